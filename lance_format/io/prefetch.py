"""Scan read-ahead: a scan's page bytes fetched in large requests, ahead of its decoding.

A scan of an object-store file knows which bytes it will read before it decodes anything: the
buffers of the pages its columns have in the scanned rows. Read chunk by chunk (one request per
column per chunk of rows, issued only when that chunk starts decoding), a 1M-row file of four
columns cost 32 GETs, and a chunk's I/O could not overlap the decoding of the chunk before it.

:class:`FilePrefetch` plans those page buffers as few large requests (whole page runs merged, cut
at :data:`~lance_format.io.planner.SCAN_REQUEST_BYTES`), issues them in row order on the scheduler's
workers while at most ``window`` bytes are fetched and not yet consumed (setting
``scan_prefetch_bytes``), and serves the decoders' reads from them. A read it does not cover (a
buffer outside the planned pages, or bytes it already released) goes to the store as before, so
serving is an optimisation only: results never depend on it.

A :class:`ScanScope` names the rows one scan will read from one fragment; the scanner sets it
around each chunk it decodes (:func:`scan_scope`), and each file reader opened under it shares one
:class:`FilePrefetch` per file and projection through :meth:`ScanScope.file`.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import itertools
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Future

from lance_format.io.planner import PlanLimits, Request, plan_requests
from lance_format.io.reader import RangeReader

__all__ = [
    "FilePrefetch",
    "ScanScope",
    "current_scan_scope",
    "scan_scope",
]

# The window (bytes requested ahead per fragment) is the session's ``scan_prefetch_bytes``.

#: A request is released once its last byte was served and at most this fraction of its bytes was
#: not: pages hold buffers a scan does not read again (a mini-block page's chunk table is parsed at
#: open and cached), which would otherwise pin the request until the scan ends.
_UNREAD_FRACTION = 16

_scope: contextvars.ContextVar[ScanScope | None] = contextvars.ContextVar("lance_scan_scope", default=None)


class FilePrefetch:
    """Page bytes of one file a scan will read, fetched ahead in large requests.

    Parameters
    ----------
    io:
        The file's reader (requests are counted in its stats).
    regions:
        ``(offset, length, first_row, end_row, column)`` of every buffer the scan will read, with
        the rows its page holds (requests are issued in the order of the rows their bytes hold,
        estimated in proportion to the offset inside the buffer: every column's first rows arrive
        first). Each column's buffers are planned apart, so no request holds two columns' rows.
    limits:
        How to merge and cut the regions into requests.
    window:
        Bytes requested and not yet consumed, at most (a read the consumer waits for is issued
        regardless, so progress never stops).
    """

    def __init__(
        self,
        io: RangeReader,
        regions: Sequence[tuple[int, int, int, int, int]],
        limits: PlanLimits,
        window: int,
    ) -> None:
        self._io = io
        self.window = max(1, window)
        live = sorted((o, o + n, r0, r1) for o, n, r0, r1, _ in regions if n > 0)
        self.requests = _plan_by_column(regions, limits)
        n = len(self.requests)
        self._starts = [r.start for r in self.requests]
        self._wanted = [0] * n  # bytes of the regions inside each request (its gaps are not read)
        self._last = [0] * n  # end of the last region byte inside each request
        key = [0.0] * n
        for o, e, r0, r1 in live:
            i = bisect.bisect_right(self._starts, o) - 1
            while i < n and self.requests[i].start < e:
                req = self.requests[i]
                lo, hi = max(o, req.start), min(e, req.end)
                if hi > lo:
                    self._wanted[i] += hi - lo
                    self._last[i] = max(self._last[i], hi)
                    # A request's first row: the earliest of its regions' (a part straddling two
                    # columns is issued when the first of them needs it).
                    row = r0 + (r1 - r0) * (lo - o) / (e - o)
                    key[i] = row if self._wanted[i] == hi - lo else min(key[i], row)
                i += 1
        self._order = sorted(range(n), key=lambda i: (key[i], i))
        self._next = 0  # next position in _order to issue
        self._futures: list[Future[memoryview] | None] = [None] * n
        self._served = [0] * n
        self._released = [False] * n
        self._pending = 0  # bytes issued and not released
        self._lock = threading.Lock()
        self.released_requests = 0  # for tests

    def _issue(self, i: int) -> Future[memoryview]:  # under the lock
        fut = self._futures[i]
        if fut is None:
            req = self.requests[i]
            fut = self._io.store.runtime.scheduler.submit(lambda: self._io.fetch(req))
            self._futures[i] = fut
            self._pending += req.length
        return fut

    def _fill(self) -> None:  # under the lock
        # Everything within the window at once: on loopback, 4 or 2 requests at a time in row
        # order (so the first chunk's pages land first) scanned 1.1-1.2x slower than the window.
        while self._next < len(self._order) and (self._pending < self.window or self._pending == 0):
            i = self._order[self._next]
            self._next += 1
            if self._futures[i] is None and not self._released[i]:
                self._issue(i)

    def start(self) -> None:
        """Issue the first requests (up to the window)."""
        with self._lock:
            self._fill()

    def _cover(self, off: int, end: int) -> list[int] | None:  # under the lock
        """Requests (back to back, none released) that hold ``[off, end)``; ``None`` if none do."""
        i = bisect.bisect_right(self._starts, off) - 1
        if i < 0:
            return None
        out = []
        pos = off
        while pos < end:
            if i >= len(self.requests) or self._released[i]:
                return None
            req = self.requests[i]
            if req.start > pos or req.end <= pos:
                return None
            out.append(i)
            pos = req.end
            i += 1
        return out

    def read(
        self, ranges: Sequence[tuple[int, int]], fallback: Callable[[list[tuple[int, int]]], list[memoryview]]
    ) -> list[memoryview]:
        """``(offset, length)`` ranges, one buffer each, in order; ranges it does not hold are read
        by ``fallback`` (one call for all of them)."""
        plan: list[tuple[int, int, list[tuple[int, Future[memoryview]]]] | None] = []
        with self._lock:
            for off, length in ranges:
                covering = self._cover(off, off + length) if length > 0 else None
                if covering is None:
                    plan.append(None)
                else:
                    plan.append((off, length, [(i, self._issue(i)) for i in covering]))
        out: list[memoryview | None] = []
        missing: list[int] = []
        done: list[tuple[int, int, int]] = []  # (request, lo, hi) of served bytes
        for k, item in enumerate(plan):
            if item is None:
                out.append(None)
                missing.append(k)
                continue
            off, length, parts = item
            try:
                got = self._slice(off, length, parts, done)
            except Exception:
                got = None  # the store's own read reports (or retries) the failure
            if got is None:
                missing.append(k)
            out.append(got)
        if missing:
            more = fallback([(int(ranges[k][0]), int(ranges[k][1])) for k in missing])
            for k, data in zip(missing, more, strict=True):
                out[k] = data
        if done:
            self._account(done)
        return [memoryview(b"") if x is None else x for x in out]

    def _slice(
        self,
        off: int,
        length: int,
        parts: list[tuple[int, Future[memoryview]]],
        done: list[tuple[int, int, int]],
    ) -> memoryview:
        end = off + length
        pieces = []
        for i, fut in parts:
            req = self.requests[i]
            data = fut.result()
            lo, hi = max(off, req.start), min(end, req.end)
            pieces.append(data[lo - req.start : hi - req.start])
            done.append((i, lo, hi))
        # A range across a split point: one copy of it (splits are MiBs apart, few ranges cross).
        return pieces[0] if len(pieces) == 1 else memoryview(b"".join(pieces))

    def _account(self, done: list[tuple[int, int, int]]) -> None:
        with self._lock:
            for i, lo, hi in done:
                self._served[i] += hi - lo
                if self._released[i]:
                    continue
                unread = self._wanted[i] - self._served[i]
                if hi >= self._last[i] and unread <= self._wanted[i] // _UNREAD_FRACTION:
                    self._released[i] = True
                    self._futures[i] = None  # readers holding the future keep their bytes
                    self._pending -= self.requests[i].length
                    self.released_requests += 1
            self._fill()


def _plan_by_column(regions: Sequence[tuple[int, int, int, int, int]], limits: PlanLimits) -> list[Request]:
    """Each column's buffers planned apart; all together when that makes requests overlap (pages
    of one column lying within the merge gap of another's)."""
    by_column: dict[int, list[tuple[int, int]]] = {}
    for o, n, _, _, c in regions:
        if n > 0:
            by_column.setdefault(c, []).append((o, n))
    out = sorted(
        (r for ranges in by_column.values() for r in plan_requests(ranges, limits)), key=lambda r: r.start
    )
    if any(b.start < a.end for a, b in itertools.pairwise(out)):
        return plan_requests([(o, n) for o, n, _, _, _ in regions], limits)
    return out


class ScanScope:
    """The rows ``[lo, hi)`` one scan reads from one fragment, and its files' prefetches.

    Parameters
    ----------
    lo, hi:
        Physical rows of the fragment the scan will read (all of them, in order).
    window:
        Bytes each file's prefetch keeps requested ahead (``None``: the store session's setting).
    """

    def __init__(self, lo: int, hi: int, window: int | None = None) -> None:
        self.lo = lo
        self.hi = hi
        self.window = window
        self._files: dict[Hashable, FilePrefetch] = {}
        self._lock = threading.Lock()

    def file(self, key: Hashable, make: Callable[[], FilePrefetch]) -> FilePrefetch:
        """The prefetch of ``key`` (a file and projection), made and started on first use."""
        with self._lock:
            found = self._files.get(key)
            if found is None:
                found = self._files[key] = make()
                found.start()
            return found


def current_scan_scope() -> ScanScope | None:
    """The scan scope of the calling context (``None`` outside scans)."""
    return _scope.get()


@contextlib.contextmanager
def scan_scope(scope: ScanScope | None) -> Iterator[None]:
    """Run the block's file reads under ``scope`` (``None``: none)."""
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)
