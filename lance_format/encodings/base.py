"""The contract between the file container and the encodings.

Decoding is a *generator* protocol so one read can gather the byte ranges of every column before
any I/O happens:

* A decoder is a generator. Each ``yield`` hands the driver a list of ``(offset, length)`` byte
  ranges (absolute positions in the file) and receives, via ``send``, one ``memoryview`` per range
  in the same order. When it is done it ``return``s its result (usually a ``pyarrow.Array``).
* The file reader drives all column decoders of a read in lock-step: it collects the ranges every
  generator asked for in this round, plans them into coalesced requests, fetches them in parallel
  and sends the slices back. Decoders that need two rounds (offsets, then bytes) just yield twice.
* Rows are selected with :data:`RowRuns`: an ``int64`` array of shape ``(k, 2)`` holding sorted,
  disjoint, non-empty ``[start, stop)`` runs. A full read is one run; a take is many short runs.
  The decoded array holds the selected rows in run order.

Sub-decoders compose with ``yield from``.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from lance_format.core.concurrency import LazyPool, nested_fanout_pays
from lance_format.core.records import fast_init
from lance_format.io.runtime import default_runtime

__all__ = [
    "ColumnInfo",
    "DecodeContext",
    "EncodedPage",
    "IOGen",
    "PageInfo",
    "Range",
    "RowRuns",
    "drive",
    "empty_runs",
    "expand_ranges",
    "fetch",
    "gather",
    "join_buffers",
    "pair_columns",
    "runs_for_range",
    "runs_from_sorted_indices",
    "runs_length",
    "split_runs",
]

T = TypeVar("T")


# A round of a read fans its decoders out to threads only from this many fetched bytes: handing a
# decoder to a thread costs ~20-50 us, which only bulk decoding (scans, big ranges) repays.
PARALLEL_DECODE_MIN_BYTES = 4 * 1024 * 1024

# Marks the threads of a page pool: sub-decoders running there resume their own gathers serially.
_IN_PAGE_POOL = threading.local()


Range = tuple[int, int]
RowRuns = npt.NDArray[np.int64]
IOGen = Generator[list[Range], list[memoryview], T]


@fast_init
@dataclass(frozen=True)
class PageInfo:
    """One page of one column, as the column metadata describes it.

    Attributes
    ----------
    buffer_offsets, buffer_sizes:
        Absolute file positions and sizes of the page's buffers.
    num_rows:
        ``Page.length``: rows (2.0: values of this column; 2.1+: top-level rows) in the page.
    priority:
        ``Page.priority`` (2.1+: first row of the page; always 0 in 2.0 files).
    encoding:
        The page encoding as a dataclass tree (2.0 ``ArrayEncoding``, 2.1+ ``PageLayout``).
    """

    buffer_offsets: tuple[int, ...]
    buffer_sizes: tuple[int, ...]
    num_rows: int
    priority: int
    encoding: Any

    def buffer(self, i: int) -> Range:
        """``(offset, size)`` of page buffer ``i``."""
        return (self.buffer_offsets[i], self.buffer_sizes[i])


@fast_init
@dataclass(frozen=True)
class ColumnInfo:
    """A column: its column-level encoding, column buffers and pages (in row order)."""

    index: int
    encoding: Any
    #: In row order (a sequence that may parse each page's layout on first use).
    pages: Sequence[PageInfo]
    buffer_offsets: tuple[int, ...] = ()
    buffer_sizes: tuple[int, ...] = ()
    #: Row at which each page starts, plus the total at the end (len(pages) + 1 entries).
    page_starts: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(1, dtype=np.int64))

    @property
    def num_rows(self) -> int:
        return int(self.page_starts[-1])


@dataclass
class DecodeContext:
    """What decoders of one file share.

    Attributes
    ----------
    path:
        The file, for error messages.
    version:
        ``(major, minor)`` of the file format as the footer says (2.0 files say ``(0, 3)``).
    columns:
        All columns of the file, by column index.
    cache:
        Per-file cache that lives as long as the reader (dictionaries, chunk metadata, ...). Keys
        are tuples that start with the column index.
    data_end:
        Where the data section ends (the metadata starts), or None when unknown. Decoders that
        follow positions stored inside data (2.1 blob descriptions) check them against it.
    page_pool:
        The threads decoding the pages of one column side by side (the reader's session's,
        :attr:`~lance_format.io.runtime.IORuntime.page_pool`); None decodes them serially.
    """

    path: str
    version: tuple[int, int]
    columns: Sequence[ColumnInfo]
    cache: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    # Added for the 2.1 blob decoder (bounds of positions read from data); keyword, defaulted.
    data_end: int | None = None
    page_pool: LazyPool | None = None


@dataclass
class EncodedPage:
    """One encoded page of one column, as an encoder hands it to the file writer.

    ``encoding`` is the serialized page encoding: ``(message name, bytes)``. ``accumulate`` marks a
    buffer-less page whose rows the writer adds to the column's previous such page instead of
    starting a new one (2.0 struct headers: pylance writes exactly one per column and file).
    """

    column: int
    buffers: list[Any]
    num_rows: int
    encoding: tuple[str, bytes]
    priority: int = 0
    # Added for the 2.0 encoder (see the docstring); defaults keep other encoders unaffected.
    accumulate: bool = False


def empty_runs() -> RowRuns:
    return np.zeros((0, 2), dtype=np.int64)


def runs_for_range(start: int, stop: int) -> RowRuns:
    """One run ``[start, stop)`` (no runs when empty)."""
    if stop <= start:
        return empty_runs()
    return np.array([[start, stop]], dtype=np.int64)


def runs_from_sorted_indices(indices: npt.NDArray[np.integer[Any]]) -> RowRuns:
    """Runs covering sorted, unique row indices (consecutive indices merge into one run)."""
    idx = np.asarray(indices, dtype=np.int64)
    if len(idx) <= 1:
        return idx.reshape(-1, 1) + np.array([[0, 1]], dtype=np.int64) if len(idx) else empty_runs()
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = idx[np.concatenate(([0], breaks))]
    stops = idx[np.concatenate((breaks - 1, [len(idx) - 1]))] + 1
    return pair_columns(starts, stops)


def pair_columns(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``np.stack([a, b], axis=1)`` as int64, without ``stack``'s per-call overhead (hot in takes)."""
    out = np.empty((len(a), 2), dtype=np.int64)
    out[:, 0] = a
    out[:, 1] = b
    return out


