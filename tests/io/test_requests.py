"""Request accounting: what opening files, taking rows and opening new versions cost in requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.dataset import write_dataset
from lance_format.dataset.dataset import LanceDataset
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.io.cache import METADATA_CACHE, PAGE_CACHE, configure_caches
from lance_format.io.planner import LOCAL_PLAN
from lance_format.io.store import LocalStore
from tests.io.counting import Call, CountingStore, takes_against_pylance

N = 6000


def table(n: int = N, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "i": np.arange(n, dtype=np.int64),
            "x": rng.random(n),
            "s": pa.array([f"name-{i}" for i in range(n)]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16, dtype=np.float32)), 16),
        }
    )


@pytest.fixture(autouse=True)
def cold_caches() -> Iterator[None]:
    METADATA_CACHE.clear()
    PAGE_CACHE.clear()
    yield
    METADATA_CACHE.clear()
    PAGE_CACHE.clear()


# -- opening a file ------------------------------------------------------------------------------
def test_open_small_file_is_one_request(tmp_path: Path) -> None:
    with LanceFileWriter(str(tmp_path / "f.lance")) as w:
        w.write_batch(table(100))
    store = CountingStore(LocalStore(str(tmp_path)))
    r = LanceFileReader("f.lance", store=store)
    assert r.io_stats.requests == 1
    assert [c.op for c in store.calls] == ["read_tail"]
    assert r.num_rows() == 100


def test_open_file_with_large_metadata_is_two_requests(tmp_path: Path) -> None:
    # ~700 columns with long names: schema and column metadata exceed the 64 KiB first read.
    wide = pa.table({f"column_with_a_rather_long_name_{i:04d}": pa.array([i, i + 1]) for i in range(700)})
    with LanceFileWriter(str(tmp_path / "wide.lance")) as w:
        w.write_batch(wide)
    store = CountingStore(LocalStore(str(tmp_path)))
    r = LanceFileReader("wide.lance", store=store)
    meta = r.metadata()
    assert meta.file_size - meta.num_data_bytes > 64 * 1024  # the premise
    assert r.io_stats.requests == 2
    assert len(store.calls) == 2
    assert r.read_all().to_table().equals(wide)


# -- takes ---------------------------------------------------------------------------------------
def test_take_of_rows_in_the_same_pages_costs_at_most_one_request_per_page(tmp_path: Path) -> None:
    t = table()
    with LanceFileWriter(
        str(tmp_path / "p.lance"), data_cache_bytes=64 * 1024, max_page_bytes=16 * 1024
    ) as w:
        for batch in t.to_batches(max_chunksize=500):
            w.write_batch(batch)
    r = LanceFileReader(str(tmp_path / "p.lance"))
    cols = r.metadata().columns
    assert all(len(c.pages) > 3 for c in cols)  # the premise: many pages per column
    rows = np.sort(np.random.default_rng(1).choice(np.arange(1000, 1400), 100, replace=False))
    before = r.io_stats
    got = r.take_rows(rows).to_table()
    spent = r.io_stats - before
    assert got.equals(t.take(pa.array(rows)))
    touched = 0
    for c in cols:
        starts = c.page_starts
        first = np.searchsorted(starts, rows, side="right") - 1
        touched += len(np.unique(first))
    assert 0 < spent.requests <= touched


def data_region_reads(store: CountingStore, ds: LanceDataset) -> tuple[list[Call], list[Call]]:
    """Split recorded calls into (metadata requests, data-page requests)."""
    data_end = {}
    for frag in ds.manifest.fragments:
        for df in frag.files:
            data_end[f"data/{df.path}"] = ds.snapshot.cache.reader(df).metadata().num_data_bytes
    meta, data = [], []
    for c in store.calls:
        if c.op == "read_range" and c.key in data_end and c.end <= data_end[c.key]:
            data.append(c)
        else:
            meta.append(c)
    return meta, data


def make_dataset(root: Path, max_rows_per_file: int = 2000) -> CountingStore:
    write_dataset(table(), str(root), max_rows_per_file=max_rows_per_file)
    return CountingStore(LocalStore(str(root)))


def test_warm_repeated_take_issues_no_metadata_requests(tmp_path: Path) -> None:
    store = make_dataset(tmp_path / "ds")
    ds = LanceDataset(str(tmp_path / "ds"), store=store)
    rows = [5, 2500, 4100, 5999]
    first = ds.take(rows)
    store.reset()
    again = ds.take(rows)
    assert again.equals(first)
    meta, data = data_region_reads(store, ds)
    assert meta == []
    # Per row: one read for each fixed-width column, two (offsets, then bytes) for the string one.
    assert 0 < len(data) <= 5 * len(rows)
    # Re-opening the dataset costs one listing of _versions/ and nothing else before the take.
    store.reset()
    reopened = LanceDataset(str(tmp_path / "ds"), store=store)
    assert [c.op for c in store.calls] == ["list"]
    store.reset()
    assert reopened.take(rows).equals(first)
    assert data_region_reads(store, reopened)[0] == []


def test_warm_take_with_page_cache_issues_no_requests(tmp_path: Path) -> None:
    store = make_dataset(tmp_path / "ds")
    old = PAGE_CACHE.capacity
    configure_caches(page_bytes=64 << 20)
    try:
        ds = LanceDataset(str(tmp_path / "ds"), store=store)
        rows = [7, 1999, 2000, 4321]
        first = ds.take(rows)
        before = PAGE_CACHE.counters()
        store.reset()
        assert ds.take(rows).equals(first)
        assert store.calls == []
        after = PAGE_CACHE.counters()
        assert after.hits > before.hits
        assert after.misses == before.misses
    finally:
        configure_caches(page_bytes=old)


def test_opening_a_newer_version_rereads_only_what_changed(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    store = make_dataset(root)
    v1 = LanceDataset(str(root), store=store)
    all_rows = np.arange(0, N, 997)
    v1.take(all_rows)  # warms every file's metadata
    write_dataset(table(1000, seed=3), str(root), mode="append")
    store.reset()
    v2 = LanceDataset(str(root), store=store)
    got = v2.take(np.append(all_rows, [N, N + 999]))
    assert got.num_rows == len(all_rows) + 2
    meta, _ = data_region_reads(store, v2)
    new_file = f"data/{v2.manifest.fragments[-1].files[0].path}"
    touched = {c.key for c in meta}
    assert touched == {"_versions", v2.manifest_naming and _manifest_key(v2), new_file}
    # One listing, the new manifest in one read, the new file's metadata in one tail read.
    assert len(meta) == 3


def _manifest_key(ds: LanceDataset) -> str:
    from lance_format.table.naming import manifest_key

    return manifest_key(ds.version, ds.manifest_naming)


def test_metadata_cache_counts_hits(tmp_path: Path) -> None:
    make_dataset(tmp_path / "ds")
    METADATA_CACHE.reset_stats()
    LanceDataset(str(tmp_path / "ds")).take([1, 2])
    cold = METADATA_CACHE.counters()
    LanceDataset(str(tmp_path / "ds")).take([1, 2])
    warm = METADATA_CACHE.counters()
    assert cold.misses > 0
    assert warm.misses == cold.misses  # nothing new to load
    assert warm.hits > cold.hits
    assert warm.bytes > 0
    assert warm.entries >= 2


def test_scans_and_cold_reads_leave_the_page_cache_alone(tmp_path: Path) -> None:
    import numpy as np

    from lance_format.io.cache import ReadPolicy

    make_dataset(tmp_path / "ds")
    old = PAGE_CACHE.capacity
    configure_caches(page_bytes=64 << 20)
    try:
        ds = LanceDataset(str(tmp_path / "ds"))
        assert ds.to_table().num_rows == N
        frag = ds.snapshot.manifest.fragments[0]
        reader = ds.snapshot.fragment_reader(frag)
        names = ds.schema.names
        cold = reader.take(names, np.array([1, 2, 3]), policy=ReadPolicy.COLD)
        assert PAGE_CACHE.counters().entries == 0
        warm = ds.take([1, 2, 3])  # a take outside a scan does use it
        assert PAGE_CACHE.counters().entries > 0
        assert cold.equals(warm.select(names))
    finally:
        configure_caches(page_bytes=old)


def test_deletion_vectors_and_row_id_index_are_cached(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_dataset(table(), str(root), max_rows_per_file=2000, enable_stable_row_ids=True)
    LanceDataset(str(root)).delete("i % 10 = 3")  # deletion files in every fragment
    store = CountingStore(LocalStore(str(root)))
    first = LanceDataset(str(root), store=store)
    ids = [0, 2500, 5998]
    expected = first.take_rows(ids)
    assert expected.column("i").to_pylist() == ids
    assert any(c.key.startswith("_deletions/") for c in store.calls)
    store.reset()
    again = LanceDataset(str(root), store=store)  # a new object, as a server opens per request
    assert again.take_rows(ids).equals(expected)
    meta, _ = data_region_reads(store, again)
    assert [c.op for c in meta] == ["list"]  # no manifest, deletion file or row-id reads
    assert METADATA_CACHE.counters().hits > 0


def test_cold_takes_cost_what_pylances_cost(tmp_path: Path) -> None:
    """A cold take issues as many data requests as pylance's for the same rows of a file pylance
    wrote (one per column for one row: 4 for all columns, 1 for one; each mini-block chunk a
    take of scattered rows needs once), and reads the same bytes."""
    lance = pytest.importorskip("lance")

    import lance_format
    from lance_format.dataset.session import Session

    n = 60_000
    lance.write_dataset(table(n), str(tmp_path / "d"))
    theirs = lance.dataset(str(tmp_path / "d"))
    cold = Session(page_cache_bytes=0, decoded_cache_bytes=0)
    ours = lance_format.dataset(str(tmp_path / "d"), session=cold)
    theirs.take([0])
    ours.take([0])  # opens the file (metadata), as pylance's first take did
    theirs.io_stats_incremental()
    cases: list[tuple[int, list[str] | None]] = [(1, None), (1, ["x"]), (100, None), (100, ["x"])]
    spent = takes_against_pylance(ours, theirs, n, 5, cases, LOCAL_PLAN.max_gap)
    assert [s.requests for s in spent[:2]] == [4, 1]  # one per column for one row
