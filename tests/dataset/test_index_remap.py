"""Compaction remaps scalar indices as pylance 14.0.2 does (it used to drop every index).

Each dataset is built once, copied, and compacted by each engine: the indices both list after
(names, kinds, fields, versions, coverage), the Rewrite transactions (which indices were remapped,
from which uuid, with which details and version) and the remapped index files (rows, order, pages)
must be alike, and both engines' filtered scans must use the indices and match full scans.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import NotSupportedError, RetryableCommitConflictError
from lance_format.dataset.scalar_index.rowid_map import decode_row_set
from lance_format.table import model
from lance_format.table.transaction import check_conflict
from lance_format.table.versions import read_transaction
from tests.interop.compare import described_indices

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pylance's list_indices

#: Rows per appended fragment: a BTREE of the four indexed fragments spans several 4096-row pages.
ROWS = 3000
TARGET = 5000  # two groups of the indexed fragments, one of the unindexed ones
FILTERS = ["a = 15", "a = 6001", "a >= 2990 and a < 3010", "a is null", "b = 'k3'", "b is null", "c = 4"]


def _part(i: int, n: int = ROWS) -> pa.Table:
    a = np.arange(i * n, i * n + n)
    return pa.table(
        {
            "a": pa.array(a, pa.int64(), mask=a % 101 == 7),
            "b": pa.array([f"k{v % 5}" for v in a], mask=a % 89 == 3),
            "c": pa.array(a % 10, pa.int32()),
        }
    )


def _build(uri: str, writer: Any, stable: bool) -> None:
    """Four indexed fragments, two appended after the indices (partial coverage), deletions in
    both; a BTREE on ``a``, a BITMAP on ``b``, a ZONEMAP on ``c``."""
    for i in range(4):
        writer.write_dataset(_part(i), uri, mode="append" if i else "create", enable_stable_row_ids=stable)
    ds = writer.dataset(uri)
    ds.create_scalar_index("a", "BTREE")
    ds.create_scalar_index("b", "BITMAP")
    ds.create_scalar_index("c", "ZONEMAP")
    for i in (4, 5):
        writer.write_dataset(_part(i), uri, mode="append")
    writer.dataset(uri).delete("a % 7 = 0 or a = 6001")


def _listed(ds: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (i["name"], i["type"], tuple(i["fields"]), i["version"], sorted(i["fragment_ids"]))
        for i in ds.list_indices()
    )


def _uuids(ds: Any) -> dict[str, str]:
    return {i["name"]: i["uuid"] for i in ds.list_indices()}


def _rewrite(uri: str) -> model.Rewrite:
    ds = lance_format.dataset(uri)
    snap = ds.snapshot
    txn = read_transaction(snap.store, snap.manifest, snap.naming)
    assert txn is not None
    assert isinstance(txn.operation, model.Rewrite)
    return txn.operation


def _remapped(uri: str) -> list[tuple[str, str, int, list[str]]]:
    return sorted(
        (r.old_id, r.details_type_url, r.index_version, sorted(n for n, _ in r.files))
        for r in _rewrite(uri).rewritten_indices
    )


def _index_rows(uri: str, uuid: str, kind: str, fragments: dict[int, int]) -> list[Any]:
    """The content of an index's files as pylance's reader sees it (order kept)."""
    folder = f"{uri}/_indices/{uuid}"
    if kind == "BTree":
        data = lance.file.LanceFileReader(f"{folder}/page_data.lance").read_all().to_table()
        lookup = lance.file.LanceFileReader(f"{folder}/page_lookup.lance").read_all().to_table()
        return [data.to_pydict(), lookup.to_pydict(), lookup.schema.metadata]
    table = lance.file.LanceFileReader(f"{folder}/bitmap_page_lookup.lance").read_all().to_table()

    def whole(f: int) -> np.ndarray:
        return (np.uint64(f) << np.uint64(32)) | np.arange(fragments[f], dtype=np.uint64)

    sets = [decode_row_set(b, whole, folder).tolist() for b in table.column("bitmaps").to_pylist()]
    return [table.column("keys").to_pylist(), sets]


def _scans_agree(uri: str) -> None:
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    for flt in FILTERS:
        want = theirs.to_table(filter=flt, use_scalar_index=False).sort_by("a")
        assert theirs.to_table(filter=flt).sort_by("a") == want, flt
        assert ours.to_table(filter=flt).sort_by("a") == want, flt
        assert ours.to_table(filter=flt, use_scalar_index=False).sort_by("a") == want, flt
    plan = theirs.scanner(filter="a = 15").explain_plan()
    assert "ScalarIndexQuery" in plan
    assert "a_idx(BTree)" in plan
    assert "b_idx(Bitmap)" in theirs.scanner(filter="b = 'k3'").explain_plan()


def _compare_compactions(mine: str, theirs: str) -> None:
    """``mine`` compacted by us and ``theirs`` (a copy of the same version) by pylance."""
    a, b = lance.dataset(mine), lance.dataset(theirs)
    assert [(f.fragment_id, f.count_rows()) for f in a.get_fragments()] == [
        (f.fragment_id, f.count_rows()) for f in b.get_fragments()
    ]
    assert _listed(a) == _listed(b)
    assert _listed(lance_format.dataset(mine)) == _listed(b)
    assert _remapped(mine) == _remapped(theirs)
    assert [i["fragment_ids"] for i in lance_format.dataset(mine).list_indices()] == [
        set(i["fragment_ids"]) for i in a.list_indices()
    ]
    sizes = {f.fragment_id: f.metadata.physical_rows for f in b.get_fragments()}
    kinds = {i["name"]: i["type"] for i in b.list_indices()}
    ua, ub = _uuids(a), _uuids(b)
    for name, kind in kinds.items():
        if kind in ("BTree", "Bitmap"):
            assert _index_rows(mine, ua[name], kind, sizes) == _index_rows(theirs, ub[name], kind, sizes), (
                name
            )
    _scans_agree(mine)
    _scans_agree(theirs)


@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_compaction_remaps_indices_like_pylance(tmp_path: Path, stable: bool, writer: str) -> None:
    """(a) pylance reads our compaction of our dataset, (c) of a pylance-written one: the same
    indices, coverage, transaction record and index content as pylance's own compaction."""
    src = str(tmp_path / "src")
    _build(src, lance_format if writer == "ours" else lance, stable)
    before = _uuids(lance.dataset(src))
    mine, theirs = str(tmp_path / "mine"), str(tmp_path / "theirs")
    shutil.copytree(src, mine)
    shutil.copytree(src, theirs)
    lance_format.dataset(mine).optimize.compact_files(target_rows_per_fragment=TARGET)
    lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=TARGET)
    _compare_compactions(mine, theirs)
    after = _uuids(lance_format.dataset(mine))
    # Without stable row ids both address indices get new files; with them only pylance's
    # BTREE (version 1, addresses) does; a zone map is never rewritten.
    kept = {n for n in before if before[n] == after[n]}
    pylance_btree = writer == "pylance"
    assert kept == ({"c_idx"} if not stable else {"b_idx", "c_idx"} | (set() if pylance_btree else {"a_idx"}))