def runs_length(runs: RowRuns) -> int:
    """Total rows the runs select."""
    if len(runs) == 1:
        return int(runs[0, 1] - runs[0, 0])
    return int((runs[:, 1] - runs[:, 0]).sum()) if len(runs) else 0


def split_runs(runs: RowRuns, bounds: npt.NDArray[np.int64]) -> list[tuple[int, RowRuns]]:
    """Cut runs at page boundaries.

    Parameters
    ----------
    runs:
        Global row runs.
    bounds:
        Page start rows plus the end (``ColumnInfo.page_starts``).

    Returns
    -------
    list of (page index, page-local runs)
        Only pages that have selected rows, in order.
    """
    out: list[tuple[int, RowRuns]] = []
    if len(runs) == 0:
        return out
    if len(bounds) == 2:
        return [(0, runs)]  # one page: nothing to cut
    if len(runs) == 1:
        # A single run (full reads, one-row takes): locate it without the vectorized grouping.
        start, stop = runs[0].tolist()
        p = bisect.bisect_right(bounds, start) - 1  # cheaper than a numpy call for one value
        if stop <= int(bounds[p + 1]):
            return [(p, runs - bounds[p])]
    first = np.searchsorted(bounds, runs[:, 0], side="right") - 1
    last = np.searchsorted(bounds, runs[:, 1] - 1, side="right") - 1
    if np.array_equal(first, last):
        # Common case: no run crosses a page boundary; group by page without a Python row loop.
        # Runs are sorted, so each page's runs are one stretch of ``first``.
        cut = np.flatnonzero(first[1:] != first[:-1]) + 1
        starts = np.concatenate(([0], cut)).tolist()
        ends = [*starts[1:], len(runs)]
        pages = first[starts].tolist()
        for p, s, e in zip(pages, starts, ends, strict=True):
            out.append((p, runs[s:e] - bounds[p]))
        return out
    pieces: dict[int, list[RowRuns]] = {}
    for (start, stop), f, la in zip(runs.tolist(), first.tolist(), last.tolist(), strict=True):
        for p in range(f, la + 1):
            s = max(start, int(bounds[p]))
            e = min(stop, int(bounds[p + 1]))
            if e > s:
                pieces.setdefault(p, []).append(np.array([[s, e]], dtype=np.int64) - bounds[p])
    return [(p, np.concatenate(v)) for p, v in sorted(pieces.items())]


def fetch(ranges: list[Range]) -> IOGen[list[memoryview]]:
    """Ask the driver for ``ranges``; ``bufs = yield from fetch(ranges)``."""
    if not ranges:
        return []
    bufs = yield ranges
    return bufs


