"""Vectorized bit-level kernels shared by the 2.1 decoders (FastLanes unpacking, bitmaps).

The per-buffer codecs live in :mod:`lance_format.encodings.codecs`; these kernels work on *many*
blocks at once (one numpy pass over every selected mini-block chunk), which is what keeps the
mini-block path free of per-chunk Python work.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.core.jit import kernel, warm

__all__ = ["FL_BLOCK", "fastlanes_order", "fastlanes_slot", "fastlanes_unpack", "uint_dtype", "warm_up"]

#: Values per FastLanes block.
FL_BLOCK = 1024
_FL_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7], dtype=np.int64)
_UINT: dict[int, type[np.unsignedinteger[Any]]] = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_ORDER: dict[int, npt.NDArray[np.int64]] = {}
_SLOT: dict[int, npt.NDArray[np.int64]] = {}


def uint_dtype(bits: int) -> np.dtype[np.unsignedinteger[Any]]:
    """Unsigned integer dtype of ``bits`` (8, 16, 32 or 64) bits."""
    return np.dtype(_UINT[bits])


def fastlanes_order(t: int) -> npt.NDArray[np.int64]:
    """Logical position of each ``row * lanes + lane`` slot of a block: FastLanes' transposed order."""
    order = _ORDER.get(t)
    if order is None:
        rows = np.arange(t, dtype=np.int64)
        lanes = FL_BLOCK // t
        order = (
            _FL_ORDER[rows // 8][:, None] * 16 + (rows % 8)[:, None] * 128 + np.arange(lanes)[None, :]
        ).ravel()
        _ORDER[t] = order
    return order


def fastlanes_slot(t: int) -> npt.NDArray[np.int64]:
    """For each logical position of a block of ``t``-bit values, its ``row * lanes + lane`` slot.

    Row ``r`` of lane ``l`` starts at bit ``r * width`` of that lane's words (the inverse of the
    transposed output order :func:`fastlanes_unpack` applies).
    """
    slot = _SLOT.get(t)
    if slot is None:
        order = fastlanes_order(t)
        slot = np.empty(FL_BLOCK, dtype=np.int64)
        slot[order] = np.arange(FL_BLOCK, dtype=np.int64)
        _SLOT[t] = slot
    return slot


def fastlanes_unpack(
    packed: npt.NDArray[np.unsignedinteger[Any]],
    width: int,
    t: int,
    nblocks: int | None = None,
) -> npt.NDArray[np.unsignedinteger[Any]]:
    """Unpack FastLanes blocks that share one bit width.

    Parameters
    ----------
    packed:
        ``(num_blocks, 1024 * width / t)`` words of ``t`` bits (any shape that reshapes to it).
    width:
        Packed bits per value (0..t).
    t:
        Width of the unpacked type (8, 16, 32 or 64).
    nblocks:
        Number of blocks; needed only when ``width`` is 0 (no packed words).

    Returns
    -------
    numpy.ndarray
        ``(num_blocks, 1024)`` unsigned values in logical order.
    """
    dt = _UINT[t]
    lanes = FL_BLOCK // t
    if width == 0:
        if nblocks is None:
            raise ValueError("zero-width blocks need an explicit block count")
        return np.zeros((nblocks, FL_BLOCK), dtype=dt)
    words = np.ascontiguousarray(packed.reshape(-1, width * lanes))
    out = np.empty((words.shape[0], FL_BLOCK), dtype=dt)
    _unpack(words.reshape(-1), width, t, fastlanes_order(t), out)
    return out


@kernel
def _unpack(
    words: npt.NDArray[Any], width: int, t: int, order: npt.NDArray[np.int64], out: npt.NDArray[Any]
) -> None:  # pragma: no cover
    """Row ``r`` of lane ``l`` of each block: bits ``r * width ..`` of that lane's words, to its
    logical position ``order[r * lanes + l]``."""
    lanes = FL_BLOCK // t
    per = width * lanes
    mask = ~np.uint64(0) >> np.uint64(64 - width)
    for b in range(out.shape[0]):
        base = b * per
        for r in range(t):
            start = r * width
            word = start // t
            shift = np.uint64(start % t)
            spill = start % t + width > t
            hi = np.uint64(t) - shift
            src = base + word * lanes
            dst = order[r * lanes : (r + 1) * lanes]
            for lane in range(lanes):
                v = np.uint64(words[src + lane]) >> shift
                if spill:
                    v |= np.uint64(words[src + lanes + lane]) << hi
                out[b, dst[lane]] = v & mask


def warm_up() -> None:
    """Compile (or load) the unpacking kernel for every unsigned width the readers use."""
    for t in (8, 16, 32, 64):
        dt = _UINT[t]
        warm(fastlanes_unpack, np.zeros(FL_BLOCK * 3 // t, dtype=dt), 3, t, readonly=(0,))
