"""Kernels that undo one ``CompressiveEncoding`` node on a batch of buffers.

Which encoding uses which kernel, in which context (mini-block, block, full-zip per value), is
said by the encoding's codec in :mod:`.codecs`; these functions know buffers, not messages.

Every kernel decodes a whole batch with numpy; the only per-buffer loops are the general-purpose
(LZ4/ZSTD) decompressions, which cannot be batched.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.core.errors import NotSupportedError
from lance_format.encodings import buffer_compression
from lance_format.encodings.base import expand_ranges
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import Bufs, gather, read_uint
from lance_format.encodings.v21._decode_kernels import variable_chunks
from lance_format.encodings.v21._fsst import fsst_decompress
from lance_format.encodings.v21.fastlanes import FL_BLOCK, fastlanes_unpack, uint_dtype, unpack_inline_blocks
from lance_format.encodings.v21.values import Fixed, Fsl, Nulls, Struct, Values, VarBin

__all__ = [
    "byte_stream_split",
    "constant_values",
    "decompress_each",
    "fixed_row_bytes",
    "flat_values",
    "fsl_rows",
    "fsst_decompress",
    "fsst_values",
    "general_per_value",
    "inline_bitpacked",
    "out_of_line_bitpacked",
    "rle_block",
    "rle_values",
    "split_packed",
    "unsupported",
    "variable_block",
    "variable_mini",
]

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]


def unsupported(path: str, what: str, ce: object) -> NotSupportedError:
    """The error for encoding ``ce`` met in a context (``what``) it does not decode in."""
    return NotSupportedError(f"{path}: {what} encoding {type(ce).__name__} is not supported")


def _chunk_ids(counts: I64) -> I64:
    return np.repeat(np.arange(len(counts), dtype=np.int64), counts)


# -- fixed width --------------------------------------------------------------------------------


def flat_values(bufs: Bufs, bits: int, counts: I64) -> Fixed:
    total = int(counts.sum())
    if bits == 1:
        pos = expand_ranges(bufs.starts * 8, counts)
        if len(pos) and int(pos.max()) >= len(bufs.blob) * 8:
            raise ValueError("bitmap outside the data read")
        bits_out = ((bufs.blob[pos >> 3] >> (pos & 7).astype(np.uint8)) & 1).astype(bool)
        return Fixed(bits_out, 1, total)
    if bits % 8:
        raise NotSupportedError(f"flat values of {bits} bits are not supported")
    width = bits // 8
    if bool((bufs.sizes < counts * width).any()):
        raise ValueError("flat buffer is smaller than its values")
    return Fixed(gather(bufs.blob, bufs.starts, counts * width), bits, total)


def inline_bitpacked(bufs: Bufs, t: int, counts: I64) -> Fixed:
    """FastLanes blocks led by their bit width; one block per buffer (<= 1024 values)."""
    if t not in (8, 16, 32, 64):
        raise ValueError(f"bad bit-packing word size {t}")
    if bool((counts > FL_BLOCK).any()):
        raise NotSupportedError("inline bit-packed buffers of more than 1024 values are not supported")
    dt = uint_dtype(t)
    wbytes = t // 8
    total = int(counts.sum())
    has = counts > 0
    if not has.any():
        return Fixed(np.zeros(0, dtype=np.uint8), t, 0)
    starts = bufs.starts[has]
    cnt = counts[has]
    widths = read_uint(bufs.blob, starts, wbytes).astype(np.int64)
    if int(widths.max()) > t:
        raise ValueError("bit width larger than the value width")
    if len(cnt) > 1:
        # Many blocks (scans): unpacked in place from the chunks, whatever their widths.
        direct = unpack_inline_blocks(bufs.blob, starts + wbytes, widths, cnt, t)
        if direct is not None:
            return Fixed(direct.view(np.uint8), t, total)
    # One row of 1024 per buffer; blocks of one bit width are unpacked together.
    w0 = int(widths[0])
    if len(widths) == 1 or not bool((widths != w0).any()):
        # One bit width (single-chunk takes, uniform data): all blocks in one call.
        raw = gather(bufs.blob, starts + wbytes, np.full(len(cnt), FL_BLOCK * w0 // 8, dtype=np.int64))
        grid = fastlanes_unpack(np.ascontiguousarray(raw).view(dt), w0, t, len(cnt))
        if len(cnt) == 1:
            row = grid[0, : int(cnt[0])]
            # A short row is copied: a view would keep the whole 1,024-value block alive under the
            # smaller size the decoded-block cache charges (a fuzz run's small files held ~30 MiB).
            return Fixed((row if len(row) == FL_BLOCK else row.copy()).view(np.uint8), t, total)
    else:
        grid = np.empty((len(cnt), FL_BLOCK), dtype=dt)
        for w in np.unique(widths).tolist():
            sel = np.flatnonzero(widths == w)
            nbytes = FL_BLOCK * w // 8
            raw = gather(bufs.blob, starts[sel] + wbytes, np.full(len(sel), nbytes, dtype=np.int64))
            grid[sel] = fastlanes_unpack(np.ascontiguousarray(raw).view(dt), w, t, len(sel))
    if bool((cnt[:-1] == FL_BLOCK).all()):
        out = grid.reshape(-1)[:total]
    else:
        out = grid[np.arange(FL_BLOCK)[None, :] < cnt[:, None]]
    return Fixed(np.ascontiguousarray(out).view(np.uint8), t, total)


def out_of_line_bitpacked(bufs: Bufs, t: int, width: int, counts: I64) -> Fixed:
    """FastLanes blocks with one bit width; the tail is packed or, when smaller, raw."""
    if t not in (8, 16, 32, 64) or width > t:
        raise ValueError("bad out-of-line bit-packing widths")
    dt = uint_dtype(t)
    wbytes = t // 8
    block_bytes = FL_BLOCK * width // 8
    full = counts // FL_BLOCK
    tail = counts % FL_BLOCK
    raw_tail = (tail > 0) & (bufs.sizes == full * block_bytes + tail * wbytes)
    nblocks = full + ((tail > 0) & ~raw_tail)
    if bool((bufs.sizes < nblocks * block_bytes + np.where(raw_tail, tail * wbytes, 0)).any()):
        raise ValueError("bit-packed buffer is smaller than its values")
    ids = _chunk_ids(nblocks)
    first_block = np.cumsum(nblocks) - nblocks
    block_starts = bufs.starts[ids] + (np.arange(len(ids)) - first_block[ids]) * block_bytes
    if len(ids):
        raw = gather(bufs.blob, block_starts, np.full(len(ids), block_bytes, dtype=np.int64))
        packed = fastlanes_unpack(np.ascontiguousarray(raw).view(dt), width, t, len(ids)).reshape(-1)
    else:
        packed = np.zeros(0, dtype=dt)
    if not raw_tail.any():
        # Only packed blocks: each buffer's values are the start of its blocks.
        if len(counts) == 1:
            out = packed[: int(counts[0])]
        else:
            out = packed[expand_ranges(first_block * FL_BLOCK, counts)]
        return Fixed(np.ascontiguousarray(out).view(np.uint8), t, len(out))
    tails = gather(bufs.blob, bufs.starts + full * block_bytes, np.where(raw_tail, tail * wbytes, 0))
    source = np.concatenate([packed, np.ascontiguousarray(tails).view(dt)])
    # Per buffer: its unpacked values (trimmed to the count), then its raw tail if any.
    from_packed = np.where(raw_tail, full * FL_BLOCK, counts)
    tail_base = len(packed) + np.cumsum(np.where(raw_tail, tail, 0)) - np.where(raw_tail, tail, 0)
    starts2 = np.stack([first_block * FL_BLOCK, tail_base], axis=1).reshape(-1)
    lens2 = np.stack([from_packed, np.where(raw_tail, tail, 0)], axis=1).reshape(-1)
    out = source[expand_ranges(starts2, lens2)]
    return Fixed(out.view(np.uint8), t, len(out))


def rle_values(values: U8, bits: int, lengths: U8, run_counts: I64, counts: I64) -> Fixed:
    """Run-length decode per buffer; runs past a buffer's count are cut (as Lance does)."""
    width = bits // 8
    if bits % 8 or len(values) != len(lengths) * width:
        raise ValueError("RLE values and run lengths disagree")
    runs = lengths.astype(np.int64)
    rows = values.reshape(-1, width) if width else values.reshape(len(runs), 0)
    expanded = np.repeat(rows, runs, axis=0)
    csum = np.zeros(len(runs) + 1, dtype=np.int64)
    np.cumsum(runs, out=csum[1:])
    run_end = np.cumsum(run_counts)
    produced = csum[run_end] - csum[run_end - run_counts]
    if bool((produced < counts).any()):
        raise ValueError("RLE runs are shorter than their values")
    if bool((produced != counts).any()):
        base = np.cumsum(produced) - produced
        expanded = expanded[expand_ranges(base, counts)]
    return Fixed(expanded.reshape(-1), bits, int(counts.sum()))


