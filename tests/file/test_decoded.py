"""The decoded-block cache: same rows as the plain reader, second-touch admission, budgets, no I/O
when warm, scans that read and fill it only with room to spare, and cold reads that bypass it."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.file import decoded as dec
from lance_format.io.cache import ByteCache, ReadPolicy
from tests.interop.compare import assert_tables_equal
from tests.strategies import TableSpec, table_specs

BLOCK = 64  # rows per block in these tests (the module's default is 64 Ki)
_counter = itertools.count()


@pytest.fixture(autouse=True)
def small_blocks() -> Iterator[None]:
    old = dec.DECODED_BLOCK_ROWS
    dec.DECODED_BLOCK_ROWS = BLOCK
    dec._touches.clear()
    try:
        yield
    finally:
        dec.DECODED_BLOCK_ROWS = old
        dec._touches.clear()


def _table(n: int) -> pa.Table:
    ids = np.arange(n, dtype=np.int64)
    names = pa.array([None if i % 7 == 0 else f"name-{i}" for i in range(n)])
    return pa.table(
        {
            "id": ids,
            "x": ids * 0.5,
            "name": names,
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(n * 4, dtype=np.float32)), 4),
            "tags": pa.array([[i, i + 1][: i % 3] for i in range(n)], pa.list_(pa.int32())),
            "s": pa.array([{"a": i, "b": str(i)} for i in range(n)]),
        }
    )


@pytest.fixture(params=["2.0", "2.1"])
def reader(request: pytest.FixtureRequest, tmp_path: Path) -> LanceFileReader:
    path = tmp_path / "f.lance"
    with LanceFileWriter(str(path), version=request.param) as w:
        w.write_batch(_table(1000))
    return LanceFileReader(str(path))


def test_takes_equal_plain_takes_while_blocks_are_admitted(reader: LanceFileReader) -> None:
    cache = ByteCache(64 << 20)
    rng = np.random.default_rng(3)
    for _ in range(12):
        offsets = rng.integers(0, 1000, 40)  # unsorted, with repeats
        got = dec.take_cached(reader, offsets, cache=cache)
        assert_tables_equal(got, reader.take_rows(offsets).to_table(), context=str(offsets))
    assert len(cache) > 0
    sorted_offsets = np.array([0, 63, 64, 64, 500, 999])
    got = dec.take_cached(reader, sorted_offsets, cache=cache)
    assert_tables_equal(got, reader.take_rows(sorted_offsets).to_table(), context="sorted")


def test_a_block_is_admitted_on_its_second_touch_and_then_costs_no_io(reader: LanceFileReader) -> None:
    cache = ByteCache(64 << 20)
    offsets = np.array([3, 70, 140])  # blocks 0, 1, 2
    dec.take_cached(reader, offsets, cache=cache)
    assert len(cache) == 0  # a first touch only counts
    dec.take_cached(reader, offsets, dec.AdmitBudget(100), cache=cache)
    assert len(cache) == 3 * len(reader._projection)
    before = reader.io_stats
    got = dec.take_cached(reader, offsets, cache=cache)
    after = reader.io_stats
    assert (after.requests, after.bytes_read) == (before.requests, before.bytes_read)
    assert got.column("id").to_pylist() == [3, 70, 140]
    counters = cache.counters()
    assert counters.hits >= 3 * len(reader._projection)


def test_touches_before_a_clear_or_in_another_cache_do_not_count(reader: LanceFileReader) -> None:
    # A cleared cache (a benchmark's cold start, an operator's reset) and a second session's cache
    # start from no touches: a block touched once before must not be decoded whole on the next
    # take as if it were hot (that took 10-20 ms per open+take on a 1M-row dataset).
    cache, other = ByteCache(64 << 20), ByteCache(64 << 20)
    offsets = np.array([3, 70, 140])
    dec.take_cached(reader, offsets, cache=cache)
    cache.clear()
    dec.take_cached(reader, offsets, dec.AdmitBudget(100), cache=cache)
    assert len(cache) == 0
    dec.take_cached(reader, offsets, dec.AdmitBudget(100), cache=other)
    assert len(other) == 0
    dec.take_cached(reader, offsets, dec.AdmitBudget(100), cache=cache)  # its own second touch
    assert len(cache) == 3 * len(reader._projection)


def test_one_take_admits_at_most_its_budget(reader: LanceFileReader) -> None:
    cache = ByteCache(64 << 20)
    offsets = np.arange(0, 1000, BLOCK)  # one row in each of 16 blocks
    one = reader._view(reader._projection[:1])
    dec.take_cached(one, offsets, cache=cache)
    dec.take_cached(one, offsets, dec.AdmitBudget(5), cache=cache)
    assert len(cache) == 5
    budget = dec.AdmitBudget(4)
    dec.take_cached(one, offsets, budget, cache=cache)  # the rest are due, 4 are allowed
    assert len(cache) == 9
    assert budget.claim(1) == 0


def test_a_full_cache_needs_a_third_touch(reader: LanceFileReader) -> None:
    one = reader._view(reader._projection[:1])  # id: 64 rows x 8 bytes = 512 bytes a block
    cache = ByteCache(2 * (512 + dec.BLOCK_OVERHEAD_BYTES))  # room for two blocks
    dec.take_cached(one, np.array([0, 64]), cache=cache)
    dec.take_cached(one, np.array([0, 64]), cache=cache)
    assert len(cache) == 2
    assert cache.nbytes >= cache.capacity * dec.FULL_FRACTION
    dec.take_cached(one, np.array([200]), cache=cache)
    dec.take_cached(one, np.array([200]), cache=cache)
    assert len(cache) == 2
    assert ((*dec._field_key(one, one._projection[0]), 200 // BLOCK)) not in cache._lru
    dec.take_cached(one, np.array([200]), cache=cache)  # third touch: displaces the oldest
    assert ((*dec._field_key(one, one._projection[0]), 200 // BLOCK)) in cache._lru


def test_ranges_come_from_cached_blocks_and_scans_fill_only_free_room(reader: LanceFileReader) -> None:
    cache = ByteCache(64 << 20)
    plain = reader.read_range(0, 1000).to_table()
    for start, stop in ((0, 128), (128, 1000), (10, 300), (960, 1000)):
        got = dec.read_range_cached(reader, start, stop, cache=cache)
        assert_tables_equal(got, plain.slice(start, stop - start), context=f"[{start}, {stop})")
    # Aligned ranges were admitted block by block: a repeat reads nothing.
    before = reader.io_stats.requests
    again = dec.read_range_cached(reader, 128, 1000, cache=cache)
    assert reader.io_stats.requests == before
    assert_tables_equal(again, plain.slice(128, 872), context="cached range")
    tiny = ByteCache(600 + dec.BLOCK_OVERHEAD_BYTES)  # one block of id fits; nothing is evicted to make room
    dec.read_range_cached(reader._view(reader._projection[:1]), 0, 256, cache=tiny)
    assert len(tiny) == 1
    assert tiny.counters().evictions == 0


def test_cold_reads_neither_use_nor_fill_the_cache(reader: LanceFileReader) -> None:
    cache = ByteCache(64 << 20)
    offsets = np.array([5, 500])
    for _ in range(3):
        dec.take_cached(reader, offsets, cache=cache, policy=ReadPolicy.COLD)
    dec.read_range_cached(reader, 0, 128, cache=cache, policy=ReadPolicy.COLD)
    assert len(cache) == 0
    assert cache.counters().hits + cache.counters().misses == 0


def test_an_off_cache_is_the_plain_reader(reader: LanceFileReader) -> None:
    off = ByteCache(0)
    offsets = np.array([9, 1, 9])
    for _ in range(3):
        got = dec.take_cached(reader, offsets, cache=off)
    assert_tables_equal(got, reader.take_rows(offsets).to_table(), context="off")
    assert len(off) == 0


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(spec=table_specs(max_rows=400), data=st.data())
def test_random_tables_read_the_same_through_the_cache(
    tmp_path_factory: pytest.TempPathFactory, spec: TableSpec, data: st.DataObject
) -> None:
    table = spec.build()
    path = str(tmp_path_factory.getbasetemp() / f"dec-{next(_counter)}.lance")
    version = data.draw(st.sampled_from(["2.0", "2.1"]), label="version")
    try:
        with LanceFileWriter(path, table.schema, version=version) as w:
            w.write_batch(table)
        reader = LanceFileReader(path)
        cache = ByteCache(64 << 20)
        n = table.num_rows
        for _ in range(3):
            if n == 0:
                break
            idx = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=30), label="idx"), np.int64)
            got = dec.take_cached(reader, idx, cache=cache)
            assert_tables_equal(got, table.take(pa.array(idx, pa.int64())), context=f"take {idx.tolist()}")
            start = data.draw(st.integers(0, n), label="start") // BLOCK * BLOCK
            stop = data.draw(st.integers(start, n), label="stop")
            got = dec.read_range_cached(reader, start, stop, cache=cache)
            assert_tables_equal(got, table.slice(start, stop - start), context=f"range [{start}, {stop})")
    finally:
        if os.path.exists(path):
            os.remove(path)


def test_concurrent_takes_admit_and_read_consistently(reader: LanceFileReader) -> None:
    """Many threads taking while blocks are admitted (some twice, racing) all get the right rows."""
    from concurrent.futures import ThreadPoolExecutor

    cache = ByteCache(64 << 20)
    expected = reader.read_range(0, 1000).to_table()

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(15):
            offsets = rng.integers(0, 1000, 25)
            got = dec.take_cached(reader, offsets, cache=cache)
            assert_tables_equal(got, expected.take(pa.array(offsets)), context=f"seed {seed}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))
    assert len(cache) > 0