@pytest.mark.parametrize("stable", [False, True])
def test_we_read_pylance_compacted_indices(tmp_path: Path, stable: bool) -> None:
    """(b) a dataset pylance built and compacted: our ``list_indices`` equals pylance's entry by
    entry (uuids included) and our filtered scans equal its scans."""
    uri = str(tmp_path / "ds")
    _build(uri, lance, stable)
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=TARGET)
    ours = lance_format.dataset(uri).list_indices()
    theirs = lance.dataset(uri).list_indices()
    keys = ("name", "type", "uuid", "fields", "version")
    assert [{k: i[k] for k in keys} for i in ours] == [{k: i[k] for k in keys} for i in theirs]
    assert [i["fragment_ids"] for i in ours] == [set(i["fragment_ids"]) for i in theirs]
    assert described_indices(lance_format.dataset(uri)) == described_indices(lance.dataset(uri))
    assert _remapped(uri)  # read back from pylance's transaction
    _scans_agree(uri)


def test_indices_stay_usable_after_repeated_compactions(tmp_path: Path) -> None:
    """A compaction of an already remapped index (two rounds, then an append and a third)."""
    uri = str(tmp_path / "ds")
    _build(uri, lance_format, False)
    ds = lance_format.dataset(uri)
    ds.optimize.compact_files(target_rows_per_fragment=TARGET)
    ds.delete("a % 11 = 1")
    ds.optimize.compact_files(target_rows_per_fragment=100_000)
    lance_format.write_dataset(_part(9, 50), uri, mode="append")
    lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=100_000)
    names = {i["name"]: i for i in lance.dataset(uri).list_indices()}
    assert set(names) == {"a_idx", "b_idx", "c_idx"}
    _scans_agree(uri)