def expand_ranges(starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Concatenation of ``arange(s, s + n)`` for each start and length, without a Python loop."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.asarray(starts, dtype=np.int64) - (np.cumsum(lengths) - lengths)
    return np.repeat(shift, lengths) + np.arange(total, dtype=np.int64)


def join_buffers(bufs: list[memoryview]) -> bytes | memoryview:
    """Concatenate fetched buffers; a single buffer is passed through without a copy."""
    if len(bufs) == 1:
        return bufs[0]
    return b"".join(bufs)


def gather(gens: list[IOGen[T]], *, pool: LazyPool | None = None) -> IOGen[list[T]]:
    """Run sub-decoders in lock-step as one decoder: each round asks for all their ranges at once.

    With a ``pool`` (:attr:`DecodeContext.page_pool`), a round that fetched at least
    :data:`PARALLEL_DECODE_MIN_BYTES` resumes the sub-decoders on its threads (the pages of one
    column: a scan's decode then spreads over the cores even when one column dominates).
    Sub-decoders that run on those threads resume their own gathers serially, so the pool never
    waits on itself.
    """

    def resume(todo: list[IOGen[T]], chunks: list[list[memoryview]], nbytes: int) -> list[tuple[bool, Any]]:
        if (
            pool is not None
            and len(todo) > 1
            and pool.workers > 1
            and not getattr(_IN_PAGE_POOL, "active", False)
            and nbytes >= PARALLEL_DECODE_MIN_BYTES
            and nested_fanout_pays()
        ):
            return list(pool().map(_page_step, todo, chunks))
        return [_step(g, c) for g, c in zip(todo, chunks, strict=True)]

    if len(gens) == 1:
        # One sub-decoder (a one-page read, a one-leaf field): no lock-step bookkeeping to pay.
        return [(yield from gens[0])]
    return (yield from _lockstep(gens, resume))


def _lockstep(
    gens: list[IOGen[T]],
    resume: Callable[[list[IOGen[T]], list[list[memoryview]], int], list[tuple[bool, Any]]],
) -> IOGen[list[T]]:
    """Advance ``gens`` round by round; ``resume`` sends each its buffers (serially or on threads)."""
    results: list[Any] = [None] * len(gens)
    pending: dict[int, list[Range]] = {}
    for i, g in enumerate(gens):
        done, value = _step_first(g)
        if done:
            results[i] = value
        else:
            pending[i] = value
    while pending:
        order = list(pending.items())
        bufs = yield [r for _, rs in order for r in rs]
        chunks = []
        pos = 0
        for _, rs in order:
            chunks.append(bufs[pos : pos + len(rs)])
            pos += len(rs)
        outs = resume([gens[i] for i, _ in order], chunks, sum(map(len, bufs)))
        pending = {}
        for (i, _), (done, value) in zip(order, outs, strict=True):
            if done:
                results[i] = value
            else:
                pending[i] = value
    return results


def _page_step(g: IOGen[T], bufs: list[memoryview]) -> tuple[bool, Any]:
    _IN_PAGE_POOL.active = True
    try:
        return _step(g, bufs)
    finally:
        _IN_PAGE_POOL.active = False


def _step(g: IOGen[T], bufs: list[memoryview]) -> tuple[bool, Any]:
    """Resume ``g`` with ``bufs``: ``(True, result)`` when it finished, else ``(False, ranges)``."""
    try:
        return False, g.send(bufs)
    except StopIteration as stop:
        return True, stop.value


def drive(
    gens: list[IOGen[T]],
    read: Callable[[list[Range]], list[memoryview]],
    parallel_min_bytes: int | None = None,
    *,
    pool: LazyPool | None = None,
) -> list[T]:
    """Run decoders to completion, batching each round's ranges into one ``read`` call.

    Parameters
    ----------
    gens:
        Decoder generators (not yet started), usually one per top-level field.
    read:
        Fetches ranges; one buffer per range, in order.
    parallel_min_bytes:
        A round that fetched at least this many bytes for several decoders resumes them on
        threads (numpy and Arrow release the GIL in their bulk work); default
        :data:`PARALLEL_DECODE_MIN_BYTES`. Small rounds (takes) stay on the caller's thread.
    pool:
        The threads to decode fields on (a session's); the default session's by default.
    """
    threshold = PARALLEL_DECODE_MIN_BYTES if parallel_min_bytes is None else parallel_min_bytes

    def resume(todo: list[IOGen[T]], chunks: list[list[memoryview]], nbytes: int) -> list[tuple[bool, Any]]:
        fields = default_runtime().decode_pool if pool is None else pool
        if len(todo) > 1 and fields.workers > 1 and nbytes >= threshold and nested_fanout_pays():
            return list(fields().map(_step, todo, chunks))
        return [_step(g, c) for g, c in zip(todo, chunks, strict=True)]

    runner = _lockstep(gens, resume)
    done, value = _step_first(runner)
    while not done:
        done, value = _step(runner, read(value))
    return list(value)


def _step_first(g: IOGen[T]) -> tuple[bool, Any]:
    try:
        return False, next(g)
    except StopIteration as stop:
        return True, stop.value
