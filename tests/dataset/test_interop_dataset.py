"""Dataset interop with pylance 14.0.2, both ways, cell by cell; and concurrent appends."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import CommitConflictError

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop


def _table(n: int, start: int = 0) -> pa.Table:
    a = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "a": a,
            "i": pa.array(a.astype(np.int32), pa.int32()),
            "s": pa.array([f"s{i}" if i % 7 else None for i in a], pa.string()),
            "f": (a * 0.25).astype(np.float64),
            "l": pa.array([[int(i), int(i) + 1] if i % 5 else None for i in a], pa.list_(pa.int32())),
            "st": pa.array([{"x": int(i), "y": f"y{i}"} for i in a]),
        }
    )


def _same(ours: pa.Table, theirs: pa.Table) -> None:
    assert ours.schema.names == theirs.schema.names
    for name in ours.schema.names:
        assert ours[name].to_pylist() == theirs[name].to_pylist(), name


def test_pylance_reads_our_datasets(tmp_path: Path) -> None:
    uri = str(tmp_path)
    lance_format.write_dataset(_table(300), uri, max_rows_per_file=100)
    lance_format.write_dataset(_table(50, 300), uri, mode="append")
    ds = lance_format.dataset(uri)
    ds.delete("a % 4 = 1 OR a >= 340")
    ds.tags.create("v2", 2)
    expected = _table(350).filter(pa.array([(i % 4 != 1) and i < 340 for i in range(350)]))
    theirs = lance.dataset(uri)
    assert theirs.version == 3
    assert theirs.count_rows() == expected.num_rows
    _same(expected, theirs.to_table())
    _same(ds.to_table(), theirs.to_table())
    assert theirs.tags.list()["v2"]["version"] == 2
    assert lance.dataset(uri, version="v2").count_rows() == 350
    assert theirs.versions() == ds.versions()
    idx = [0, 17, 5, 17, expected.num_rows - 1]
    _same(ds.take(idx), theirs.take(idx))
    addrs = [(1 << 32) | 3, 0, 2, (3 << 32) | 1, 0]
    _same(ds.take_rows(addrs), theirs._take_rows(addrs))
    _same(
        ds.to_table(columns=["a"], with_row_id=True, filter="a > 250"),
        theirs.to_table(columns=["a"], with_row_id=True, filter="a > 250"),
    )
    lance_format.write_dataset(_table(10, 1000), uri, mode="overwrite")
    assert lance.dataset(uri).to_table()["a"].to_pylist() == list(range(1000, 1010))


def test_we_read_pylance_datasets_with_deletions(tmp_path: Path) -> None:
    uri = str(tmp_path)
    t = _table(20_000)
    lance.write_dataset(t, uri, data_storage_version="2.0", max_rows_per_file=10_000)
    theirs = lance.dataset(uri)
    theirs.delete("a % 3 = 0 AND a < 9000")  # .arrow
    theirs.delete("a >= 10000 AND a % 10 <> 0")  # .bin
    theirs = lance.dataset(uri)
    ds = lance_format.dataset(uri)
    assert ds.count_rows() == theirs.count_rows()
    _same(ds.to_table(), theirs.to_table())
    idx = [5, 0, 7000, 5, theirs.count_rows() - 1]
    _same(ds.take(idx), theirs.take(idx))
    _same(ds.take_rows([3, 4, 1 << 32, (1 << 32) | 10]), theirs._take_rows([3, 4, 1 << 32, (1 << 32) | 10]))
    assert ds.count_rows("s IS NULL") == theirs.count_rows("s IS NULL")


def test_appends_across_implementations(tmp_path: Path) -> None:
    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_format.write_dataset(_table(30), ours_uri)
    lance.write_dataset(_table(20, 30), ours_uri, mode="append")
    ds = lance_format.dataset(ours_uri)
    assert ds.version == 2
    _same(ds.to_table(), _table(50))
    lance.write_dataset(_table(30), theirs_uri, data_storage_version="2.0")
    lance_format.write_dataset(_table(20, 30), theirs_uri, mode="append")
    _same(lance.dataset(theirs_uri).to_table(), _table(50))
    _same(lance_format.dataset(theirs_uri).to_table(), _table(50))


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_we_read_pylance_structural_versions(tmp_path: Path, version: str) -> None:
    if importlib.util.find_spec("lance_format.encodings.v21") is None:
        pytest.skip("the file layer does not decode 2.1/2.2 yet")
    uri = str(tmp_path)
    lance.write_dataset(_table(500), uri, data_storage_version=version, max_rows_per_file=200)
    lance.dataset(uri).delete("a < 10")
    try:
        ours = lance_format.dataset(uri).to_table()
    except NotImplementedError as e:  # the file reader may not support this version yet
        pytest.skip(f"file reader: {e}")
    _same(ours, lance.dataset(uri).to_table())


def test_concurrent_appends(tmp_path: Path) -> None:
    uri = str(tmp_path)
    lance_format.write_dataset(_table(2), uri)
    threads, per_thread = 8, 3
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def work(k: int) -> None:
        barrier.wait()
        for j in range(per_thread):
            try:
                lance_format.write_dataset(_table(2, 1000 + 100 * k + 10 * j), uri, mode="append")
            except BaseException as e:
                errors.append(e)

    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert all(isinstance(e, CommitConflictError) for e in errors), errors
    landed = threads * per_thread - len(errors)
    ds = lance_format.dataset(uri)
    assert [v["version"] for v in ds.versions()] == list(range(1, landed + 2))
    assert ds.count_rows() == 2 + 2 * landed
    assert lance.dataset(uri).count_rows() == 2 + 2 * landed
    assert sorted(ds.to_table(columns=["a"])["a"].to_pylist())[:2] == [0, 1]


def test_pylance_reads_our_evolution_update_compaction(tmp_path: Path) -> None:
    uri = str(tmp_path)
    ds = lance_format.write_dataset(_table(60), uri, max_rows_per_file=20)
    ds.delete("a % 5 = 0")
    ds.add_columns({"b": "a * 3"})
    ds.update({"f": "f + 100"}, where="a BETWEEN 10 AND 12")
    ds.alter_columns({"path": "i", "name": "i2"})
    ds.drop_columns(["st"])
    _same(ds.to_table(), lance.dataset(uri).to_table())
    before = ds.to_table()
    ds.compact_files(target_rows_per_fragment=1000)
    theirs = lance.dataset(uri)
    assert len(theirs.get_fragments()) == 1
    _same(before, theirs.to_table())
    _same(ds.take([0, 3, 3]), theirs.take([0, 3, 3]))


def test_stable_row_ids_both_ways(tmp_path: Path) -> None:
    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_format.write_dataset(_table(30), ours_uri, enable_stable_row_ids=True, max_rows_per_file=10)
    lance.write_dataset(_table(30), theirs_uri, data_storage_version="2.0", enable_stable_row_ids=True)
    for uri in (ours_uri, theirs_uri):
        lance_format.write_dataset(_table(10, 30), uri, mode="append")
        lance.write_dataset(_table(10, 40), uri, mode="append")
        lance.dataset(uri).delete("a % 6 = 0")
        ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
        ids = [45, 1, 33, 45, 6]
        _same(ours.take_rows(ids), theirs._take_rows(ids))
        _same(
            ours.to_table(columns=["a"], with_row_id=True),
            theirs.to_table(columns=["a"], with_row_id=True),
        )


def test_cleanup_on_pylance_dataset(tmp_path: Path) -> None:
    uri = str(tmp_path)
    lance.write_dataset(_table(10), uri, data_storage_version="2.0")
    lance.write_dataset(_table(10, 10), uri, mode="overwrite")
    ds = lance.write_dataset(_table(10, 20), uri, mode="append")
    ds.delete("a = 25")
    lance.write_dataset(_table(5, 50), uri, mode="overwrite")
    lance.dataset(uri).tags.create("keep", 3)
    before = {p.name for p in (tmp_path / "data").iterdir()}
    stats = lance_format.dataset(uri).cleanup_old_versions(
        older_than_seconds=0, error_if_tagged_old_versions=False
    )
    assert stats.old_versions == 3
    after = {p.name for p in (tmp_path / "data").iterdir()}
    assert len(before - after) == 1  # only version 1's file was unreferenced
    _same(lance.dataset(uri, version="keep").to_table(), _table(20, 10))
    _same(lance.dataset(uri).to_table(), _table(5, 50))
    assert [v["version"] for v in lance.dataset(uri).versions()] == [3, 5]


def test_legacy_datasets_are_refused(tmp_path: Path) -> None:
    from lance_format.core.errors import NotSupportedError

    uri = str(tmp_path)
    lance.write_dataset(_table(5), uri, data_storage_version="legacy")
    ds = lance_format.dataset(uri)
    assert ds.count_rows() == 5
    with pytest.raises(NotSupportedError, match="legacy"):
        ds.to_table()
    with pytest.raises(NotSupportedError):
        lance_format.write_dataset(_table(5), uri, mode="append")


def test_we_read_pylance_schema_evolution(tmp_path: Path) -> None:
    uri = str(tmp_path)
    lance.write_dataset(_table(50), uri, data_storage_version="2.0", max_rows_per_file=20)
    theirs = lance.dataset(uri)
    theirs.add_columns({"b": "a * 2"})
    theirs.drop_columns(["i"])
    theirs.alter_columns({"path": "f", "name": "g"})
    theirs.update({"s": "'x'"}, where="a < 3")
    theirs.add_columns(pa.field("n", pa.int32()))  # all-null, metadata only
    theirs = lance.dataset(uri)
    ours = lance_format.dataset(uri)
    _same(ours.to_table(), theirs.to_table())
    _same(ours.take([0, 49, 7]), theirs.take([0, 49, 7]))
    lance_format.write_dataset(theirs.to_table().slice(0, 5), uri, mode="append")
    _same(lance.dataset(uri).to_table(), lance_format.dataset(uri).to_table())


def test_base_paths(tmp_path: Path) -> None:
    from lance import DatasetBasePath

    uri, extra = str(tmp_path / "ds"), tmp_path / "extra"
    extra.mkdir()
    base = DatasetBasePath(str(extra), name="extra")
    lance.write_dataset(
        _table(30), uri, data_storage_version="2.0", initial_bases=[base], target_bases=["extra"]
    )
    lance.dataset(uri).delete("a < 4")
    ours = lance_format.dataset(uri)
    assert ours.manifest.reader_feature_flags & 16
    _same(ours.to_table(), lance.dataset(uri).to_table())
    lance_format.write_dataset(_table(5, 30), uri, mode="append")
    ours = lance_format.dataset(uri)
    assert ours.manifest.base_paths
    _same(lance.dataset(uri).to_table(), _table(35).slice(4))
    _same(ours.take([0, 30]), lance.dataset(uri).take([0, 30]))


def test_concurrent_appends_with_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path)
    lance_format.write_dataset(_table(2), uri)
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def ours(k: int) -> None:
        barrier.wait()
        for j in range(3):
            try:
                lance_format.write_dataset(_table(2, 1000 + 100 * k + 10 * j), uri, mode="append")
            except BaseException as e:
                errors.append(e)

    def theirs(k: int) -> None:
        barrier.wait()
        for j in range(3):
            lance.write_dataset(_table(2, 5000 + 100 * k + 10 * j), uri, mode="append")

    pool = [threading.Thread(target=ours, args=(k,)) for k in range(3)]
    pool += [threading.Thread(target=theirs, args=(k,)) for k in range(3)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []
    ds = lance_format.dataset(uri)
    assert ds.version == 1 + 18
    assert ds.count_rows() == 2 + 36 == lance.dataset(uri).count_rows()
    _same(ds.to_table(), lance.dataset(uri).to_table())


def test_asof_and_v1_migration(tmp_path: Path) -> None:
    import time
    from datetime import datetime

    uri = str(tmp_path)
    lance.write_dataset(_table(3), uri, data_storage_version="2.0", enable_v2_manifest_paths=False)
    time.sleep(0.05)
    middle = datetime.now()
    time.sleep(0.05)
    lance_format.write_dataset(_table(2, 3), uri, mode="append")
    assert (tmp_path / "_versions" / "2.manifest").exists()  # the dataset's scheme is kept
    assert lance_format.dataset(uri, asof=middle).version == 1
    ds = lance_format.dataset(uri)
    ds.migrate_manifest_paths_v2()
    assert sorted(p.name for p in (tmp_path / "_versions").glob("*.manifest")) == [
        "18446744073709551613.manifest",
        "18446744073709551614.manifest",
    ]
    assert lance.dataset(uri).count_rows() == 5
    lance_format.write_dataset(_table(1, 5), uri, mode="append")
    assert (tmp_path / "_versions" / "18446744073709551612.manifest").exists()


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_takes_and_scans_through_the_decoded_cache_match_pylance(tmp_path: Path, version: str) -> None:
    """With the server's decoded-block cache on (tiny blocks, so a few takes admit many), every
    take and scan still equals pylance's, deletions included; dropping the dataset forgets them."""
    from lance_format.file import decoded
    from lance_format.io.cache import DECODED_CACHE, configure_caches, forget_dataset

    uri = str(tmp_path / "d")
    lance.write_dataset(_table(3000), uri, data_storage_version=version, max_rows_per_file=1000)
    lance.dataset(uri).delete("a % 5 = 0")
    theirs = lance.dataset(uri)
    old_capacity, old_block = DECODED_CACHE.capacity, decoded.DECODED_BLOCK_ROWS
    configure_caches(decoded_bytes=64 << 20)
    decoded.DECODED_BLOCK_ROWS = 100
    try:
        ds = lance_format.dataset(uri)
        rng = np.random.default_rng(11)
        for _ in range(8):
            idx = rng.integers(0, theirs.count_rows(), 50).tolist()
            _same(ds.take(idx), theirs.take(idx))
            _same(ds.take(idx, columns=["s"]), theirs.take(idx, columns=["s"]))
        assert DECODED_CACHE.counters().entries > 0
        _same(ds.to_table(), theirs.to_table())
        _same(ds.to_table(), theirs.to_table())  # the second scan reads cached blocks
        assert DECODED_CACHE.counters().hits > 0
        forget_dataset(uri)
        assert DECODED_CACHE.counters().entries == 0
    finally:
        decoded.DECODED_BLOCK_ROWS = old_block
        DECODED_CACHE.clear()
        configure_caches(decoded_bytes=old_capacity)


