"""Large scratch and output buffers from Arrow's memory pool instead of ``malloc``.

A scan reads and decodes megabytes per batch into fresh buffers (the bytes read, the values
gathered out of mini-block chunks, the unpacked integers). glibc serves allocations that large
with ``mmap`` and gives them back with ``munmap`` (or trims them off its heap), so every batch
touched brand-new pages: one minor page fault and one zeroed page per 4 KiB, ~1.8 us per 4 KiB
on our VM, more than the copies themselves (a cold scan of a float64 column spent ~8 of its
~16 ns per row there). Arrow's pool (mimalloc or jemalloc) keeps freed pages for the next
allocation, so steady-state scans fault no pages in. The buffers are ordinary writable numpy
arrays; each keeps its Arrow buffer (hence the memory) alive for as long as anything views it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = [
    "JOIN_MAX_MEAN_PART_BYTES",
    "POOL_MIN_BYTES",
    "concat_bytes",
    "empty",
    "empty_bytes",
    "pool_allocations",
]

#: Allocations from this size on come from Arrow's pool. glibc's default ``mmap`` threshold is
#: 128 KiB; below ~64 KiB ``malloc`` reuses its own free lists and numpy's ``np.empty`` costs
#: ~0.3 us against ~1 us for a pool buffer and its wrappers, so small buffers stay with numpy.
POOL_MIN_BYTES = 64 * 1024


def empty_bytes(n: int) -> npt.NDArray[np.uint8]:
    """An uninitialized, writable uint8 array of ``n`` bytes (pooled when large)."""
    if n < POOL_MIN_BYTES:
        return np.empty(n, dtype=np.uint8)
    return np.frombuffer(pa.allocate_buffer(n), dtype=np.uint8)


def empty(n: int, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """An uninitialized, writable 1-d array of ``n`` items of ``dtype`` (pooled when large)."""
    dt = np.dtype(dtype)
    nbytes = n * dt.itemsize
    if nbytes < POOL_MIN_BYTES:
        return np.empty(n, dtype=dt)
    return np.frombuffer(pa.allocate_buffer(nbytes), dtype=dt)


#: Parts of at most this many bytes on average are joined by ``bytes.join`` (one C loop, a read-only
#: result from ``malloc``) instead of copied one slice assignment each into a pooled buffer: the
#: chunk stretches of a take (a few KiB each, ~100 per column of a 100-row take) cost ~1-2 us of
#: Python apiece that way, more than their bytes (100 parts of 7.6 KB: 45 -> 21 us; 400 of 4 KB:
#: 221 -> 52 us). Scans' parts (whole chunks and pages, 32 KiB and up) stay pooled: their buffers
#: are large and many, where fresh ``malloc`` memory faulted a page per 4 KiB.
JOIN_MAX_MEAN_PART_BYTES = 16 * 1024


def concat_bytes(parts: Sequence[bytes | memoryview | npt.NDArray[np.uint8]]) -> npt.NDArray[np.uint8]:
    """The concatenation of byte strings as one uint8 array (pooled when large, read-only when
    joined from many small parts: see :data:`JOIN_MAX_MEAN_PART_BYTES`).

    Large parts are copied by a slice assignment each: ``np.concatenate`` first makes an array of
    every part (~2 us each).
    """
    sizes = [len(p) for p in parts]
    total = sum(sizes)
    if len(parts) > 1 and total <= JOIN_MAX_MEAN_PART_BYTES * len(parts):
        return np.frombuffer(b"".join(cast(Any, parts)), dtype=np.uint8)  # arrays are buffers too
    out = empty_bytes(total)
    view = out.data
    pos = 0
    for part, n in zip(parts, sizes, strict=True):
        view[pos : pos + n] = part.data if isinstance(part, np.ndarray) else part
        pos += n
    return out


def pool_allocations() -> int:
    """Allocations made from Arrow's default pool so far in this process (tests count them)."""
    return int(pa.default_memory_pool().num_allocations())
