"""Ranged reads of one object through the planner, with request and byte accounting."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from lance_format.core.concurrency import LazyPool
from lance_format.core.errors import CorruptFileError
from lance_format.io.planner import LOCAL_PLAN, PlanLimits, Request, plan_requests
from lance_format.io.store import ObjectStore

__all__ = ["IOStats", "RangeReader"]

# Threads that fetch one call's requests in parallel. Local reads are page-cache copies that release
# the GIL, so a few threads overlap them; object stores want more (latency bound). 8 matches Lance's
# local default and keeps a 2-core box from thrashing.
DEFAULT_IO_THREADS = 8

# Below this many bytes in one call, requests run one after another in the caller's thread: handing
# work to a pool costs ~50-100 us, more than a few small local reads take.
PARALLEL_MIN_BYTES = 1024 * 1024

# On local disk, also stay serial when requests average less than this: a pooled request costs
# ~20 us of hand-off, a 64 KiB page-cache pread about the same (takes of 100 rows issue hundreds of
# small requests and spent 40% of their time in the pool). Object stores keep the pool: their
# small requests are latency bound.
PARALLEL_MIN_MEAN_BYTES = 64 * 1024

_pool = LazyPool(DEFAULT_IO_THREADS, "lance-io")


@dataclass
class IOStats:
    """Requests issued and bytes transferred."""

    requests: int = 0
    bytes_read: int = 0

    def add(self, requests: int, nbytes: int) -> None:
        self.requests += requests
        self.bytes_read += nbytes

    def snapshot(self) -> IOStats:
        return IOStats(self.requests, self.bytes_read)

    def __sub__(self, other: IOStats) -> IOStats:
        return IOStats(self.requests - other.requests, self.bytes_read - other.bytes_read)


class RangeReader:
    """Reads byte ranges of one object: plan, fetch (in parallel), slice back.

    Parameters
    ----------
    store, key:
        The object.
    size:
        Its size when already known (saves a metadata request).
    limits:
        Planner limits; the store's defaults when omitted.
    """

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        size: int | None = None,
        limits: PlanLimits | None = None,
    ) -> None:
        self.store = store
        self.key = key
        self._size = size
        self.limits = limits or store.plan_limits
        self.stats = IOStats()
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        if self._size is None:
            self._size = self.store.size(self.key)
            self._count(1, 0)
        return self._size

    def _count(self, requests: int, nbytes: int) -> None:
        with self._lock:
            self.stats.add(requests, nbytes)

    def _fetch(self, req: Request) -> bytes:
        data = self.store.read_range(self.key, req.start, req.end)
        if len(data) != req.length:
            raise CorruptFileError(
                self.key,
                f"read of bytes [{req.start}, {req.end}) returned {len(data)} bytes (file truncated?)",
            )
        return data

    def read(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """Fetch ``(offset, length)`` ranges; returns one buffer per range, in the order given."""
        requests = plan_requests(ranges, self.limits)
        total = sum(r.length for r in requests)
        if (
            len(requests) == 1
            or total < PARALLEL_MIN_BYTES
            or (self.limits == LOCAL_PLAN and total < PARALLEL_MIN_MEAN_BYTES * len(requests))
        ):
            datas = [self._fetch(r) for r in requests]
        else:
            datas = list(_pool().map(self._fetch, requests))
        self._count(len(requests), sum(len(d) for d in datas))
        starts = [r.start for r in requests]
        views = [memoryview(d) for d in datas]
        out: list[memoryview] = []
        for off, length in ranges:
            if length <= 0:
                out.append(memoryview(b""))
                continue
            i = bisect.bisect_right(starts, off) - 1
            # A range is inside one request unless that request was split at max_request.
            req = requests[i]
            if off + length <= req.end:
                out.append(views[i][off - req.start : off - req.start + length])
            else:
                parts = []
                pos = off
                while pos < off + length:
                    r = requests[i]
                    take = min(r.end, off + length) - pos
                    parts.append(views[i][pos - r.start : pos - r.start + take])
                    pos += take
                    i += 1
                out.append(memoryview(b"".join(parts)))
        return out

    def read_tail(self, nbytes: int) -> tuple[int, memoryview]:
        """The last ``nbytes`` of the object (or all of it), in one request; ``(offset, bytes)``."""
        if self._size is not None:
            start = max(0, self._size - nbytes)
            return start, self.read([(start, self._size - start)])[0]
        size, data = self.store.read_tail(self.key, nbytes)
        self._size = size
        self._count(1, len(data))
        return size - len(data), memoryview(data)
