"""The range planner: every byte asked for is covered, requests are disjoint and bounded."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from lance_format.io.planner import LOCAL_PLAN, OBJECT_STORE_PLAN, PlanLimits, plan_requests

ranges_st = st.lists(st.tuples(st.integers(0, 10_000_000), st.integers(0, 3_000_000)), max_size=60)
limits_st = st.builds(PlanLimits, max_gap=st.integers(0, 100_000), max_request=st.integers(50_000, 5_000_000))


@settings(max_examples=300, deadline=None)
@given(ranges=ranges_st, limits=limits_st)
def test_plan_covers_every_byte_and_respects_limits(
    ranges: list[tuple[int, int]], limits: PlanLimits
) -> None:
    reqs = plan_requests(ranges, limits)
    assert all(r.length <= limits.max_request for r in reqs)
    assert all(r.length > 0 for r in reqs)
    # Sorted and disjoint.
    for a, b in itertools.pairwise(reqs):
        assert a.end <= b.start
    for off, length in ranges:
        if length == 0:
            continue
        covered = sum(max(0, min(r.end, off + length) - max(r.start, off)) for r in reqs)
        assert covered == length
    # Nothing outside the union of asked ranges plus allowed gaps is read.
    total_asked = sum(length for _, length in ranges)
    assert sum(r.length for r in reqs) <= total_asked + limits.max_gap * max(0, len(ranges))


def test_nearby_ranges_merge_and_far_ranges_do_not() -> None:
    reqs = plan_requests([(0, 100), (100 + LOCAL_PLAN.max_gap, 10), (10_000_000, 5)], LOCAL_PLAN)
    assert [(r.start, r.end) for r in reqs] == [(0, 100 + LOCAL_PLAN.max_gap + 10), (10_000_000, 10_000_005)]


def test_object_store_gap_is_wider() -> None:
    ranges = [(0, 10), (40_000, 10)]
    assert len(plan_requests(ranges, LOCAL_PLAN)) == 2
    assert len(plan_requests(ranges, OBJECT_STORE_PLAN)) == 1


def test_large_range_is_split_evenly() -> None:
    limits = PlanLimits(max_gap=0, max_request=1000)
    reqs = plan_requests([(0, 2500)], limits)
    assert [r.length for r in reqs] == [833, 833, 834]


def test_out_of_order_overlapping_and_duplicate_ranges() -> None:
    limits = PlanLimits(max_gap=0, max_request=1 << 30)
    reqs = plan_requests([(50, 10), (0, 20), (55, 20), (0, 20), (20, 0)], limits)
    assert [(r.start, r.end) for r in reqs] == [(0, 20), (50, 75)]