def test_defer_index_remap_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri, lance_format, False)
    ds = lance_format.dataset(uri)
    with pytest.raises(NotSupportedError, match="defer_index_remap"):
        ds.optimize.compact_files(target_rows_per_fragment=TARGET, defer_index_remap=True)
    assert lance_format.dataset(uri).version == ds.version
    ds.optimize.compact_files(target_rows_per_fragment=TARGET, defer_index_remap=False)


@pytest.mark.parametrize("stable", [False, True])
def test_an_index_we_cannot_remap_refuses_the_compaction(tmp_path: Path, stable: bool) -> None:
    """A pylance INVERTED index over rewritten fragments: without stable row ids it would need new
    files, so compaction refuses before writing anything; with them it keeps its uuid and covers
    the new fragments, as pylance does."""
    uri = str(tmp_path / "ds")
    for i in range(3):
        lance.write_dataset(
            _part(i, 100), uri, mode="append" if i else "create", enable_stable_row_ids=stable
        )
    lance.dataset(uri).create_scalar_index("b", "INVERTED")
    copy = str(tmp_path / "copy")
    shutil.copytree(uri, copy)
    ds = lance_format.dataset(uri)
    if not stable:
        with pytest.raises(NotSupportedError, match="b_idx"):
            ds.optimize.compact_files(target_rows_per_fragment=TARGET)
        assert lance_format.dataset(uri).version == ds.version
        return
    ds.optimize.compact_files(target_rows_per_fragment=TARGET)
    lance.dataset(copy).optimize.compact_files(target_rows_per_fragment=TARGET)
    assert lance.dataset(uri).list_indices() == lance.dataset(copy).list_indices()


def _index(uuid: str, frags: set[int]) -> model.IndexMetadata:
    return model.IndexMetadata(
        uuid=uuid, name="x", fields=(0,), dataset_version=1, fragment_ids=frozenset(frags)
    )


def _frag(i: int) -> model.DataFragment:
    return model.DataFragment(id=i, files=(), physical_rows=1)


