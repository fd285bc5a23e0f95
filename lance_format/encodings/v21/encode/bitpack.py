"""FastLanes bit-packing (the inverse of :func:`lance_format.encodings.v21.fastlanes.fastlanes_unpack`).

A block is 1024 values of a ``t``-bit type seen as ``t`` rows of ``1024 / t`` lanes; row ``r`` of a
lane occupies bits ``r * w .. r * w + w`` of that lane's ``w`` words. Packing ORs the values in
place in a compiled kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.core.jit import kernel, warm
from lance_format.encodings.v21.fastlanes import FL_BLOCK, fastlanes_order, uint_dtype

__all__ = ["bit_widths", "pack_blocks", "warm_up"]

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
    out = np.zeros((n, width * lanes), dtype=dt)
    _pack(np.ascontiguousarray(blocks), width, t, fastlanes_order(t), out)
    return out


@kernel
def _pack(
    blocks: UInts, width: int, t: int, order: npt.NDArray[np.int64], out: UInts
) -> None:  # pragma: no cover
    """Row ``r`` of lane ``l`` (the value at ``order[r * lanes + l]``) goes to bits ``r * width ..``
    of that lane's words, spilling into the next word."""
    lanes = FL_BLOCK // t
    mask = ~np.uint64(0) >> np.uint64(64 - width)
    for b in range(blocks.shape[0]):
        for r in range(t):
            start = r * width
            col = (start // t) * lanes
            shift = np.uint64(start % t)
            spill = start % t + width > t
            hi = np.uint64(t) - shift
            src = order[r * lanes : (r + 1) * lanes]
            for lane in range(lanes):
                v = np.uint64(blocks[b, src[lane]]) & mask
                out[b, col + lane] |= v << shift
                if spill:
                    out[b, col + lanes + lane] |= v >> hi


def as_unsigned(values: npt.NDArray[Any], t: int) -> UInts:
    """``values`` reinterpreted as ``t``-bit unsigned integers."""
    return np.ascontiguousarray(values).view(uint_dtype(t))


def warm_up() -> None:
    """Compile (or load) the packing kernel for every unsigned width the writers use."""
    for t in (8, 16, 32, 64):
        warm(pack_blocks, np.zeros((1, FL_BLOCK), dtype=uint_dtype(t)), 3, readonly=(0,))
