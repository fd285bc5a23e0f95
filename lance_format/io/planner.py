"""Pure byte-range planning: turn the ranges a read needs into the requests to issue.

No I/O happens here. The result *is* the I/O plan, so tests can assert on it directly.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.core.config import EngineConfig

__all__ = [
    "LOCAL_PLAN",
    "OBJECT_STORE_PLAN",
    "OBJECT_STORE_REQUEST_COST_S",
    "OBJECT_STORE_STREAM_BYTES_PER_S",
    "SCAN_REQUEST_BYTES",
    "PlanLimits",
    "Request",
    "merge_gap",
    "object_store_limits",
    "plan_requests",
    "scan_limits",
]


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

#: Client CPU of one more GET (signing, HTTP, the response's buffer), measured through obstore on
#: loopback SeaweedFS with requests sent in waves of concurrent calls (reader.TOGETHER_MAX_REQUESTS):
#: 182 ranged GETs of 35 KB cost 27-47 ms of CPU, ~150-250 us each (one request per call from
#: threads cost ~350 us each).
OBJECT_STORE_REQUEST_COST_S = 0.2e-3
#: Bytes per second one request streams once it has started: ~200 MB/s on loopback SeaweedFS,
#: ~90-100 MB/s per connection from in-region S3 (where the latency term dominates the gap).
OBJECT_STORE_STREAM_BYTES_PER_S = 200e6


def merge_gap(
    request_cost_s: float, stream_bytes_per_s: float, latency_s: float = 0.0, concurrency: int = 1
) -> int:
    """The gap worth reading to save a request, rounded down to a power of two (at least 4 KiB).

    One more request costs its client CPU (``request_cost_s``) and a share of a round trip: the
    requests of a read go out ``concurrency`` at a time, so every ``concurrency`` more requests add
    one wave, one first-byte latency (``latency_s``), to the read. What the store streams in that
    time (``stream_bytes_per_s``) is the gap that costs no more than the request it saves. Rounding
    down keeps the byte side of the trade at or below its break-even point.
    """
    cost_s = request_cost_s + latency_s / max(1, concurrency)
    return 1 << max(12, int(cost_s * stream_bytes_per_s).bit_length() - 1)


def object_store_limits(latency_us: int, concurrency: int) -> PlanLimits:
    """Merge and split limits of takes on an object store whose first byte arrives ``latency_us``
    after a request and whose reads keep ``concurrency`` requests in flight (engine settings
    ``object_store_latency_us`` and ``io_parallelism``)."""
    gap = merge_gap(
        OBJECT_STORE_REQUEST_COST_S, OBJECT_STORE_STREAM_BYTES_PER_S, latency_us * 1e-6, concurrency
    )
    return _object_store_limits(gap)


@functools.lru_cache(maxsize=64)
def _object_store_limits(gap: int) -> PlanLimits:
    # 16 MiB parts keep parallel GETs busy on large reads.
    return PlanLimits(max_gap=gap, max_request=16 * 1024 * 1024)


# Object stores with the default settings: (0.2 ms CPU + 20 ms first-byte latency / 64 requests in
# flight) x 200 MB/s = 102 KB -> 64 KiB (Lance also uses 64 KiB). A cold take of 100 random rows of
# the 1M-row benchmark then issues pylance's requests and bytes exactly (182 GETs, 6.5 MB); the old
# 256 KiB (a serial-latency model: 5 ms x 200 MB/s) read 20.8 MB in 78 GETs. On loopback, where the
# latency is ~1 ms, 128 KiB gaps made such takes ~10% faster at 3x the bytes: a trade a real link
# (20 ms, ~100 MB/s a connection) does not repay.
# The stores plan with their session's settings (``plan_limits``); this is the defaults' plan.
OBJECT_STORE_PLAN = object_store_limits(EngineConfig.object_store_latency_us, EngineConfig.io_parallelism)

#: Longest request of a scan's read-ahead on an object store (:mod:`lance_format.io.prefetch`).
#: A GET pays a fixed cost (~5 ms on loopback SeaweedFS, ~20-30 ms in-region S3) and then streams
#: at ~100-200 MB/s per connection: 16 MiB takes 80-160 ms, so the fixed cost stays a small share,
#: while a 64 MiB page still becomes four requests streaming side by side. Measured on loopback
#: (1M-row benchmark file, 84 MB in four columns, each column planned apart): 7 requests (pylance's
#: count) scanned in p50 315 ms against 348 ms for 12 requests of <= 8 MiB (10 runs each,
#: interleaved), and a decoder's read crosses a part boundary (one copy) half as often.
SCAN_REQUEST_BYTES = 16 * 1024 * 1024


def scan_limits(take: PlanLimits) -> PlanLimits:
    """Planning of a scan's read-ahead on an object store whose takes plan with ``take`` (its
    session's merge gap, :attr:`~lance_format.io.store.ObjectStore.plan_limits`): page runs merged
    as for takes, cut at :data:`SCAN_REQUEST_BYTES`."""
    return PlanLimits(max_gap=take.max_gap, max_request=SCAN_REQUEST_BYTES)


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
