"""Scan read-ahead (lance_format.io.prefetch): requests and bytes of scans on object stores."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.core.config import EngineConfig
from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.session import Session
from lance_format.io.cache import ReadPolicy
from lance_format.io.planner import SCAN_REQUEST_BYTES, PlanLimits
from lance_format.io.prefetch import FilePrefetch
from lance_format.io.reader import RangeReader, io_stats
from lance_format.io.store import LocalStore
from tests.io.counting import CountingStore, takes_against_pylance

#: Physical rows a scan decodes per step by default (the ``scan_chunk_rows`` setting).
SCAN_CHUNK_ROWS = EngineConfig().scan_chunk_rows
ROWS = 300_000  # more than one scan chunk (256K rows)


def table(n: int = ROWS, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "i": np.arange(n, dtype=np.int64),
            "x": rng.random(n),
            "s": pa.array(np.char.add("name-", rng.integers(0, 10**9, n).astype(str))),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16, dtype=np.float32)), 16),
        }
    )


def page_bytes(ds: LanceDataset, columns: list[str] | None = None) -> tuple[int, int]:
    """(bytes of every page buffer of the projected columns, number of columns) of a one-file dataset."""
    frag = ds.manifest.fragments[0]
    reader = ds.snapshot.cache.reader(frag.files[0])
    meta = reader.metadata()
    names = [f.name for f in meta.lance_schema.fields]
    picked = range(len(names)) if columns is None else [names.index(c) for c in columns]
    total = sum(sum(p.buffer_sizes) for c in picked for p in meta.columns[c].pages)
    return total, len(picked)


def cold() -> Session:
    return Session(page_cache_bytes=0, decoded_cache_bytes=0)


def remote_counting(root: Path) -> CountingStore:
    """A local store that plans and reads like an object store (deterministic, no server)."""
    store = CountingStore(LocalStore(str(root)))
    store.remote = True
    return store


def data_reads(store: CountingStore) -> list[tuple[int, int]]:
    return [(c.start, c.end) for c in store.calls if c.op == "read_range" and c.key.startswith("data/")]


@pytest.mark.parametrize("columns", [None, ["x"], ["s", "v"]])
def test_object_store_scan_reads_each_page_once_in_large_requests(
    tmp_path: Path, columns: list[str] | None
) -> None:
    t = table()
    lance_format.write_dataset(t, str(tmp_path / "d"))
    store = remote_counting(tmp_path / "d")
    ds = LanceDataset(str(tmp_path / "d"), store=store, session=cold())
    ds.take([0])  # opens the file
    total, ncols = page_bytes(ds, columns)
    store.reset()
    got = ds.to_table(columns=columns)
    assert got.equals(t if columns is None else t.select(columns))
    reads = data_reads(store)
    # Every page byte once (plus the alignment padding between pages), no byte twice (before: one
    # request per chunk and column, 3 chunks x 4 columns = 12 requests for all columns).
    assert total <= sum(e - s for s, e in reads) <= total + 64 * 4
    assert len(set(reads)) == len(reads)
    assert len(reads) <= math.ceil(total / SCAN_REQUEST_BYTES) + ncols
    assert max(e - s for s, e in reads) <= SCAN_REQUEST_BYTES


def test_local_scan_reads_as_before(tmp_path: Path) -> None:
    """Local files are read chunk by chunk (the OS reads ahead; no request to save)."""
    t = table()
    lance_format.write_dataset(t, str(tmp_path / "d"))
    store = CountingStore(LocalStore(str(tmp_path / "d")))
    ds = LanceDataset(str(tmp_path / "d"), store=store, session=cold())
    ds.take([0])
    store.reset()
    assert ds.to_table(columns=["x"]).equals(t.select(["x"]))
    assert len(data_reads(store)) == math.ceil(ROWS / SCAN_CHUNK_ROWS)  # one per scan chunk


def test_scan_with_limit_reads_only_its_rows(tmp_path: Path) -> None:
    lance_format.write_dataset(table(), str(tmp_path / "d"))
    store = remote_counting(tmp_path / "d")
    ds = LanceDataset(str(tmp_path / "d"), store=store, session=cold())
    ds.take([0])
    total, _ = page_bytes(ds, ["v"])
    store.reset()
    assert ds.to_table(columns=["v"], limit=10).num_rows == 10
    assert sum(e - s for s, e in data_reads(store)) < total // 100


def _prefetch(tmp_path: Path, size: int = 10_000_000) -> tuple[CountingStore, RangeReader, bytes]:
    data = np.random.default_rng(3).integers(0, 256, size, dtype=np.uint8).tobytes()
    (tmp_path / "blob").write_bytes(data)
    store = remote_counting(tmp_path)
    return store, RangeReader(store, "blob", size), data


def test_prefetch_serves_reads_from_few_requests_and_releases_them(tmp_path: Path) -> None:
    store, io, data = _prefetch(tmp_path)
    mib = 1 << 20
    # Two "columns": bytes [0, 4 MiB) and [5 MiB, 9 MiB), each a page of 1000 rows.
    pf = FilePrefetch(
        io, [(0, 4 * mib, 0, 1000, 0), (5 * mib, 4 * mib, 0, 1000, 1)], PlanLimits(0, mib), 3 * mib
    )
    pf.start()
    assert len(pf.requests) == 8
    direct_calls: list[list[tuple[int, int]]] = []

    def direct(ranges: list[tuple[int, int]]) -> list[memoryview]:
        direct_calls.append(ranges)
        return io.read(ranges, ReadPolicy.SCAN)

    step = mib // 2
    for k in range(8):  # eight chunks, each half a MiB of both columns, in order
        ranges = [(k * step, step), (5 * mib + k * step, step)]
        got = pf.read(ranges, direct)
        assert [bytes(g) for g in got] == [data[o : o + n] for o, n in ranges]
    assert direct_calls == []
    assert sorted((c.start, c.end) for c in store.calls) == [(r.start, r.end) for r in pf.requests]
    assert pf.released_requests == 8
    # A range outside the planned regions, and one already released, go to the store directly.
    store.reset()
    got = pf.read([(4 * mib + 10, 100), (0, 100)], direct)
    assert [bytes(g) for g in got] == [data[4 * mib + 10 : 4 * mib + 110], data[:100]]
    assert direct_calls == [[(4 * mib + 10, 100), (0, 100)]]


def test_prefetch_window_bounds_requests_ahead(tmp_path: Path) -> None:
    store, io, _ = _prefetch(tmp_path)
    mib = 1 << 20
    pf = FilePrefetch(io, [(0, 8 * mib, 0, 8, 0)], PlanLimits(0, mib), 2 * mib)
    pf.start()
    for f in list(pf._futures):
        if f is not None:
            f.result()
    assert len(store.calls) == 2  # the window: 2 MiB of 1 MiB requests, nothing consumed yet
    pf.read([(0, mib)], lambda r: io.read(r, ReadPolicy.SCAN))
    for f in list(pf._futures):
        if f is not None:
            f.result()
    assert len(store.calls) == 3  # one released, one more issued


def test_prefetch_issues_in_row_order_across_columns(tmp_path: Path) -> None:
    _, io, _ = _prefetch(tmp_path)
    mib = 1 << 20
    # Column a: 6 MiB for rows 0..600; column b after it: 2 MiB for the same rows.
    pf = FilePrefetch(io, [(0, 6 * mib, 0, 600, 0), (6 * mib, 2 * mib, 0, 600, 1)], PlanLimits(0, mib), 1)
    order = [(pf.requests[i].start // mib) for i in pf._order]
    assert order[:2] == [0, 6]  # both columns' first rows first
    assert order.index(7) < order.index(4)  # b's second half (rows 300+) before a's rows 400+


def test_prefetch_plans_each_column_apart(tmp_path: Path) -> None:
    _, io, _ = _prefetch(tmp_path)
    mib = 1 << 20
    # Adjacent columns: planned together, the second 4 MiB part would hold both columns' rows.
    pf = FilePrefetch(io, [(0, 6 * mib, 0, 600, 0), (6 * mib, 2 * mib, 0, 600, 1)], PlanLimits(0, 4 * mib), 1)
    assert [(r.start // mib, r.end // mib) for r in pf.requests] == [(0, 3), (3, 6), (6, 8)]


@pytest.mark.s3
def test_s3_scan_requests_and_bytes_against_pylance(s3_uri: str, s3_server: object) -> None:
    """A cold scan on S3 reads every page byte once in requests of at most 16 MiB; pylance reads the
    same pages (its count is the bound: at most one more request per column than it issues when
    its requests are larger)."""
    lance = pytest.importorskip("lance")
    opts = s3_server.storage_options  # type: ignore[attr-defined]
    t = table()
    lance.write_dataset(t, s3_uri, storage_options=opts)
    theirs = lance.dataset(s3_uri, storage_options=opts)
    ours = lance_format.dataset(s3_uri, storage_options=opts, session=cold())
    theirs.take([0])
    ours.take([0])
    theirs.io_stats_incremental()
    before = io_stats()
    got = ours.to_table()
    spent = io_stats() - before
    assert got.equals(theirs.to_table())
    stats = theirs.io_stats_incremental()
    total, ncols = page_bytes(ours)
    assert total <= spent.bytes_read <= total + 64 * ncols
    assert spent.bytes_read <= stats.read_bytes * 1.01
    assert spent.requests <= math.ceil(total / SCAN_REQUEST_BYTES) + ncols
    assert spent.requests <= stats.read_iops + ncols


def test_object_store_merge_gap_is_derived_from_the_cost_model() -> None:
    from lance_format.io.planner import (
        OBJECT_STORE_PLAN,
        OBJECT_STORE_REQUEST_COST_S,
        OBJECT_STORE_STREAM_BYTES_PER_S,
        merge_gap,
        object_store_limits,
    )

    assert merge_gap(0.35e-3, 200e6) == 64 * 1024  # CPU only: 70 KB rounded down
    assert merge_gap(0.35e-3, 100e6) == 32 * 1024
    assert merge_gap(0.0, 1.0) == 4096
    # A request beyond a wave of `concurrency` adds latency / concurrency: 0.2 ms + 20 ms / 64.
    assert merge_gap(0.2e-3, 200e6, 20e-3, 64) == 64 * 1024  # 102 KB
    assert merge_gap(0.2e-3, 200e6, 20e-3, 8) == 512 * 1024  # fewer in flight: each costs more
    assert merge_gap(0.2e-3, 200e6, 100e-3, 64) == 256 * 1024  # 352 KB
    assert merge_gap(0.2e-3, 200e6, 0.0, 64) == 32 * 1024  # no latency: the CPU alone
    assert object_store_limits(20_000, 64) == OBJECT_STORE_PLAN
    assert OBJECT_STORE_PLAN.max_gap == merge_gap(
        OBJECT_STORE_REQUEST_COST_S, OBJECT_STORE_STREAM_BYTES_PER_S, 20e-3, 64
    )
    assert OBJECT_STORE_PLAN.max_gap == 64 * 1024


def test_object_stores_plan_with_their_sessions_latency_and_parallelism(tmp_path: Path) -> None:
    from lance_format.io.planner import LOCAL_PLAN, object_store_limits
    from lance_format.io.store import store_for_uri

    # No request is made: a store's plan needs only its session's settings.
    uri, opts = "s3://bucket/gap", {"aws_endpoint": "http://127.0.0.1:9", "aws_skip_signature": "true"}
    slow = Session(object_store_latency_us=100_000)
    store = store_for_uri(uri, opts, runtime=slow.runtime)
    assert store.remote
    assert store.plan_limits.max_gap == 256 * 1024
    assert store.plan_limits == object_store_limits(100_000, 64)
    narrow = Session(object_store_latency_us=20_000, io_parallelism=8)
    assert store_for_uri(uri, opts, runtime=narrow.runtime).plan_limits.max_gap == 512 * 1024
    assert store_for_uri(uri, opts, runtime=cold().runtime).plan_limits.max_gap == 64 * 1024
    assert store_for_uri(str(tmp_path), runtime=slow.runtime).plan_limits == LOCAL_PLAN  # local disk


@pytest.mark.s3
def test_s3_cold_takes_cost_what_pylances_cost(s3_uri: str, s3_server: object) -> None:
    """Cold takes on S3 cost no more requests than pylance's, and no more bytes than pylance's
    plus one merge gap per request saved: random rows of the vector column lie ~200 KB apart, which
    the old 256 KiB merge gap read whole (3x the bytes). With the default settings the gap is
    64 KiB; a session that expects 100 ms latency merges more (256 KiB gaps): fewer requests,
    within the bound."""
    from lance_format.io.planner import OBJECT_STORE_PLAN, object_store_limits

    lance = pytest.importorskip("lance")
    opts = s3_server.storage_options  # type: ignore[attr-defined]
    lance.write_dataset(table(), s3_uri, storage_options=opts)
    theirs = lance.dataset(s3_uri, storage_options=opts)
    ours = lance_format.dataset(s3_uri, storage_options=opts, session=cold())
    slow = lance_format.dataset(
        s3_uri,
        storage_options=opts,
        session=Session(page_cache_bytes=0, decoded_cache_bytes=0, object_store_latency_us=100_000),
    )
    theirs.take([0])
    ours.take([0])
    slow.take([0])
    cases: list[tuple[int, list[str] | None]] = [(1, None), (100, None), (100, ["v"]), (100, ["x"])]
    theirs.io_stats_incremental()
    spent = takes_against_pylance(ours, theirs, ROWS, 11, cases, OBJECT_STORE_PLAN.max_gap)
    theirs.io_stats_incremental()
    merged = takes_against_pylance(slow, theirs, ROWS, 11, cases, object_store_limits(100_000, 64).max_gap)
    assert merged[1].requests < spent[1].requests  # the 256 KiB gap merged some of them


def test_file_reader_stream_reads_pages_ahead_on_object_stores(tmp_path: Path) -> None:
    from lance_format.file import LanceFileReader, LanceFileWriter

    t = table()
    with LanceFileWriter(str(tmp_path / "f.lance")) as w:
        w.write_batch(t)
    store = remote_counting(tmp_path)
    r = LanceFileReader("f.lance", store=store)
    meta = r.metadata()
    total = sum(sum(p.buffer_sizes) for c in meta.columns for p in c.pages)
    store.reset()
    got = pa.Table.from_batches(list(r.read_all(batch_size=50_000).to_batches()))
    assert got.equals(t)
    reads = [(c.start, c.end) for c in store.calls if c.op == "read_range"]
    assert total <= sum(e - s for s, e in reads) <= total + 64 * 4
    # Before: one request per column for each of the five 64K-row chunks (20).
    assert len(reads) <= math.ceil(total / SCAN_REQUEST_BYTES) + len(meta.columns)


def test_views_of_one_file_in_a_scan_share_its_prefetch(tmp_path: Path) -> None:
    """Later chunks may decode fewer fields (the others come from the decoded-block cache): their
    reads are served by the file's prefetch, no byte is fetched twice."""
    from lance_format.file import LanceFileReader, LanceFileWriter
    from lance_format.io.prefetch import ScanScope, scan_scope

    t = table()
    with LanceFileWriter(str(tmp_path / "f.lance")) as w:
        w.write_batch(t)
    store = remote_counting(tmp_path)
    r = LanceFileReader("f.lance", store=store)
    fields = r.projection
    store.reset()
    scope = ScanScope(0, ROWS)
    step = 100_000
    for k, view in enumerate([r.view(fields), r.view(fields[1:]), r.view(fields[2:])]):
        with scan_scope(scope):
            got = view.read_range(k * step, step, policy=ReadPolicy.SCAN).to_table()
        assert got.equals(t.select(view.schema.names).slice(k * step, step))
    reads = sorted((c.start, c.end) for c in store.calls if c.op == "read_range")
    assert all(b[0] >= a[1] for a, b in itertools.pairwise(reads))


