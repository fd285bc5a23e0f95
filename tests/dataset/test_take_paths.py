"""The take path's per-call savings: reused fragment readers and plans, memoized Arrow schemas,
serial local reads, and page-cache reads that straddle blocks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.core.errors import InvalidInputError
from lance_format.core.types import LanceField
from lance_format.dataset import write_dataset
from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.session import Session
from lance_format.io.cache import ByteCache
from lance_format.io.reader import PAGE_BLOCK_BYTES, RangeReader
from lance_format.io.store import MemoryStore


def _data(n: int) -> pa.Table:
    ids = np.arange(n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "x": ids * 0.25,
            "s": pa.array([f"row-{i}" for i in range(n)]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(n * 4, dtype=np.float32)), 4),
        }
    )


@pytest.fixture
def ds(tmp_path: Path) -> LanceDataset:
    write_dataset(_data(2000), str(tmp_path / "d"), max_rows_per_file=500)
    return LanceDataset(str(tmp_path / "d"))


def test_fragment_readers_and_plans_are_reused(ds: LanceDataset) -> None:
    frag = ds.manifest.fragments[1]
    reader = ds.snapshot.fragment_reader(frag)
    assert ds.snapshot.fragment_reader(frag) is reader
    ds.take([600, 700], ["id", "s"])
    plan = reader._plan(["id", "s"])
    assert reader._plan(["id", "s"]) is plan
    assert reader._plan(["s", "id"]) is not plan  # another projection, another plan


def test_takes_after_a_delete_see_the_new_version(ds: LanceDataset) -> None:
    rows = np.array([5, 600, 1999, 600, 1200])
    before = ds.take(rows)
    assert before.column("id").to_pylist() == rows.tolist()
    ds.delete("id < 100")  # a new manifest: readers made for the old one are not reused
    after = ds.take([0, 500, 1899])
    assert after.column("id").to_pylist() == [100, 600, 1999]
    assert after.column("s").to_pylist() == ["row-100", "row-600", "row-1999"]


def test_local_takes_do_not_use_threads(ds: LanceDataset, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(session: Session) -> None:
        raise AssertionError("a local take went to the dataset pool")

    monkeypatch.setattr(Session, "dataset_pool", refuse)
    rows = np.array([1999, 0, 501, 1500, 1001])  # four fragments, out of order
    got = ds.take(rows)
    assert got.column("id").to_pylist() == rows.tolist()
    assert got.equals(_data(2000).take(rows))


def test_arrow_conversion_is_memoized_and_replace_makes_a_new_one() -> None:
    f = LanceField(0, -1, "a", "int64")
    assert f.to_arrow() is f.to_arrow()
    g = dataclasses.replace(f, name="b", nullable=False)
    assert g.to_arrow().name == "b"
    assert not g.to_arrow().nullable
    assert f.to_arrow().name == "a"
    assert f == LanceField(0, -1, "a", "int64")  # the memo is not part of equality


def test_page_cache_reads_straddling_blocks_are_exact() -> None:
    store = MemoryStore("memory://take-paths")
    blob = np.random.default_rng(0).integers(0, 256, 5 * PAGE_BLOCK_BYTES, dtype=np.uint8).tobytes()
    store.write("obj", blob)
    reader = RangeReader(store, "obj", len(blob), page_cache=ByteCache(1 << 22))
    b = PAGE_BLOCK_BYTES
    ranges = [(b - 3, 10), (b // 2, 3 * b), (4 * b - 1, 2), (0, 5 * b), (2 * b, b)]
    for _ in range(2):  # cold (blocks fetched), then warm (blocks from the cache)
        got = reader.read(ranges)
        assert [bytes(g) for g in got] == [blob[o : o + n] for o, n in ranges]


def test_fragment_index_is_built_once_per_version(ds: LanceDataset) -> None:
    index = ds.snapshot.fragment_index()
    assert ds.snapshot.fragment_index() is index
    assert index.ends.tolist() == [500, 1000, 1500, 2000]
    ds.delete("id >= 1900")
    fresh = ds.snapshot.fragment_index()
    assert fresh is not index
    assert fresh.ends.tolist() == [500, 1000, 1500, 1900]
    assert ds.take([1899]).column("id").to_pylist() == [1899]
    with pytest.raises(InvalidInputError, match="out of range"):
        ds.take([1900])