def rle_block(bufs: Bufs, bits: int, counts: I64) -> Fixed:
    """Run-length blocks: per buffer, a u64 size of the run values, the run values, a u8 per run."""
    vbytes = read_uint(bufs.blob, bufs.starts, 8).astype(np.int64)
    width = bits // 8
    if width == 0 or bool((vbytes % width).any()) or bool((8 + vbytes > bufs.sizes).any()):
        raise ValueError("RLE block header is inconsistent")
    nruns = vbytes // width
    if bool((8 + vbytes + nruns > bufs.sizes).any()):
        raise ValueError("RLE block is truncated")
    values = gather(bufs.blob, bufs.starts + 8, vbytes)
    lengths = gather(bufs.blob, bufs.starts + 8 + vbytes, nruns)
    return rle_values(values, bits, lengths, nruns, counts)


def byte_stream_split(bufs: Bufs, bits: int, counts: I64) -> Fixed:
    width = bits // 8
    if bits % 8 or bool((bufs.sizes < counts * width).any()):
        raise ValueError("byte-stream-split buffer is smaller than its values")
    ids = _chunk_ids(counts)
    local = np.arange(len(ids), dtype=np.int64) - (np.cumsum(counts) - counts)[ids]
    base = bufs.starts[ids] + local
    idx = base[:, None] + np.arange(width, dtype=np.int64)[None, :] * counts[ids][:, None]
    return Fixed(bufs.blob[idx].reshape(-1), bits, len(ids))


