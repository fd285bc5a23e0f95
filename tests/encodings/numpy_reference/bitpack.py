"""Test oracle, the numpy code before the compiled kernels.

FastLanes bit-packing (the inverse of :func:`lance_format.encodings.v21.fastlanes.fastlanes_unpack`).

A block is 1024 values of a ``t``-bit type seen as ``t`` rows of ``1024 / t`` lanes; row ``r`` of a
lane occupies bits ``r * w .. r * w + w`` of that lane's ``w`` words. Packing loops over the ``t``
rows (at most 64), each step vectorized over every block and lane, never over values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from tests.encodings.numpy_reference.fastlanes import FL_BLOCK, fastlanes_slot, uint_dtype

__all__ = ["bit_widths", "pack_blocks"]

UInts = npt.NDArray[np.unsignedinteger[Any]]


def bit_widths(blocks: UInts) -> npt.NDArray[np.int64]:
    """Bits needed by the largest value of each row of ``blocks`` (0 for all zeros)."""
    mx = blocks.max(axis=1).astype(np.uint64) if blocks.size else np.zeros(len(blocks), np.uint64)
    out = np.zeros(len(mx), dtype=np.int64)
    nz = mx > 0
    # float64 log2 is exact enough below 2**53; the correction step below fixes the rest.
    w = np.floor(np.log2(mx[nz].astype(np.float64))).astype(np.int64) + 1
    w = np.minimum(w, 64)
    too_small = (w < 64) & (mx[nz] >> np.minimum(w, 63).astype(np.uint64) > 0)
    w[too_small] += 1
    out[nz] = w
    return out


def pack_blocks(blocks: UInts, width: int) -> UInts:
    """Pack ``(n, 1024)`` values of one unsigned type with one bit ``width``.

    Returns
    -------
    numpy.ndarray
        ``(n, 1024 * width / t)`` words of the values' type.
    """
    dt = blocks.dtype
    t = dt.itemsize * 8
    lanes = FL_BLOCK // t
    n = blocks.shape[0]
    if width == 0:
        return np.zeros((n, 0), dtype=dt)
    # grid[b, r, l]: the value stored at row r of lane l.
    grid = _rows(blocks, t)
    if width == t:
        return grid.reshape(n, -1).copy()
    mask = dt.type((1 << width) - 1)
    out = np.zeros((n, width, lanes), dtype=dt)
    for r in range(t):
        start = r * width
        word, shift = divmod(start, t)
        v = grid[:, r, :] & mask
        out[:, word, :] |= v << dt.type(shift)
        if shift + width > t:
            out[:, word + 1, :] |= v >> dt.type(t - shift)
    return out.reshape(n, -1)


def _rows(blocks: UInts, t: int) -> UInts:
    """``(n, t, lanes)``: the value at each (row, lane) slot of every block."""
    slot = fastlanes_slot(t)  # slot[logical] = row * lanes + lane
    grid = np.empty_like(blocks)
    grid[:, slot] = blocks
    return grid.reshape(blocks.shape[0], t, FL_BLOCK // t)


def as_unsigned(values: npt.NDArray[Any], t: int) -> UInts:
    """``values`` reinterpreted as ``t``-bit unsigned integers."""
    return np.ascontiguousarray(values).view(uint_dtype(t))
