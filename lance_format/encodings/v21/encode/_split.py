"""One page's string encode split over threads: FSST coding and dictionary building of a large
page run on row ranges side by side (their kernels release the GIL), so a file with one big string
column still uses every core. The ranges' results are joined so the bytes do not depend on the
split.

The threads are the writing session's split pool
(:attr:`~lance_format.io.runtime.IORuntime.split_pool`, sized by its ``encode_threads`` setting and
stopped by ``Session.close``), passed down from the file writer as reads get
``DecodeContext.page_pool``; without one (a direct call) a page encodes on the calling thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from lance_format.core.concurrency import LazyPool

__all__ = ["SPLIT_MIN_BYTES", "run_split", "split_rows", "windows"]

T = TypeVar("T")

#: Bytes of strings per range at least: handing a range to a thread costs some 20-50 us, which a
#: range this large (about a millisecond of coding) repays many times.
SPLIT_MIN_BYTES = 1 << 20


def split_rows(
    offsets: npt.NDArray[np.int64], pool: LazyPool | None, min_bytes: int | None = None
) -> list[int]:
    """Row bounds (first 0, last ``n``) cutting ``n`` strings into ranges of about equal bytes,
    each at least ``min_bytes`` (default :data:`SPLIT_MIN_BYTES`), at most one per thread of
    ``pool`` (the session's split pool; None: one range)."""
    n = len(offsets) - 1
    total = int(offsets[-1] - offsets[0]) if n > 0 else 0
    least = SPLIT_MIN_BYTES if min_bytes is None else min_bytes
    threads = 1 if pool is None else pool.workers
    parts = max(1, min(threads, total // max(1, least), n))
    if parts == 1:
        return [0, n]
    targets = offsets[0] + (total * np.arange(1, parts, dtype=np.int64)) // parts
    cuts = np.searchsorted(offsets, targets, side="left")
    return [0, *sorted({int(c) for c in cuts if 0 < c < n}), n]


def run_split(jobs: Sequence[Callable[[], T]], pool: LazyPool | None) -> list[T]:
    """Results of ``jobs`` in order: the first runs on this thread, the others on ``pool`` (one
    not started by the time this thread needs it runs here instead; no pool: all run here).

    The pool must be one of its own (the session's split pool): pages encoded on the writer's
    encode pool wait on it, and its tasks never wait on any pool, so the two cannot deadlock."""
    if len(jobs) == 1 or pool is None:
        return [job() for job in jobs]
    executor = pool()
    futures = [executor.submit(job) for job in jobs[1:]]
    out = [jobs[0]()]
    for fut, job in zip(futures, jobs[1:], strict=True):
        out.append(job() if fut.cancel() else fut.result())
    return out


def windows(data: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """Every full 8-byte window of ``data`` as a little-endian u64: an overlapping view with a
    stride of one byte (no copy), so a kernel reads a position's next 8 bytes in one load."""
    count = len(data) - 7
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    return np.ndarray((count,), dtype="<u8", buffer=data, strides=(1,))
