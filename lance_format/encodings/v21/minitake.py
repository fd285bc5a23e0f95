"""Decoding only some values of a batch of mini-block chunks (takes).

A take needs a handful of values from each chunk it touches, yet :func:`decode_mini` decodes every
value of every chunk (a FastLanes block is 1024 values). For the value compressions Lance uses by
default - flat, inline bit-packing, variable-width and FSST over it, fixed-size lists of those -
the wanted values can be addressed directly: a bit-packed value's word and shift follow from its
position, a string's bytes from its two offsets. These are the kernels; which encoding uses which
is said by its codec (:mod:`.codecs`), and anything a codec cannot address returns ``None`` there so
the caller decodes whole chunks.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.encodings.v21._bytes import Bufs, gather, read_uint
from lance_format.encodings.v21.fastlanes import FL_BLOCK, fastlanes_slot, uint_dtype
from lance_format.encodings.v21.values import Fixed, Fsl, VarBin

__all__ = [
    "bitpack_widths",
    "check_local",
    "one_flat",
    "one_fsl_flat",
    "one_inline_bitpacked",
    "one_level_bitpacked",
    "one_level_flat",
    "one_variable",
    "take_flat",
    "take_flat_levels",
    "take_inline_bitpacked",
    "take_levels_bitpacked",
    "take_variable",
]

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
# The low ``w`` bits set, for every bit width 0..64.
_MASKS = np.array([(1 << w) - 1 for w in range(65)], dtype=np.uint64)


def check_local(counts: I64, chunk: I64, local: I64) -> None:
    """Raise ValueError when a wanted value ``local[j]`` lies outside its chunk ``chunk[j]``."""
    if len(chunk) and (int(local.min()) < 0 or bool((local >= counts[chunk]).any())):
        raise ValueError("wanted value outside its chunk")


def take_flat(bufs: Bufs, bits: int, chunk: I64, local: I64) -> Fixed | None:
    """Values of ``bits`` bits each (whole bytes; None for booleans) out of flat buffers."""
    if bits % 8 or bits == 0:
        return None  # booleans: the full decoder handles bit positions
    width = bits // 8
    if bool((bufs.sizes[chunk] < (local + 1) * width).any()):
        raise ValueError("flat buffer is smaller than its values")
    return Fixed(
        gather(bufs.blob, bufs.starts[chunk] + local * width, np.full(len(chunk), width)), bits, len(chunk)
    )


def take_inline_bitpacked(bufs: Bufs, t: int, chunk: I64, local: I64) -> Fixed:
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


def bitpack_widths(t: int, w: int) -> tuple[int, int, int, int]:
    """Unpacked bits, packed bits, bytes per unpacked value and bytes per FastLanes block."""
    if t not in (8, 16, 32, 64) or not 0 <= w <= t:
        raise ValueError("bad out-of-line bit-packing widths")
    return t, w, t // 8, FL_BLOCK * w // 8


def take_flat_levels(bufs: Bufs, bits: int, chunk: I64, local: I64) -> npt.NDArray[np.uint16]:
    """Levels stored as plain 8- or 16-bit integers, addressed by position."""
    got = take_flat(bufs, bits, chunk, local)
    assert got is not None
    return np.ascontiguousarray(got.data).view(f"<u{bits // 8}").astype(np.uint16)


def take_levels_bitpacked(
    bufs: Bufs, counts: I64, chunk: I64, local: I64, t: int, w: int
) -> npt.NDArray[np.uint16]:
    """Levels ``local[j]`` of out-of-line bit-packed level buffer ``chunk[j]``.

    One bit width for the buffer: whole FastLanes blocks, then a tail packed as a block or, when
    smaller, stored raw.
    """
    t, w, wbytes, block_bytes = bitpack_widths(t, w)
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


def take_variable(bufs: Bufs, offset_bits: int, chunk: I64, local: I64) -> VarBin:
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


def one_flat(blob: U8, buf: tuple[int, int], bits: int, i: int) -> Fixed:
    """Flat value ``i`` (whole bytes) of the buffer ``(start, size)``."""
    w = bits // 8
    start, size = buf
    if (i + 1) * w > size:
        raise ValueError("flat buffer is smaller than its values")
    return Fixed(blob[start + i * w : start + (i + 1) * w].copy(), bits, 1)


def one_inline_bitpacked(blob: U8, buf: tuple[int, int], t: int, i: int) -> Fixed:
    """Value ``i`` of one FastLanes block of ``t``-bit words led by its bit width."""
    if i >= FL_BLOCK:
        raise ValueError("inline bit-packed buffer of more than 1024 values")
    start, size = buf
    width = _uint(blob, start, t // 8)
    if width > t or size < t // 8 + FL_BLOCK // 8 * width:
        raise ValueError("bit-packed buffer is smaller than its block")
    val = _fastlanes_one(blob, start + t // 8, width, t, i)
    return Fixed(np.frombuffer(val.to_bytes(t // 8, "little"), dtype=np.uint8), t, 1)


def one_variable(blob: U8, buf: tuple[int, int], offset_bits: int, i: int) -> VarBin:
    """String ``i`` of a buffer of ``n + 1`` chunk-relative offsets followed by the bytes."""
    ob = offset_bits // 8
    if ob not in (4, 8):
        raise ValueError(f"bad offset width {ob * 8}")
    start, size = buf
    if (i + 2) * ob > size:
        raise ValueError("variable-width offsets outside their buffer")
    lo = _uint(blob, start + i * ob, ob)
    hi = _uint(blob, start + (i + 1) * ob, ob)
    if not lo <= hi <= size:
        raise ValueError("variable-width offsets out of order")
    offsets = np.array([0, hi - lo], dtype=np.int64)
    return VarBin(offsets, blob[start + lo : start + hi].copy())


def one_fsl_flat(blob: U8, buf: tuple[int, int], bits: int, dim: int, i: int) -> Fsl:
    """List ``i`` of ``dim`` flat items of ``bits`` bits (whole bytes), without validity."""
    w = bits // 8 * dim
    start, size = buf
    if (i + 1) * w > size:
        raise ValueError("flat buffer is smaller than its values")
    items = Fixed(blob[start + i * w : start + (i + 1) * w].copy(), bits, dim)
    return Fsl(dim, None, items, 1)


def one_level_flat(blob: U8, start: int, size: int, bits: int, i: int) -> int:
    """Level ``i`` of a buffer of plain 8- or 16-bit levels."""
    nb = bits // 8
    if (i + 1) * nb > size:
        raise ValueError("level buffer is smaller than its levels")
    return _uint(blob, start + i * nb, nb)


def one_level_bitpacked(blob: U8, start: int, size: int, count: int, i: int, t: int, w: int) -> int:
    """Level ``i`` of an out-of-line bit-packed buffer of ``count`` levels."""
    t, w, wbytes, block_bytes = bitpack_widths(t, w)
    full, tail = divmod(count, FL_BLOCK)
    raw_tail = tail > 0 and size == full * block_bytes + tail * wbytes
    nblocks = full + (tail > 0 and not raw_tail)
    if size < nblocks * block_bytes + (tail * wbytes if raw_tail else 0):
        raise ValueError("bit-packed buffer is smaller than its values")
    blk, k = divmod(i, FL_BLOCK)
    if raw_tail and blk == full:
        return _uint(blob, start + full * block_bytes + k * wbytes, wbytes)
    return _fastlanes_one(blob, start + blk * block_bytes, w, t, k)
