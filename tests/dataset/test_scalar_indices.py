"""BTREE and BITMAP indices against pylance: ours read pylance's and answer filters with them
(reading less), pylance reads and uses ours, and results match cell by cell."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import InvalidInputError
from lance_format.io import io_stats

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pylance's list_indices
pytest.importorskip("lance.file")

FILTERS = [
    "a = 3",
    "a > 59990",
    "a <= 2 or a = 50000",
    "a between 100 and 103",
    "a in (7, 11, 59999)",
    "a is null",
    "s = 'k7'",
    "s in ('k1', 'k2') and a < 40",
    "s is null",
    "s = 'k3' or a = 4",
    "a = 3 and b > 0.5",  # an unindexed part: the index narrows, the filter decides
    "not (a = 3)",  # not answerable: scanned
]


def _data(n: int = 60_000) -> pa.Table:
    rng = np.random.default_rng(7)
    a = pa.array(np.arange(n), pa.int64(), mask=np.arange(n) % 997 == 5)
    s = pa.array([f"k{i % 10}" for i in range(n)], mask=np.arange(n) % 1013 == 1)
    return pa.table({"a": a, "s": s, "b": rng.random(n), "pad": [f"{i:08d}" * 8 for i in range(n)]})


@pytest.fixture(scope="module")
def pylance_indexed(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = str(tmp_path_factory.mktemp("idx") / "ds")
    lance.write_dataset(_data(), uri, max_rows_per_file=25_000)
    ds = lance.dataset(uri)
    ds.delete("a % 50 = 3")  # indexed rows the scan must still drop
    ds.create_scalar_index("a", "BTREE")
    ds.create_scalar_index("s", "BITMAP")
    lance.write_dataset(_data(50), uri, mode="append")  # a fragment no index covers
    return uri


def _rows(t: pa.Table) -> list[Any]:
    return sorted(t.to_pylist(), key=repr)


def _read(run: Any) -> tuple[Any, int]:
    before = io_stats()
    out = run()
    return out, (io_stats() - before).bytes_read


@pytest.mark.parametrize("flt", FILTERS)
def test_pylance_indices_answer_our_filters(pylance_indexed: str, flt: str) -> None:
    ours = lance_format.dataset(pylance_indexed).to_table(columns=["a", "s", "b"], filter=flt)
    theirs = lance.dataset(pylance_indexed).to_table(columns=["a", "s", "b"], filter=flt)
    assert _rows(ours) == _rows(theirs)
    unindexed = lance_format.dataset(pylance_indexed).to_table(
        columns=["a", "s", "b"], filter=flt, use_scalar_index=False
    )
    assert _rows(ours) == _rows(unindexed)


def test_an_indexed_point_lookup_reads_the_index_not_the_columns(pylance_indexed: str) -> None:
    ds = lance_format.dataset(pylance_indexed)
    ds.to_table(filter="a = 1")  # the index lookups are now cached, as a server's would be
    hit, indexed = _read(lambda: ds.to_table(columns=["pad"], filter="a = 12345"))
    _, scanned = _read(lambda: ds.to_table(columns=["pad"], filter="a = 12345", use_scalar_index=False))
    assert hit.column("pad").to_pylist() == ["00012345" * 8]
    assert indexed * 20 < scanned
    hit, indexed = _read(lambda: ds.to_table(columns=["pad"], filter="s = 'k4' and a < 100"))
    assert len(hit) == 15  # 10, and 5 in the appended fragment no index covers
    assert indexed * 5 < scanned


@pytest.mark.parametrize("kind", ["BTREE", "BITMAP"])
def test_pylance_reads_and_uses_our_indices(tmp_path: Path, kind: str) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(_data(3_000), uri, max_rows_per_file=1_000)
    lance.dataset(uri).delete("a % 7 = 0")
    ours = lance_format.dataset(uri)
    ours.create_scalar_index("a", kind)
    ours.create_scalar_index("s", kind)
    theirs = lance.dataset(uri)
    types = sorted(i["type"] for i in theirs.list_indices())
    assert types == [kind.capitalize() if kind == "BITMAP" else "BTree"] * 2
    for flt in ["a = 3", "a = 8", "a in (1, 2, 2999)", "a is null", "s = 'k7'", "s is null", "a >= 2990"]:
        if kind == "BITMAP" or not flt.startswith("s"):
            assert "ScalarIndexQuery" in theirs.scanner(filter=flt).explain_plan()
        assert _rows(theirs.to_table(filter=flt)) == _rows(ours.to_table(filter=flt))
        assert _rows(theirs.to_table(filter=flt)) == _rows(
            theirs.to_table(filter=flt, use_scalar_index=False)
        )


@pytest.mark.parametrize("kind", ["BTREE", "BITMAP"])
def test_our_index_files_match_pylances(tmp_path: Path, kind: str) -> None:
    base = tmp_path / "base"
    lance.write_dataset(_data(5_000), str(base), max_rows_per_file=2_000)
    for who in ("ours", "theirs"):
        shutil.copytree(base, tmp_path / who)
    lance_format.dataset(str(tmp_path / "ours")).create_scalar_index("s", kind)
    lance.dataset(str(tmp_path / "theirs")).create_scalar_index("s", kind)
    tables = []
    for who in ("ours", "theirs"):
        folder = next((tmp_path / who / "_indices").iterdir())
        files = sorted(p.name for p in folder.iterdir())
        tables.append(
            (files, [lance.file.LanceFileReader(str(folder / f)).read_all().to_table() for f in files])
        )
    assert tables[0][0] == tables[1][0]
    for ours, theirs in zip(tables[0][1], tables[1][1], strict=True):
        assert ours.schema.equals(theirs.schema, check_metadata=True)
        if "ids" in ours.column_names:  # page data: ties may come in any order
            keys = [("values", "ascending"), ("ids", "ascending")]
            assert ours.sort_by(keys).equals(theirs.sort_by(keys))
        elif "bitmaps" in ours.column_names:  # bitmap bytes may differ (container choice)
            assert ours.column("keys").equals(theirs.column("keys"))
        else:
            assert ours.equals(theirs)


def test_stable_row_ids_and_unknown_index_type(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance_format.write_dataset(_data(500), uri, enable_stable_row_ids=True, max_rows_per_file=200)
    ds = lance_format.dataset(uri)
    ds.delete("a < 10")
    ds.create_scalar_index("a", "BTREE")
    assert ds.to_table(filter="a = 250").column("a").to_pylist() == [250]
    assert lance.dataset(uri).to_table(filter="a = 250").column("a").to_pylist() == [250]
    with pytest.raises(lance_format.core.errors.NotSupportedError, match="INVERTED"):
        ds.create_scalar_index("s", "INVERTED")


@pytest.mark.parametrize("kind", ["BTREE", "BITMAP"])
def test_values_rewritten_in_place_leave_the_index(tmp_path: Path, kind: str) -> None:
    uri = str(tmp_path / "ds")
    lance_format.write_dataset(
        pa.table({"a": pa.array(range(20), pa.int64()), "b": range(20)}), uri, max_rows_per_file=10
    )
    ds = lance_format.dataset(uri)
    ds.create_scalar_index("a", kind)
    frag = ds.get_fragments()[1]
    meta, modified = frag.update_columns(pa.table({"b": [12], "a": [1000]}), left_on="b")
    op = lance_format.LanceOperation.Update(updated_fragments=[meta], fields_modified=modified)
    ds = lance_format.LanceDataset.commit(uri, op, read_version=ds.version)
    for mod in (lance_format, lance):
        assert mod.dataset(uri).to_table(filter="a = 1000").column("b").to_pylist() == [12]
        assert mod.dataset(uri).to_table(filter="a = 12").num_rows == 0
    (index,) = lance_format.dataset(uri).list_indices()
    assert index["fragment_ids"] == {0}


def test_float_columns_with_nan_are_scanned(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    t = pa.table({"f": [1.0, float("nan"), 3.0, None, -2.0], "i": range(5)})
    lance.write_dataset(t, uri)
    lance.dataset(uri).create_scalar_index("f", "BTREE")
    for flt in ["f > 0", "f < 2", "f = 3", "f is null", "f between 0 and 5"]:
        ours = lance_format.dataset(uri).to_table(filter=flt)
        assert repr(_rows(ours)) == repr(_rows(lance.dataset(uri).to_table(filter=flt))), flt  # NaN


def test_scattered_matches_are_read_as_few_ranges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lance_format.dataset.pruning import candidate_ranges

    uri = str(tmp_path / "ds")
    lance_format.write_dataset(pa.table({"k": [i % 10 for i in range(5000)]}), uri)
    ds = lance_format.dataset(uri)
    ds.create_scalar_index("k", "BITMAP")
    tree = ds.scanner(filter="k = 7").predicate.tree  # type: ignore[union-attr]
    assert candidate_ranges(ds.snapshot, tree, ds.manifest.fragments) == {0: [(7, 4998)]}
    # The setting is the session's (resolved once, when it is made): every match its own range.
    monkeypatch.setenv("LANCE_FORMAT_INDEX_MERGE_GAP_ROWS", "0")
    unchanged = candidate_ranges(ds.snapshot, tree, ds.manifest.fragments)
    assert unchanged == {0: [(7, 4998)]}  # the default session read the environment before
    ds = lance_format.dataset(uri, session=lance_format.Session())
    ranges = candidate_ranges(ds.snapshot, tree, ds.manifest.fragments)
    assert ranges is not None
    assert ranges[0][:2] == [(7, 8), (17, 18)]
    assert len(ranges[0]) == 500
    assert ds.to_table(filter="k = 7").num_rows == 500
    monkeypatch.setenv("LANCE_FORMAT_INDEX_MERGE_GAP_ROWS", "-1")
    with pytest.raises(lance_format.core.errors.InvalidInputError, match="must be an integer >= 0"):
        lance_format.Session()


@pytest.mark.parametrize("kind", ["BTREE", "BITMAP", "ZONEMAP"])
@pytest.mark.parametrize("builder", ["ours", "pylance"])
def test_an_index_built_on_no_rows_then_appended_to(tmp_path: Path, kind: str, builder: str) -> None:
    """Found by the differential machine's new create_index rule (session 12): on a dataset of 0
    rows, our BITMAP build failed (``zip() argument 2 is longer than argument 1``), and a ZONEMAP
    of no zones (ours or pylance's) made every later filtered scan of ours fail with IndexError
    once rows were appended."""
    uri = str(tmp_path / "t")
    empty = pa.table({"id": pa.array([], pa.int64()), "u": pa.array([], pa.uint64())})
    lance.write_dataset(empty, uri)
    (lance_format if builder == "ours" else lance).dataset(uri).create_scalar_index("u", kind)
    assert lance_format.dataset(uri).to_table(filter="u = 3").num_rows == 0
    lance.write_dataset(pa.table({"id": [1, 2], "u": pa.array([3, 4], pa.uint64())}), uri, mode="append")
    for engine in (lance_format, lance):
        assert engine.dataset(uri).to_table(filter="u = 3").to_pylist() == [{"id": 1, "u": 3}]
        assert engine.dataset(uri).count_rows("u > 3") == 1


@pytest.mark.parametrize("kind", ["BTREE", "BITMAP"])
@pytest.mark.parametrize("builder", ["ours", "pylance"])
def test_indices_on_stable_row_ids_find_rows_past_fragment_zero(
    tmp_path: Path, kind: str, builder: str
) -> None:
    """Found by the differential machine's create_index rule (seed 912008): pylance 14.0.2 writes a
    BTREE on a stable-row-id dataset with row *addresses* (index_version 1), and ours mapped them as
    stable row ids: every row outside fragment 0 was lost (``v = 106`` found nothing, ``v >= 100``
    3 rows of 9). BITMAP (index_version 0) and our own indices hold stable row ids."""
    uri = str(tmp_path / "t")
    data = pa.table({"id": list(range(10)), "v": list(range(100, 110))})
    lance.write_dataset(
        data, uri, max_rows_per_file=5, enable_stable_row_ids=True, data_storage_version="2.1"
    )
    lance.dataset(uri).update({"v": "999"}, "id = 1")  # row id 1 moves to a new fragment
    (lance_format if builder == "ours" else lance).dataset(uri).create_scalar_index("v", kind)
    for flt, ids in [("v = 999", [1]), ("v = 106", [6]), ("v >= 100", [2, 3, 4, 5, 6, 7, 8, 9, 1, 0])]:
        expected = lance.dataset(uri).to_table(filter=flt)
        assert sorted(expected["id"].to_pylist()) == sorted(ids)
        assert lance_format.dataset(uri).to_table(filter=flt).equals(expected), flt


def test_our_bitmap_holds_nan_once_so_pylance_finds_every_nan_row(tmp_path: Path) -> None:
    """Found by the differential machine (seed 912006): our BITMAP over a float column wrote one
    key per NaN row (NaN != NaN split the groups); pylance expects each key once and answered
    ``f > 1.5`` without one of the NaN rows (both engines order NaN above every number)."""
    from lance.file import LanceFileReader

    uri = str(tmp_path / "t")
    vals = [1.0, float("nan"), 2.0, float("inf"), None, -1.0, float("nan"), 3.0, float("nan")]
    lance.write_dataset(pa.table({"id": list(range(len(vals))), "f": pa.array(vals, pa.float32())}), uri)
    lance_format.dataset(uri).create_scalar_index("f", "BITMAP")
    [lookup] = list((tmp_path / "t" / "_indices").glob("*/bitmap_page_lookup.lance"))
    keys = LanceFileReader(str(lookup)).read_all().to_table().column("keys").to_pylist()
    assert sum(1 for k in keys if k != k) == 1, keys  # one NaN key
    theirs = lance.dataset(uri).to_table(filter="f > 1.5")
    assert sorted(theirs["id"].to_pylist()) == [1, 2, 3, 6, 7, 8]
    assert lance_format.dataset(uri).to_table(filter="f > 1.5")["id"].equals(theirs["id"])


@pytest.mark.parametrize(("first", "second"), [("BTREE", "BITMAP"), ("BITMAP", "ZONEMAP")])
def test_a_second_kind_of_index_on_a_column_gets_the_next_default_name(
    tmp_path: Path, first: str, second: str
) -> None:
    """Found by the differential machine (seed 912009): with ``replace=False`` and an index of
    another kind already named ``s_idx``, pylance names the new one ``s_idx_2``; ours refused
    ("already exists"). The same kind twice is still refused."""
    listed = []
    for engine in (lance, lance_format):
        uri = str(tmp_path / engine.__name__)
        lance.write_dataset(pa.table({"s": ["a", "b", "c"]}), uri)
        lance.dataset(uri).create_scalar_index("s", first)
        engine.dataset(uri).create_scalar_index("s", second, replace=False)
        listed.append(sorted((i["name"], i["type"]) for i in lance.dataset(uri).list_indices()))
        assert lance_format.dataset(uri).to_table(filter="s = 'b'").num_rows == 1
    assert listed[0] == listed[1]
    assert [n for n, _ in listed[1]] == ["s_idx", "s_idx_2"]
    with pytest.raises(InvalidInputError, match="already exists"):
        lance_format.dataset(str(tmp_path / "lance_format")).create_scalar_index("s", first, replace=False)