def test_float_comparisons_order_nan_like_pylance(tmp_path: Path) -> None:
    """NaN sorts above every number and equals itself in pylance's SQL; -0.0 equals 0.0 against
    literals and in IN lists. (Column-to-column, pylance also orders -0.0 below 0.0: not here.)"""
    nan = float("nan")
    t = pa.table(
        {
            "x": pa.array([nan, nan, 1.0, 0.5, 0.0, None, -0.0], pa.float64()),
            "y": pa.array([nan, 1.0, nan, 0.25, 2.0, 1.0, 3.0], pa.float32()),
        }
    )
    uri = str(tmp_path / "d")
    lance.write_dataset(t, uri)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    filters = [
        "x > 0.5", "x >= 0.5", "x < 0.75", "x <= 0", "x = 0.0", "x != 1", "NOT (x > 0.5)",
        "x BETWEEN 0.25 AND 2", "x > y", "x >= y", "x < y", "x <= y", "x = y", "x != y",
        "x + 1 > 1", "x * 2 < 0", "x IN (0, 1)", "x NOT IN (-0.0)", "y > 2.5", "CAST(y AS DOUBLE) >= 3",
    ]  # fmt: skip
    for f in filters:
        got = ours.to_table(filter=f, with_row_id=True).column("_rowid").to_pylist()
        want = theirs.to_table(filter=f, with_row_id=True).column("_rowid").to_pylist()
        assert got == want, f
