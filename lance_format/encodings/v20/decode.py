"""Decoding 2.0 pages: selected rows in, Arrow arrays out (see ``encodings.base`` for the protocol).

In 2.0 every field owns a column: struct children and list items are read from their own columns;
a list column's pages hold end offsets into its item column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import CorruptFileError, NotSupportedError
from lance_format.core.types import LanceField
from lance_format.encodings.base import (
    ColumnInfo,
    DecodeContext,
    IOGen,
    PageInfo,
    Range,
    RowRuns,
    expand_ranges,
    fetch,
    gather,
    join_buffers,
    runs_length,
    split_runs,
)
from lance_format.encodings.buffer_compression import decompress
from lance_format.encodings.v20 import model as m

__all__ = ["decode_field"]

U64 = np.dtype("<u8")


def _empty(t: pa.DataType) -> pa.Array:
    return pa.array([], type=t)


def _concat(pieces: list[pa.Array], t: pa.DataType) -> pa.Array:
    if not pieces:
        return _empty(t)
    if len(pieces) == 1:
        return pieces[0]
    if pa.types.is_dictionary(t):
        # Pages carry their own dictionaries (with null items); re-encode the values as one.
        values = pa.concat_arrays([p.dictionary_decode() for p in pieces])
        encoded = values.dictionary_encode()
        return pa.DictionaryArray.from_arrays(encoded.indices.cast(t.index_type), encoded.dictionary)
    return pa.concat_arrays(pieces)


def _is_packed(f: LanceField) -> bool:
    v = f.metadata.get("lance-encoding:packed") or f.metadata.get("packed")
    return v is not None and v.lower() in (b"true", b"1")


def decode_field(
    ctx: DecodeContext, field: LanceField, columns_of: dict[int, int], runs: RowRuns
) -> IOGen[pa.Array]:
    """Decoder for the selected rows of ``field`` (and everything below it)."""
    t = field.to_arrow().type
    lt = field.logical_type
    if lt == "struct" and not _is_packed(field):
        children = yield from gather([decode_field(ctx, c, columns_of, runs) for c in field.children])
        n = runs_length(runs)
        if not field.children:
            return pa.array([{}] * n, type=t)
        return pa.StructArray.from_arrays(children, fields=list(t))
    col = ctx.columns[columns_of[field.id]]
    if lt in ("list", "list.struct", "large_list", "large_list.struct"):
        return (yield from _decode_list(ctx, field, col, columns_of, runs, t))
    return (yield from decode_column(ctx, col, runs, t))


def decode_column(ctx: DecodeContext, col: ColumnInfo, runs: RowRuns, t: pa.DataType) -> IOGen[pa.Array]:
    """Selected rows of a leaf column, page by page (pages fetched together)."""
    pieces = yield from gather(
        [
            decode_array(ctx, col.pages[p], col.pages[p].encoding, local, t, (col.index, p))
            for p, local in split_runs(runs, col.page_starts)
        ]
    )
    return _concat(pieces, t)


# -- page-level decoders ------------------------------------------------------------------------
def _page_buffer(ctx: DecodeContext, page: PageInfo, ref: m.BufferRef) -> Range:
    if ref.kind != 0:
        raise NotSupportedError(f"{ctx.path}: column- and file-level buffers in 2.0 pages are not supported")
    if ref.index >= len(page.buffer_offsets):
        raise CorruptFileError(
            ctx.path, f"page encoding names buffer {ref.index} of {len(page.buffer_offsets)}"
        )
    return page.buffer(ref.index)


def _check_runs(ctx: DecodeContext, runs: RowRuns, limit: int, what: str) -> None:
    if len(runs) and int(runs[-1, 1]) > limit:
        raise CorruptFileError(
            ctx.path, f"{what} has {limit} values but rows up to {int(runs[-1, 1])} were asked"
        )


def _whole_buffer(ctx: DecodeContext, page: PageInfo, flat: m.Flat, key: tuple[Any, ...]) -> IOGen[bytes]:
    """A compressed flat buffer, read and decompressed once per reader."""
    cached = ctx.cache.get(key)
    if cached is not None:
        return bytes(cached)
    (raw,) = yield from fetch([_page_buffer(ctx, page, flat.buffer)])
    data = _decompress(ctx, flat.compression or "", bytes(raw))
    ctx.cache[key] = data
    return data


def _decompress(ctx: DecodeContext, scheme: str, raw: bytes) -> bytes:
    return decompress(scheme, raw, ctx.path)


def _flat_bytes(
    ctx: DecodeContext, page: PageInfo, flat: m.Flat, runs: RowRuns, width: int, key: tuple[Any, ...]
) -> IOGen[bytes | memoryview]:
    """The bytes of the selected values of a byte-aligned flat buffer, concatenated."""
    off, size = _page_buffer(ctx, page, flat.buffer)
    if len(runs) == 0:
        return b""
    if flat.compression:
        whole = yield from _whole_buffer(ctx, page, flat, (*key, "flat"))
        _check_runs(ctx, runs, len(whole) // width, "a compressed buffer")
        arr = np.frombuffer(whole, dtype=np.uint8).reshape(-1, width)
        idx = expand_ranges(runs[:, 0], runs[:, 1] - runs[:, 0])
        return arr[idx].tobytes()
    _check_runs(ctx, runs, size // width, "a flat buffer")
    starts = off + runs[:, 0] * width
    lengths = (runs[:, 1] - runs[:, 0]) * width
    bufs = yield from fetch(list(zip(starts.tolist(), lengths.tolist(), strict=True)))
    return join_buffers(bufs)


def decode_bits(
    ctx: DecodeContext, page: PageInfo, flat: m.Flat, runs: RowRuns
) -> IOGen[npt.NDArray[np.bool_]]:
    """Selected bits (LSB-first bitmap) as booleans."""
    if flat.bits != 1:
        raise CorruptFileError(ctx.path, f"expected a 1-bit buffer, found {flat.bits} bits per value")
    off, size = _page_buffer(ctx, page, flat.buffer)
    if len(runs) == 0:
        return np.zeros(0, dtype=bool)
    _check_runs(ctx, runs, size * 8, "a bitmap")
    first = runs[:, 0] // 8
    last = (runs[:, 1] + 7) // 8
    bufs = yield from fetch(list(zip((off + first).tolist(), (last - first).tolist(), strict=True)))
    bits = np.unpackbits(np.frombuffer(join_buffers(bufs), dtype=np.uint8), bitorder="little")
    byte_start = np.cumsum(last - first) - (last - first)
    lengths = runs[:, 1] - runs[:, 0]
    return bits[expand_ranges(byte_start * 8 + runs[:, 0] % 8, lengths)].astype(bool)


def _bitmap(valid: npt.NDArray[np.bool_]) -> pa.Buffer | None:
    if valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _with_validity(arr: pa.Array, valid: npt.NDArray[np.bool_]) -> pa.Array:
    bitmap = _bitmap(valid)
    if bitmap is None:
        return arr
    if pa.types.is_dictionary(arr.type):
        indices = _with_validity(arr.indices, valid)
        return pa.DictionaryArray.from_arrays(indices, arr.dictionary)
    if arr.offset != 0:
        arr = pa.concat_arrays([arr])
    children = [arr.field(i) for i in range(arr.type.num_fields)] if pa.types.is_struct(arr.type) else None
    if (
        pa.types.is_fixed_size_list(arr.type)
        or pa.types.is_list(arr.type)
        or pa.types.is_large_list(arr.type)
    ):
        children = [arr.values]
    bufs = arr.buffers()
    nbuf = arr.type.num_buffers
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *bufs[1:nbuf]], children=children)


def _byte_width(ctx: DecodeContext, t: pa.DataType, bits: int) -> int:
    if bits % 8:
        raise NotSupportedError(f"{ctx.path}: {bits}-bit flat values are not supported for {t}")
    width = bits // 8
    expected = t.byte_width if pa.types.is_fixed_size_binary(t) else (t.bit_width // 8 if t.bit_width else 0)
    if expected != width:
        raise CorruptFileError(ctx.path, f"{bits}-bit values cannot hold {t}")
    return width


def decode_array(
    ctx: DecodeContext,
    page: PageInfo,
    enc: m.ArrayEncoding,
    runs: RowRuns,
    t: pa.DataType,
    key: tuple[Any, ...],
) -> IOGen[pa.Array]:
    """Selected rows of one page under one node of its encoding tree."""
    n = runs_length(runs)
    if isinstance(enc, m.NoNull):
        return (yield from decode_array(ctx, page, enc.values, runs, t, (*key, "v")))
    if isinstance(enc, m.SomeNull):
        if not isinstance(enc.validity, m.Flat):
            raise NotSupportedError(f"{ctx.path}: validity encoded as {type(enc.validity).__name__}")
        valid, values = yield from gather(
            [
                decode_bits(ctx, page, enc.validity, runs),
                decode_array(ctx, page, enc.values, runs, t, (*key, "v")),
            ]
        )
        return _with_validity(values, valid)
    if isinstance(enc, m.AllNull):
        return pa.nulls(n, t)
    if isinstance(enc, m.Flat):
        if pa.types.is_boolean(t):
            bits = yield from decode_bits(ctx, page, enc, runs)
            return pa.Array.from_buffers(t, n, [None, pa.py_buffer(np.packbits(bits, bitorder="little"))])
        width = _byte_width(ctx, t, enc.bits)
        data = yield from _flat_bytes(ctx, page, enc, runs, width, key)
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(data)])
    if isinstance(enc, m.FixedSizeBinary):
        return (yield from decode_array(ctx, page, enc.bytes, runs, t, (*key, "fsb")))
    if isinstance(enc, m.FixedSizeList):
        if not pa.types.is_fixed_size_list(t) or t.list_size != enc.dimension:
            raise CorruptFileError(ctx.path, f"fixed-size-list encoding of dimension {enc.dimension} for {t}")
        items = yield from decode_array(
            ctx, page, enc.items, runs * enc.dimension, t.value_type, (*key, "fsl")
        )
        return pa.FixedSizeListArray.from_arrays(items, type=t)
    if isinstance(enc, m.Binary):
        return (yield from _decode_binary(ctx, page, enc, runs, t, key))
    if isinstance(enc, m.Dictionary):
        return (yield from _decode_dictionary(ctx, page, enc, runs, t, key))
    if isinstance(enc, m.PackedStruct):
        return (yield from _decode_packed(ctx, page, enc, runs, t))
    if isinstance(enc, m.SimpleStruct | m.List):
        raise CorruptFileError(ctx.path, f"{type(enc).__name__} page where {t} values were expected")
    raise NotSupportedError(f"{ctx.path}: 2.0 encoding {type(enc).__name__} is not supported for {t}")


# -- offsets (shared by binary and list) ----------------------------------------------------------
def _offsets_flat(ctx: DecodeContext, enc: m.ArrayEncoding) -> m.Flat:
    while isinstance(enc, m.NoNull):
        enc = enc.values
    if not isinstance(enc, m.Flat) or enc.bits != 64:
        raise NotSupportedError(f"{ctx.path}: offsets encoded as {enc}")
    return enc


def decode_end_offsets(
    ctx: DecodeContext, page: PageInfo, enc: m.ArrayEncoding, adjustment: int, runs: RowRuns
) -> IOGen[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]]:
    """Page-local ``(starts, ends, null)`` of the selected rows from u64 end offsets.

    Each row stores its end offset; a null row stores ``end + adjustment``. The start of a row is
    the previous row's end (0 for the page's first row).
    """
    flat = _offsets_flat(ctx, enc)
    off, size = _page_buffer(ctx, page, flat.buffer)
    if adjustment <= 0:
        raise CorruptFileError(ctx.path, "offsets page has no null adjustment")
    _check_runs(ctx, runs, size // 8, "an offsets buffer")
    if len(runs) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(0, dtype=bool)
    has_prev = runs[:, 0] > 0
    first = runs[:, 0] - has_prev
    bufs = yield from fetch(
        list(zip((off + first * 8).tolist(), ((runs[:, 1] - first) * 8).tolist(), strict=True))
    )
    fetched = np.frombuffer(join_buffers(bufs), dtype=U64)
    if fetched.size and int(fetched.max()) > np.iinfo(np.int64).max:
        raise CorruptFileError(ctx.path, "offset out of range")
    raw = fetched.astype(np.int64)
    lengths = runs[:, 1] - runs[:, 0]
    if len(runs) == 1:
        seg = raw if has_prev[0] else np.concatenate((np.zeros(1, dtype=np.int64), raw))
        prev_raw, ends_raw = seg[:-1], seg[1:]
    else:
        # Give every run a leading "previous end": the fetched one, or 0 at the page start.
        seg_len = runs[:, 1] - first
        seg_start = np.cumsum(seg_len) - seg_len
        raw = np.insert(raw, seg_start[~has_prev], 0)
        seg_start = np.cumsum(lengths + 1) - (lengths + 1)
        is_head = np.zeros(len(raw), dtype=bool)
        is_head[seg_start] = True
        ends_raw = raw[~is_head]
        is_tail = np.zeros(len(raw), dtype=bool)
        is_tail[seg_start + lengths] = True
        prev_raw = raw[~is_tail]
    if int(ends_raw.max(initial=0)) < adjustment and int(prev_raw.max(initial=0)) < adjustment:
        # No null rows among these: skip the (slow) modulo.
        starts, ends, null = prev_raw, ends_raw, np.zeros(len(ends_raw), dtype=bool)
    else:
        null = ends_raw >= adjustment
        starts = prev_raw % adjustment
        ends = ends_raw % adjustment
    if (ends < starts).any():
        raise CorruptFileError(ctx.path, "offsets decrease")
    return starts, ends, null


def _run_spans(
    runs: RowRuns, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For each run, the span ``[start of its first row, end of its last row)``."""
    lengths = runs[:, 1] - runs[:, 0]
    first = np.cumsum(lengths) - lengths
    last = first + lengths - 1
    return starts[first], ends[last]


