"""Vectorized bit-level kernels shared by the 2.1 decoders (FastLanes unpacking, bitmaps).

The per-buffer codecs live in :mod:`lance_format.encodings.codecs`; these kernels work on *many*
blocks at once (one numpy pass over every selected mini-block chunk), which is what keeps the
mini-block path free of per-chunk Python work.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.core.buffers import empty
from lance_format.core.jit import kernel, warm

__all__ = [
    "FL_BLOCK",
    "fastlanes_order",
    "fastlanes_slot",
    "fastlanes_unpack",
    "uint_dtype",
    "unpack_inline_blocks",
    "warm_up",
]

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


def unpack_inline_blocks(
    blob: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.int64],
    widths: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    t: int,
) -> npt.NDArray[np.unsignedinteger[Any]] | None:
    """The first ``counts[k]`` values of FastLanes block ``k`` (its words at byte ``starts[k]`` of
    ``blob``, ``widths[k]`` bits each), concatenated: one compiled pass straight from the chunks,
    any mix of widths, no gather of the packed words and no padded grid.

    None when the words are not aligned to ``t`` bits in memory (the caller then gathers them).

    Raises
    ------
    ValueError
        A block reaching past ``blob``, a width above ``t`` or a count above a block.
    """
    wbytes = t // 8
    base = blob.ctypes.data if len(blob) else 0
    if base % wbytes or bool((starts % wbytes).any()):
        return None
    lanes = FL_BLOCK // t
    if len(widths) and (int(widths.min()) < 0 or int(widths.max()) > t):
        raise ValueError("bit width larger than the value width")
    if len(counts) and (int(counts.min()) < 0 or int(counts.max()) > FL_BLOCK):
        raise ValueError("a FastLanes block holds at most 1024 values")
    first = starts // wbytes
    words = blob[: len(blob) - len(blob) % wbytes].view(_UINT[t])
    if len(first) and int((first + widths * lanes).max()) > len(words):
        raise ValueError("bit-packed block outside the data read")
    out = empty(int(counts.sum()), _UINT[t])
    _unpack_blocks(words, first, widths, counts, t, fastlanes_order(t), out)
    return out


@kernel
def _unpack_blocks(
    words: npt.NDArray[Any],
    first: npt.NDArray[np.int64],
    widths: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    t: int,
    order: npt.NDArray[np.int64],
    out: npt.NDArray[Any],
) -> None:  # pragma: no cover - compiled
    """Like :func:`_unpack`, one block at a time with its own width, writing only the values a
    block holds (its logical position below its count) straight to their place in ``out``."""
    lanes = FL_BLOCK // t
    pos = 0
    for b in range(widths.shape[0]):
        width = widths[b]
        n = counts[b]
        if width == 0:
            for i in range(n):
                out[pos + i] = 0
            pos += n
            continue
        mask = ~np.uint64(0) >> np.uint64(64 - width)
        base = first[b]
        for r in range(t):
            start = r * width
            shift = start % t
            spill = shift + width > t
            src = base + (start // t) * lanes
            for lane in range(lanes):
                at = order[r * lanes + lane]
                if at < n:
                    v = np.uint64(words[src + lane]) >> np.uint64(shift)
                    if spill:
                        v |= np.uint64(words[src + lanes + lane]) << np.uint64(t - shift)
                    out[pos + at] = v & mask
        pos += n


def warm_up() -> None:
    """Compile (or load) the unpacking kernel for every unsigned width the readers use."""
    for t in (8, 16, 32, 64):
        dt = _UINT[t]
        warm(fastlanes_unpack, np.zeros(FL_BLOCK * 3 // t, dtype=dt), 3, t, readonly=(0,))
        blob = np.zeros(8 + FL_BLOCK * 3 // 8, dtype=np.uint8)
        one = np.array([8], dtype=np.int64)
        warm(
            unpack_inline_blocks,
            blob,
            one,
            np.array([3], np.int64),
            np.array([5], np.int64),
            t,
            readonly=(0,),
        )
