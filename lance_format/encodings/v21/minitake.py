"""Decoding only some values of a batch of mini-block chunks (takes).

A take needs a handful of values from each chunk it touches, yet :func:`decode_mini` decodes every
value of every chunk (a FastLanes block is 1024 values). For the value compressions Lance uses by
default - flat, inline bit-packing, variable-width and FSST over it, fixed-size lists of those -
the wanted values can be addressed directly: a bit-packed value's word and shift follow from its
position, a string's bytes from its two offsets. Anything else returns ``None`` and the caller
decodes whole chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

import numpy as np
import numpy.typing as npt

from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import Bufs, gather, read_uint
from lance_format.encodings.v21._fsst import fsst_decompress
from lance_format.encodings.v21._kernels import FL_BLOCK, fastlanes_slot, uint_dtype
from lance_format.encodings.v21.values import Fixed, Fsl, Values, VarBin

__all__ = ["decode_mini_take", "levels_take", "one_level", "one_value"]

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
# The low ``w`` bits set, for every bit width 0..64.
_MASKS = np.array([(1 << w) - 1 for w in range(65)], dtype=np.uint64)


def decode_mini_take(
    ce: m.CompressiveEncoding, bufs: Sequence[Bufs], counts: I64, chunk: I64, local: I64
) -> Values | None:
    """Values ``local[j]`` of chunk ``chunk[j]`` for every ``j``, or None when not addressable.

    Parameters
    ----------
    ce:
        The layout's ``value_compression``.
    bufs:
        One :class:`Bufs` per value buffer, one entry per chunk of the batch.
    counts:
        Values in each chunk of the batch.
    chunk, local:
        Which values: a chunk of the batch and a position inside it.

    Raises
    ------
    ValueError
        A wanted value lies outside its chunk or buffer (corrupt data).
    """
    if len(chunk) and (int(local.min()) < 0 or bool((local >= counts[chunk]).any())):
        raise ValueError("wanted value outside its chunk")
    if isinstance(ce, m.Flat):
        if ce.data is not None and ce.data.scheme is not None:
            return None
        return _flat(bufs[0], ce.bits_per_value, chunk, local)
    if isinstance(ce, m.InlineBitpacking):
        if ce.values is not None and ce.values.scheme is not None:
            return None
        return _inline_bitpacked(bufs[0], ce.uncompressed_bits_per_value, chunk, local)
    if isinstance(ce, m.Variable):
        if (ce.values is not None and ce.values.scheme is not None) or not isinstance(ce.offsets, m.Flat):
            return None
        return _variable(bufs[0], ce.offsets.bits_per_value, chunk, local)
    if isinstance(ce, m.Fsst):
        inner = decode_mini_take(ce.values, bufs, counts, chunk, local)
        if not isinstance(inner, VarBin):
            return None
        offsets, data = fsst_decompress(ce.symbol_table, inner.offsets, inner.data)
        return VarBin(offsets, data)
    if isinstance(ce, m.FixedSizeList) and not ce.has_validity:
        dim = ce.items_per_value
        items = (local[:, None] * dim + np.arange(dim, dtype=np.int64)[None, :]).reshape(-1)
        child = decode_mini_take(ce.values, bufs, counts * dim, np.repeat(chunk, dim), items)
        return None if child is None else Fsl(dim, None, child, len(chunk))
    return None


def _flat(bufs: Bufs, bits: int, chunk: I64, local: I64) -> Fixed | None:
    if bits % 8 or bits == 0:
        return None  # booleans: the full decoder handles bit positions
    width = bits // 8
    if bool((bufs.sizes[chunk] < (local + 1) * width).any()):
        raise ValueError("flat buffer is smaller than its values")
    return Fixed(
        gather(bufs.blob, bufs.starts[chunk] + local * width, np.full(len(chunk), width)), bits, len(chunk)
    )


def _inline_bitpacked(bufs: Bufs, t: int, chunk: I64, local: I64) -> Fixed:
    """Single values out of FastLanes blocks led by their bit width (one block per buffer)."""
    if t not in (8, 16, 32, 64):
        raise ValueError(f"bad bit-packing word size {t}")
    if bool((local >= FL_BLOCK).any()):
        raise ValueError("inline bit-packed buffer of more than 1024 values")
    dt = uint_dtype(t)
    wbytes = t // 8
    start = bufs.starts[chunk]
    width = read_uint(bufs.blob, start, wbytes).astype(np.int64)
    if len(width) and int(width.max()) > t:
        raise ValueError("bit width larger than the value width")
    if bool((bufs.sizes[chunk] < wbytes + FL_BLOCK // 8 * width).any()):
        raise ValueError("bit-packed buffer is smaller than its block")
    val = _fastlanes_values(bufs.blob, start + wbytes, width, t, local)
    return Fixed(val.astype(dt).view(np.uint8), t, len(chunk))


def _fastlanes_values(
    blob: npt.NDArray[np.uint8], block: I64, width: I64, t: int, local: I64
) -> npt.NDArray[np.uint64]:
    """Value ``local`` (0..1023) of the FastLanes block of ``t``-bit words at byte ``block``.

    Row ``r`` of a lane starts at bit ``r * width`` of that lane's words; a value may spill into
    the lane's next word. A zero-width block has no words (its values are 0).
    """
    wbytes = t // 8
    lanes = FL_BLOCK // t
    slot = fastlanes_slot(t)[local]
    bit = (slot // lanes) * width
    shift = bit % t
    pos = np.where(width > 0, block + ((bit // t) * lanes + slot % lanes) * wbytes, 0)
    val = read_uint(blob, pos, wbytes) >> shift.astype(np.uint64)
    spill = shift + width > t
    if spill.any():
        hi = read_uint(blob, pos[spill] + lanes * wbytes, wbytes)
        val[spill] |= hi << (t - shift[spill]).astype(np.uint64)
    return val & _MASKS[width]


def _flat_levels(ce: m.CompressiveEncoding) -> TypeGuard[m.Flat]:
    """Levels stored as plain 8- or 16-bit integers, addressable by position."""
    return (
        isinstance(ce, m.Flat)
        and ce.bits_per_value in (8, 16)
        and (ce.data is None or ce.data.scheme is None)
    )


def _bitpack_widths(ce: m.CompressiveEncoding) -> tuple[int, int, int, int] | None:
    """Unpacked bits, packed bits, bytes per unpacked value and bytes per FastLanes block."""
    if not isinstance(ce, m.OutOfLineBitpacking) or not isinstance(ce.values, m.Flat):
        return None
    t, w = ce.uncompressed_bits_per_value, ce.values.bits_per_value
    if t not in (8, 16, 32, 64) or not 0 <= w <= t:
        raise ValueError("bad out-of-line bit-packing widths")
    return t, w, t // 8, FL_BLOCK * w // 8


def levels_take(
    ce: m.CompressiveEncoding, bufs: Bufs, counts: I64, chunk: I64, local: I64
) -> npt.NDArray[np.uint16] | None:
    """Levels ``local[j]`` of level buffer ``chunk[j]``, or None when not addressable.

    Handles out-of-line bit-packing (one bit width for the buffer: whole FastLanes blocks, then a
    tail packed as a block or, when smaller, stored raw) and flat levels.
    """
    if _flat_levels(ce):
        got = _flat(bufs, ce.bits_per_value, chunk, local)
        assert got is not None
        return np.ascontiguousarray(got.data).view(f"<u{ce.bits_per_value // 8}").astype(np.uint16)
    widths = _bitpack_widths(ce)
    if widths is None:
        return None
    t, w, wbytes, block_bytes = widths
    n = counts[chunk]
    full, tail = n // FL_BLOCK, n % FL_BLOCK
    size = bufs.sizes[chunk]
    raw_tail = (tail > 0) & (size == full * block_bytes + tail * wbytes)
    nblocks = full + ((tail > 0) & ~raw_tail)
    if bool((size < nblocks * block_bytes + np.where(raw_tail, tail * wbytes, 0)).any()):
        raise ValueError("bit-packed buffer is smaller than its values")
    start = bufs.starts[chunk]
    blk = local // FL_BLOCK
    in_raw = raw_tail & (blk == full)
    width = np.full(len(chunk), w, dtype=np.int64)
    # Raw tail values are plain words; point at them as a block's first row with the full width.
    block = np.where(in_raw, 0, start + blk * block_bytes)
    out = np.zeros(len(chunk), dtype=np.uint64)
    packed = ~in_raw
    if packed.any():
        out[packed] = _fastlanes_values(bufs.blob, block[packed], width[packed], t, local[packed] % FL_BLOCK)
    if in_raw.any():
        at = start[in_raw] + full[in_raw] * block_bytes + (local[in_raw] % FL_BLOCK) * wbytes
        out[in_raw] = read_uint(bufs.blob, at, wbytes)
    return out.astype(np.uint16)


def _variable(bufs: Bufs, offset_bits: int, chunk: I64, local: I64) -> VarBin:
    """Strings out of chunks holding ``n + 1`` chunk-relative offsets, then the bytes."""
    if offset_bits not in (32, 64):
        raise ValueError(f"bad offset width {offset_bits}")
    ob = offset_bits // 8
    start = bufs.starts[chunk]
    if bool((bufs.sizes[chunk] < (local + 2) * ob).any()):
        raise ValueError("variable-width offsets outside their buffer")
    at = start + local * ob
    lo = read_uint(bufs.blob, at, ob).astype(np.int64)
    hi = read_uint(bufs.blob, at + ob, ob).astype(np.int64)
    if bool((hi < lo).any()) or bool((hi > bufs.sizes[chunk]).any()):
        raise ValueError("variable-width offsets out of order")
    lengths = hi - lo
    offsets = np.zeros(len(chunk) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return VarBin(offsets, np.ascontiguousarray(gather(bufs.blob, start + lo, lengths)))


# -- one value --------------------------------------------------------------------------------
# A one-row take reads one value of one chunk. Addressing it with Python integers costs a few
# microseconds where the batch path above spends ~100 us in small numpy calls.


# fastlanes_slot as Python lists, for scalar lookups.
_SLOT_LISTS: dict[int, list[int]] = {}


def _uint(blob: U8, pos: int, width: int) -> int:
    if pos < 0 or pos + width > len(blob):
        raise ValueError("integer read outside the data read")
    return int.from_bytes(blob[pos : pos + width].tobytes(), "little")


def _fastlanes_one(blob: U8, block: int, width: int, t: int, i: int) -> int:
    """Value ``i`` of the FastLanes block of ``t``-bit words at byte ``block`` (see above)."""
    if width == 0:
        return 0
    lanes = FL_BLOCK // t
    wbytes = t // 8
    slots = _SLOT_LISTS.get(t)
    if slots is None:
        slots = _SLOT_LISTS[t] = fastlanes_slot(t).tolist()
    row, lane = divmod(slots[i], lanes)
    word, shift = divmod(row * width, t)
    pos = block + (word * lanes + lane) * wbytes
    val = _uint(blob, pos, wbytes) >> shift
    if shift + width > t:
        val |= _uint(blob, pos + lanes * wbytes, wbytes) << (t - shift)
    return val & ((1 << width) - 1)


def one_value(ce: m.CompressiveEncoding, blob: U8, bufs: list[tuple[int, int]], i: int) -> Values | None:
    """Value ``i`` of one mini-block chunk whose value buffers are ``(start, size)`` in ``blob``.

    None when the compression is not one :func:`decode_mini_take` addresses.

    Raises
    ------
    ValueError
        The value lies outside its buffer (corrupt data).
    """
    if isinstance(ce, m.Flat):
        bits = ce.bits_per_value
        if (ce.data is not None and ce.data.scheme is not None) or bits % 8 or not bits:
            return None
        w = bits // 8
        start, size = bufs[0]
        if (i + 1) * w > size:
            raise ValueError("flat buffer is smaller than its values")
        return Fixed(blob[start + i * w : start + (i + 1) * w].copy(), bits, 1)
    if isinstance(ce, m.InlineBitpacking):
        t = ce.uncompressed_bits_per_value
        if (ce.values is not None and ce.values.scheme is not None) or t not in (8, 16, 32, 64):
            return None
        if i >= FL_BLOCK:
            raise ValueError("inline bit-packed buffer of more than 1024 values")
        start, size = bufs[0]
        width = _uint(blob, start, t // 8)
        if width > t or size < t // 8 + FL_BLOCK // 8 * width:
            raise ValueError("bit-packed buffer is smaller than its block")
        val = _fastlanes_one(blob, start + t // 8, width, t, i)
        return Fixed(np.frombuffer(val.to_bytes(t // 8, "little"), dtype=np.uint8), t, 1)
    if isinstance(ce, m.Variable):
        if (ce.values is not None and ce.values.scheme is not None) or not isinstance(ce.offsets, m.Flat):
            return None
        ob = ce.offsets.bits_per_value // 8
        if ob not in (4, 8):
            raise ValueError(f"bad offset width {ob * 8}")
        start, size = bufs[0]
        if (i + 2) * ob > size:
            raise ValueError("variable-width offsets outside their buffer")
        lo = _uint(blob, start + i * ob, ob)
        hi = _uint(blob, start + (i + 1) * ob, ob)
        if not lo <= hi <= size:
            raise ValueError("variable-width offsets out of order")
        offsets = np.array([0, hi - lo], dtype=np.int64)
        return VarBin(offsets, blob[start + lo : start + hi].copy())
    if isinstance(ce, m.Fsst):
        inner = one_value(ce.values, blob, bufs, i)
        if not isinstance(inner, VarBin):
            return None
        offsets, data = fsst_decompress(ce.symbol_table, inner.offsets, inner.data)
        return VarBin(offsets, data)
    if isinstance(ce, m.FixedSizeList) and not ce.has_validity and isinstance(ce.values, m.Flat):
        dim = ce.items_per_value
        flat = ce.values
        if (flat.data is not None and flat.data.scheme is not None) or flat.bits_per_value % 8 or dim == 0:
            return None
        w = flat.bits_per_value // 8 * dim
        start, size = bufs[0]
        if (i + 1) * w > size:
            raise ValueError("flat buffer is smaller than its values")
        items = Fixed(blob[start + i * w : start + (i + 1) * w].copy(), flat.bits_per_value, dim)
        return Fsl(dim, None, items, 1)
    return None


def one_level(ce: m.CompressiveEncoding, blob: U8, start: int, size: int, count: int, i: int) -> int | None:
    """Level ``i`` of one chunk's level buffer of ``count`` levels, or None when not addressable."""
    if _flat_levels(ce):
        nb = ce.bits_per_value // 8
        if (i + 1) * nb > size:
            raise ValueError("level buffer is smaller than its levels")
        return _uint(blob, start + i * nb, nb)
    widths = _bitpack_widths(ce)
    if widths is None:
        return None
    t, w, wbytes, block_bytes = widths
    full, tail = divmod(count, FL_BLOCK)
    raw_tail = tail > 0 and size == full * block_bytes + tail * wbytes
    nblocks = full + (tail > 0 and not raw_tail)
    if size < nblocks * block_bytes + (tail * wbytes if raw_tail else 0):
        raise ValueError("bit-packed buffer is smaller than its values")
    blk, k = divmod(i, FL_BLOCK)
    if raw_tail and blk == full:
        return _uint(blob, start + full * block_bytes + k * wbytes, wbytes)
    return _fastlanes_one(blob, start + blk * block_bytes, w, t, k)
