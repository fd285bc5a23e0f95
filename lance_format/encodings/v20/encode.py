"""Encoding Arrow arrays as 2.0 pages, the way pylance 14 writes them.

Every field gets a column: a struct writes a ``SimpleStruct`` page and its children write their own;
a list writes u64 end offsets and its items go to the item column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import NotSupportedError
from lance_format.core.types import LanceField
from lance_format.encodings.base import EncodedPage
from lance_format.encodings.buffer_compression import compress
from lance_format.encodings.v20 import model as m
from lance_format.encodings.v20._serde import array_encoding_to_bytes, column_encoding_to_bytes

__all__ = ["check_writable", "column_encoding_for", "encode_field"]

# pylance dictionary-encodes a `string` page when it has at least this many rows and fewer distinct
# values than this (LANCE_DICT_ENCODING_THRESHOLD, default 100); matching it keeps files alike.
DICT_ENCODING_THRESHOLD = 100

# Field metadata that opts string/binary bytes into general compression (as in pylance's 2.0 writer).
COMPRESSION_KEY = "lance-encoding:compression"


def check_writable(field: LanceField) -> None:
    """Refuse, before any data is written, types a 2.0 file cannot hold."""
    t = field.to_arrow().type
    if pa.types.is_fixed_size_list(t):
        vt = t.value_type
        while pa.types.is_fixed_size_list(vt):
            vt = vt.value_type
        if not (pa.types.is_primitive(vt) or pa.types.is_fixed_size_binary(vt) or pa.types.is_decimal(vt)):
            raise NotSupportedError(f"field {field.name!r}: fixed-size lists of {vt} are not supported")
    if pa.types.is_dictionary(t) and not _is_binary_like(t.value_type):
        raise NotSupportedError(f"field {field.name!r}: dictionaries of {t.value_type} are not supported")
    if pa.types.is_decimal256(t):
        raise NotSupportedError(f"field {field.name!r}: decimal256 is not supported")


def column_encoding_for(field: LanceField) -> tuple[str, bytes]:
    """Column-level encoding: plain values."""
    return column_encoding_to_bytes(m.Values())


class _Buffers:
    """Page buffers in the order the encoding tree names them."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def add(self, data: Any) -> m.BufferRef:
        self.items.append(data)
        return m.BufferRef(len(self.items) - 1)


def _valid(arr: pa.Array) -> npt.NDArray[np.bool_]:
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _bitmap(bools: npt.NDArray[np.bool_]) -> bytes:
    return np.packbits(bools, bitorder="little").tobytes()


def _fixed_bytes(arr: pa.Array, width: int) -> memoryview:
    buf = arr.buffers()[1]
    return (
        memoryview(buf)[arr.offset * width : (arr.offset + len(arr)) * width]
        if buf is not None
        else memoryview(b"")
    )


def _with_nulls(
    arr: pa.Array, values: m.ArrayEncoding, bufs: _Buffers, validity_first: m.BufferRef | None
) -> m.ArrayEncoding:
    if validity_first is None:
        return m.NoNull(values)
    return m.SomeNull(m.Flat(1, validity_first), values)


def _encode_values(
    arr: pa.Array, bufs: _Buffers, name: str, compression: str | None = None
) -> m.ArrayEncoding:
    """A leaf array (anything but struct and list) as an encoding tree plus buffers."""
    t = arr.type
    n = len(arr)
    if pa.types.is_null(t) or (
        n and arr.null_count == n and not _is_binary_like(t) and not pa.types.is_dictionary(t)
    ):
        return m.AllNull()
    if pa.types.is_dictionary(t):
        return _encode_arrow_dictionary(arr, bufs, name)
    if _is_binary_like(t):
        if pa.types.is_string(t) and _auto_dictionary(arr):
            return _encode_auto_dictionary(arr, bufs)
        return _encode_binary(arr, bufs, compression)
    validity = bufs.add(_bitmap(_valid(arr))) if arr.null_count else None
    if pa.types.is_boolean(t):
        bits = np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)
        return _with_nulls(arr, m.Flat(1, bufs.add(_bitmap(bits))), bufs, validity)
    if pa.types.is_fixed_size_list(t):
        dim = t.list_size
        child = arr.values.slice(arr.offset * dim, n * dim)
        items = _encode_values(child, bufs, name)
        return _with_nulls(arr, m.FixedSizeList(dim, items), bufs, validity)
    width = t.byte_width if pa.types.is_fixed_size_binary(t) else t.bit_width // 8
    if not width:
        raise NotSupportedError(f"field {name!r}: cannot write {t} in a 2.0 file")
    return _with_nulls(arr, m.Flat(width * 8, bufs.add(_fixed_bytes(arr, width))), bufs, validity)


def _is_binary_like(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    )


def _auto_dictionary(arr: pa.Array) -> bool:
    if len(arr) < DICT_ENCODING_THRESHOLD:
        return False
    return bool(int(pc.count_distinct(arr, mode="only_valid").as_py()) < DICT_ENCODING_THRESHOLD)