# -- general-purpose compression --------------------------------------------------------------


def decompress_each(bufs: Bufs, scheme: str | None, path: str) -> Bufs:
    """LZ4/ZSTD-decompress every buffer (the one per-buffer loop there is)."""
    if scheme is None:
        return bufs
    parts = [
        np.frombuffer(buffer_compression.decompress(scheme, bufs.one(k).tobytes(), path), dtype=np.uint8)
        for k in range(len(bufs))
    ]
    sizes = np.array([len(p) for p in parts], dtype=np.int64)
    blob = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)
    return Bufs(blob, np.cumsum(sizes) - sizes, sizes)


# -- variable width ---------------------------------------------------------------------------


def variable_mini(bufs: Bufs, offset_bits: int, counts: I64) -> VarBin:
    """Chunks holding ``n + 1`` offsets (relative to the chunk) followed by the bytes."""
    offsets, data = variable_chunks(bufs, offset_bits, counts)
    return VarBin(offsets, data)


def variable_block(buf: U8, count: int) -> VarBin:
    """One buffer: bits per offset, start of the bytes, offsets, bytes."""
    if len(buf) < 8:
        raise ValueError("variable-width block is too short")
    if buf[1] or buf[2] or buf[3]:
        # The older header: one byte of offset width, then the value count.
        width = int(buf[0])
        head = 9 if width == 32 else 17
        start = int(read_uint(buf, np.array([5 if width == 32 else 9]), width // 8)[0])
    else:
        width = int(read_uint(buf, np.array([0]), 4)[0])
        head = 8 if width == 32 else 16
        start = int(read_uint(buf, np.array([4 if width == 32 else 8]), width // 8)[0])
    if width not in (32, 64):
        raise ValueError(f"bad offset width {width}")
    ob = width // 8
    if start > len(buf) or start < head + (count + 1) * ob:
        raise ValueError("variable-width block header is inconsistent")
    offs = np.frombuffer(buf[head : head + (count + 1) * ob].tobytes(), dtype=f"<u{ob}").astype(np.int64)
    data = buf[start:]
    if len(offs) and (bool((np.diff(offs) < 0).any()) or int(offs[-1]) > len(data) or int(offs[0]) < 0):
        raise ValueError("variable-width offsets out of range")
    return VarBin(offs, np.ascontiguousarray(data))


def fsst_values(table: bytes, inner: Values) -> VarBin:
    if not isinstance(inner, VarBin):
        raise ValueError("FSST over non-string values")
    offsets, data = fsst_decompress(table, inner.offsets, inner.data)
    return VarBin(offsets, data)


def split_packed(inner: Values, bits: tuple[int, ...], path: str) -> Struct:
    if not isinstance(inner, Fixed) or inner.bits == 1 or any(b % 8 for b in bits):
        raise NotSupportedError(f"{path}: packed struct fields must be whole bytes")
    row = inner.bits // 8
    if sum(bits) // 8 != row:
        raise ValueError("packed struct widths do not add up")
    rows = inner.data.reshape(inner.n, row) if row else inner.data.reshape(inner.n, 0)
    kids: list[Values] = []
    pos = 0
    for b in bits:
        w = b // 8
        kids.append(
            Fixed(np.ascontiguousarray(rows[:, pos : pos + w], dtype=np.uint8).reshape(-1), b, inner.n)
        )
        pos += w
    return Struct(tuple(kids), inner.n)


def constant_values(value: bytes | None, n: int) -> Values:
    if value is None:
        return Nulls(n)
    raw = np.frombuffer(value, dtype=np.uint8)
    return Fixed(np.tile(raw, n), 8 * len(raw), n)


# -- per value (full-zip) ---------------------------------------------------------------------


def fixed_row_bytes(ce: m.CompressiveEncoding, bits_per_value: int) -> int:
    """Bytes one fixed-width full-zip value occupies."""
    if bits_per_value % 8:
        raise NotSupportedError("bit-packed full-zip values are not supported")
    return bits_per_value // 8


def fsl_rows(ce: m.FixedSizeList, mat: U8, n: int, path: str) -> Values:
    """Per row: one item bitmap per FSL layer with validity (outermost first), then the items."""
    layers: list[m.FixedSizeList] = []
    node: m.CompressiveEncoding = ce
    while isinstance(node, m.FixedSizeList):
        layers.append(node)
        node = node.values
    # Constant items: Lance writes this when every item is null; each row then holds only its
    # validity bitmaps and no item bytes.
    if not isinstance(node, (m.Flat, m.Constant)) or (
        isinstance(node, m.Flat) and node.bits_per_value % 8 and node.bits_per_value != 1
    ):
        raise unsupported(path, "full-zip fixed-size-list item", node)
    pos = 0
    dims = 1
    validities: list[npt.NDArray[np.bool_] | None] = []
    for layer in layers:
        dims *= layer.items_per_value
        if layer.has_validity:
            nb = (dims + 7) // 8
            bits = np.unpackbits(np.ascontiguousarray(mat[:, pos : pos + nb]), axis=1, bitorder="little")
            validities.append(bits[:, :dims].reshape(-1).astype(bool))
            pos += nb
        else:
            validities.append(None)
    items = np.ascontiguousarray(mat[:, pos:]).reshape(-1)
    out: Values
    if isinstance(node, m.Constant):
        if n and pos != mat.shape[1]:
            raise ValueError("constant full-zip items take no bytes after the validity")
        out = constant_values(node.value, n * dims)
    elif node.bits_per_value == 1:
        out = Fixed(np.unpackbits(items, bitorder="little")[: n * dims].astype(bool), 1, n * dims)
    else:
        out = Fixed(items, node.bits_per_value, n * dims)
    count = n * dims
    for layer, validity in zip(reversed(layers), reversed(validities), strict=True):
        count //= layer.items_per_value
        out = Fsl(layer.items_per_value, validity, out, count)
    return out


def general_per_value(values: VarBin, scheme: str | None, path: str) -> VarBin:
    """Each value compressed on its own: one decompression call per value (opt-in encoding)."""
    if scheme is None:
        return values
    parts = [
        np.frombuffer(
            buffer_compression.decompress(scheme, values.data[int(a) : int(b)].tobytes(), path),
            dtype=np.uint8,
        )
        if b > a
        else np.zeros(0, dtype=np.uint8)
        for a, b in zip(values.offsets[:-1].tolist(), values.offsets[1:].tolist(), strict=True)
    ]
    lengths = np.array([len(p) for p in parts], dtype=np.int64)
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)
    return VarBin(offsets, data)


def split_variable_packed(
    fields: tuple[m.VariablePackedField, ...], rows: VarBin
) -> list[tuple[m.VariablePackedField, U8 | VarBin]]:
    """Cut variable packed struct rows into their fields' stored values.

    Each row holds its fields in order: a fixed field as ``bits_per_value / 8`` bytes, a variable
    one as a little-endian length of ``bits_per_length / 8`` bytes and then that many bytes. The
    rows are walked one field at a time over all rows at once (a cursor per row). A row of no
    bytes is a null struct's placeholder (a stored row always holds a fixed field or a length):
    its fields read as zeros and empty values.

    Returns
    -------
    list
        Per field: the fixed values back to back (``uint8``), or the variable values as
        :class:`VarBin`, each still in the field's own per-value encoding.
    """
    n = len(rows.offsets) - 1
    blob = np.ascontiguousarray(rows.data, dtype=np.uint8)
    begins = rows.offsets[:-1].astype(np.int64)
    ends = rows.offsets[1:].astype(np.int64)
    live = np.flatnonzero(ends > begins)
    cursor = begins[live]
    live_ends = ends[live]
    out: list[tuple[m.VariablePackedField, U8 | VarBin]] = []
    for f in fields:
        if f.bits_per_length is not None:
            if f.bits_per_length not in (32, 64):
                raise ValueError(f"packed struct length prefix of {f.bits_per_length} bits")
            pb = f.bits_per_length // 8
            if bool((cursor + pb > live_ends).any()):
                raise ValueError("packed struct row too short for a length prefix")
            lengths = read_uint(blob, cursor, pb).astype(np.int64)
            starts = cursor + pb
            cursor = starts + lengths
            if bool((cursor > live_ends).any()):
                raise ValueError("packed struct value overruns its row")
            all_lengths = np.zeros(n, dtype=np.int64)
            all_lengths[live] = lengths
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(all_lengths, out=offsets[1:])
            out.append((f, VarBin(offsets, gather(blob, starts, lengths))))
        else:
            bits = f.bits_per_value
            if bits is None or bits % 8:
                raise NotSupportedError("packed struct fields must be whole bytes")
            w = bits // 8
            if bool((cursor + w > live_ends).any()):
                raise ValueError("packed struct value overruns its row")
            fixed = gather(blob, cursor, np.full(len(live), w, dtype=np.int64))
            if len(live) != n:
                full = np.zeros((n, w), dtype=np.uint8)
                full[live] = fixed.reshape(len(live), w)
                fixed = full.reshape(-1)
            out.append((f, fixed))
            cursor = cursor + w
    if bool((cursor != live_ends).any()):
        raise ValueError("packed struct rows hold bytes past their fields")
    return out


def delta_values(deltas: Values, bits: int, base: int, counts: I64) -> Fixed:
    """Sequences starting at ``base`` whose differences are ``deltas`` (``counts[k] - 1`` of them
    for sequence ``k``); wrap-around is not checked beyond the unsigned width."""
    if bits not in (32, 64):
        raise ValueError(f"delta values of {bits} bits")
    dt = uint_dtype(bits)
    if not isinstance(deltas, Fixed) or deltas.bits != bits:
        raise ValueError("delta differences are not fixed-width values of the sequence's width")
    counts = np.asarray(counts, dtype=np.int64)
    diffs = np.frombuffer(np.ascontiguousarray(deltas.data).tobytes(), dtype=dt)
    if len(diffs) != int((counts - 1).clip(0).sum()):
        raise ValueError("delta differences do not match the value count")
    total = int(counts.sum())
    steps = np.zeros(total, dtype=dt)
    first = np.cumsum(counts) - counts
    # Every value but each sequence's first takes the next difference; then a running sum per
    # sequence (the global running sum minus its value at each sequence's start).
    mask = np.ones(total, dtype=bool)
    mask[first[counts > 0]] = False
    steps[mask] = diffs
    run = np.cumsum(steps, dtype=dt)
    run -= np.repeat(run[first[counts > 0]], counts[counts > 0])
    run += dt.type(base)
    return Fixed(run.view(np.uint8), bits, total)


def range_values(bits: int, start: int, step: int, counts: I64) -> Fixed:
    """``start + step * i`` for ``i`` in ``0..counts[k]``, for each sequence ``k``, wrapping at
    ``bits`` like the stored integers do."""
    if bits not in (8, 16, 32, 64):
        raise ValueError(f"range values of {bits} bits")
    dt = uint_dtype(bits)
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    i = np.arange(total, dtype=np.uint64) - np.repeat((np.cumsum(counts) - counts).astype(np.uint64), counts)
    mod = 1 << 64
    vals = np.uint64(start % mod) + np.uint64(step % mod) * i  # wraps mod 2**64, then narrows
    return Fixed(vals.astype(dt).view(np.uint8), bits, total)
