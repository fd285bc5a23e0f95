"""Ranged reads of one object through the planner and the scheduler, with request accounting.

Reads are planned (coalesced and split), fetched through the scheduler of the store's session (bounded
requests in flight, priorities), and sliced back into the ranges asked for. Small reads can be
served from the page cache of the store's session, keyed by ``(store, object, block)``.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.core.buffers import empty_bytes
from lance_format.core.concurrency import nested_fanout_pays
from lance_format.core.errors import CorruptFileError
from lance_format.io.cache import ByteCache, ReadPolicy
from lance_format.io.planner import PlanLimits, Request, merge_spans, plan_requests
from lance_format.io.store import ObjectStore

__all__ = ["IOStats", "RangeReader", "io_stats"]

# Below this many bytes in one call, local requests run one after another in the caller's thread:
# handing work to a thread costs ~50-100 us, more than a few small local reads take.
PARALLEL_MIN_BYTES = 1024 * 1024

# On local disk, also stay serial when requests average less than this: a pooled request costs
# ~20 us of hand-off, a 64 KiB page-cache pread about the same (takes of 100 rows issue hundreds of
# small requests and spent 40% of their time in the pool). Object stores always go parallel: their
# small requests are latency bound.
PARALLEL_MIN_MEAN_BYTES = 64 * 1024

#: Page cache granule. The object-store planner's merge gap, so the missing blocks between two
#: wanted ones are fetched in the same request; a block holds a few hundred rows of a typical
#: column, so neighbouring takes share it, while keeping the cache's byte overhead per random row
#: small.
PAGE_BLOCK_BYTES = 64 * 1024

#: Reads larger than this bypass the page cache, as do all reads of scans: one scan would otherwise
#: evict the hot set of random takes that the cache exists for.
PAGE_CACHE_MAX_READ_BYTES = 8 * 1024 * 1024

#: Object stores: requests go to the client in concurrent calls ("waves"), not one per hand-off
#: to our threads. Rust's ``object_store`` keeps at most this many ranges of one call in flight
#: (a sliding window over the call's ranges), so a read of at most this many requests is one call,
#: and a read of more is split into one call per gate permit it holds, each a contiguous run in
#: offset order (the reading thread awaits them all; the scheduler's threads run them where it
#: cannot): with ``requests_in_flight`` 64, six calls of ~30 GETs keep ~60 in flight, as 19
#: calls of <= 10 six at a time did, for 6 wake-ups of the reading thread instead of 19. Measured
#: through obstore on loopback SeaweedFS (182 ranged GETs of 35 KB): ~350 us of client CPU per GET
#: issued one per call from threads, ~150-200 us per GET in calls of 8-10, and 19 async calls of
#: <= 10 cost ~2-3 ms more CPU per read than 6 calls of ~30 (29.4 -> 27.9 ms; the reading thread
#: 3.1 -> 1.1 ms), one async call per GET ~2x the CPU of calls of 10.
TOGETHER_MAX_REQUESTS = 10

# Up to this many ranges, block bookkeeping runs in plain Python (numpy's per-call cost dominates).
_FEW_RANGES = 16


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


_GLOBAL = IOStats()
_GLOBAL_LOCK = threading.Lock()


def io_stats() -> IOStats:
    """Ranged-read requests and bytes of this process so far (every :class:`RangeReader`)."""
    with _GLOBAL_LOCK:
        return _GLOBAL.snapshot()


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
        page_cache: ByteCache | None = None,
    ) -> None:
        self.store = store
        self.key = key
        self._size = size
        self.limits = limits or store.plan_limits
        self.stats = IOStats()
        self._lock = threading.Lock()
        self._page_cache = store.runtime.page_cache if page_cache is None else page_cache

    @property
    def size(self) -> int:
        if self._size is None:
            self._size = self.store.size(self.key)
            self._count(1, 0)
        return self._size

    def _count(self, requests: int, nbytes: int) -> None:
        with self._lock:
            self.stats.add(requests, nbytes)
        with _GLOBAL_LOCK:
            _GLOBAL.add(requests, nbytes)

    def _fetch(self, req: Request) -> memoryview:
        data = self.store.read_range_view(self.key, req.start, req.end)
        if len(data) != req.length:
            raise CorruptFileError(
                self.key,
                f"read of bytes [{req.start}, {req.end}) returned {len(data)} bytes (file truncated?)",
            )
        return data

    def fetch(self, req: Request) -> memoryview:
        """Issue one planned request now (the caller holds the store's gate), counted."""
        data = self._fetch(req)
        self._count(1, len(data))
        return data

    def _fetch_many(self, requests: Sequence[Request]) -> list[memoryview]:
        datas = self.store.read_ranges_view(self.key, [(r.start, r.end) for r in requests])
        for req, data in zip(requests, datas, strict=True):
            if len(data) != req.length:
                self._fetch(req)  # raises the truncation error with the range in it
        return datas

    def _fetch_all(self, requests: list[Request]) -> list[memoryview]:
        if self.store.remote:
            return self._fetch_remote([(r.start, r.end) for r in requests])
        total = sum(r.length for r in requests)
        parallel = total >= PARALLEL_MIN_BYTES and total >= PARALLEL_MIN_MEAN_BYTES * len(requests)
        parallel = parallel and nested_fanout_pays()  # as in _serial_local
        datas = self.store.runtime.scheduler.run(
            self._fetch,
            requests,
            parallel=parallel,
            max_parallel=self.store.io_parallelism,
            fetch_many=self._fetch_many,  # local stores batch their preads
        )
        self._count(len(requests), sum(len(d) for d in datas))
        return datas

    def _fetch_remote(self, spans: list[tuple[int, int]]) -> list[memoryview]:
        """Sorted, disjoint ``(start, end)`` spans of an object store's object, one request each:
        in one concurrent client call or in waves of them (:meth:`_fetch_waves`) where the store
        has such calls, else each alone on the scheduler's threads; counted, lengths checked."""
        n = len(spans)
        datas: list[memoryview] | None = None
        if 1 < n <= TOGETHER_MAX_REQUESTS:
            with self.store.runtime.scheduler.gate.hold():
                datas = self.store.read_spans_together(self.key, spans)
        elif n > 1:
            datas = self._fetch_waves(spans)
        if datas is None:
            # One request at a time through the zero-copy path (a batch call would copy every
            # response into ``bytes``).
            datas = self.store.runtime.scheduler.run(
                self._fetch,
                [Request(s, e) for s, e in spans],
                parallel=n > 1,
                max_parallel=self.store.io_parallelism,
            )
        else:
            for i, (s, e) in enumerate(spans):
                if len(datas[i]) != e - s:
                    datas[i] = self._fetch(Request(s, e))  # again alone: raises if short
        self._count(n, sum(e - s for s, e in spans))
        return datas

    def _fetch_waves(self, spans: list[tuple[int, int]]) -> list[memoryview] | None:
        """Many spans as concurrent client calls ("waves") of near-equal size, contiguous in
        offset order, side by side: one per gate permit held, at most
        ``requests_in_flight // TOGETHER_MAX_REQUESTS`` and ``ceil(len(spans) /
        TOGETHER_MAX_REQUESTS)`` (the client keeps that many GETs of each call in flight).
        Awaited together on the calling thread where the store can (:meth:`_waves_from_here`),
        else on the scheduler's threads (the caller's among them); ``None`` when the store has no
        such call (then each request goes alone). Lengths are not checked here."""
        store, key = self.store, self.key
        bound = max(
            1, min(store.requests_in_flight // TOGETHER_MAX_REQUESTS, -(-len(spans) // TOGETHER_MAX_REQUESTS))
        )
        waves: list[list[tuple[int, int]]] = []
        got = self._waves_from_here(spans, bound, waves)
        if got is None:
            waves = _split_waves(spans, bound)
            got = store.runtime.scheduler.run(
                lambda part: store.read_spans_together(key, part), waves, parallel=True, max_parallel=bound
            )
        if all(datas is None for datas in got):
            return None
        out: list[memoryview] = []
        for part, datas in zip(waves, got, strict=True):
            # A wave with a span past the end: each of its requests alone reports it.
            out += [self._fetch(Request(s, e)) for s, e in part] if datas is None else datas
        return out

    def _waves_from_here(
        self, spans: list[tuple[int, int]], bound: int, waves: list[list[tuple[int, int]]]
    ) -> list[list[memoryview] | None] | None:
        """``spans`` as waves side by side from the calling thread (the store's
        :meth:`~lance_format.io.store.ObjectStore.read_span_waves`), one wave per gate permit
        held: one waited for, up to ``bound - 1`` more taken only if free at once (waiting for
        more while holding one could deadlock two readers); the waves sent are put in ``waves``.
        ``None`` when the store cannot."""
        gate = self.store.runtime.scheduler.gate
        with gate.hold():
            extra = gate.try_acquire(bound - 1)
            try:
                waves[:] = _split_waves(spans, 1 + extra)
                return self.store.read_span_waves(self.key, waves, len(waves))
            finally:
                for _ in range(extra):
                    gate.release()

    def read(
        self, ranges: Sequence[tuple[int, int]], policy: ReadPolicy = ReadPolicy.CACHED
    ) -> list[memoryview]:
        """Fetch ``(offset, length)`` ranges; returns one buffer per range, in the order given.

        ``policy``: whether the page cache may serve and keep these bytes (not for scans).
        """
        if (
            self._page_cache.enabled
            and ranges
            and policy.page_cache
            and sum(n for _, n in ranges if n > 0) <= PAGE_CACHE_MAX_READ_BYTES
        ):
            cached = self._read_blocks(ranges)
            if cached is not None:
                return cached
        if ranges and not self.store.remote:
            local = (
                self._read_many_local(ranges) if len(ranges) > _FEW_RANGES else self._read_few_local(ranges)
            )
            if local is not None:
                return local
        elif len(ranges) > _FEW_RANGES:
            remote = self._read_many_remote(ranges)
            if remote is not None:
                return remote
        requests = plan_requests(ranges, self.limits)
        bases, views = self._fetch_spans(requests)
        starts = [r.start for r in requests]
        out: list[memoryview] = []
        for off, length in ranges:
            if length <= 0:
                out.append(memoryview(b""))
                continue
            i = bisect.bisect_right(starts, off) - 1
            # Parts of one span (a range split at max_request) share one buffer: slice it.
            lo = off - bases[i]
            out.append(views[i][lo : lo + length])
        return out

    def _merged(
        self, ranges: Sequence[tuple[int, int]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Offsets and lengths of ``ranges`` as arrays and the spans they merge into (starts, ends,
        and each range's span); ``None`` for an empty or negative range (the general path's)."""
        flat = np.fromiter(itertools.chain.from_iterable(ranges), dtype=np.int64, count=2 * len(ranges))
        offsets, lengths = flat[0::2], flat[1::2]
        if int(lengths.min()) <= 0 or int(offsets.min()) < 0:
            return None
        starts, ends, owner = merge_spans(offsets, lengths, self.limits.max_gap)
        return offsets, lengths, starts, ends, owner

    def _read_many_local(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview] | None:
        """:meth:`read` of many small ranges of a local object, planned with arrays and read in
        one batch (a take of 100 rows over 4 columns reads ~360 chunks: request objects, the
        span bookkeeping and a search per range cost twice the preads themselves).

        ``None`` when the general path must handle them (empty or negative ranges, spans above
        ``max_request``, enough bytes to read on threads).
        """
        planned = self._merged(ranges)
        if planned is None:
            return None
        offsets, lengths, starts, ends, owner = planned
        sizes = ends - starts
        if not self._serial_local(int(sizes.sum()), int(sizes.max()), len(starts)):
            return None
        views = self._fetch_local(list(zip(starts.tolist(), ends.tolist(), strict=True)))
        return _slice_spans(views, offsets - starts[owner], lengths, owner)

    def _read_many_remote(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview] | None:
        """:meth:`read` of many ranges of an object store's object (takes: a chunk per row and
        column), planned with arrays: no request objects, no search per range. ``None`` when the
        general path must handle them (empty or negative ranges, spans above ``max_request``)."""
        planned = self._merged(ranges)
        if planned is None:
            return None
        offsets, lengths, starts, ends, owner = planned
        if int((ends - starts).max()) > self.limits.max_request:
            return None
        views = self._fetch_remote(list(zip(starts.tolist(), ends.tolist(), strict=True)))
        return _slice_spans(views, offsets - starts[owner], lengths, owner)

    def _read_few_local(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview] | None:
        """:meth:`read` of a few small ranges of a local object, planned in plain Python (a one-row
        take over 4 columns: request objects and the scheduler's bookkeeping cost ~20x its 4
        preads). ``None`` when the general path must handle them (as :meth:`_read_many_local`)."""
        order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
        gap = self.limits.max_gap
        spans: list[list[int]] = []
        owner = [0] * len(ranges)
        for i in order:
            off, length = ranges[i]
            if length <= 0 or off < 0:
                return None
            if spans and off <= spans[-1][1] + gap:
                spans[-1][1] = max(spans[-1][1], off + length)
            else:
                spans.append([off, off + length])
            owner[i] = len(spans) - 1
        sizes = [e - s for s, e in spans]
        if not self._serial_local(sum(sizes), max(sizes), len(spans)):
            return None
        views = self._fetch_local([(s, e) for s, e in spans])
        out = []
        for (off, length), g in zip(ranges, owner, strict=True):
            lo = off - spans[g][0]
            out.append(views[g] if lo == 0 and length == sizes[g] else views[g][lo : lo + length])
        return out

    def _serial_local(self, total: int, largest: int, count: int) -> bool:
        """Whether local spans are read one after another (as :meth:`_fetch_all` would)."""
        big = total >= PARALLEL_MIN_BYTES and total >= PARALLEL_MIN_MEAN_BYTES * count
        # Inside a scan whose chunks occupy every core, even big reads stay on the chunk's thread.
        return largest <= self.limits.max_request and not (big and nested_fanout_pays())

    def _fetch_local(self, spans: list[tuple[int, int]]) -> list[memoryview]:
        """Read sorted, disjoint ``(start, end)`` spans of a local object under one gate permit."""
        key = self.key

        def fetch_many(batch: Sequence[tuple[int, int]]) -> list[memoryview]:
            return self.store.read_ranges_view(key, batch)

        datas = self.store.runtime.scheduler.run(
            lambda span: fetch_many([span])[0], spans, parallel=False, fetch_many=fetch_many
        )
        total = 0
        for (start, end), d in zip(spans, datas, strict=True):
            if len(d) != end - start:
                self._fetch(Request(start, end))  # raises the truncation error with the range in it
            total += end - start
        self._count(len(spans), total)
        return [memoryview(d) for d in datas]

    def _fetch_spans(self, requests: list[Request]) -> tuple[list[int], list[memoryview]]:
        """Fetch ``requests``; per request, the file offset and the buffer of its span.

        A span is a run of requests back to back (one planned read split at ``max_request``):
        its parts are read straight into one preallocated buffer, in parallel, so a range across
        split points is a slice of it, not a join of copies.
        """
        spans: list[tuple[int, int]] = []  # [first, last] request of each span
        for i, r in enumerate(requests):
            if spans and requests[i - 1].end == r.start:
                spans[-1] = (spans[-1][0], i)
            else:
                spans.append((i, i))
        if all(a == b for a, b in spans):
            datas = self._fetch_all(requests)
            return [r.start for r in requests], datas
        bases: list[int] = [0] * len(requests)
        views: list[memoryview] = [memoryview(b"")] * len(requests)
        jobs: list[tuple[Request, memoryview]] = []
        singles: list[int] = []
        for a, b in spans:
            if a == b:
                singles.append(a)
                continue
            base = requests[a].start
            # Uninitialised (np.empty): every byte is about to be read into it.
            buf = empty_bytes(requests[b].end - base).data
            for i in range(a, b + 1):
                bases[i], views[i] = base, buf
                r = requests[i]
                jobs.append((r, buf[r.start - base : r.end - base]))
        if singles:
            for i, d in zip(singles, self._fetch_all([requests[i] for i in singles]), strict=True):
                bases[i], views[i] = requests[i].start, d
        self.store.runtime.scheduler.run(
            self._fetch_into, jobs, parallel=True, max_parallel=self.store.io_parallelism
        )
        self._count(len(jobs), sum(r.length for r, _ in jobs))
        return bases, views

    def _fetch_into(self, job: tuple[Request, memoryview]) -> None:
        req, out = job
        got = self.store.read_range_into(self.key, req.start, out)
        if got != req.length:
            raise CorruptFileError(
                self.key,
                f"read of bytes [{req.start}, {req.end}) returned {got} bytes (file truncated?)",
            )

    def _blocks_of(self, ranges: Sequence[tuple[int, int]]) -> list[int] | None:
        """Sorted page-cache blocks the ranges touch; ``None`` when one lies outside the object."""
        bsz = PAGE_BLOCK_BYTES
        if len(ranges) <= _FEW_RANGES:
            # Takes of a few rows: plain Python beats a dozen numpy calls of ~2 us each.
            live = [(int(o), int(n)) for o, n in ranges if n > 0]
            if not live or min(o for o, _ in live) < 0 or max(o + n for o, n in live) > self.size:
                return None
            found: set[int] = set()
            for o, n in live:
                found.update(range(o // bsz, (o + n - 1) // bsz + 1))
            return sorted(found)
        arr = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        live_arr = arr[arr[:, 1] > 0]
        if (
            len(live_arr) == 0
            or (live_arr[:, 0] < 0).any()
            or int((live_arr[:, 0] + live_arr[:, 1]).max()) > self.size
        ):
            return None
        first = live_arr[:, 0] // bsz
        counts = (live_arr[:, 0] + live_arr[:, 1] - 1) // bsz - first + 1
        steps = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        out: list[int] = np.unique(np.repeat(first, counts) + steps).tolist()
        return out

    def _read_blocks(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview] | None:
        """Serve ranges from page-cache blocks, fetching (coalesced) only the missing blocks.

        ``None`` when a range is outside the object (the direct path reports it).
        """
        bsz = PAGE_BLOCK_BYTES
        blocks = self._blocks_of(ranges)
        if blocks is None:
            return None
        uri = self.store.uri
        keys: list[tuple[str, str, int]] = [(uri, self.key, b) for b in blocks]
        found = self._page_cache.get_many(list(keys))
        by_block: dict[int, memoryview] = {}
        missing = []
        for b, data in zip(blocks, found, strict=True):
            if data is None:
                missing.append(b)
            else:
                by_block[b] = data
        if missing:
            size = self.size
            wanted = [(b * bsz, max(0, min(bsz, size - b * bsz))) for b in missing]
            requests = plan_requests(wanted, self.limits)
            datas = self._fetch_all(requests)
            starts = [r.start for r in requests]
            for b, (off, n) in zip(missing, wanted, strict=True):
                block: bytes | memoryview
                i = bisect.bisect_right(starts, off) - 1
                req = requests[i]
                if off == req.start and n == req.length and isinstance(datas[i], bytes):
                    block = datas[i]  # the request was this block: no copy
                elif off + n <= req.end:
                    block = bytes(memoryview(datas[i])[off - req.start : off - req.start + n])
                else:  # the block straddles split points
                    parts = []
                    pos = off
                    while pos < off + n:
                        r = requests[i]
                        take = min(r.end, off + n) - pos
                        parts.append(memoryview(datas[i])[pos - r.start : pos - r.start + take])
                        pos += take
                        i += 1
                    block = b"".join(parts)
                view = memoryview(block)
                by_block[b] = view
                self._page_cache.put((uri, self.key, b), view, max(n, 1))
        out: list[memoryview] = []
        for off, length in ranges:
            if length <= 0:
                out.append(memoryview(b""))
                continue
            b0, b1 = off // bsz, (off + length - 1) // bsz
            if b0 == b1:
                lo = off - b0 * bsz
                out.append(by_block[b0][lo : lo + length])
            else:
                # Join only the wanted parts of the blocks (not whole 64 KiB copies of each).
                lo = off - b0 * bsz
                end = off + length - b1 * bsz
                parts = [by_block[b0][lo:], *(by_block[b] for b in range(b0 + 1, b1)), by_block[b1][:end]]
                out.append(memoryview(b"".join(parts)))
        return out

    def read_tail(self, nbytes: int) -> tuple[int, memoryview]:
        """The last ``nbytes`` of the object (or all of it), in one request; ``(offset, bytes)``.

        Not through the page cache: a file's tail is parsed once and its result cached (the
        metadata cache), so keeping its bytes too would only take room from data pages.
        """
        if self._size is not None:
            start = max(0, self._size - nbytes)
            return start, self.read([(start, self._size - start)], ReadPolicy.SCAN)[0]
        size, data = self.store.read_tail(self.key, nbytes)
        self._size = size
        self._count(1, len(data))
        return size - len(data), memoryview(data)


def _split_waves(spans: list[tuple[int, int]], count: int) -> list[list[tuple[int, int]]]:
    """``spans`` in ``count`` contiguous runs of near-equal length (fewer when there are fewer)."""
    n = len(spans)
    count = max(1, min(count, n))
    bounds = [(n * i) // count for i in range(count + 1)]
    return [spans[a:b] for a, b in itertools.pairwise(bounds)]


def _slice_spans(
    views: list[memoryview],
    lo: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    owner: npt.NDArray[np.int64],
) -> list[memoryview]:
    """Range ``i``: ``lengths[i]`` bytes at ``lo[i]`` in the buffer of its span ``owner[i]``."""
    if len(views) == len(owner) and not lo.any():
        # Every range is a span of its own (takes: chunks far apart), at ``owner``.
        return [views[g] for g in owner.tolist()]
    return [
        views[g][a : a + m] for g, a, m in zip(owner.tolist(), lo.tolist(), lengths.tolist(), strict=True)
    ]
