"""The dataset API on our own datasets: write modes, scans, filters, takes, deletes, versions, tags."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.core.errors import (
    CorruptFileError,
    DatasetAlreadyExistsError,
    InvalidInputError,
    NotFoundError,
    NotSupportedError,
    SchemaMismatchError,
)
from lance_format.table.naming import manifest_key


def _table(n: int, start: int = 0) -> pa.Table:
    a = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "a": a,
            "s": pa.array([f"s{i}" if i % 7 else None for i in a], pa.string()),
            "f": (a * 0.5).astype(np.float64),
        }
    )


@pytest.fixture
def uri() -> str:
    return f"memory://ds-{uuid.uuid4().hex}"


def test_create_append_overwrite_versions(uri: str) -> None:
    ds = lance_format.write_dataset(_table(25), uri, max_rows_per_file=10)
    assert (ds.version, ds.count_rows(), len(ds.get_fragments())) == (1, 25, 3)
    assert ds.to_table().equals(_table(25))
    with pytest.raises(DatasetAlreadyExistsError):
        lance_format.write_dataset(_table(1), uri)
    ds = lance_format.write_dataset(_table(5, 25), uri, mode="append")
    assert ds.version == 2
    assert ds.to_table().equals(_table(30))
    ds = lance_format.write_dataset(_table(3, 100), uri, mode="overwrite")
    assert ds.version == 3
    assert ds.to_table().equals(_table(3, 100))
    assert [f.fragment_id for f in ds.get_fragments()] == [4]
    assert lance_format.dataset(uri, version=2).count_rows() == 30
    assert ds.checkout_version(1).to_table().equals(_table(25))
    versions = ds.versions()
    assert [v["version"] for v in versions] == [1, 2, 3]
    assert versions[1]["metadata"]["total_rows"] == "30"
    assert ds.latest_version == 3


def test_input_kinds(uri: str) -> None:
    t = _table(12)
    batches = t.to_batches(max_chunksize=5)
    for i, data in enumerate([t, batches[0], t.to_reader(), iter(batches), t.to_pandas()]):
        ds = lance_format.write_dataset(data, f"{uri}-{i}")
        assert ds.count_rows() == (5 if i == 1 else 12)
    ds = lance_format.write_dataset(iter([]), f"{uri}-e", schema=t.schema)
    assert ds.count_rows() == 0
    assert ds.schema.names == ["a", "s", "f"]
    with pytest.raises(SchemaMismatchError):
        lance_format.write_dataset(pa.table({"b": [1]}), f"{uri}-0", mode="append")
    with pytest.raises(InvalidInputError):
        lance_format.write_dataset(t, uri, mode="upsert")
    with pytest.raises(InvalidInputError):
        lance_format.write_dataset(42, uri)


def test_scan_options(uri: str) -> None:
    ds = lance_format.write_dataset(_table(50), uri, max_rows_per_file=16)
    full = _table(50)
    assert ds.to_table(columns=["f", "a"]).equals(full.select(["f", "a"]))
    assert ds.to_table(limit=7, offset=20).equals(full.slice(20, 7))
    assert ds.head(3).equals(full.slice(0, 3))
    t = ds.to_table(filter="a >= 10 AND a < 40 AND s IS NOT NULL", columns=["a"])
    expected = [i for i in range(10, 40) if i % 7]
    assert t["a"].to_pylist() == expected
    t = ds.to_table(filter=(pc.field("a") > 44) & pc.field("s").is_valid(), columns=["a"])
    assert t["a"].to_pylist() == [45, 46, 47, 48]
    t = ds.to_table(filter="a > 40", limit=3, offset=2, columns=["a"])
    assert t["a"].to_pylist() == [43, 44, 45]
    assert ds.count_rows("s LIKE 's1%'") == len([i for i in range(50) if str(i).startswith("1") and i % 7])
    t = ds.to_table(columns=["a"], with_row_id=True, with_row_address=True, limit=2, offset=16)
    assert t.schema.names == ["a", "_rowid", "_rowaddr"]
    assert t["_rowaddr"].to_pylist() == [1 << 32, (1 << 32) | 1] == t["_rowid"].to_pylist()
    batches = list(ds.to_batches(batch_size=6))
    assert max(b.num_rows for b in batches) <= 6
    assert pa.Table.from_batches(batches).equals(full)
    frag = ds.get_fragments()[1]
    assert ds.to_table(fragments=[frag])["a"].to_pylist() == list(range(16, 32))


@pytest.mark.parametrize("bad", ["nope = 1", "a >", "a = (SELECT 1)", "s + 1 = 2"])
def test_bad_filters(uri: str, bad: str) -> None:
    ds = lance_format.write_dataset(_table(5), uri)
    # A subquery is outside the filter dialect: NotSupportedError naming it.
    with pytest.raises((InvalidInputError, NotSupportedError)):
        ds.to_table(filter=bad)


def test_delete_take_and_take_rows(uri: str) -> None:
    ds = lance_format.write_dataset(_table(30), uri, max_rows_per_file=10)
    assert ds.delete("a % 3 = 0") == {"num_deleted_rows": 10}
    ds.delete("a >= 20")  # drops fragment 2 entirely
    live = [i for i in range(20) if i % 3]
    assert ds.version == 3
    assert ds.count_rows() == len(live)
    assert ds.to_table()["a"].to_pylist() == live
    assert [f.fragment_id for f in ds.get_fragments()] == [0, 1]
    assert ds.take([5, 0, 5, 12])["a"].to_pylist() == [live[5], live[0], live[5], live[12]]
    with pytest.raises(InvalidInputError):
        ds.take([len(live)])
    addrs = [(1 << 32) | 4, 2, 3, 2]  # row 3 is deleted: dropped
    assert ds.take_rows(addrs, columns=["a"])["a"].to_pylist() == [14, 2, 2]
    with pytest.raises(InvalidInputError):
        ds.take_rows([7 << 32])
    assert ds.checkout_version(1).count_rows() == 30
    reopened = lance_format.dataset(uri)
    assert reopened.to_table(with_row_id=True, columns=["a"]).column("_rowid").to_pylist()[:2] == [1, 2]


def test_tags_and_restore(uri: str) -> None:
    ds = lance_format.write_dataset(_table(10), uri)
    ds = lance_format.write_dataset(_table(5, 10), uri, mode="append")
    ds.tags.create("first", 1)
    assert ds.tags.list()["first"]["version"] == 1
    assert lance_format.dataset(uri, version="first").count_rows() == 10
    with pytest.raises(DatasetAlreadyExistsError):
        ds.tags.create("first", 2)
    with pytest.raises(NotFoundError):
        lance_format.dataset(uri, version="nope")
    old = ds.checkout_version("first")
    old.restore()
    assert old.version == 3
    assert lance_format.dataset(uri).count_rows() == 10
    ds.tags.delete("first")
    assert ds.tags.list() == {}


def test_cleanup_keeps_tagged_versions(tmp_path: Path) -> None:
    uri = str(tmp_path)
    lance_format.write_dataset(_table(10), uri)
    lance_format.write_dataset(_table(10, 10), uri, mode="overwrite")
    ds = lance_format.write_dataset(_table(10, 20), uri, mode="overwrite")
    ds.tags.create("keep", 1)
    stats = ds.cleanup_old_versions(older_than_seconds=0, error_if_tagged_old_versions=False)
    assert stats.old_versions == 1
    assert lance_format.dataset(uri, version="keep").to_table().equals(_table(10))
    with pytest.raises(NotFoundError):
        lance_format.dataset(uri, version=2)
    assert ds.to_table().equals(_table(10, 20))


def test_errors(tmp_path: Path, uri: str) -> None:
    with pytest.raises(NotFoundError):
        lance_format.dataset(str(tmp_path / "missing"))
    ds = lance_format.write_dataset(_table(3), str(tmp_path / "d"))
    with pytest.raises(NotFoundError):
        ds.checkout_version(9)
    with pytest.raises(InvalidInputError):
        ds.to_table(columns=["zz"])
    from dataclasses import replace

    from lance_format.table.manifest_file import encode_manifest_file

    flagged = replace(ds.manifest, reader_feature_flags=1 << 12)
    (tmp_path / "d" / manifest_key(1)).write_bytes(encode_manifest_file(flagged, None))
    with pytest.raises(NotSupportedError, match="unknown flag 4096"):
        lance_format.dataset(str(tmp_path / "d"))
    (tmp_path / "d" / manifest_key(1)).write_bytes(b"garbage that is no manifest at all")
    with pytest.raises(CorruptFileError):
        lance_format.dataset(str(tmp_path / "d"))


def test_stable_row_ids(uri: str) -> None:
    ds = lance_format.write_dataset(_table(10), uri, enable_stable_row_ids=True, max_rows_per_file=4)
    ds = lance_format.write_dataset(_table(5, 10), uri, mode="append")
    ds.delete("a = 2")
    t = ds.to_table(columns=["a"], with_row_id=True, with_row_address=True)
    assert t["_rowid"].to_pylist() == [i for i in range(15) if i != 2]
    assert ds.take_rows([12, 0, 2, 12], columns=["a"])["a"].to_pylist() == [12, 0, 12]


def test_schema_evolution(uri: str) -> None:
    ds = lance_format.write_dataset(_table(20), uri, max_rows_per_file=8)
    ds.delete("a = 3")
    ds.add_columns({"b": "a * 2", "c": "f + 1"})
    assert ds.schema.names == ["a", "s", "f", "b", "c"]
    t = ds.to_table(columns=["a", "b", "c"])
    assert t["b"].to_pylist() == [2 * i for i in range(20) if i != 3]
    assert t["c"].to_pylist() == [i * 0.5 + 1 for i in range(20) if i != 3]
    assert ds.take([3], columns=["b"])["b"].to_pylist() == [8]
    ds.drop_columns(["s"])
    ds.alter_columns({"path": "f", "name": "g"})
    assert ds.schema.names == ["a", "g", "b", "c"]
    assert ds.to_table(filter="g > 9", columns=["a"])["a"].to_pylist() == [19]
    assert lance_format.dataset(uri, version=1).schema.names == ["a", "s", "f"]
    with pytest.raises(InvalidInputError):
        ds.drop_columns(["nope"])
    with pytest.raises(InvalidInputError):
        ds.add_columns({"a": "g"})


def test_compaction_keeps_rows_and_stable_ids(uri: str) -> None:
    ds = lance_format.write_dataset(_table(50), uri, max_rows_per_file=10, enable_stable_row_ids=True)
    ds.delete("a % 4 = 0")
    before = ds.to_table(with_row_id=True)
    stats = ds.optimize.compact_files(target_rows_per_fragment=100)
    assert stats.fragments_removed == 5
    assert stats.fragments_added == 1
    assert len(ds.get_fragments()) == 1
    assert ds.to_table(with_row_id=True).equals(before)
    assert ds.take_rows([5, 1], columns=["a"])["a"].to_pylist() == [5, 1]


def test_staged_fragments_commit(uri: str) -> None:
    from lance_format.core.types import fields_from_arrow
    from lance_format.dataset import commit, stage_fragments
    from lance_format.table.fragment_json import fragment_from_json, fragment_to_json
    from lance_format.table.model import Append, Overwrite

    staged = stage_fragments(_table(10), uri, max_rows_per_file=4)
    shipped = [fragment_from_json(fragment_to_json(f)) for f in staged]
    assert shipped == staged
    ds = commit(uri, Overwrite(tuple(shipped), fields_from_arrow(_table(10).schema)))
    assert ds.version == 1
    assert ds.to_table().equals(_table(10))
    a = stage_fragments(_table(3, 10), uri)
    b = stage_fragments(_table(3, 13), uri)
    ds = commit(uri, Append(tuple(a + b)), read_version=1)
    assert ds.to_table().equals(_table(16))
    assert [f.fragment_id for f in ds.get_fragments()] == [0, 1, 2, 3, 4]


def test_config_and_transactions(uri: str) -> None:
    from lance_format.table.model import Append, Delete, Overwrite, UpdateConfig

    ds = lance_format.write_dataset(_table(4), uri)
    ds.update_config({"k": "v", "x": "y"})
    ds.delete_config_keys(["x"])
    assert ds.config() == {"k": "v"}
    assert ds.manifest.writer_feature_flags & 8
    ds.delete("a = 1")
    lance_format.write_dataset(_table(1, 4), uri, mode="append")
    kinds = [type(ds.read_transaction(v).operation) for v in range(1, 6)]  # type: ignore[union-attr]
    assert kinds == [Overwrite, UpdateConfig, UpdateConfig, Delete, Append]
    assert lance_format.dataset(uri).config() == {"k": "v"}


@pytest.mark.parametrize("stable", [False, True])
def test_update(uri: str, stable: bool) -> None:
    ds = lance_format.write_dataset(_table(20), uri, max_rows_per_file=8, enable_stable_row_ids=stable)
    result = ds.update({"f": "f * 10", "s": "'upd'"}, where="a >= 6 AND a < 9")
    assert result == {"num_rows_updated": 3}
    t = ds.to_table()
    assert t.num_rows == 20
    assert sorted(t.filter(pc.field("s") == "upd")["a"].to_pylist()) == [6, 7, 8]
    assert t.filter(pc.field("a") == 7)["f"].to_pylist() == [35.0]
    if stable:
        assert ds.take_rows([7], columns=["f"])["f"].to_pylist() == [35.0]
        assert ds.manifest.next_row_id == 20
    with pytest.raises(InvalidInputError):
        ds.update({"zz": "1"})


def test_sql_projection(uri: str) -> None:
    ds = lance_format.write_dataset(_table(10), uri)
    t = ds.to_table(columns={"double_a": "a * 2", "half": "f"}, filter="a > 6", with_row_id=True)
    assert t.schema.names == ["double_a", "half", "_rowid"]
    assert t["double_a"].to_pylist() == [14, 16, 18]
    assert t["_rowid"].to_pylist() == [7, 8, 9]
    assert ds.to_table(columns={"one": "1", "a": "a"}, limit=2)["one"].to_pylist() == [1, 1]
    with pytest.raises(NotSupportedError):  # no column read: pylance refuses it too
        ds.to_table(columns={"one": "1"}, limit=2)


def test_reopened_dataset_take_is_warm(uri: str) -> None:
    from lance_format.io.store import MemoryStore

    class Counting(MemoryStore):
        tails = 0

        def read_tail(self, key: str, nbytes: int) -> tuple[int, bytes]:
            Counting.tails += key.startswith(("data/", "_deletions/"))
            return super().read_tail(key, nbytes)

        def read_range(self, key: str, start: int, end: int) -> bytes:
            if key.startswith("data/") and end - start >= 4096:
                Counting.tails += 1  # a metadata-sized read of a data file
            return super().read_range(key, start, end)

        def read_all(self, key: str) -> bytes:
            Counting.tails += key.startswith("_deletions/")
            return super().read_all(key)

    ds = lance_format.write_dataset(_table(100), uri, max_rows_per_file=30)
    ds.delete("a = 5")
    store = Counting(uri[len("memory://") :])
    first = lance_format.LanceDataset(uri, store=store)
    first.take([1, 50, 98])
    warm = Counting.tails
    again = lance_format.LanceDataset(uri, store=store)
    assert again.take([2, 60, 98])["a"].to_pylist() == [2, 61, 99]
    assert Counting.tails == warm


def test_concurrent_deletes_and_appends(tmp_path: Path) -> None:
    import threading

    uri = str(tmp_path)
    lance_format.write_dataset(_table(40), uri, max_rows_per_file=20)
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def deleter(k: int) -> None:
        barrier.wait()
        try:
            for j in range(3):
                lance_format.dataset(uri).delete(f"a = {k * 3 + j}")
        except BaseException as e:
            errors.append(e)

    def appender(k: int) -> None:
        barrier.wait()
        try:
            for j in range(3):
                lance_format.write_dataset(_table(1, 1000 + 10 * k + j), uri, mode="append")
        except BaseException as e:
            errors.append(e)

    pool = [threading.Thread(target=deleter, args=(k,)) for k in range(3)]
    pool += [threading.Thread(target=appender, args=(k,)) for k in range(3)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []
    ds = lance_format.dataset(uri)
    assert ds.version == 1 + 9 + 9
    expected = [i for i in range(9, 40)] + sorted(1000 + 10 * k + j for k in range(3) for j in range(3))
    assert sorted(ds.to_table()["a"].to_pylist()) == expected


def test_empty_projection_keeps_row_count(uri: str) -> None:
    ds = lance_format.write_dataset(_table(9), uri, max_rows_per_file=4)
    ds.delete("a = 0")
    assert ds.to_table(columns=[]).num_rows == 8
    assert ds.to_table(columns=[], filter="a > 4").num_rows == 4


def test_filter_on_row_ids(uri: str) -> None:
    ds = lance_format.write_dataset(_table(20), uri, max_rows_per_file=8)
    assert ds.to_table(filter="_rowid >= 4294967296 AND _rowid < 4294967298", columns=["a"])[
        "a"
    ].to_pylist() == [8, 9]
    t = ds.to_table(filter="_rowaddr = 2", with_row_address=True)
    assert t.schema.names[-1] == "_rowaddr"
    assert t["a"].to_pylist() == [2]


def test_delete_by_row_id(uri: str) -> None:
    ds = lance_format.write_dataset(_table(10), uri)
    assert ds.delete("_rowid IN (1, 3)") == {"num_deleted_rows": 2}
    assert ds.to_table()["a"].to_pylist() == [0, 2, 4, 5, 6, 7, 8, 9]
    with pytest.raises(InvalidInputError):
        ds.delete("nope = 1")
    assert ds.version == 2


def test_add_constant_column(uri: str) -> None:
    ds = lance_format.write_dataset(_table(6), uri, max_rows_per_file=4)
    ds.delete("a = 1")
    ds.add_columns({"one": "1"})
    assert ds.to_table(columns=["a", "one"])["one"].to_pylist() == [1] * 5