def test_rewrite_and_create_index_conflict_where_they_share_fragments() -> None:
    """pylance's rule, both ways: an index built concurrently over fragments a compaction moved
    holds addresses the compaction did not remap (retry); over other fragments they commute."""
    u1, u2 = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"
    rewrite = model.Transaction(
        1, "r", model.Rewrite((model.RewriteGroup((_frag(0), _frag(1)), (_frag(5),)),))
    )
    over = model.Transaction(1, "c", model.CreateIndex((_index(u1, {1, 2}),)))
    apart = model.Transaction(1, "d", model.CreateIndex((_index(u1, {2, 3}),)))
    for mine, theirs in ((rewrite, over), (over, rewrite)):
        with pytest.raises(RetryableCommitConflictError):
            check_conflict(mine, theirs, 2)
    check_conflict(rewrite, apart, 2)
    check_conflict(apart, rewrite, 2)
    # Two rewrites of other fragments that both remap one index: each would replace it.
    remap = (model.RewrittenIndex(u1, u2),)
    a = model.Transaction(1, "a", model.Rewrite((model.RewriteGroup((_frag(0),), (_frag(5),)),), remap))
    b = model.Transaction(1, "b", model.Rewrite((model.RewriteGroup((_frag(3),), (_frag(6),)),), remap))
    with pytest.raises(RetryableCommitConflictError):
        check_conflict(a, b, 2)
    # An index dropped concurrently (a CreateIndex removing it) cannot be remapped any more.
    dropped = model.Transaction(1, "e", model.CreateIndex((), (_index(u1, {0}),)))
    with pytest.raises(RetryableCommitConflictError):
        check_conflict(a, dropped, 2)
    check_conflict(rewrite, dropped, 2)  # a rewrite that remapped nothing: no conflict


def test_a_compaction_planned_before_a_concurrent_index_remaps_it(tmp_path: Path) -> None:
    """A handle still on the version before ``create_scalar_index`` compacts: its Rewrite
    conflicts with the index (built over the fragments it moves), is planned again on the latest
    version and remaps the new index too; pylance lists and uses it."""
    uri = str(tmp_path / "ds")
    for i in range(4):
        lance_format.write_dataset(_part(i, 100), uri, mode="append" if i else "create")
    stale = lance_format.dataset(uri)
    lance_format.dataset(uri).create_scalar_index("a", "BTREE")
    stale.optimize.compact_files(target_rows_per_fragment=TARGET)
    listed = lance.dataset(uri).list_indices()
    frags = {f.fragment_id for f in lance.dataset(uri).get_fragments()}
    assert len(frags) == 1  # (the first attempt's reserved id is spent, as in pylance)
    assert [(i["name"], set(i["fragment_ids"])) for i in listed] == [("a_idx", frags)]
    assert "a_idx(BTree)" in lance.dataset(uri).scanner(filter="a = 15").explain_plan()
    assert lance.dataset(uri).to_table(filter="a = 15").num_rows == 1


def test_a_compaction_planned_before_a_concurrent_delete_keeps_the_rows_deleted(tmp_path: Path) -> None:
    """The Rewrite is committed on top of its own id reservation; a delete that landed between the
    version it read and that reservation must still make it plan again (it copied the rows)."""
    uri = str(tmp_path / "ds")
    for i in range(4):
        lance_format.write_dataset(_part(i, 100), uri, mode="append" if i else "create")
    stale = lance_format.dataset(uri)
    lance_format.dataset(uri).delete("a < 50")
    left = lance.dataset(uri).count_rows()
    stale.optimize.compact_files(target_rows_per_fragment=TARGET)
    assert lance.dataset(uri).count_rows() == left
    assert lance_format.dataset(uri).count_rows("a < 50") == 0


def test_indices_are_listed_and_described_by_name_like_pylance(tmp_path: Path) -> None:
    """pylance lists and describes indices by name, not in the order they were created (found by
    the differential run of seed 1302: ours described id_idx before i64_idx)."""
    uri = str(tmp_path / "ds")
    lance_format.write_dataset(_part(0, 20), uri)
    ds = lance_format.dataset(uri)
    for name, col, kind in [
        ("zz", "a", "BTREE"),
        ("aa", "b", "BITMAP"),
        ("Bq", "c", "ZONEMAP"),
        ("b_1", "c", "BTREE"),
    ]:
        ds.create_scalar_index(col, kind, name=name)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert [i["name"] for i in ours.list_indices()] == [i["name"] for i in theirs.list_indices()]
    assert [i["name"] for i in ours.list_indices()] == ["Bq", "aa", "b_1", "zz"]
    assert described_indices(ours) == described_indices(theirs)
