"""Test oracle, the numpy code before the compiled kernels.

Mini-block pages: values cut into chunks of a power-of-two count, each with its own levels.

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
from lance_format.encodings.v21.encode.values import FixedVals, VarVals
from tests.encodings.numpy_reference.bitpack import bit_widths, pack_blocks
from tests.encodings.numpy_reference.fastlanes import FL_BLOCK

__all__ = ["TooLarge", "dictionary_block", "encode_miniblock", "pack_levels"]

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
_PAD = 0xFE


class TooLarge(Exception):
    """The data does not fit mini-block chunks (the caller then writes a full-zip page)."""


@dataclass
class _Chunked:
    counts: I64  # values per chunk
    buffers: list[list[bytes]]  # per chunk, its value buffers
    compression: m.CompressiveEncoding
    num_buffers: int


def _pow2_counts(n: int, per: int) -> I64:
    per = max(1, min(MAX_CHUNK_VALUES, 1 << (max(1, per).bit_length() - 1)))
    full, rest = divmod(n, per)
    counts = [per] * full + ([rest] if rest else [])
    return np.array(counts, dtype=np.int64)


def _bitpacked(v: FixedVals) -> _Chunked:
    t = v.width * 8
    dt = np.dtype(f"<u{v.width}")
    vals = v.data.view(dt)
    nchunks = -(-v.n // FL_BLOCK)
    grid = np.zeros((nchunks, FL_BLOCK), dtype=dt)
    grid.reshape(-1)[: v.n] = vals
    widths = bit_widths(grid)
    out: list[bytes | None] = [None] * nchunks
    for w in np.unique(widths).tolist():
        sel = np.flatnonzero(widths == w)
        packed = pack_blocks(grid[sel], int(w))
        head = np.array([w], dtype=dt).tobytes()
        for i, row in zip(sel.tolist(), packed, strict=True):
            out[i] = head + row.tobytes()
    counts = np.full(nchunks, FL_BLOCK, dtype=np.int64)
    if nchunks:
        counts[-1] = v.n - FL_BLOCK * (nchunks - 1)
    return _Chunked(counts, [[b] for b in out if b is not None], m.InlineBitpacking(t), 1)


def _bitmap_slices(bits: npt.NDArray[np.bool_], counts: I64, per_value: int) -> list[bytes]:
    starts = (np.cumsum(counts) - counts) * per_value
    packed = [
        np.packbits(bits[s : s + c * per_value], bitorder="little").tobytes()
        for s, c in zip(starts.tolist(), counts.tolist(), strict=True)
    ]
    return packed


def _flat(v: FixedVals) -> _Chunked:
    items = v.items
    if v.width == 0:
        assert v.bools is not None
        counts = _pow2_counts(v.n, (FIXED_CHUNK_BYTES * 8) // max(1, items))
        if (counts[:-1] * items % 8).any():
            counts = _pow2_counts(v.n, max(8, (FIXED_CHUNK_BYTES * 8) // max(1, items)))
        bufs = [[b] for b in _bitmap_slices(v.bools, counts, items)]
        inner: m.CompressiveEncoding = m.Flat(1)
    else:
        row = v.width * items
        counts = _pow2_counts(v.n, FIXED_CHUNK_BYTES // row)
        ends = np.cumsum(counts) * row
        starts = ends - counts * row
        bufs = [[v.data[s:e].tobytes()] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
        inner = m.Flat(v.width * 8)
    nbuf = 1
    if v.dims:
        # One item bitmap per level with nulls (outermost first), before the values.
        per = 1
        maps: list[list[bytes]] = [[] for _ in counts]
        flags = []
        for d, valid in zip(v.dims, v.level_valid, strict=True):
            per *= d
            flags.append(valid is not None)
            if valid is None:
                continue
            if (counts[:-1] * per % 8).any():
                raise TooLarge("item validity of fixed-size lists needs byte-aligned chunks")
            for c, b in enumerate(_bitmap_slices(valid, counts, per)):
                maps[c].append(b)
            nbuf += 1
        bufs = [[*mp, *b] for mp, b in zip(maps, bufs, strict=True)]
        for d, flag in zip(reversed(v.dims), reversed(flags), strict=True):
            inner = m.FixedSizeList(d, inner, flag)
    return _Chunked(counts, bufs, inner, nbuf)


def _variable(v: VarVals) -> _Chunked:
    n = v.n
    offs = v.offsets
    ob = 8 if v.large else 4
    counts_l: list[int] = []
    bufs: list[list[bytes]] = []
    s = 0
    while s < n:
        cand = 1 << (min(MAX_CHUNK_VALUES, n - s).bit_length() - 1)
        while cand > 1 and int(offs[s + cand] - offs[s]) + ob * (cand + 1) > VAR_CHUNK_BYTES:
            cand //= 2
        k = cand
        if s + k < n and n - s <= MAX_CHUNK_VALUES:
            # The last chunk may hold any count: take the rest when it fits.
            rest = n - s
            if int(offs[n] - offs[s]) + ob * (rest + 1) <= VAR_CHUNK_BYTES:
                k = rest
        local = offs[s : s + k + 1] - offs[s] + ob * (k + 1)
        body = v.data[offs[s] : offs[s + k]]
        raw = local.astype(f"<u{ob}").tobytes() + body.tobytes()
        # pylance wants the buffer size to be a multiple of the offset width.
        bufs.append([raw + b"\0" * (-len(raw) % ob)])
        counts_l.append(k)
        s += k
    return _Chunked(np.array(counts_l, dtype=np.int64), bufs, m.Variable(m.Flat(8 * ob)), 1)


def dictionary_block(d: FixedVals | VarVals) -> bytes:
    """The dictionary buffer. Fixed-width items are their bytes back to back (a ``Flat`` block).
    Variable-width items are a block of: u32 offset width, the start of the bytes (u32, or u64 after
    4 zero bytes for 64-bit offsets), the offsets, the bytes. Large Arrow types get 64-bit offsets."""
    if isinstance(d, FixedVals):
        if d.bools is not None:  # booleans: a bitmap, least significant bit first (Flat(1))
            return np.packbits(d.bools[: d.n], bitorder="little").tobytes()
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


def pack_levels(levels: npt.NDArray[np.uint16], bounds: I64, width: int) -> list[bytes]:
    """Out-of-line bit-packing of each chunk's u16 levels (``levels[bounds[c]:bounds[c + 1]]``)
    with one ``width``: whole 1024-level blocks packed, a short tail stored raw. All chunks' blocks
    are packed in one call."""
    a, b = bounds[:-1], bounds[1:]
    count = b - a
    full, tail = count // FL_BLOCK, count % FL_BLOCK
    block_bytes = FL_BLOCK * width // 8
    packed_tail = (tail > 0) & (tail * 2 > block_bytes)
    nblocks = full + packed_tail
    owner = np.repeat(np.arange(len(count)), nblocks)
    first = np.cumsum(nblocks) - nblocks
    k = np.arange(int(nblocks.sum()), dtype=np.int64) - first[owner]
    starts = a[owner] + k * FL_BLOCK
    idx = starts[:, None] + np.arange(FL_BLOCK, dtype=np.int64)[None, :]
    inside = idx < b[owner][:, None]
    grid = np.where(inside, levels[np.minimum(idx, max(len(levels) - 1, 0))], 0).astype(np.uint16)
    words = pack_blocks(grid, width).reshape(len(grid), -1) if len(grid) else np.zeros((0, 0), np.uint16)
    raw = words.tobytes()
    row = block_bytes
    out = []
    for c in range(len(count)):
        f0, nb = int(first[c]), int(nblocks[c])
        part = raw[f0 * row : (f0 + nb) * row]
        if tail[c] and not packed_tail[c]:
            part += levels[int(b[c]) - int(tail[c]) : int(b[c])].astype("<u2").tobytes()
        out.append(part)
    return out


def _pad8(b: bytes) -> bytes:
    rem = len(b) % 8
    return b + bytes([_PAD]) * (8 - rem) if rem else b


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
) -> tuple[m.MiniBlockLayout, list[bytes]]:
    """Layout and buffers of one mini-block page.

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
    if isinstance(values, VarVals):
        ch = _variable(values)
    elif values.int_bits is not None and not values.dims and bitpack:
        ch = _bitpacked(values)
    else:
        ch = _flat(values)
        if values.packed_bits:
            ch.compression = m.PackedStruct(values.packed_bits, ch.compression)
    if general is not None and ch.num_buffers == 1:
        assert general.scheme is not None
        ch = _Chunked(
            ch.counts,
            [[buffer_compression.compress(general.scheme, b[0], general.level)] for b in ch.buffers],
            m.General(general, ch.compression),
            1,
        )
    counts = ch.counts
    nchunks = len(counts)
    # Entry range of each chunk: a chunk starts at the entry of its first value.
    nent = len(rep) if rep is not None else len(defs) if defs is not None else values.n
    if visible is None:
        bounds = np.concatenate(([0], np.cumsum(counts)))
    else:
        vis_pos = np.flatnonzero(visible)
        firsts = np.cumsum(counts) - counts
        bounds = np.concatenate((vis_pos[firsts], [nent]))
        bounds[0] = 0
    rep_w = int(rep.max()).bit_length() if rep is not None and len(rep) else 0
    def_w = int(defs.max()).bit_length() if defs is not None and len(defs) else 0
    size_dt = "<u4" if large else "<u2"
    chunks: list[bytes] = []
    words: list[int] = []
    rep_index: list[tuple[int, int]] = []
    max_rep = sum(1 for x in layers if x.is_list)
    bounds = bounds.astype(np.int64)
    rep_parts = pack_levels(rep, bounds, max(rep_w, 1)) if rep is not None else None
    def_parts = pack_levels(defs, bounds, max(def_w, 1)) if defs is not None else None
    for c in range(nchunks):
        a, b = int(bounds[c]), int(bounds[c + 1])
        nlev = b - a
        head = [nlev]
        body: list[bytes] = []
        if rep_parts is not None:
            rb = rep_parts[c]
            head.append(len(rb))
            body.append(_pad8(rb))
        if def_parts is not None:
            db = def_parts[c]
            head.append(len(db))
            body.append(_pad8(db))
        if nlev > 0xFFFF or any(h > 0xFFFF for h in head):
            raise TooLarge("too many levels in one chunk")
        sizes = [len(x) for x in ch.buffers[c]]
        if not large and any(s > 0xFFFF for s in sizes):
            raise TooLarge("value buffer too large for a 2.1 chunk")
        header = np.array(head, dtype="<u2").tobytes() + np.array(sizes, dtype=size_dt).tobytes()
        chunk = _pad8(header) + b"".join(body) + b"".join(_pad8(x) for x in ch.buffers[c])
        if not large and len(chunk) > MAX_CHUNK_BYTES_21:
            raise TooLarge("chunk larger than 32 KiB")
        chunks.append(chunk)
        cnt = int(counts[c])
        log = cnt.bit_length() - 1 if c < nchunks - 1 else 0
        words.append(((len(chunk) // 8 - 1) << 4) | log)
        if rep is not None:
            r = rep[a:b]
            starts = np.flatnonzero(r == max_rep)
            nxt_is_start = c == nchunks - 1 or int(rep[b]) == max_rep
            ends = len(starts) - (0 if nxt_is_start else 1) + (0 if (len(r) and r[0] == max_rep) else 1)
            trailing = 0 if nxt_is_start else (nlev - int(starts[-1]) if len(starts) else nlev)
            rep_index.append((ends, trailing))
    if not large and any(w > 0xFFFF for w in words):
        raise TooLarge("chunk metadata word overflows u16")
    bufs = [np.array(words, dtype="<u4" if large else "<u2").tobytes(), b"".join(chunks)]
    dict_ce: m.CompressiveEncoding | None = None
    if dictionary is not None:
        bufs.append(dictionary_block(dictionary))
        if isinstance(dictionary, FixedVals):
            dict_ce = m.Flat(8 * dictionary.width if dictionary.width else 1)
        else:
            dict_ce = m.Variable(m.Flat(64 if dictionary.large else 32))
    depth = 0
    if rep is not None:
        depth = 1
        bufs.append(np.array(rep_index, dtype="<u8").reshape(-1).tobytes())
    layout = m.MiniBlockLayout(
        rep_compression=m.OutOfLineBitpacking(16, m.Flat(max(rep_w, 1))) if rep is not None else None,
        def_compression=m.OutOfLineBitpacking(16, m.Flat(max(def_w, 1))) if defs is not None else None,
        value_compression=m.Fsst(fsst_table, ch.compression) if fsst_table is not None else ch.compression,
        dictionary=dict_ce,
        num_dictionary_items=dictionary.n if dictionary is not None else 0,
        layers=layers,
        num_buffers=ch.num_buffers,
        repetition_index_depth=depth,
        num_items=values.n,
        has_large_chunk=large,
    )
    return layout, bufs
