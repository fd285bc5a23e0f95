"""Mini-block pages: values cut into chunks of a power-of-two count, each with its own levels.

Chunk layout (what :mod:`lance_format.encodings.v21.miniblock` reads): u16 level count, u16 rep
size, u16 def size (each only when levels of that kind exist), one size per value buffer (u16 in
2.1, u32 in 2.2), padding to 8, then rep, def and value buffers each padded to 8 with ``0xFE``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.encodings import buffer_compression
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21.encode._chunks import (
    Stream,
    assemble_chunks,
    bitpack_chunks,
    bitpack_page,
    flat_page,
    pack_level_chunks,
    variable_chunks,
)
from lance_format.encodings.v21.encode._levels import chunk_bounds, rep_index
from lance_format.encodings.v21.encode.values import FixedVals, PageBuffers, VarVals
from lance_format.encodings.v21.fastlanes import FL_BLOCK

__all__ = ["PageBuffers", "TooLarge", "dictionary_block", "encode_miniblock"]

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

#: Target bytes of values per chunk: pylance aims at about 8 KiB for fixed width so a chunk and its
#: levels stay far below the 32 KiB a 2.1 chunk may hold.
FIXED_CHUNK_BYTES = 8192
#: Variable-width chunks pack values until about 4 KiB (pylance's figure): small random reads.
VAR_CHUNK_BYTES = 4096
#: Most values in one chunk (the reader accepts any power of two; pylance writes up to 4096).
MAX_CHUNK_VALUES = 4096
#: A 2.1 chunk's size is a 12-bit count of 8-byte words.
MAX_CHUNK_BYTES_21 = 32 * 1024
_TOO_LARGE = {
    1: "too many levels in one chunk",
    2: "value buffer too large for a 2.1 chunk",
    3: "chunk larger than 32 KiB",
}


class TooLarge(Exception):
    """The data does not fit mini-block chunks (the caller then writes a full-zip page)."""


@dataclass
class _Chunked:
    counts: I64  # values per chunk
    buffers: list[Stream]  # per value buffer, its bytes for every chunk
    compression: m.CompressiveEncoding
    num_buffers: int


def _pow2(per: int) -> int:
    """Values per chunk: the largest power of two at most ``per`` (and the most a chunk holds)."""
    return max(1, min(MAX_CHUNK_VALUES, 1 << (max(1, per).bit_length() - 1)))


def _flat_per(v: FixedVals) -> int:
    """Values per chunk of a fixed-width page (booleans: chunks start on whole bytes)."""
    items = v.items
    if v.width == 0:
        per = _pow2((FIXED_CHUNK_BYTES * 8) // max(1, items))
        if v.n > per and per * items % 8:
            per = _pow2(max(8, (FIXED_CHUNK_BYTES * 8) // max(1, items)))
        return per
    return _pow2(FIXED_CHUNK_BYTES // (v.width * items))


def _pow2_counts(n: int, per: int) -> I64:
    per = _pow2(per)
    full, rest = divmod(n, per)
    counts = np.full(full + (1 if rest else 0), per, dtype=np.int64)
    if rest:
        counts[-1] = rest
    return counts


def _bitpacked(v: FixedVals) -> _Chunked:
    vals = v.data[: v.n * v.width].view(np.dtype(f"<u{v.width}"))
    nchunks = -(-v.n // FL_BLOCK)
    counts = np.full(nchunks, FL_BLOCK, dtype=np.int64)
    if nchunks:
        counts[-1] = v.n - FL_BLOCK * (nchunks - 1)
    return _Chunked(counts, [bitpack_chunks(vals)], m.InlineBitpacking(v.width * 8), 1)


def _bitmap_stream(bits: npt.NDArray[np.bool_], counts: I64, per_value: int) -> Stream:
    """Each chunk's ``count * per_value`` bits as a bitmap: chunks start on whole bytes (the
    callers make sure), so one bitmap of all bits cut at those bytes is every chunk's bitmap."""
    flat = np.packbits(bits[: int(counts.sum()) * per_value], bitorder="little")
    offs = np.zeros(len(counts) + 1, dtype=np.int64)
    offs[1:] = (np.cumsum(counts) * per_value + 7) // 8
    return flat, offs


