"""Decoding the selected rows of one 2.0 page, node by node of its encoding tree.

:func:`decode_array` walks the tree, handing each node to the decoder registered for its dataclass
(see :func:`registered`): nullability wrappers, flat values and bitmaps, fixed-size lists,
variable-width binary (plain or FSST), dictionaries, packed structs, bit-packed integers and
constants. Each node reads only what the selected rows need; dictionaries are read once per page
and kept in ``ctx.cache``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import CorruptFileError, NotSupportedError
from lance_format.encodings.base import (
    DecodeContext,
    IOGen,
    PageInfo,
    RowRuns,
    fetch,
    gather,
    join_buffers,
    pair_columns,
    runs_length,
)
from lance_format.encodings.registry import Registry
from lance_format.encodings.v20 import model as m
from lance_format.encodings.v20.buffers import (
    and_validity,
    bitmap,
    check_runs,
    flat_bytes,
    page_buffer,
    read_bits,
    read_end_offsets,
    run_spans,
)

__all__ = ["NodeDecoder", "decode_array", "fixed_width", "registered"]

# Largest 32-bit offset (a constant: np.iinfo costs microseconds per call on the take path).
_I32_MAX = 2**31 - 1

Key = tuple[Any, ...]


def _is_binary_like(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    )


def _is_large(t: pa.DataType) -> bool:
    return bool(pa.types.is_large_string(t) or pa.types.is_large_binary(t))


# fixed_width by type: the pyarrow type checks cost microseconds per call on the take path.
_WIDTHS: dict[pa.DataType, int] = {}
#: Types :func:`fixed_width` remembers: types come from clients' schemas (timestamp time zones,
#: fixed-size binary widths, decimals), so the table is emptied when it reaches this many.
WIDTH_TYPES = 1024


def fixed_width(t: pa.DataType) -> int:
    """Bytes per value of a fixed-width Arrow type (0 for anything else, bool included)."""
    width = _WIDTHS.get(t)
    if width is None:
        width = _fixed_width(t)
        if len(_WIDTHS) >= WIDTH_TYPES:
            _WIDTHS.clear()
        _WIDTHS[t] = width
    return width


def _fixed_width(t: pa.DataType) -> int:
    if pa.types.is_fixed_size_binary(t):
        return int(t.byte_width)
    if pa.types.is_boolean(t) or pa.types.is_null(t) or _is_binary_like(t):
        return 0
    try:
        bits = int(t.bit_width)
    except ValueError:
        return 0
    return bits // 8 if bits % 8 == 0 else 0


def _check_width(ctx: DecodeContext, t: pa.DataType, bits: int) -> int:
    width = fixed_width(t)
    if bits != width * 8 or width == 0:
        raise CorruptFileError(ctx.path, f"{bits}-bit values cannot hold {t}")
    return width


def _from_values(t: pa.DataType, n: int, data: bytes | memoryview | pa.Buffer) -> pa.Array:
    buf = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
    return pa.Array.from_buffers(t, n, [None, buf])


def decode_array(
    ctx: DecodeContext, page: PageInfo, enc: m.ArrayEncoding, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    """Decoder for the selected values of one page under one node of its encoding tree.

    Parameters
    ----------
    ctx, page:
        The file and the page.
    enc:
        The node.
    runs:
        Page-local runs of the values to decode.
    t:
        Arrow type of the result.
    key:
        Cache key of the node (starts with the column index and page number).

    Returns
    -------
    pyarrow.Array
        ``runs_length(runs)`` values of type ``t``, in run order.
    """
    decoder = _BY_TYPE.get(type(enc), _not_supported)
    return (yield from decoder(ctx, page, enc, runs, t, key))


#: Decodes the selected values of a page under one node: ``(ctx, page, node, runs, type, key)``.
NodeDecoder = Callable[[DecodeContext, PageInfo, Any, RowRuns, pa.DataType, Key], IOGen[pa.Array]]

_DECODERS: Registry[NodeDecoder] = Registry("a decoder")
_BY_TYPE = _DECODERS.table  # looked up once per node of a page's encoding tree


def _node(*kinds: type[Any]) -> Callable[[NodeDecoder], NodeDecoder]:
    """Register a function as the decoder of the node dataclasses ``kinds`` (one per kind)."""

    def add(fn: NodeDecoder) -> NodeDecoder:
        for kind in kinds:
            _DECODERS.add(kind, fn)
        return fn

    return add


def registered() -> Mapping[type[Any], NodeDecoder]:
    """Every 2.0 array-encoding node type with its decoder (read-only)."""
    return _DECODERS.view()


def _not_supported(
    ctx: DecodeContext, page: PageInfo, enc: Any, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    raise NotSupportedError(f"{ctx.path}: the 2.0 encoding {type(enc).__name__} is not supported for {t}")
    yield from ()  # a generator like every node decoder


# Non-negative FastLanes bit-packing is a 2.1 draft, never in a 2.0 page.
_node(m.BitpackedForNonNeg)(_not_supported)


@_node(m.SimpleStruct, m.List)
def _decode_not_values(
    ctx: DecodeContext, page: PageInfo, enc: m.SimpleStruct | m.List, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    """Struct and list pages describe other columns; they hold no values of their own."""
    raise CorruptFileError(ctx.path, f"{type(enc).__name__} page where {t} values were expected")
    yield from ()  # a generator like every node decoder


@_node(m.NoNull)
def _decode_no_null(
    ctx: DecodeContext, page: PageInfo, enc: m.NoNull, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    return (yield from decode_array(ctx, page, enc.values, runs, t, (*key, "v")))


@_node(m.SomeNull)
def _decode_some_null(
    ctx: DecodeContext, page: PageInfo, enc: m.SomeNull, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    validity = enc.validity.values if isinstance(enc.validity, m.NoNull) else enc.validity
    if not isinstance(validity, m.Flat):
        raise NotSupportedError(f"{ctx.path}: validity encoded as {type(validity).__name__}")
    valid, values = yield from gather(
        [
            read_bits(ctx, page, validity, runs, (*key, "valid")),
            decode_array(ctx, page, enc.values, runs, t, (*key, "v")),
        ]
    )
    return and_validity(values, valid)


@_node(m.AllNull)
def _decode_all_null(
    ctx: DecodeContext, page: PageInfo, enc: m.AllNull, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    yield from ()  # a generator like every node decoder
    return pa.nulls(runs_length(runs), t)


@_node(m.Flat)
def _decode_flat(
    ctx: DecodeContext, page: PageInfo, enc: m.Flat, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    n = runs_length(runs)
    if pa.types.is_boolean(t):
        bits = yield from read_bits(ctx, page, enc, runs, key)
        return _from_values(t, n, np.packbits(bits, bitorder="little"))
    width = _check_width(ctx, t, enc.bits)
    data = yield from flat_bytes(ctx, page, enc, runs, width, key)
    return _from_values(t, n, data)


@_node(m.FixedSizeList)
def _decode_fixed_size_list(
    ctx: DecodeContext, page: PageInfo, enc: m.FixedSizeList, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    if not pa.types.is_fixed_size_list(t) or t.list_size != enc.dimension:
        raise CorruptFileError(ctx.path, f"fixed-size-list encoding of dimension {enc.dimension} for {t}")
    items = yield from decode_array(ctx, page, enc.items, runs * enc.dimension, t.value_type, (*key, "fsl"))
    return pa.FixedSizeListArray.from_arrays(items, type=t)


# -- variable-width values ------------------------------------------------------------------------
def _varbin(
    t: pa.DataType, n: int, lengths: npt.NDArray[np.int64], null: Any, data: Any, ctx: DecodeContext
) -> pa.Array:
    """A binary-like array from row lengths, a null mask (or None) and the concatenated bytes."""
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if not _is_large(t):
        if offsets[-1] > _I32_MAX:
            raise NotSupportedError(
                f"{ctx.path}: more than 2 GiB of {t} in one read; read it as the large type"
            )
        offsets = offsets.astype(np.int32)
    validity = None if null is None else bitmap(~null)
    return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])


def _binary_parts(
    ctx: DecodeContext, page: PageInfo, enc: m.Binary, runs: RowRuns, key: Key
) -> IOGen[tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], bytes | memoryview]]:
    """Row lengths, null mask and bytes of the selected rows of a binary node."""
    starts, ends, null = yield from read_end_offsets(ctx, page, enc.indices, enc.null_adjustment, runs, key)
    data: bytes | memoryview = b""
    if len(runs):
        by = enc.bytes.values if isinstance(enc.bytes, m.NoNull) else enc.bytes
        if not isinstance(by, m.Flat) or by.bits != 8:
            raise NotSupportedError(f"{ctx.path}: binary bytes encoded as {enc.bytes}")
        lo, hi = run_spans(runs, starts, ends)
        spans = pair_columns(lo, hi)
        data = yield from flat_bytes(ctx, page, by, spans[hi > lo], 1, (*key, "bytes"))
    return ends - starts, null, data


@_node(m.Binary)
def _decode_binary(
    ctx: DecodeContext, page: PageInfo, enc: m.Binary, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    if not _is_binary_like(t):
        raise CorruptFileError(ctx.path, f"binary encoding where {t} values were expected")
    lengths, null, data = yield from _binary_parts(ctx, page, enc, runs, key)
    return _varbin(t, runs_length(runs), lengths, null, data, ctx)


@_node(m.Fsst)
def _decode_fsst(
    ctx: DecodeContext, page: PageInfo, enc: m.Fsst, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    # FSST in Lance's own symbol-table serialization; the 2.1 decoders share the codec.
    from lance_format.encodings.v21.compressive import fsst_decompress

    if not _is_binary_like(t):
        raise CorruptFileError(ctx.path, f"FSST encoding where {t} values were expected")
    inner, valid = enc.binary, None
    if isinstance(inner, m.SomeNull):
        flat = inner.validity.values if isinstance(inner.validity, m.NoNull) else inner.validity
        if not isinstance(flat, m.Flat):
            raise NotSupportedError(f"{ctx.path}: validity encoded as {type(flat).__name__}")
        valid = yield from read_bits(ctx, page, flat, runs, (*key, "valid"))
        inner = inner.values
    while isinstance(inner, m.NoNull):
        inner = inner.values
    if not isinstance(inner, m.Binary):
        raise NotSupportedError(f"{ctx.path}: FSST over {type(inner).__name__}")
    lengths, null, data = yield from _binary_parts(ctx, page, inner, runs, (*key, "fsst"))
    n = runs_length(runs)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    try:
        out_offsets, out = fsst_decompress(enc.symbol_table, offsets, np.frombuffer(data, dtype=np.uint8))
    except ValueError as e:
        raise CorruptFileError(ctx.path, f"FSST data does not decode: {e}") from None
    if valid is not None:
        null = null | ~valid
    return _varbin(t, n, np.diff(out_offsets), null, out, ctx)


@_node(m.FixedSizeBinary)
def _decode_fixed_size_binary(
    ctx: DecodeContext, page: PageInfo, enc: m.FixedSizeBinary, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    """Binary values that all have ``byte_width`` bytes (or an Arrow fixed_size_binary)."""
    w = enc.byte_width
    by = enc.bytes.values if isinstance(enc.bytes, m.NoNull) else enc.bytes
    if not isinstance(by, m.Flat) or by.bits not in (8, 8 * w):
        raise NotSupportedError(f"{ctx.path}: fixed-size binary bytes encoded as {enc.bytes}")
    n = runs_length(runs)
    data = yield from flat_bytes(ctx, page, m.Flat(8 * w, by.buffer, by.compression), runs, w, (*key, "fsb"))
    if pa.types.is_fixed_size_binary(t) and t.byte_width == w:
        return _from_values(t, n, data)
    if not _is_binary_like(t):
        raise CorruptFileError(ctx.path, f"fixed-size binary encoding where {t} values were expected")
    return _varbin(t, n, np.full(n, w, dtype=np.int64), None, data, ctx)


# -- dictionaries ---------------------------------------------------------------------------------
# The integer width each node kind that can hold dictionary indices decodes to.
_INT_BITS: dict[type[Any], Callable[[Any], int]] = {
    m.Flat: attrgetter("bits"),
    m.Bitpacked: attrgetter("uncompressed_bits"),
    m.BitpackedForNonNeg: attrgetter("uncompressed_bits"),
}


def _int_bits(ctx: DecodeContext, enc: m.ArrayEncoding) -> int:
    """Width of the integers an index encoding decodes to."""
    while isinstance(enc, m.NoNull):
        enc = enc.values
    width = _INT_BITS.get(type(enc))
    bits = width(enc) if width is not None else 0
    if bits not in (8, 16, 32, 64):
        raise NotSupportedError(f"{ctx.path}: dictionary indices encoded as {enc}")
    return bits


def _dictionary_items(
    ctx: DecodeContext, page: PageInfo, enc: m.Dictionary, value_type: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    """All items of a page's dictionary, read once per reader."""
    cache_key = (*key, "dict")
    items = ctx.cache.get(cache_key)
    if items is None:
        count = enc.num_dictionary_items
        all_items = np.array([[0, count]], dtype=np.int64) if count else np.zeros((0, 2), dtype=np.int64)
        items = yield from decode_array(ctx, page, enc.items, all_items, value_type, cache_key)
        ctx.cache[cache_key] = items
    assert isinstance(items, pa.Array)
    return items