def _decode_binary(
    ctx: DecodeContext, page: PageInfo, enc: m.Binary, runs: RowRuns, t: pa.DataType, key: tuple[Any, ...]
) -> IOGen[pa.Array]:
    if not (
        pa.types.is_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_large_string(t)
    ):
        raise CorruptFileError(ctx.path, f"binary encoding where {t} values were expected")
    n = runs_length(runs)
    starts, ends, null = yield from decode_end_offsets(ctx, page, enc.indices, enc.null_adjustment, runs)
    if not isinstance(enc.bytes, m.Flat) or enc.bytes.bits != 8:
        raise NotSupportedError(f"{ctx.path}: binary bytes encoded as {enc.bytes}")
    lengths = ends - starts
    data: bytes | memoryview = b""
    if n:
        lo, hi = _run_spans(runs, starts, ends)
        span_runs = np.stack([lo, hi], axis=1)
        nonempty = span_runs[hi > lo]
        data = yield from _flat_bytes(ctx, page, enc.bytes, nonempty, 1, (*key, "bytes"))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
    if not large:
        if offsets[-1] > np.iinfo(np.int32).max:
            raise NotSupportedError(f"{ctx.path}: more than 2 GiB of {t} in one read; use the large type")
        offsets = offsets.astype(np.int32)
    return pa.Array.from_buffers(t, n, [_bitmap(~null), pa.py_buffer(offsets), pa.py_buffer(data)])


