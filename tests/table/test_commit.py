"""Commits, rebase and conflicts on synthetic fragments; deletion files."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pyarrow as pa
import pytest

from lance_format.core.errors import (
    CommitConflictError,
    CorruptFileError,
    DatasetAlreadyExistsError,
    RetryableCommitConflictError,
)
from lance_format.core.types import fields_from_arrow
from lance_format.io.store import LocalStore, MemoryStore, ObjectStore
from lance_format.table import _serde
from lance_format.table.commit import CommitOptions, commit_transaction
from lance_format.table.deletion import BITMAP_THRESHOLD, read_deletion_file, write_deletion_file
from lance_format.table.model import (
    Append,
    DataFile,
    DataFragment,
    Delete,
    DeletionFileType,
    Overwrite,
    Restore,
    Transaction,
)
from lance_format.table.naming import HINT_KEY, list_versions
from lance_format.table.versions import load_manifest, read_transaction

SCHEMA = fields_from_arrow(pa.schema([pa.field("a", pa.int64())]))


def _frag(rows: int = 10, fid: int = 0) -> DataFragment:
    return DataFragment(fid, (DataFile(f"{uuid.uuid4().hex}.lance", (0,), (0,), 2, 0, 1),), rows)


def _txn(read_version: int, op: object) -> Transaction:
    return Transaction(read_version, str(uuid.uuid4()), op)  # type: ignore[arg-type]


def _create(store: ObjectStore, frags: int = 1) -> None:
    op = Overwrite(tuple(_frag() for _ in range(frags)), SCHEMA)
    commit_transaction(store, _txn(0, op), None, options=CommitOptions(create_only=True))


def _mem() -> MemoryStore:
    return MemoryStore(f"commit-{uuid.uuid4().hex}")


def test_create_append_restore() -> None:
    store = _mem()
    _create(store)
    m1, naming = load_manifest(store)
    assert (m1.version, [f.id for f in m1.fragments], m1.max_fragment_id) == (1, [0], 0)
    m2 = commit_transaction(store, _txn(1, Append((_frag(5), _frag(6)))), m1, naming)
    assert [f.id for f in m2.fragments] == [0, 1, 2]
    assert m2.num_rows == 21
    assert store.read_all(HINT_KEY) == b'{"version":2}'
    txn = read_transaction(store, m2, naming)
    assert txn is not None
    assert isinstance(txn.operation, Append)
    assert store.exists(f"_transactions/{m2.transaction_file}")
    m3 = commit_transaction(store, _txn(2, Restore(1)), m2, naming)
    assert m3.version == 3
    assert [f.id for f in m3.fragments] == [0]
    assert m3.max_fragment_id == 2
    m4 = commit_transaction(store, _txn(3, Overwrite((_frag(),), SCHEMA)), m3, naming)
    assert [f.id for f in m4.fragments] == [3]
    with pytest.raises(DatasetAlreadyExistsError):
        _create(store)


def test_stable_row_ids_assigned() -> None:
    store = _mem()
    op = Overwrite((_frag(100),), SCHEMA)
    m1 = commit_transaction(store, _txn(0, op), None, options=CommitOptions(stable_row_ids=True))
    assert m1.reader_feature_flags == 2
    assert m1.next_row_id == 100
    m2 = commit_transaction(store, _txn(1, Append((_frag(50),))), m1)
    assert m2.next_row_id == 150
    ids = _serde.decode_row_ids(m2.fragments[1].row_ids, "x")  # type: ignore[arg-type]
    assert ids.tolist() == list(range(100, 150))
    # The bytes pylance 14.0.2 writes for range{100, 150}.
    assert _serde.row_id_range_bytes(100, 150) == bytes.fromhex("0a070a0508641096" + "01")


def test_rebase_appends_and_disjoint_deletes() -> None:
    store = _mem()
    _create(store, frags=3)
    m1, naming = load_manifest(store)
    commit_transaction(store, _txn(1, Append((_frag(),))), m1, naming)
    d0 = Delete((), (0,), "x")
    m3 = commit_transaction(store, _txn(1, d0), m1, naming)  # rebased over the append
    assert [f.id for f in m3.fragments] == [1, 2, 3]
    d1 = Delete((), (1,), "y")
    m4 = commit_transaction(store, _txn(1, d1), m1, naming)  # over append + delete of frag 0
    assert [f.id for f in m4.fragments] == [2, 3]
    with pytest.raises(RetryableCommitConflictError, match=r"fragments \[1\]"):
        commit_transaction(store, _txn(1, Delete((), (1,), "z")), m1, naming)
    commit_transaction(store, _txn(4, Overwrite((_frag(),), SCHEMA)), m4, naming)
    with pytest.raises(CommitConflictError):
        commit_transaction(store, _txn(4, Append((_frag(),))), m4, naming)


@pytest.mark.parametrize("threads", [8])
def test_concurrent_appends_local(tmp_path: object, threads: int) -> None:
    root = str(tmp_path)
    _create(LocalStore(root))
    per_thread = 4
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def work() -> None:
        store = LocalStore(root)
        barrier.wait()
        for _ in range(per_thread):
            try:
                base, naming = load_manifest(store)
                commit_transaction(store, _txn(base.version, Append((_frag(3),))), base, naming)
            except BaseException as e:
                errors.append(e)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert all(isinstance(e, CommitConflictError) for e in errors), errors
    store = LocalStore(root)
    found, _ = list_versions(store)
    landed = threads * per_thread - len(errors)
    assert sorted(found) == list(range(1, landed + 2))
    latest, _ = load_manifest(store)
    assert latest.num_rows == 10 + 3 * landed
    ids = [f.id for f in latest.fragments]
    assert len(set(ids)) == len(ids) == landed + 1


@pytest.mark.parametrize("count", [3, BITMAP_THRESHOLD + 1])
def test_deletion_files_roundtrip(count: int) -> None:
    store = _mem()
    offsets = np.random.default_rng(1).permutation(20_000)[:count]
    d = write_deletion_file(store, 4, 7, offsets)
    assert d.num_deleted_rows == count
    assert d.file_type is (
        DeletionFileType.BITMAP if count > BITMAP_THRESHOLD else DeletionFileType.ARROW_ARRAY
    )
    key = d.key(4)
    assert key.startswith("_deletions/4-7-")
    assert key.endswith(d.file_type.suffix)
    assert read_deletion_file(store, 4, d).tolist() == sorted(offsets.tolist())
    if d.file_type is DeletionFileType.ARROW_ARRAY:
        assert store.read_all(key)[:6] == b"ARROW1"


def test_bad_deletion_file_schema() -> None:
    store = _mem()
    d = write_deletion_file(store, 0, 1, np.array([1, 2]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, pa.schema([("row_id", pa.int32())])) as w:
        w.write_table(pa.table({"row_id": pa.array([1], pa.int32())}))
    store.write(d.key(0), sink.getvalue().to_pybytes())
    with pytest.raises(CorruptFileError, match="schema"):
        read_deletion_file(store, 0, d)


def test_external_manifest_store_commits() -> None:
    from lance_format.table.committers import ExternalManifestCommitter, MemoryManifestStore

    store = _mem()
    kv = MemoryManifestStore()
    opts = CommitOptions(committer=ExternalManifestCommitter(kv))
    commit_transaction(store, _txn(0, Overwrite((_frag(),), SCHEMA)), None, options=opts)
    m1, naming = load_manifest(store)
    commit_transaction(store, _txn(1, Append((_frag(),))), m1, naming, opts)
    # A writer that lost the claim rebases and lands as version 3.
    m3 = commit_transaction(store, _txn(1, Append((_frag(),))), m1, naming, opts)
    assert m3.version == 3
    assert kv.latest(store.uri) == (3, "_versions/18446744073709551612.manifest")
    assert not [k for k, _ in store.list("_versions") if "manifest-" in k]
    assert load_manifest(store)[0].num_rows == 30


def _conflict_ops() -> dict[str, object]:
    from lance_format.table.model import (
        Clone,
        CreateIndex,
        Merge,
        Project,
        ReserveFragments,
        Rewrite,
        RewriteGroup,
        UnknownOperation,
        Update,
        UpdateConfig,
    )

    return {
        "append": Append((_frag(),)),
        "delete0": Delete((), (0,), "x"),
        "delete1": Delete((), (1,), "y"),
        "update0": Update((0,), (), (_frag(),)),
        "rewrite1": Rewrite((RewriteGroup((_frag(fid=1),), (_frag(),)),)),
        "overwrite": Overwrite((_frag(),), SCHEMA),
        "restore": Restore(1),
        "project": Project(SCHEMA),
        "merge": Merge((), SCHEMA),
        "config_k": UpdateConfig({"k": "1"}),
        "config_j": UpdateConfig({"j": None}),
        "index": CreateIndex(),
        "reserve": ReserveFragments(2),
        "unknown": UnknownOperation("branch"),
        "clone": Clone(True, None, 3, "/src"),
    }


@pytest.mark.parametrize(
    ("mine", "theirs", "outcome"),
    [
        ("append", "append", "ok"),
        ("append", "delete0", "ok"),
        ("append", "rewrite1", "ok"),
        ("append", "config_k", "ok"),
        ("append", "index", "ok"),
        ("append", "reserve", "ok"),
        ("append", "overwrite", "retry"),
        ("append", "merge", "retry"),
        ("append", "unknown", "fatal"),
        ("append", "clone", "retry"),
        ("delete0", "clone", "retry"),
        ("delete0", "delete1", "ok"),
        ("delete0", "delete0", "retry"),
        ("delete0", "update0", "retry"),
        ("delete1", "rewrite1", "retry"),
        ("delete0", "append", "ok"),
        ("delete0", "restore", "retry"),
        ("overwrite", "unknown", "ok"),
        ("restore", "delete0", "ok"),
        ("project", "append", "retry"),
        ("project", "config_k", "ok"),
        ("config_k", "config_j", "ok"),
        ("config_k", "config_k", "retry"),
        ("config_k", "append", "ok"),
    ],
)
def test_conflict_matrix(mine: str, theirs: str, outcome: str) -> None:
    from lance_format.table.transaction import check_conflict

    ops = _conflict_ops()

    def call() -> None:
        check_conflict(_txn(1, ops[mine]), _txn(1, ops[theirs]), 2)

    if outcome == "ok":
        call()
    elif outcome == "retry":
        with pytest.raises(RetryableCommitConflictError):
            call()
    else:
        with pytest.raises(CommitConflictError) as info:
            call()
        assert not isinstance(info.value, RetryableCommitConflictError)


def test_inline_only_transactions_kept() -> None:
    from dataclasses import replace

    from lance_format.table.manifest_file import encode_manifest_file
    from lance_format.table.naming import manifest_key

    store = _mem()
    _create(store)
    m1, naming = load_manifest(store)
    flagged = replace(m1, writer_feature_flags=32, transaction_file="")
    store.write(manifest_key(1), encode_manifest_file(flagged, _txn(0, Overwrite((), SCHEMA))))
    m1, naming = load_manifest(store)
    m2 = commit_transaction(store, _txn(1, Append((_frag(),))), m1, naming)
    assert m2.writer_feature_flags & 32
    assert m2.transaction_file == ""
    txn = read_transaction(store, m2, naming)
    assert txn is not None
    assert isinstance(txn.operation, Append)
    assert not any(k.startswith("_transactions/1-") for k, _ in store.list("_transactions"))