@pytest.mark.s3
def test_scan_read_ahead_plans_with_its_sessions_merge_gap(
    s3_uri: str, s3_server: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan's read-ahead merges page runs with the merge gap of its store's session (as its takes
    do), not the defaults' 64 KiB: a session expecting 100 ms first-byte latency plans 256 KiB."""
    import lance_format.file.reader as file_reader

    seen: list[PlanLimits] = []
    real = file_reader.FilePrefetch

    def spy(
        io: RangeReader, regions: list[tuple[int, int, int, int, int]], limits: PlanLimits, window: int
    ) -> FilePrefetch:
        seen.append(limits)
        return real(io, regions, limits, window)

    monkeypatch.setattr(file_reader, "FilePrefetch", spy)
    opts = s3_server.storage_options  # type: ignore[attr-defined]
    t = table(50_000)
    lance_format.write_dataset(t, s3_uri, storage_options=opts)
    slow = Session(page_cache_bytes=0, decoded_cache_bytes=0, object_store_latency_us=100_000)
    ds = lance_format.dataset(s3_uri, storage_options=opts, session=slow)
    assert ds.to_table(columns=["x"]).equals(t.select(["x"]))
    assert seen
    assert {limits.max_gap for limits in seen} == {256 * 1024}
    assert {limits.max_request for limits in seen} == {SCAN_REQUEST_BYTES}


def test_a_session_sets_the_rows_a_scan_reads_per_step(tmp_path: Path) -> None:
    """``scan_chunk_rows`` (argument or ``LANCE_FORMAT_SCAN_CHUNK_ROWS``) is the scan's step: a
    quarter of the default reads four times as many chunks, each one request on a local file."""
    t = table()
    lance_format.write_dataset(t, str(tmp_path / "d"))
    rows = SCAN_CHUNK_ROWS // 4
    store = CountingStore(LocalStore(str(tmp_path / "d")))
    session = Session(page_cache_bytes=0, decoded_cache_bytes=0, scan_chunk_rows=rows)
    ds = LanceDataset(str(tmp_path / "d"), store=store, session=session)
    ds.take([0])
    store.reset()
    assert ds.to_table(columns=["x"]).equals(t.select(["x"]))
    assert len(data_reads(store)) == math.ceil(ROWS / rows)


def test_a_session_sets_the_chunks_a_scan_decodes_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``readahead_chunks`` (argument or ``LANCE_FORMAT_READAHEAD_CHUNKS``) bounds the chunks a scan
    has in flight: the read-ahead is built with it, and the scan still reads every row."""
    from lance_format.dataset import scanner

    seen: list[int] = []

    class Recording(scanner.ReadAhead):  # type: ignore[misc]
        def __init__(self, *args: Any, max_tasks: int = 4, **kwargs: Any) -> None:
            seen.append(max_tasks)
            super().__init__(*args, max_tasks=max_tasks, **kwargs)

    monkeypatch.setattr(scanner, "ReadAhead", Recording)
    t = table()
    lance_format.write_dataset(t, str(tmp_path / "d"))
    for chunks in (1, 7):
        session = Session(page_cache_bytes=0, decoded_cache_bytes=0, readahead_chunks=chunks)
        ds = LanceDataset(str(tmp_path / "d"), session=session)
        assert ds.to_table(columns=["x"]).equals(t.select(["x"]))
        assert seen[-1] == chunks
    monkeypatch.setenv("LANCE_FORMAT_READAHEAD_CHUNKS", "2")
    ds = LanceDataset(str(tmp_path / "d"), session=Session(page_cache_bytes=0, decoded_cache_bytes=0))
    assert ds.to_table(columns=["x"]).num_rows == t.num_rows
    assert seen[-1] == 2
