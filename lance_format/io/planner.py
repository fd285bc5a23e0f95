"""Pure byte-range planning: turn the ranges a read needs into the requests to issue.

No I/O happens here. The result *is* the I/O plan, so tests can assert on it directly.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["LOCAL_PLAN", "OBJECT_STORE_PLAN", "PlanLimits", "Request", "plan_requests"]


@dataclass(frozen=True)
class PlanLimits:
    """How aggressively to merge and split.

    Attributes
    ----------
    max_gap:
        Two ranges closer than this are fetched by one request (the gap bytes are read and dropped).
    max_request:
        No request is longer than this; larger merged ranges are cut into near-equal parts.
    """

    max_gap: int
    max_request: int


# Local disk: a pread costs a syscall (~1-5 us) and reading 4 KiB more costs about the same, so merge
# ranges within one page-cache page. Split at 16 MiB to keep memory per request bounded and let
# parallel threads share a large read (Lance uses the same 4 KiB / 16 MiB).
LOCAL_PLAN = PlanLimits(max_gap=4 * 1024, max_request=16 * 1024 * 1024)

# Object stores: merge two ranges when fetching the gap between them costs less than a request.
# A GET has a fixed cost c (first-byte latency plus client CPU) and then streams at B per
# connection; merging pays while gap / B < c. Measured here: SeaweedFS on loopback c ~ 5-6 ms,
# B ~ 200 MB/s (break-even ~1 MB); AWS S3 in-region c ~ 20-30 ms, B ~ 90 MB/s (~2 MB). We take
# 256 KiB, well under both break-evens, so merged reads waste at most a few times the bytes asked
# for; a take of 100 random rows from a 1M-row dataset on loopback S3 went from 186 requests to 80
# and ran 2x faster than with Lance's 64 KiB. 16 MiB parts keep parallel GETs busy on large scans.
OBJECT_STORE_PLAN = PlanLimits(max_gap=256 * 1024, max_request=16 * 1024 * 1024)


@dataclass(frozen=True)
class Request:
    """One request to the store: ``[start, end)`` of the object."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


# Up to this many ranges, plain Python beats numpy's per-call overhead (takes of a few rows).
_SMALL = 16


def _split(s: int, e: int, step: int) -> list[Request]:
    n = -(-(e - s) // step)
    if n <= 1:
        return [Request(s, e)]
    bounds = [s + ((e - s) * i) // n for i in range(n + 1)]
    return [Request(a, b) for a, b in itertools.pairwise(bounds)]


def _plan_small(ranges: Sequence[tuple[int, int]], limits: PlanLimits) -> list[Request]:
    spans = sorted((int(o), int(o) + int(n)) for o, n in ranges if n > 0)
    if not spans:
        return []
    if spans[0][0] < 0:
        raise ValueError("negative offset in byte range")
    out: list[Request] = []
    cur_s, cur_e = spans[0]
    for s, e in spans[1:]:
        if s > cur_e + limits.max_gap:
            out.extend(_split(cur_s, cur_e, limits.max_request))
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    out.extend(_split(cur_s, cur_e, limits.max_request))
    return out


def merge_spans(
    offsets: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], max_gap: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Merge non-empty ranges (any order) closer than ``max_gap`` into sorted, disjoint spans.

    Returns ``(span starts, span ends, span of each range)``; no span is split (see
    :func:`plan_requests` for ``max_request``).
    """
    order = np.argsort(offsets, kind="stable")
    starts = offsets[order]
    ends = starts + lengths[order]
    # A range starts a new group when it begins more than max_gap past every earlier end.
    running_end = np.maximum.accumulate(ends)
    new_group = np.empty(len(starts), dtype=bool)
    new_group[0] = True
    new_group[1:] = starts[1:] > running_end[:-1] + max_gap
    group_ids = np.cumsum(new_group) - 1
    # Every earlier group ends before this one starts: a group's end is the running end at its
    # last range.
    last = np.append(np.flatnonzero(new_group)[1:] - 1, len(starts) - 1)
    group_ends = running_end[last]
    owner = np.empty(len(order), dtype=np.int64)
    owner[order] = group_ids
    return starts[new_group], group_ends, owner


def plan_requests(ranges: Sequence[tuple[int, int]], limits: PlanLimits) -> list[Request]:
    """Coalesce ``(offset, length)`` ranges into requests.

    Ranges may come in any order, overlap or repeat. Empty ranges need no bytes and are dropped.
    Every byte of every non-empty range is covered by exactly one request's span (requests do not
    overlap), and no request is longer than ``limits.max_request``.

    Parameters
    ----------
    ranges:
        ``(offset, length)`` pairs, offsets absolute within one object.
    limits:
        Merge and split thresholds.

    Returns
    -------
    list[Request]
        Sorted, disjoint requests.
    """
    if len(ranges) == 0:
        return []
    if len(ranges) <= _SMALL:
        return _plan_small(ranges, limits)
    arr = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    arr = arr[arr[:, 1] > 0]
    if len(arr) == 0:
        return []
    if (arr[:, 0] < 0).any():
        raise ValueError("negative offset in byte range")
    group_starts, group_ends, _ = merge_spans(arr[:, 0], arr[:, 1], limits.max_gap)
    gs, ge = group_starts.tolist(), group_ends.tolist()
    if int((group_ends - group_starts).max()) <= limits.max_request:
        return list(map(Request, gs, ge))  # takes: hundreds of small groups, none to split
    out: list[Request] = []
    for s, e in zip(gs, ge, strict=True):
        out.extend(_split(s, e, limits.max_request))  # near-equal parts, none above max_request
    return out
