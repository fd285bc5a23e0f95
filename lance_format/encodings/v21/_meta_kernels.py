"""Compiled pass over a mini-block page's chunk metadata words (see :mod:`.miniblock_meta`).

A page of a million rows has tens of thousands of chunks; turning their words into chunk sizes,
value counts and positions took about fifteen numpy passes (one to two milliseconds per column on
the first take after an open). One compiled loop does it in one pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.core.jit import kernel, warm

__all__ = ["CHUNK_COUNTS_DO_NOT_ADD_UP", "CHUNK_TOO_LARGE", "chunk_words", "warm_up"]

I64 = npt.NDArray[np.int64]

#: Status codes of :func:`chunk_words` (0: fine).
CHUNK_COUNTS_DO_NOT_ADD_UP = 1
CHUNK_TOO_LARGE = 2


@kernel
def chunk_words(
    words: npt.NDArray[np.unsignedinteger[Any]], num_items: int, data_pos: int, max_values: int, align: int
) -> tuple[I64, I64, I64, I64, int, int, int]:
    """``(chunk positions, byte sizes, value counts, first value of each chunk, total bytes,
    chunks without values, status)`` of the chunk metadata ``words`` (``size / align - 1`` above a
    4-bit log2 of the value count; the last chunk holds the rest of ``num_items``)."""
    n = len(words)
    pos = np.empty(n, np.int64)
    sizes = np.empty(n, np.int64)
    items = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
    at = np.int64(data_pos)
    seen = np.int64(0)
    empty = 0
    status = 0
    for i in range(n):
        w = np.int64(words[i])
        size = ((w >> 4) + 1) * align
        log = w & 0xF
        count = np.int64(1) << log if log > 0 else np.int64(0)
        if i == n - 1:
            rest = num_items - seen
            if rest < 0 or (log > 0 and count != rest):
                status = CHUNK_COUNTS_DO_NOT_ADD_UP
            elif rest > max_values:
                status = CHUNK_TOO_LARGE
            count = rest
        pos[i] = at
        sizes[i] = size
        items[i] = count
        first[i] = seen
        if count == 0:
            empty += 1
        at += size
        seen += count
    return pos, sizes, items, first, int(at - data_pos), empty, status


def warm_up() -> None:
    """Compile (or load) the kernel for both word widths, writable and read-only."""
    for dtype in (np.uint16, np.uint32):
        warm(chunk_words, np.array([0x11, 0x20], dtype=dtype), 4, 0, 1 << 16, 8, readonly=(0,))
