"""pylance API additions (issue 17): to_pandas, sample, insert, get_transactions, stats, validate,
explain_plan / analyze_plan; each compared with pylance where both can run."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import CorruptFileError, InvalidInputError

lance = pytest.importorskip("lance")
pd = pytest.importorskip("pandas")


def _table(n: int = 100, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "v": [float(i) / 2 for i in ids],
            "s": [None if i % 7 == 0 else f"x{i}" for i in ids],
            "st": [{"a": i, "b": str(i)} for i in ids],
        }
    )


@pytest.fixture
def uri(tmp_path: Path) -> str:
    """A pylance-written dataset: 3 fragments, 5 deleted rows, 3 versions."""
    u = str(tmp_path / "ds")
    lance.write_dataset(_table(), u, max_rows_per_file=40)
    lance.dataset(u).delete("id < 5")
    return u


def test_to_pandas_matches_pylance(uri: str) -> None:
    ours = lance_format.dataset(uri).to_pandas(columns=["id", "s"], filter="id > 50", limit=10, offset=2)
    theirs = lance.dataset(uri).to_pandas(columns=["id", "s"], filter="id > 50", limit=10, offset=2)
    pd.testing.assert_frame_equal(ours, theirs)
    pd.testing.assert_frame_equal(lance_format.dataset(uri).to_pandas(), lance.dataset(uri).to_pandas())


def test_sample_distinct_live_rows(uri: str) -> None:
    ds = lance_format.dataset(uri)
    got = ds.sample(20)
    theirs = lance.dataset(uri).sample(20)
    assert got.schema == theirs.schema
    assert got.num_rows == theirs.num_rows == 20
    ids = got.column("id").to_pylist()
    assert len(set(ids)) == 20
    assert all(5 <= i < 100 for i in ids)
    assert ds.sample(5, columns=["s"]).schema.names == ["s"]
    assert ds.sample(3, columns={"twice": "id * 2"}).schema.names == ["twice"]
    assert ds.sample(1000).num_rows == ds.count_rows()
    with pytest.raises(InvalidInputError):
        ds.sample(-1)


def test_insert_moves_the_handle_like_pylance(uri: str, tmp_path: Path) -> None:
    other = str(tmp_path / "copy")
    shutil.copytree(uri, other)
    ours, theirs = lance_format.dataset(uri), lance.dataset(other)
    for ds in (ours, theirs):
        assert ds.insert(_table(3, 1000)) is None
    assert ours.version == theirs.version
    assert ours.to_table().equals(theirs.to_table())
    assert lance.dataset(uri).to_table().equals(theirs.to_table())
    for ds in (ours, theirs):
        ds.insert(_table(2, 2000), mode="overwrite")
    assert ours.version == theirs.version
    assert ours.to_table().equals(theirs.to_table())


def test_get_transactions_newest_first(uri: str) -> None:
    ours = lance_format.dataset(uri).get_transactions(5)
    theirs = lance.dataset(uri).get_transactions(5)
    assert len(ours) == len(theirs) == 2
    assert [type(t.operation).__name__ for t in ours if t] == [type(t.operation).__name__ for t in theirs]
    assert [t.read_version for t in ours if t] == [t.read_version for t in theirs]
    assert [t.uuid for t in ours if t] == [t.uuid for t in theirs]
    assert len(lance_format.dataset(uri).get_transactions(1)) == 1


def test_stats_match_pylance(uri: str) -> None:
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert ours.stats.dataset_stats() == theirs.stats.dataset_stats()
    assert ours.stats.dataset_stats(10) == theirs.stats.dataset_stats(10)
    mine = [(f.id, f.bytes_on_disk) for f in ours.stats.data_stats().fields]
    assert mine == [(f.id, f.bytes_on_disk) for f in theirs.stats.data_stats().fields]


def test_validate_passes_and_catches_a_swapped_file(uri: str) -> None:
    ds = lance_format.dataset(uri)
    assert ds.validate() is None
    assert lance.dataset(uri).validate() is None
    # Replace fragment 2's data file (20 rows) by fragment 0's (40 rows): the manifest now lies.
    files = {f.fragment_id: f.data_files()[0].path for f in ds.get_fragments()}
    data = Path(uri) / "data"
    shutil.copy(data / files[0], data / files[2])
    with pytest.raises(CorruptFileError, match="has 40 rows, the manifest says 20"):
        lance_format.dataset(uri).validate()


def test_explain_and_analyze_plan(uri: str) -> None:
    scan = lance_format.dataset(uri).scanner(columns=["id"], filter="id > 90", limit=3)
    plan = scan.explain_plan()
    assert "LanceRead" in plan
    assert "projection=[id]" in plan
    assert "id > 90" in plan
    assert "fetch=3" in plan
    assert "fragments (id:live rows)=[0:35, 1:40, 2:20]" in scan.explain_plan(verbose=True)
    analyzed = scan.analyze_plan()
    assert "output_rows=3" in analyzed
    assert "LanceRead" in lance.dataset(uri).scanner(columns=["id"], filter="id > 90").explain_plan()


def test_tags_create_with_pylance_references(uri: str, tmp_path: Path) -> None:
    other = str(tmp_path / "copy")
    shutil.copytree(uri, other)
    results = []
    for mod, u in ((lance_format, uri), (lance, other)):
        ds = mod.dataset(u, version=1)
        ds.tags.create("here")  # this handle's version
        ds.tags.create("same", "here")  # a tag names a version
        ds.tags.create("latest", (None, None))
        ds.tags.create("second", (None, 2))
        ds.tags.update("here", 2)
        results.append({k: v["version"] for k, v in ds.tags.list().items()})
        with pytest.raises(OSError, match="nope"):
            ds.tags.create("x", "nope")
    assert results[0] == results[1] == {"here": 2, "same": 1, "latest": 2, "second": 2}


def _metadata_steps(ds: object) -> list[object]:
    d: object = ds
    out: list[object] = [
        d.update_config({"a": "1", "b": "2"}),  # type: ignore[attr-defined]
        d.update_config({"a": None}),  # type: ignore[attr-defined]
        d.update_config({"c": "3"}, replace=True),  # type: ignore[attr-defined]
        d.update_metadata({"owner": "me", "x": "y"}),  # type: ignore[attr-defined]
        d.update_metadata({"x": None}),  # type: ignore[attr-defined]
        d.update_schema_metadata({"sm": "1"}),  # type: ignore[attr-defined]
        d.update_schema_metadata({"sm2": "2"}, replace=True),  # type: ignore[attr-defined]
        d.update_field_metadata({"id": {"unit": "s"}, "s": {"k": "v"}}),  # type: ignore[attr-defined]
        d.update_field_metadata({"s": {"k2": "v2"}}, replace=True),  # type: ignore[attr-defined]
    ]
    return out


def test_config_and_metadata_updates_match_pylance(uri: str, tmp_path: Path) -> None:
    other = str(tmp_path / "copy")
    shutil.copytree(uri, other)
    ours, theirs = lance_format.dataset(uri), lance.dataset(other)
    assert _metadata_steps(ours) == _metadata_steps(theirs)
    assert ours.version == theirs.version
    for a, b in (
        (ours, lance.dataset(other)),
        (lance.dataset(uri), theirs),
        (lance_format.dataset(other), theirs),
    ):
        assert a.config() == b.config()
        assert a.schema.metadata == b.schema.metadata
        assert a.schema.field("id").metadata == b.schema.field("id").metadata == {b"unit": b"s"}
        assert a.schema.field("s").metadata == b.schema.field("s").metadata == {b"k2": b"v2"}
    # Our transactions read back as pylance's: each change in its own map.
    ops = [t.operation for t in lance.dataset(uri).get_transactions(4)]
    assert ops[0].field_metadata_updates[2].replace
    assert ops[2].schema_metadata_updates.updates == {"sm2": "2"}
    with pytest.raises(InvalidInputError):
        ours.update_field_metadata({"nope": {"a": "b"}})
    with pytest.raises(InvalidInputError):
        ours.update_metadata({"a": 1})  # type: ignore[dict-item]


def test_optimize_compact_files_reports_pylances_metrics(tmp_path: Path) -> None:
    """``ds.optimize.compact_files()`` returns an object with pylance's four counters, equal to
    pylance's for the same dataset (code reading ``metrics.fragments_removed`` runs on both)."""
    import lance

    got = []
    for engine, path in ((lance, tmp_path / "p"), (lance_format, tmp_path / "o")):
        for i in range(4):
            table = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())})
            engine.write_dataset(table, str(path), mode="append" if i else "create")
        ds = engine.dataset(str(path))
        ds.delete("id = 3")
        metrics = engine.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=100)
        got.append(
            (metrics.fragments_removed, metrics.fragments_added, metrics.files_removed, metrics.files_added)
        )
    assert got[0] == got[1]
    assert got[1][:2] == (4, 1)