def _decode_dictionary(
    ctx: DecodeContext, page: PageInfo, enc: m.Dictionary, runs: RowRuns, t: pa.DataType, key: tuple[Any, ...]
) -> IOGen[pa.Array]:
    value_type = t.value_type if pa.types.is_dictionary(t) else t
    items_key = (*key, "dict")
    items = ctx.cache.get(items_key)
    ind_enc = enc.indices
    while isinstance(ind_enc, m.NoNull):
        ind_enc = ind_enc.values
    if not isinstance(ind_enc, m.Flat) or ind_enc.bits not in (8, 16, 32, 64):
        raise NotSupportedError(f"{ctx.path}: dictionary indices encoded as {ind_enc}")
    index_type = pa.from_numpy_dtype(np.dtype(f"<u{ind_enc.bits // 8}"))
    gens: list[IOGen[pa.Array]] = [decode_array(ctx, page, ind_enc, runs, index_type, (*key, "idx"))]
    if items is None:
        all_items = (
            np.array([[0, enc.num_dictionary_items]], dtype=np.int64)
            if enc.num_dictionary_items
            else runs[:0]
        )
        gens.append(decode_array(ctx, page, enc.items, all_items, value_type, items_key))
    got = yield from gather(gens)
    if items is None:
        items = got[1]
        ctx.cache[items_key] = items
    idx = got[0].to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_dictionary(t):
        # Arrow dictionary input: 0-based keys; null rows point at a null item.
        if len(idx) and idx.max() >= len(items):
            raise CorruptFileError(ctx.path, "dictionary index out of range")
        item_valid = np.asarray(items.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        keys = pa.array(idx, type=t.index_type, mask=~item_valid[idx] if len(idx) else None)
        return pa.DictionaryArray.from_arrays(keys, items)
    # Auto-dictionary: 0 means null, k means items[k - 1].
    if len(idx) and idx.max() > len(items):
        raise CorruptFileError(ctx.path, "dictionary index out of range")
    null = idx == 0
    taken = items.take(pa.array(np.where(null, 0, idx - 1), mask=null))
    return taken


def _decode_packed(
    ctx: DecodeContext, page: PageInfo, enc: m.PackedStruct, runs: RowRuns, t: pa.DataType
) -> IOGen[pa.Array]:
    if not pa.types.is_struct(t) or len(enc.inner) != t.num_fields:
        raise CorruptFileError(ctx.path, f"packed struct of {len(enc.inner)} fields for {t}")
    widths = []
    for inner in enc.inner:
        flat = inner.values if isinstance(inner, m.NoNull) else inner
        if not isinstance(flat, m.Flat) or flat.bits % 8:
            raise NotSupportedError(f"{ctx.path}: packed struct child encoded as {inner}")
        widths.append(flat.bits // 8)
    row = sum(widths)
    data = yield from _flat_bytes(ctx, page, m.Flat(row * 8, enc.buffer), runs, row, ())
    n = runs_length(runs)
    table = np.frombuffer(data, dtype=np.uint8).reshape(n, row)
    children = []
    pos = 0
    for f, w in zip(t, widths, strict=True):
        if pa.types.is_boolean(f.type) or _byte_width(ctx, f.type, w * 8) != w:
            raise NotSupportedError(f"{ctx.path}: packed struct child {f.type}")
        chunk = np.ascontiguousarray(table[:, pos : pos + w])
        children.append(pa.Array.from_buffers(f.type, n, [None, pa.py_buffer(chunk.tobytes())]))
        pos += w
    return pa.StructArray.from_arrays(children, fields=list(t))


# -- lists ------------------------------------------------------------------------------------
def _page_item_starts(ctx: DecodeContext, col: ColumnInfo) -> npt.NDArray[np.int64]:
    key = (col.index, "item_starts")
    cached = ctx.cache.get(key)
    if cached is None:
        counts = []
        for p in col.pages:
            if not isinstance(p.encoding, m.List):
                raise CorruptFileError(
                    ctx.path, f"column {col.index}: list column page is {type(p.encoding).__name__}"
                )
            counts.append(p.encoding.num_items)
        cached = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=cached[1:])
        ctx.cache[key] = cached
    return np.asarray(cached, dtype=np.int64)


def _decode_list(
    ctx: DecodeContext,
    field: LanceField,
    col: ColumnInfo,
    columns_of: dict[int, int],
    runs: RowRuns,
    t: pa.DataType,
) -> IOGen[pa.Array]:
    item_starts = _page_item_starts(ctx, col)
    pages = split_runs(runs, col.page_starts)
    gens = []
    for p, local in pages:
        enc = col.pages[p].encoding
        assert isinstance(enc, m.List)
        gens.append(decode_end_offsets(ctx, col.pages[p], enc.offsets, enc.null_offset_adjustment, local))
    parts = yield from gather(gens)
    n = runs_length(runs)
    starts_all, ends_all, null_all, spans = [], [], [], []
    for (p, local), (starts, ends, null) in zip(pages, parts, strict=True):
        enc = col.pages[p].encoding
        assert isinstance(enc, m.List)
        if len(ends) and int(ends.max()) > enc.num_items:
            raise CorruptFileError(ctx.path, f"column {col.index}: list offsets exceed the page's items")
        lo, hi = _run_spans(local, starts, ends)
        base = int(item_starts[p])
        spans.append(np.stack([lo + base, hi + base], axis=1))
        starts_all.append(starts)
        ends_all.append(ends)
        null_all.append(null)
    if spans:
        item_runs = np.concatenate(spans)
        item_runs = item_runs[item_runs[:, 1] > item_runs[:, 0]]
        lengths = np.concatenate(ends_all) - np.concatenate(starts_all)
        null = np.concatenate(null_all)
    else:
        item_runs = np.zeros((0, 2), dtype=np.int64)
        lengths = np.zeros(0, dtype=np.int64)
        null = np.zeros(0, dtype=bool)
    child = yield from decode_field(ctx, field.children[0], columns_of, item_runs)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if not pa.types.is_large_list(t):
        offsets = offsets.astype(np.int32)
    return pa.Array.from_buffers(t, n, [_bitmap(~null), pa.py_buffer(offsets)], children=[child])
