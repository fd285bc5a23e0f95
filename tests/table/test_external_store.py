"""The SQLite external manifest store: claims, the URI registry, reader repair, concurrent writers."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import CorruptFileError, InvalidInputError
from lance_format.dataset import stage_fragments
from lance_format.io.store import ObjectStore
from lance_format.table import (
    SqliteManifestStore,
    register_manifest_store,
    unregister_manifest_store,
)
from lance_format.table.committers import ExternalManifestCommitter
from lance_format.table.external_store import manifest_store_for, staged_to_final


def _table(start: int, n: int = 10) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


@pytest.fixture
def registered(tmp_path: Path) -> Iterator[tuple[str, SqliteManifestStore]]:
    root = str(tmp_path / "ds")
    kv = SqliteManifestStore(tmp_path / "manifests.db")
    register_manifest_store(root, kv)
    try:
        yield root, kv
    finally:
        unregister_manifest_store(root)


def test_claims_are_exclusive(tmp_path: Path) -> None:
    kv = SqliteManifestStore(tmp_path / "m.db")
    assert kv.latest("u") is None
    assert kv.put_if_not_exists("u", 1, "a")
    assert not kv.put_if_not_exists("u", 1, "b")
    assert kv.put_if_not_exists("u", 2, "c")
    assert kv.put_if_not_exists("other", 7, "x")
    kv.put_if_exists("u", 1, "a2")
    assert kv.get("u", 1) == "a2"
    assert kv.get("u", 3) is None
    assert kv.latest("u") == (2, "c")
    with pytest.raises(InvalidInputError):
        kv.put_if_exists("u", 9, "nope")
    # A second handle (another process would look the same) sees the same rows.
    assert SqliteManifestStore(tmp_path / "m.db").latest("u") == (2, "c")


def test_registry_matches_whole_segments(tmp_path: Path) -> None:
    kv = SqliteManifestStore(tmp_path / "m.db")
    register_manifest_store("memory://bucket/a", kv)
    try:
        assert manifest_store_for("memory://bucket/a/ds") is kv
        assert manifest_store_for("memory://bucket/a") is kv
        assert manifest_store_for("memory://bucket/ab") is None
    finally:
        unregister_manifest_store("memory://bucket/a")
    assert manifest_store_for("memory://bucket/a/ds") is None
    with pytest.raises(InvalidInputError):
        register_manifest_store("", kv)


def test_staged_to_final() -> None:
    final = "_versions/18446744073709551614.manifest"
    assert staged_to_final(f"{final}-0b1c2d3e-aaaa-bbbb-cccc-123456789012") == final
    assert staged_to_final(final) == final
    with pytest.raises(CorruptFileError):
        staged_to_final("_versions/garbage")


def test_commits_go_through_the_registered_store(registered: tuple[str, SqliteManifestStore]) -> None:
    root, kv = registered
    lance_format.write_dataset(_table(0), root)
    ds = lance_format.write_dataset(_table(10), root, mode="append")
    ds.delete("id < 5")
    latest = kv.latest(Path(root).as_posix())
    assert latest is not None
    assert latest[0] == 3
    assert latest[1] == staged_to_final(latest[1])  # published: the final name is recorded
    assert lance_format.dataset(root).count_rows() == 15
    staged = [p for p in Path(root, "_versions").iterdir() if "manifest-" in p.name]
    assert staged == []


class _DiesAfterClaim(ExternalManifestCommitter):
    """A writer that claims the version, then dies before publishing the manifest."""

    def commit(self, store: ObjectStore, version: int, key: str, data: bytes) -> bool:
        staged = f"{key}-00000000-0000-0000-0000-000000000000"
        store.write(staged, data)
        assert self.external.put_if_not_exists(store.uri, version, staged)
        raise KeyboardInterrupt("writer killed")


def test_reader_repairs_a_claimed_but_unpublished_version(
    registered: tuple[str, SqliteManifestStore],
) -> None:
    from lance_format.table import Append, CommitOptions, Transaction, commit_transaction, load_manifest

    root, kv = registered
    lance_format.write_dataset(_table(0), root)
    frags = stage_fragments(_table(100), root)
    store = lance_format.dataset(root).store
    base, naming = load_manifest(store)
    txn = Transaction(base.version, "dead-writer", Append(tuple(frags)))
    with pytest.raises(KeyboardInterrupt):
        commit_transaction(store, txn, base, naming, CommitOptions(committer=_DiesAfterClaim(kv)))
    # Listing alone misses version 2; the external store has it claimed at the staged path.
    assert not Path(root, "_versions", "18446744073709551613.manifest").exists()
    ds = lance_format.dataset(root)
    assert ds.version == 2
    assert ds.count_rows() == 20
    assert Path(root, "_versions", "18446744073709551613.manifest").exists()
    assert kv.latest(store.uri) == (2, "_versions/18446744073709551613.manifest")
    # Writers continue from the repaired version, and pylance reads the published manifests.
    assert lance_format.write_dataset(_table(200), root, mode="append").version == 3
    import lance

    theirs = lance.dataset(root)
    assert theirs.version == 3
    assert sorted(theirs.to_table()["id"].to_pylist()) == sorted(
        ds.checkout_latest().to_table()["id"].to_pylist()
    )


def test_missing_staged_and_final_manifest_is_corrupt(registered: tuple[str, SqliteManifestStore]) -> None:
    root, kv = registered
    ds = lance_format.write_dataset(_table(0), root)
    assert kv.put_if_not_exists(ds.store.uri, 2, "_versions/18446744073709551613.manifest-gone")
    with pytest.raises(CorruptFileError, match="claimed"):
        lance_format.dataset(root)


def test_threads_commit_through_sqlite(registered: tuple[str, SqliteManifestStore]) -> None:
    root, _kv = registered
    lance_format.write_dataset(_table(0), root)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for j in range(5):
                lance_format.write_dataset(_table(1000 * k + 10 * j), root, mode="append")
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ds = lance_format.dataset(root)
    assert ds.version == 21
    assert ds.count_rows() == 210
    assert [v["version"] for v in ds.versions()] == list(range(1, 22))


_PROCESS_WRITER = """
import sys
import pyarrow as pa
import lance_format
from lance_format.table import SqliteManifestStore, register_manifest_store
root, db, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
register_manifest_store(root, SqliteManifestStore(db))
for j in range(5):
    lance_format.write_dataset(pa.table({"id": pa.array(range(10), pa.int64())}), root, mode="append")
"""


def test_processes_commit_through_sqlite(tmp_path: Path) -> None:
    root, db = str(tmp_path / "ds"), str(tmp_path / "m.db")
    register_manifest_store(root, SqliteManifestStore(db))
    try:
        lance_format.write_dataset(_table(0), root)
    finally:
        unregister_manifest_store(root)
    procs = [subprocess.Popen([sys.executable, "-c", _PROCESS_WRITER, root, db, str(k)]) for k in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    register_manifest_store(root, SqliteManifestStore(db))
    try:
        ds = lance_format.dataset(root)
        assert ds.count_rows() == 160
        assert ds.version == 16
    finally:
        unregister_manifest_store(root)