def _flat(v: FixedVals) -> _Chunked:
    items = v.items
    if v.width == 0:
        counts = _pow2_counts(v.n, (FIXED_CHUNK_BYTES * 8) // max(1, items))
        if (counts[:-1] * items % 8).any():
            counts = _pow2_counts(v.n, max(8, (FIXED_CHUNK_BYTES * 8) // max(1, items)))
        if v.bitmap is not None:
            # Chunks start on whole bytes: the packed booleans are every chunk's bitmap already.
            offs = np.zeros(len(counts) + 1, dtype=np.int64)
            offs[1:] = (np.cumsum(counts) * items + 7) // 8
            # (Writable: the chunk assembly kernel is compiled for writable arrays.)
            values = (v.bitmap if v.bitmap.flags.writeable else v.bitmap.copy(), offs)
        else:
            values = _bitmap_stream(v.bits(), counts, items)
        inner: m.CompressiveEncoding = m.Flat(1)
    else:
        row = v.width * items
        counts = _pow2_counts(v.n, FIXED_CHUNK_BYTES // row)
        offs = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts * row, out=offs[1:])
        values = (v.data[: int(offs[-1])], offs)
        inner = m.Flat(v.width * 8)
    # One item bitmap per level with nulls (outermost first), before the values.
    streams: list[Stream] = []
    per = 1
    flags = []
    for d, valid in zip(v.dims, v.level_valid, strict=True):
        per *= d
        flags.append(valid is not None)
        if valid is None:
            continue
        if (counts[:-1] * per % 8).any():
            raise TooLarge("item validity of fixed-size lists needs byte-aligned chunks")
        streams.append(_bitmap_stream(valid, counts, per))
    for d, flag in zip(reversed(v.dims), reversed(flags), strict=True):
        inner = m.FixedSizeList(d, inner, flag)
    return _Chunked(counts, [*streams, values], inner, len(streams) + 1)


def _variable(v: VarVals) -> _Chunked:
    counts, values = variable_chunks(v.offsets, v.data, v.large, VAR_CHUNK_BYTES, MAX_CHUNK_VALUES)
    return _Chunked(counts, [values], m.Variable(m.Flat(64 if v.large else 32)), 1)


def _compressed(ch: _Chunked, general: m.BufferCompression) -> _Chunked:
    """Each chunk's (single) value buffer compressed with LZ4 or ZSTD on its own."""
    assert general.scheme is not None
    flat, offs = ch.buffers[0]
    parts = [
        buffer_compression.compress(general.scheme, flat[a:b].tobytes(), general.level)
        for a, b in zip(offs[:-1].tolist(), offs[1:].tolist(), strict=True)
    ]
    new = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in parts], out=new[1:])
    joined = np.frombuffer(b"".join(parts), dtype=np.uint8)
    return _Chunked(ch.counts, [(joined, new)], m.General(general, ch.compression), 1)


def dictionary_block(d: FixedVals | VarVals) -> bytes:
    """The dictionary buffer. Fixed-width items are their bytes back to back (a ``Flat`` block).
    Variable-width items are a block of: u32 offset width, the start of the bytes (u32, or u64 after
    4 zero bytes for 64-bit offsets), the offsets, the bytes. Large Arrow types get 64-bit offsets."""
    if isinstance(d, FixedVals):
        if d.width == 0:  # booleans: a bitmap, least significant bit first (Flat(1))
            if d.bitmap is not None and not d.dims:
                return d.bitmap.tobytes()
            return np.packbits(d.bits()[: d.n], bitorder="little").tobytes()
        return d.data[: d.n * d.width].tobytes()
    ob = 8 if d.large else 4
    head_len = 8 if ob == 4 else 16
    start = head_len + ob * (d.n + 1)
    head = (
        np.array([32, start], dtype="<u4").tobytes()
        if ob == 4
        else np.array([64, 0], dtype="<u4").tobytes() + np.array([start], dtype="<u8").tobytes()
    )
    offs = d.offsets - d.offsets[0]
    return head + offs.astype(f"<u{ob}").tobytes() + d.data[d.offsets[0] : d.offsets[-1]].tobytes()  # type: ignore[no-any-return]


def encode_miniblock(
    values: FixedVals | VarVals,
    rep: npt.NDArray[np.uint16] | None,
    defs: npt.NDArray[np.uint16] | None,
    visible: npt.NDArray[np.bool_] | None,
    layers: tuple[m.RepDefLayer, ...],
    large: bool,
    dictionary: FixedVals | VarVals | None = None,
    fsst_table: bytes | None = None,
    general: m.BufferCompression | None = None,
    bitpack: bool = True,
) -> tuple[m.MiniBlockLayout, PageBuffers]:
    """Layout and buffers of one mini-block page (buffers are bytes or uint8 arrays).

    Parameters
    ----------
    values:
        The visible values.
    rep, defs:
        Levels per entry (None when absent).
    visible:
        Per entry, whether it carries a value (None: all do).
    layers:
        Layer meanings, leaf first.
    large:
        2.2 chunks (u32 metadata words and buffer sizes).
    dictionary:
        The page dictionary when ``values`` are indices into it.
    fsst_table:
        The FSST symbol table when ``values`` are FSST codes.
    general:
        LZ4/ZSTD applied to each chunk's values (``lance-encoding:compression``).
    bitpack:
        Bit-pack integers (off for ``lance-encoding:compression=none``).

    Raises
    ------
    TooLarge
        A chunk would exceed what a mini-block chunk can hold.
    """
    simple_ints = isinstance(values, FixedVals) and values.int_bits is not None and not values.dims
    if simple_ints and bitpack and rep is None and defs is None and visible is None and general is None:
        # The common flat integer column: the whole page in one compiled call.
        assert isinstance(values, FixedVals)
        ints = values.data[: values.n * values.width].view(np.dtype(f"<u{values.width}"))
        chunks, words = bitpack_page(ints, large)
        return _layout(
            values,
            chunks,
            words,
            None,
            None,
            None,
            layers,
            large,
            1,
            dictionary,
            fsst_table,
            m.InlineBitpacking(values.width * 8),
        )
    if (
        isinstance(values, FixedVals)
        and not (values.int_bits is not None and not values.dims and bitpack)
        and all(valid is None for valid in values.level_valid)
        and rep is None
        and defs is None
        and visible is None
        and general is None
    ):
        # Flat values without levels or item validity (floats, booleans, vectors in mini-block):
        # the whole page in one compiled call.
        per = _flat_per(values)
        if values.width == 0:
            data = values.bitmap
            if data is None:
                data = np.packbits(values.bits()[: values.n * values.items], bitorder="little")
            bits = values.items
        else:
            data = values.data[: values.n * values.width * values.items]
            bits = values.width * 8 * values.items
        chunks, words, err = flat_page(data, values.n, bits, per, large, 0 if large else MAX_CHUNK_BYTES_21)
        if err:
            raise TooLarge(_TOO_LARGE[err])
        comp: m.CompressiveEncoding = m.Flat(values.width * 8 if values.width else 1)
        for d in reversed(values.dims):
            comp = m.FixedSizeList(d, comp, False)
        if values.packed_bits:
            comp = m.PackedStruct(values.packed_bits, comp)
        return _layout(
            values,
            chunks,
            words,
            None,
            None,
            None,
            layers,
            large,
            1,
            dictionary,
            fsst_table,
            comp,
            checked=True,
        )
    if isinstance(values, VarVals):
        ch = _variable(values)
    elif values.int_bits is not None and not values.dims and bitpack:
        ch = _bitpacked(values)
    else:
        ch = _flat(values)
        if values.packed_bits:
            ch.compression = m.PackedStruct(values.packed_bits, ch.compression)
    if general is not None and ch.num_buffers == 1:
        ch = _compressed(ch, general)
    counts = ch.counts
    nchunks = len(counts)
    # Entry range of each chunk: a chunk starts at the entry of its first value.
    nent = len(rep) if rep is not None else len(defs) if defs is not None else values.n
    if visible is None:
        bounds = np.concatenate(([0], np.cumsum(counts)))
    else:
        bounds = chunk_bounds(visible, counts.astype(np.int64, copy=False), nent)
    rep_w = int(rep.max()).bit_length() if rep is not None and len(rep) else 0
    def_w = int(defs.max()).bit_length() if defs is not None and len(defs) else 0
    bounds = bounds.astype(np.int64)
    levels: list[Stream] = []
    if rep is not None:
        levels.append(pack_level_chunks(rep, bounds, max(rep_w, 1)))
    if defs is not None:
        levels.append(pack_level_chunks(defs, bounds, max(def_w, 1)))
    logs = np.zeros(nchunks, dtype=np.int64)
    if nchunks > 1:
        logs[:-1] = np.log2(counts[:-1]).astype(np.int64)
    chunks, words, err = assemble_chunks(
        levels, ch.buffers, np.diff(bounds), logs, large, 0 if large else MAX_CHUNK_BYTES_21
    )
    if err:
        raise TooLarge(_TOO_LARGE[err])
    return _layout(
        values,
        chunks,
        words,
        rep,
        defs,
        bounds,
        layers,
        large,
        ch.num_buffers,
        dictionary,
        fsst_table,
        ch.compression,
        rep_w,
        def_w,
        checked=True,
    )


def _layout(
    values: FixedVals | VarVals,
    chunks: npt.NDArray[np.uint8],
    words: I64,
    rep: npt.NDArray[np.uint16] | None,
    defs: npt.NDArray[np.uint16] | None,
    bounds: I64 | None,
    layers: tuple[m.RepDefLayer, ...],
    large: bool,
    num_buffers: int,
    dictionary: FixedVals | VarVals | None,
    fsst_table: bytes | None,
    compression: m.CompressiveEncoding,
    rep_w: int = 0,
    def_w: int = 0,
    *,
    checked: bool = False,
) -> tuple[m.MiniBlockLayout, PageBuffers]:
    """The page's buffers (metadata words, chunks, dictionary, repetition index) and layout.
    ``checked``: the chunks were laid out within 2.1's chunk limit, whose words fit u16."""
    nchunks = len(words)
    max_rep = sum(1 for x in layers if x.is_list)
    if not large and not checked and nchunks and int(words.max()) > 0xFFFF:
        raise TooLarge("chunk metadata word overflows u16")
    bufs: PageBuffers = [words.astype("<u4" if large else "<u2"), chunks]
    dict_ce: m.CompressiveEncoding | None = None
    if dictionary is not None:
        bufs.append(dictionary_block(dictionary))
        if isinstance(dictionary, FixedVals):
            dict_ce = m.Flat(8 * dictionary.width if dictionary.width else 1)
        else:
            dict_ce = m.Variable(m.Flat(64 if dictionary.large else 32))
    depth = 0
    if rep is not None:
        assert bounds is not None
        depth = 1
        bufs.append(rep_index(rep, bounds, max_rep).astype("<u8"))
    layout = m.MiniBlockLayout(
        rep_compression=m.OutOfLineBitpacking(16, m.Flat(max(rep_w, 1))) if rep is not None else None,
        def_compression=m.OutOfLineBitpacking(16, m.Flat(max(def_w, 1))) if defs is not None else None,
        value_compression=m.Fsst(fsst_table, compression) if fsst_table is not None else compression,
        dictionary=dict_ce,
        num_dictionary_items=dictionary.n if dictionary is not None else 0,
        layers=layers,
        num_buffers=num_buffers,
        repetition_index_depth=depth,
        num_items=values.n,
        has_large_chunk=large,
    )
    return layout, bufs
