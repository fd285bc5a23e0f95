"""Test oracle, the numpy code before the compiled kernels.

Vectorized bit-level kernels shared by the 2.1 decoders (FastLanes unpacking, bitmaps).

The per-buffer codecs live in :mod:`lance_format.encodings.codecs`; these kernels work on *many*
blocks at once (one numpy pass over every selected mini-block chunk), which is what keeps the
mini-block path free of per-chunk Python work.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["FL_BLOCK", "fastlanes_slot", "fastlanes_unpack", "uint_dtype"]

#: Values per FastLanes block.
FL_BLOCK = 1024
_FL_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7], dtype=np.int64)
_UINT: dict[int, type[np.unsignedinteger[Any]]] = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_PLAN: dict[tuple[int, int], tuple[npt.NDArray[Any], ...]] = {}
_SLOT: dict[int, npt.NDArray[np.int64]] = {}


def uint_dtype(bits: int) -> np.dtype[np.unsignedinteger[Any]]:
    """Unsigned integer dtype of ``bits`` (8, 16, 32 or 64) bits."""
    return np.dtype(_UINT[bits])


def _plan(width: int, t: int) -> tuple[npt.NDArray[Any], ...]:
    """Word index, bit shift and spill of every (row, lane) of a block, plus the output order."""
    key = (width, t)
    plan = _PLAN.get(key)
    if plan is None:
        lanes = FL_BLOCK // t
        rows = np.arange(t, dtype=np.int64)
        start = rows * width
        word = start // t
        shift = start % t
        spill = (shift + width > t) & (width > 0)
        # Output position of (row, lane): FastLanes' transposed order.
        order = (
            _FL_ORDER[rows // 8][:, None] * 16 + (rows % 8)[:, None] * 128 + np.arange(lanes)[None, :]
        ).ravel()
        dt = _UINT[t]
        # Everything a call needs beyond the words, in the unpacked dtype, so calls only index.
        nxt = np.minimum(word + 1, max(width - 1, 0))
        hi_shift = np.where(spill, t - shift, 0).astype(dt)
        plan = (word, shift, spill.astype(np.int64), order, shift.astype(dt), nxt, hi_shift, ~spill)
        _PLAN[key] = plan
    return plan


def fastlanes_slot(t: int) -> npt.NDArray[np.int64]:
    """For each logical position of a block of ``t``-bit values, its ``row * lanes + lane`` slot.

    Row ``r`` of lane ``l`` starts at bit ``r * width`` of that lane's words (the inverse of the
    transposed output order :func:`fastlanes_unpack` applies).
    """
    slot = _SLOT.get(t)
    if slot is None:
        order = _plan(t, t)[3]
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
    words = packed.reshape(-1, width * lanes)
    nblocks = words.shape[0]
    if width == t:
        w3 = words.reshape(nblocks, t, lanes)
        out = np.empty((nblocks, FL_BLOCK), dtype=dt)
        out[:, _plan(width, t)[3]] = w3.reshape(nblocks, -1)
        return out
    word, _shift, _spill, order, shift, nxt, hi_shift, no_spill = _plan(width, t)
    w3 = words.reshape(nblocks, width, lanes)
    lo = w3[:, word, :] >> shift[None, :, None]
    if not no_spill.all():
        hi = w3[:, nxt, :] << hi_shift[None, :, None]
        hi[:, no_spill, :] = 0
        lo |= hi
    lo &= dt((1 << width) - 1)
    out = np.empty((nblocks, FL_BLOCK), dtype=dt)
    out[:, order] = lo.reshape(nblocks, -1)
    return out
