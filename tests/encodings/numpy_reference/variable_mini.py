"""Test oracle, the numpy code before the compiled kernel.

Variable-width mini-block chunks (``n + 1`` offsets relative to the chunk, then the bytes), a batch
decoded with numpy: gather every offset, diff, drop the chunk boundaries, gather the bytes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.encodings.v21._bytes import Bufs
from tests.encodings.numpy_reference.gather import gather, read_uint

__all__ = ["variable_chunks"]

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]


def variable_chunks(bufs: Bufs, offset_bits: int, counts: I64) -> tuple[I64, U8]:
    """``(offsets, data)`` of the chunks' values, concatenated (offsets from 0)."""
    if offset_bits not in (32, 64):
        raise ValueError(f"bad offset width {offset_bits}")
    ob = offset_bits // 8
    nofs = counts + 1
    ids = np.repeat(np.arange(len(nofs), dtype=np.int64), nofs)
    local = np.arange(len(ids), dtype=np.int64) - (np.cumsum(nofs) - nofs)[ids]
    offs = read_uint(bufs.blob, bufs.starts[ids] + local * ob, ob).astype(np.int64)
    last = np.cumsum(nofs) - 1
    first = last - counts
    lengths_all = np.diff(offs)
    boundary = np.zeros(len(lengths_all), dtype=bool)
    boundary[last[:-1]] = True
    lengths = lengths_all[~boundary]
    start_rel = offs[first]
    nbytes = offs[last] - start_rel
    if bool((lengths < 0).any()) or bool((start_rel < 0).any()) or bool((offs[last] > bufs.sizes).any()):
        raise ValueError("variable-width offsets out of order")
    data = gather(bufs.blob, bufs.starts + start_rel, nbytes)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets, np.ascontiguousarray(data)
