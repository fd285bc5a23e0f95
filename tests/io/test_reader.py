"""RangeReader: every byte asked for comes back exactly, through the direct and the page-cache paths."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_format.core.errors import CorruptFileError
from lance_format.io.cache import ByteCache
from lance_format.io.planner import PlanLimits, plan_requests
from lance_format.io.reader import PAGE_BLOCK_BYTES, RangeReader, io_stats
from lance_format.io.store import LocalStore, MemoryStore

SIZE = 300_000
DATA = np.random.default_rng(0).integers(0, 256, SIZE, dtype=np.uint8).tobytes()
STORE = MemoryStore("reader-props")
STORE.write("obj", DATA)

ranges_st = st.lists(
    st.integers(0, SIZE - 1).flatmap(
        lambda off: st.tuples(st.just(off), st.integers(0, min(SIZE - off, 90_000)))
    ),
    max_size=40,
)
limits_st = st.builds(PlanLimits, max_gap=st.integers(0, 70_000), max_request=st.integers(1_000, 200_000))


@settings(max_examples=200, deadline=None)
@given(ranges=ranges_st, limits=limits_st, cached=st.booleans())
def test_every_byte_is_returned_exactly(
    ranges: list[tuple[int, int]], limits: PlanLimits, cached: bool
) -> None:
    cache = ByteCache(10 * PAGE_BLOCK_BYTES if cached else 0)
    r = RangeReader(STORE, "obj", SIZE, limits, page_cache=cache)
    out = r.read(ranges)
    assert [bytes(b) for b in out] == [DATA[o : o + n] for o, n in ranges]
    # A second read serves what stayed cached and still returns the same bytes.
    again = r.read(ranges)
    assert [bytes(b) for b in again] == [DATA[o : o + n] for o, n in ranges]


def test_page_cache_serves_repeated_reads_without_requests() -> None:
    cache = ByteCache(1 << 20)
    r = RangeReader(STORE, "obj", SIZE, page_cache=cache)
    ranges = [(10, 5), (70_000, 100), (200_000, 80_000)]
    first = [bytes(b) for b in r.read(ranges)]
    before = r.stats.snapshot()
    assert [bytes(b) for b in r.read(ranges)] == first
    assert (r.stats - before).requests == 0
    counters = cache.counters()
    assert counters.hits > 0
    assert counters.bytes <= 1 << 20


def test_global_io_stats_count_every_reader() -> None:
    before = io_stats()
    RangeReader(STORE, "obj", SIZE, page_cache=ByteCache(0)).read([(0, 10), (250_000, 10)])
    spent = io_stats() - before
    assert spent.requests >= 2
    assert spent.bytes_read >= 20


def test_a_read_split_at_max_request_lands_in_one_buffer_without_a_join(tmp_path: Path) -> None:
    # A whole-page read (64 MiB vectors) is split into parallel requests; the parts are read straight
    # into one buffer (pread into it on local disk), so the range is a slice of it: exact bytes,
    # one request per part, no byte read twice and no joined copy of the parts.
    (tmp_path / "obj").write_bytes(DATA)
    limits = PlanLimits(max_gap=0, max_request=40_000)
    for store in (LocalStore(str(tmp_path)), STORE):
        r = RangeReader(store, "obj", SIZE, limits, page_cache=ByteCache(0))
        ranges = [(1_000, 150_000), (151_000, 3), (200_000, 90_000)]
        out = r.read(ranges)
        assert [bytes(b) for b in out] == [DATA[o : o + n] for o, n in ranges]
        # [1000, 151003) is one span of 4 parts, [200000, 290000) one of 3.
        assert (r.stats.requests, r.stats.bytes_read) == (4 + 3, 150_003 + 90_000)
        assert out[0].obj is out[1].obj  # both slices of the first span's buffer
        assert not isinstance(out[0].obj, bytes)  # not a b"".join of the parts


def test_a_short_object_under_a_split_read_is_reported_as_truncated(tmp_path: Path) -> None:
    (tmp_path / "obj").write_bytes(DATA[:100_000])
    r = RangeReader(LocalStore(str(tmp_path)), "obj", SIZE, PlanLimits(0, 40_000), page_cache=ByteCache(0))
    with pytest.raises(CorruptFileError, match="truncated"):
        r.read([(0, 150_000)])


def test_many_small_local_ranges_are_planned_as_the_general_path_plans_them(tmp_path: Path) -> None:
    # Takes read hundreds of chunks per call; local stores plan and slice them with arrays. The
    # requests and bytes are the planner's, and every range comes back exactly, in the order asked,
    # repeats and neighbours merged within max_gap included.
    (tmp_path / "obj").write_bytes(DATA)
    rng = np.random.default_rng(3)
    offsets = rng.integers(0, SIZE - 5_000, 60)
    ranges = [(int(o), int(n)) for o, n in zip(offsets, rng.integers(1, 5_000, 60), strict=True)]
    ranges += [ranges[7], (ranges[3][0] + 1, 10)]  # a repeat and a range inside another
    limits = PlanLimits(max_gap=4096, max_request=1 << 20)
    planned = plan_requests(ranges, limits)
    for store in (LocalStore(str(tmp_path)), STORE):
        r = RangeReader(store, "obj", SIZE, limits, page_cache=ByteCache(0))
        out = r.read(ranges)
        assert [bytes(b) for b in out] == [DATA[o : o + n] for o, n in ranges]
        assert (r.stats.requests, r.stats.bytes_read) == (len(planned), sum(q.length for q in planned))
    # Far apart: one request per range, each returned without a slice of a merged span.
    far = [(i * 4_200, 100) for i in range(70, 0, -1)]
    r = RangeReader(LocalStore(str(tmp_path)), "obj", SIZE, limits, page_cache=ByteCache(0))
    out = r.read(far)
    assert [bytes(b) for b in out] == [DATA[o : o + n] for o, n in far]
    assert (r.stats.requests, r.stats.bytes_read) == (70, 7_000)


def test_many_small_ranges_past_the_end_of_a_short_object_are_reported_as_truncated(tmp_path: Path) -> None:
    (tmp_path / "obj").write_bytes(DATA[:100_000])
    r = RangeReader(LocalStore(str(tmp_path)), "obj", SIZE, PlanLimits(0, 40_000), page_cache=ByteCache(0))
    with pytest.raises(CorruptFileError, match="truncated"):
        r.read([(i * 10_000, 100) for i in range(30)])


def test_a_few_local_ranges_are_planned_as_the_general_path_plans_them(tmp_path: Path) -> None:
    # A one-row take reads one chunk per column: planned in plain Python, same requests and bytes.
    (tmp_path / "obj").write_bytes(DATA)
    limits = PlanLimits(max_gap=4096, max_request=1 << 20)
    ranges = [(250_000, 300), (10, 5), (3_000, 2_000), (250_100, 50), (120_000, 9_000)]
    planned = plan_requests(ranges, limits)
    r = RangeReader(LocalStore(str(tmp_path)), "obj", SIZE, limits, page_cache=ByteCache(0))
    out = r.read(ranges)
    assert [bytes(b) for b in out] == [DATA[o : o + n] for o, n in ranges]
    assert len(planned) == 3
    assert (r.stats.requests, r.stats.bytes_read) == (3, sum(q.length for q in planned))
    (tmp_path / "short").write_bytes(DATA[:100_000])
    short = RangeReader(LocalStore(str(tmp_path)), "short", SIZE, limits, page_cache=ByteCache(0))
    with pytest.raises(CorruptFileError, match="truncated"):
        short.read([(10, 5), (150_000, 10)])