def test_get_transactions_have_pylances_fields(tmp_path: Path) -> None:
    """Each transaction answers pylance's attributes: read_version, uuid, operation (with the
    operation's own fields) and transaction_properties."""
    import lance

    seen = []
    for engine, path in ((lance, tmp_path / "p"), (lance_format, tmp_path / "o")):
        engine.write_dataset(pa.table({"a": [1, 2, 3]}), str(path))
        engine.dataset(str(path)).delete("a = 2")
        ts = engine.dataset(str(path)).get_transactions()
        seen.append(
            [
                (
                    t.read_version,
                    type(t.operation).__name__,
                    sorted(t.transaction_properties),
                    isinstance(t.uuid, str),
                )
                for t in ts
            ]
        )
        assert list(ts[0].operation.deleted_fragment_ids) == []
    assert seen[0] == seen[1]


@pytest.mark.parametrize(
    "kwargs", [{"limit": 3}, {"offset": 2}, {"offset": 0}, {"limit": 0}, {"limit": 3, "filter": "id > 50"}]
)
def test_count_rows_refuses_limit_and_offset_like_pylance(uri: str, kwargs: dict[str, Any]) -> None:
    """pylance 14.0.2: "Cannot use limit/offset with aggregate". Before: ours counted them."""
    with pytest.raises(ValueError, match="Cannot use limit/offset with aggregate"):
        lance.dataset(uri).scanner(**kwargs).count_rows()
    with pytest.raises(InvalidInputError, match="Cannot use limit/offset with aggregate"):
        lance_format.dataset(uri).scanner(**kwargs).count_rows()
    with pytest.raises(InvalidInputError, match="Cannot use limit/offset with aggregate"):
        lance_format.dataset(uri).get_fragments()[0].scanner(**kwargs).count_rows()
    both = [
        ds.scanner(filter="id > 50").count_rows() for ds in (lance.dataset(uri), lance_format.dataset(uri))
    ]
    assert both[0] == both[1]


@pytest.mark.parametrize("indices", [[2, 0], [0, 3, 1], [5, 5, 4]])
def test_fragment_take_refuses_decreasing_indices_like_pylance(uri: str, indices: list[int]) -> None:
    """pylance 14.0.2: "Requested row indices are not strictly increasing" (repeats pass). Before:
    ours answered in the order asked."""
    with pytest.raises(OSError, match="not strictly increasing"):
        lance.dataset(uri).get_fragments()[0].take(indices)
    with pytest.raises(InvalidInputError, match="not strictly increasing"):
        lance_format.dataset(uri).get_fragments()[0].take(indices)
    for ok in ([0, 2], [1, 1, 3], []):
        ours = lance_format.dataset(uri).get_fragments()[0].take(ok)
        assert ours.to_pylist() == lance.dataset(uri).get_fragments()[0].take(ok).to_pylist()
