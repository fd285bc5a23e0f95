"""Test oracle, the numpy code before the compiled kernels.

One list layer of the level walk: entries expand into one per list item (numpy passes over the
entries), as :func:`lance_format.encodings.v21.encode._levels.expand_lists` does in one pass.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["expand_lists"]

I64 = npt.NDArray[np.int64]


def expand_lists(
    slots: I64, null_at: I64, kind: I64, starts: I64, offsets: I64, valid: npt.NDArray[np.bool_], depth: int
) -> tuple[I64, I64, I64, I64, bool, bool]:
    live = (slots >= 0) & (null_at < 0)
    li = slots[live]
    lengths = np.zeros(len(slots), dtype=np.int64)
    lengths[live] = offsets[li + 1] - offsets[li]
    begin = np.zeros(len(slots), dtype=np.int64)
    begin[live] = offsets[li]
    is_null = np.zeros(len(slots), dtype=bool)
    is_null[live] = ~valid[li]
    lengths[is_null] = 0
    is_empty = live & ~is_null & (lengths == 0)
    count = np.where(lengths > 0, lengths, 1)
    total = int(count.sum())
    parent = np.repeat(np.arange(len(slots), dtype=np.int64), count)
    first = np.cumsum(count) - count
    pos_in = np.arange(total, dtype=np.int64) - first[parent]
    new_slots = np.where(lengths[parent] > 0, begin[parent] + pos_in, -1)
    new_null_at = null_at[parent].copy()
    new_kind = kind[parent].copy()
    here = (is_null | is_empty)[parent]
    new_null_at[here] = depth
    new_kind[here] = is_empty[parent][here].astype(np.int64)
    new_starts = np.where(pos_in == 0, starts[parent], depth)
    return new_slots, new_null_at, new_kind, new_starts, bool(is_null.any()), bool(is_empty.any())
