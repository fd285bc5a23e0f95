"""Row versions in what we write, as pylance reads them: ``_row_created_at_version`` and
``_row_last_updated_at_version`` of every row after the same operations on both engines; and
the same columns read by our engine (scans, filters, takes) equal pylance's on either engine's
dataset.

Before: rows an update or a merge-insert rewrote kept no versions (pylance read them as created
and last updated by version 1), and a compaction dropped every row's versions. The generated test
runs random sequences of appends, updates, deletes, merge-inserts and compactions on a dataset of
each engine and compares pylance's reading of both cell by cell after every step.
``LANCE_FUZZ_EXAMPLES=400`` runs a longer search.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_format
from lance_format.errors import CorruptFileError
from lance_format.table.rowids import decode_row_versions, encode_row_versions

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop

EXAMPLES = int(os.environ.get("LANCE_FUZZ_EXAMPLES", "12"))
COLUMNS = ["id", "v", "_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


def _table(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids), pa.int64())})


def _apply(engine: Any, uri: str, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "append":
        engine.write_dataset(_table(op[1], op[2]), uri, mode="append", max_rows_per_file=op[3])
    elif kind == "update":
        engine.dataset(uri).update({"v": str(op[2])}, where=f"id % 5 = {op[1]}")
    elif kind == "delete":
        engine.dataset(uri).delete(f"id % 7 = {op[1]}")
    elif kind == "merge":
        # Updates and inserts (one fragment for both, as pylance writes them), or inserts only.
        builder = engine.dataset(uri).merge_insert("id").when_not_matched_insert_all()
        builder = builder.when_matched_update_all() if op[3] else builder
        builder.execute(_table(op[1], op[2]))
    else:
        engine.dataset(uri).optimize.compact_files(target_rows_per_fragment=op[1])


def _seen(uri: str, stable: bool) -> list[tuple[Any, ...]]:
    """Every row as pylance reads it, in row-id order with stable ids; without them the row id is
    an address, which depends on where each engine placed rewritten rows (a hash join's order),
    so the rows are compared as a multiset."""
    got = lance.dataset(uri).to_table(columns=COLUMNS if stable else COLUMNS[:2] + COLUMNS[3:])
    if stable:
        got = got.sort_by("_rowid")
    rows = list(zip(*got.to_pydict().values(), strict=True))
    return rows if stable else sorted(rows)


def _check_reads(uri: str) -> None:
    """Our reads of the row version columns equal pylance's, cell by cell and in scan order."""
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    cols = ["id", "_row_created_at_version", "_row_last_updated_at_version"]
    assert ours.to_table(columns=cols) == theirs.to_table(columns=cols)
    flt = "_row_last_updated_at_version > _row_created_at_version OR _row_created_at_version >= 3"
    assert ours.to_table(columns=["id", "v"], filter=flt) == theirs.to_table(columns=["id", "v"], filter=flt)
    assert ours.count_rows(filter=flt) == theirs.count_rows(filter=flt)
    n = theirs.count_rows()
    idx = sorted({0, n // 2, n - 1}) if n else []
    for named in (["_row_created_at_version", "id"], ["v", "_row_last_updated_at_version"]):
        assert ours.take(idx, columns=named) == theirs.take(idx, columns=named)


def _check_deltas(uri: str, stable: bool) -> None:
    """``delta`` against every earlier version equals pylance's, on either engine's dataset."""
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    for begin in range(1, theirs.version + 1):
        mine, want = ours.delta(compared_against=begin), theirs.delta(compared_against=begin)
        assert len(mine.list_transactions()) == len(want.list_transactions())
        assert mine.get_inserted_rows().read_all() == want.get_inserted_rows().read_all(), begin
        assert mine.get_updated_rows().read_all() == want.get_updated_rows().read_all(), begin
        if stable:
            assert mine.get_deleted_row_ids().read_all() == want.get_deleted_row_ids().read_all(), begin
        else:
            with pytest.raises(ValueError, match="stable row ids"):
                mine.get_deleted_row_ids()


_ids = st.lists(st.integers(0, 40), min_size=1, max_size=8, unique=True)
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), _ids, st.integers(0, 9), st.sampled_from([3, 100])),
        st.tuples(st.just("update"), st.integers(0, 4), st.integers(10, 19)),
        st.tuples(st.just("delete"), st.integers(0, 6)),
        st.tuples(st.just("merge"), _ids, st.integers(20, 29), st.booleans()),
        st.tuples(st.just("compact"), st.sampled_from([4, 1000])),
    ),
    min_size=1,
    max_size=7,
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops=_ops, stable=st.booleans())
def test_row_versions_match_pylance(ops: list[tuple[Any, ...]], stable: bool) -> None:
    root = tempfile.mkdtemp(prefix="row-versions-")
    try:
        uris = {}
        for engine in (lance, lance_format):
            uris[engine] = os.path.join(root, engine.__name__)
            engine.write_dataset(_table(list(range(12)), 0), uris[engine], enable_stable_row_ids=stable)
        assert _seen(uris[lance_format], stable) == _seen(uris[lance], stable)
        for op in ops:
            for engine in (lance, lance_format):
                _apply(engine, uris[engine], op)
            assert _seen(uris[lance_format], stable) == _seen(uris[lance], stable), op
            for uri in uris.values():
                _check_reads(uri)
        for uri in uris.values():
            _check_deltas(uri, stable)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_delta_arguments_as_pylance(tmp_path: Any) -> None:
    """Before: ours had no ``delta``. pylance: compared_against wins over a range given with it."""
    for engine in (lance, lance_format):
        uri = str(tmp_path / engine.__name__)
        engine.write_dataset(_table([1, 2], 0), uri, enable_stable_row_ids=True)
        engine.write_dataset(_table([3], 0), uri, mode="append")
        engine.dataset(uri).delete("id = 1")
        ds = engine.dataset(uri)
        for kw in ({}, {"begin_version": 1}, {"end_version": 2}):
            with pytest.raises(ValueError, match="Must specify"):
                ds.delta(**kw)
        assert len(ds.delta(1, begin_version=2, end_version=3).list_transactions()) == 2
        assert ds.delta(begin_version=3, end_version=1).list_transactions() == []
        assert ds.delta(begin_version=1, end_version=2).get_inserted_rows().read_all()["id"].to_pylist() == [
            3
        ]
        assert ds.delta(2).get_deleted_row_ids().read_all()["_rowid"].to_pylist() == [0]


@pytest.mark.parametrize(
    "versions", [[], [1], [1, 1, 1], [3, 3, 1, 1, 7], list(range(1, 40)), [2**40, 2**40, 5]]
)
def test_row_version_sequences_round_trip(versions: list[int]) -> None:
    v = np.array(versions, dtype=np.uint64)
    assert decode_row_versions(encode_row_versions(v), len(v), "t").tolist() == versions


def test_missing_row_versions_read_as_version_one() -> None:
    assert decode_row_versions(None, 3, "t").tolist() == [1, 1, 1]
    with pytest.raises(CorruptFileError):
        decode_row_versions(encode_row_versions(np.array([1, 2], np.uint64)), 3, "t")