def _binary_parts(arr: pa.Array) -> tuple[npt.NDArray[np.uint64], memoryview, int]:
    """u64 end offsets (null rows + adjustment), the bytes, and the adjustment."""
    offs_t = (
        np.int64 if (pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)) else np.int32
    )
    n = len(arr)
    raw_offsets = arr.buffers()[1]
    offs = (
        np.frombuffer(raw_offsets, dtype=offs_t)[arr.offset : arr.offset + n + 1].astype(np.int64)
        if raw_offsets is not None
        else np.zeros(n + 1, dtype=np.int64)
    )
    start, end = int(offs[0]), int(offs[-1])
    data = arr.buffers()[2]
    body = memoryview(data)[start:end] if data is not None else memoryview(b"")
    ends = (offs[1:] - start).astype(np.uint64)
    adjustment = end - start + 1
    if arr.null_count:
        ends[~_valid(arr)] += np.uint64(adjustment)
    return ends, body, adjustment


def _encode_binary(arr: pa.Array, bufs: _Buffers, compression: str | None = None) -> m.Binary:
    ends, body, adjustment = _binary_parts(arr)
    offsets_ref = bufs.add(ends.astype("<u8").tobytes())
    bytes_ref = bufs.add(compress(compression, body) if compression else body)
    return m.Binary(m.NoNull(m.Flat(64, offsets_ref)), m.Flat(8, bytes_ref, compression), adjustment)


def _index_bits(count: int) -> int:
    for bits in (8, 16, 32):
        if count < (1 << bits):
            return bits
    return 64


def _encode_auto_dictionary(arr: pa.Array, bufs: _Buffers) -> m.Dictionary:
    items = pc.unique(arr.drop_null())
    if len(items) == 0:
        items = pa.nulls(1, arr.type)  # pylance stores an all-null page as one null item
        indices = np.zeros(len(arr), dtype=np.int64)
    else:
        indices = np.asarray(
            pc.fill_null(pc.add(pc.index_in(arr, items), 1), 0).to_numpy(zero_copy_only=False)
        )
    bits = _index_bits(len(items) + 1)
    idx_ref = bufs.add(indices.astype(f"<u{bits // 8}").tobytes())
    item_enc = _encode_binary(items, bufs)
    return m.Dictionary(m.NoNull(m.Flat(bits, idx_ref)), item_enc, len(items))


def _encode_arrow_dictionary(arr: pa.Array, bufs: _Buffers, name: str) -> m.Dictionary:
    keys = arr.indices
    items = arr.dictionary
    key_np = np.asarray(pc.fill_null(keys, 0).to_numpy(zero_copy_only=False)).astype(np.int64)
    null_rows = ~_valid(arr)
    if null_rows.any():
        # Null rows point at an extra null item, as pylance writes them.
        items = pa.concat_arrays([items, pa.nulls(1, items.type)])
        key_np[null_rows] = len(items) - 1
    bits = keys.type.bit_width
    idx_ref = bufs.add(key_np.astype(np.dtype(keys.type.to_pandas_dtype()).newbyteorder("<")).tobytes())
    if not _is_binary_like(items.type):
        raise NotSupportedError(f"field {name!r}: dictionaries of {items.type} are not supported")
    return m.Dictionary(m.NoNull(m.Flat(bits, idx_ref)), _encode_binary(items, bufs), len(items))


def _page(
    columns_of: dict[int, int], field: LanceField, enc: m.ArrayEncoding, bufs: _Buffers, n: int
) -> EncodedPage:
    return EncodedPage(columns_of[field.id], bufs.items, n, array_encoding_to_bytes(enc))


def encode_field(field: LanceField, arr: pa.Array, columns_of: dict[int, int]) -> list[EncodedPage]:
    """Pages of every column of ``field`` for the rows of ``arr`` (one page per column)."""
    out: list[EncodedPage] = []
    _encode(field, arr, columns_of, out)
    return out


def _encode(field: LanceField, arr: pa.Array, columns_of: dict[int, int], out: list[EncodedPage]) -> None:
    t = arr.type
    n = len(arr)
    if pa.types.is_struct(t):
        if arr.null_count:
            raise NotSupportedError(
                f"field {field.name!r}: Lance file version 2.0 does not encode struct validity; "
                "use 2.1 or later"
            )
        out.append(EncodedPage(columns_of[field.id], [], n, array_encoding_to_bytes(m.SimpleStruct())))
        for i, child in enumerate(field.children):
            _encode(child, arr.field(i), columns_of, out)
        return
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        offs = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        start, end = int(offs[0]), int(offs[-1])
        ends = (offs[1:] - start).astype(np.uint64)
        adjustment = end - start + 1
        if arr.null_count:
            ends[~_valid(arr)] += np.uint64(adjustment)
        bufs = _Buffers()
        ref = bufs.add(ends.astype("<u8").tobytes())
        enc = m.List(m.NoNull(m.Flat(64, ref)), adjustment, end - start)
        out.append(_page(columns_of, field, enc, bufs, n))
        _encode(field.children[0], arr.values.slice(start, end - start), columns_of, out)
        return
    bufs = _Buffers()
    scheme = field.metadata.get(COMPRESSION_KEY, b"").decode(errors="replace").lower()
    leaf = _encode_values(arr, bufs, field.name, scheme if scheme in ("zstd", "lz4") else None)
    out.append(_page(columns_of, field, leaf, bufs, n))