@_node(m.Dictionary)
def _decode_dictionary(
    ctx: DecodeContext, page: PageInfo, enc: m.Dictionary, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    value_type = t.value_type if pa.types.is_dictionary(t) else t
    index_type = pa.from_numpy_dtype(np.dtype(f"<u{_int_bits(ctx, enc.indices) // 8}"))
    keys, items = yield from gather(
        [
            decode_array(ctx, page, enc.indices, runs, index_type, (*key, "idx")),
            _dictionary_items(ctx, page, enc, value_type, key),
        ]
    )
    idx = np.asarray(keys.to_numpy(zero_copy_only=False), dtype=np.int64)
    if pa.types.is_dictionary(t):
        # An Arrow dictionary was written: 0-based keys; null rows point at a null item.
        if len(idx) and int(idx.max()) >= len(items):
            raise CorruptFileError(ctx.path, "dictionary index out of range")
        item_valid = np.asarray(items.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        null = ~item_valid[idx] if len(idx) else np.zeros(0, dtype=bool)
        keys_out = pa.array(np.where(null, 0, idx), type=t.index_type, mask=null if null.any() else None)
        return pa.DictionaryArray.from_arrays(keys_out, items)
    # A string column pylance chose to dictionary-encode: 0 is null, k is items[k - 1].
    if len(idx) and int(idx.max()) > len(items):
        raise CorruptFileError(ctx.path, "dictionary index out of range")
    null = idx == 0
    return items.take(pa.array(np.where(null, 0, idx - 1), mask=null if null.any() else None))


# -- packed structs --------------------------------------------------------------------------------
def _packed_child(ctx: DecodeContext, enc: m.ArrayEncoding, t: pa.DataType) -> int:
    """Bytes per row of one packed-struct child (fixed width, full bytes only)."""
    while isinstance(enc, m.NoNull):
        enc = enc.values
    if isinstance(enc, m.Flat) and not pa.types.is_boolean(t):
        return _check_width(ctx, t, enc.bits)
    if isinstance(enc, m.FixedSizeList) and pa.types.is_fixed_size_list(t) and t.list_size == enc.dimension:
        return enc.dimension * _packed_child(ctx, enc.items, t.value_type)
    raise NotSupportedError(f"{ctx.path}: packed struct child {t} encoded as {enc}")


def _packed_array(t: pa.DataType, n: int, column: npt.NDArray[np.uint8]) -> pa.Array:
    """A child array from its ``(n, width)`` byte matrix."""
    if pa.types.is_fixed_size_list(t):
        items = _packed_array(t.value_type, n * t.list_size, column.reshape(n * t.list_size, -1))
        return pa.FixedSizeListArray.from_arrays(items, type=t)
    return _from_values(t, n, np.ascontiguousarray(column))


@_node(m.PackedStruct)
def _decode_packed(
    ctx: DecodeContext, page: PageInfo, enc: m.PackedStruct, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    if not pa.types.is_struct(t) or len(enc.inner) != t.num_fields:
        raise CorruptFileError(ctx.path, f"packed struct of {len(enc.inner)} fields for {t}")
    widths = [_packed_child(ctx, inner, f.type) for inner, f in zip(enc.inner, t, strict=True)]
    row = sum(widths)
    n = runs_length(runs)
    if row == 0:
        raise CorruptFileError(ctx.path, "packed struct of zero-width rows")
    data = yield from flat_bytes(ctx, page, m.Flat(row * 8, enc.buffer), runs, row, (*key, "packed"))
    table = np.frombuffer(data, dtype=np.uint8).reshape(n, row)
    bounds = np.cumsum([0, *widths])
    children = [
        _packed_array(f.type, n, table[:, int(lo) : int(hi)])
        for f, lo, hi in zip(t, bounds[:-1], bounds[1:], strict=True)
    ]
    return pa.StructArray.from_arrays(children, fields=list(t))


# -- bit-packed integers and constants ------------------------------------------------------------
@_node(m.Bitpacked)
def _decode_bitpacked(
    ctx: DecodeContext, page: PageInfo, enc: m.Bitpacked, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    """Values stored as one LSB-first stream of ``compressed_bits`` bits each (sign-extended)."""
    bits, out_bits = enc.compressed_bits, enc.uncompressed_bits
    if fixed_width(t) * 8 != out_bits or not 0 < bits <= out_bits or out_bits not in (8, 16, 32, 64):
        raise CorruptFileError(ctx.path, f"{bits}-in-{out_bits}-bit packed values for {t}")
    n = runs_length(runs)
    off, size = page_buffer(ctx, page, enc.buffer)
    check_runs(ctx, runs, size * 8 // bits, "a bit-packed buffer")
    if n == 0:
        return _from_values(t, 0, b"")
    first = runs[:, 0] * bits // 8
    last = (runs[:, 1] * bits + 7) // 8
    got = yield from fetch(list(zip((off + first).tolist(), (last - first).tolist(), strict=True)))
    stream = np.unpackbits(np.frombuffer(join_buffers(got), dtype=np.uint8), bitorder="little")
    # Bit position (in the fetched stream) of every selected value's first bit.
    byte_start = np.cumsum(last - first) - (last - first)
    lengths = runs[:, 1] - runs[:, 0]
    base = np.repeat(byte_start * 8 - first * 8, lengths)
    rows = np.repeat(runs[:, 0], lengths) + (np.arange(n) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    pos = base + rows * bits
    matrix = np.zeros((n, out_bits), dtype=np.uint8)
    matrix[:, :bits] = stream[pos[:, None] + np.arange(bits)[None, :]]
    if enc.signed and bits < out_bits:
        matrix[:, bits:] = matrix[:, bits - 1 : bits]
    return _from_values(t, n, np.packbits(matrix, axis=1, bitorder="little"))


@_node(m.Constant)
def _decode_constant(
    ctx: DecodeContext, page: PageInfo, enc: m.Constant, runs: RowRuns, t: pa.DataType, key: Key
) -> IOGen[pa.Array]:
    yield from ()  # a generator like every node decoder
    n = runs_length(runs)
    if pa.types.is_boolean(t):
        if len(enc.value) != 1:
            raise CorruptFileError(ctx.path, "boolean constant is not one byte")
        bits = np.full(n, bool(enc.value[0]), dtype=bool)
        return _from_values(t, n, np.packbits(bits, bitorder="little"))
    width = fixed_width(t)
    if width == 0:
        raise NotSupportedError(f"{ctx.path}: constant pages of {t} are not supported")
    if len(enc.value) != width:
        raise CorruptFileError(ctx.path, f"constant of {len(enc.value)} bytes for {t}")
    return _from_values(t, n, np.tile(np.frombuffer(enc.value, dtype=np.uint8), n))
