"""Encoding one page of a column that holds values (anything but struct and list), as pylance 14 does.

:func:`encode_values` turns an Arrow array into an encoding tree (:mod:`.model`) and appends the
page buffers the tree names, in the order pylance writes them:

* fixed-width values: ``nullable{no_nulls|some_nulls{validity, values}}`` around ``flat``; bits
  under null slots are kept as the Arrow buffer has them;
* every value null (or no rows at all): ``nullable{all_nulls}`` with no buffers;
* strings and binary: ``binary`` with u64 end offsets, null rows marked by ``+ null_adjustment``;
  a plain ``string`` page with at least 100 rows and fewer than 100 distinct values becomes an
  ``dictionary`` (u8 indices, 0 = null) instead;
* Arrow dictionaries: 0-based keys, null rows pointing at a null item (appended when needed);
* fixed-size lists: row validity, then the items' own encoding;
* packed structs: ``packed_struct`` of fixed-width children, row-major in one buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.config import EngineConfig
from lance_format.core.errors import InvalidInputError, NotSupportedError
from lance_format.encodings.buffer_compression import compress
from lance_format.encodings.v20 import model as m

__all__ = [
    "COMPRESSION_KEY",
    "COMPRESSION_LEVEL_KEY",
    "DICT_ENCODING_THRESHOLD",
    "PageBuffers",
    "encode_packed_struct",
    "encode_values",
    "is_binary_like",
    "packed_child_width",
]

# pylance dictionary-encodes a plain `string` page of at least this many rows with fewer distinct
# values than this (it estimates the count with a HyperLogLog; we count exactly). Same default as
# pylance, so both write the same files: setting ``dict_encoding_threshold``'s default (a writer
# passes its session's value).
DICT_ENCODING_THRESHOLD: int = EngineConfig.dict_encoding_threshold

# Field metadata that opts a string/binary field's bytes into compression (2.0: zstd, lz4; "none" is
# recorded but stores the bytes as they are; "fsst", see below), and the optional compression level.
COMPRESSION_KEY = "lance-encoding:compression"
COMPRESSION_LEVEL_KEY = "lance-encoding:compression-level"
_COMPRESSIONS = ("zstd", "lz4", "none", "fsst")

# FSST: pylance's FSST leaves pages under 32 KiB uncompressed behind a symbol table that says so
# (the magic in the high half of the header, nothing else set). We write that form for every page
# size: byte-identical to pylance's small pages, and always readable (we do not build symbol tables).
_FSST_PASSTHROUGH_TABLE = (0x46535354 << 32).to_bytes(8, "little") + bytes(256 * 8 + 256)

Bools = npt.NDArray[np.bool_]


@dataclass
class PageBuffers:
    """A page's buffers in the order its encoding tree names them."""

    items: list[Any] = field(default_factory=list)

    def add(self, data: Any) -> m.Buffer:
        """Append a buffer; returns its reference."""
        self.items.append(data)
        return m.Buffer(len(self.items) - 1)


def is_binary_like(t: pa.DataType) -> bool:
    """String, binary or their large variants."""
    return bool(
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    )


def _valid(arr: pa.Array) -> Bools:
    """Logical validity (a dictionary row whose key points at a null item is null)."""
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _packbits(bools: Bools) -> bytes:
    return np.packbits(bools, bitorder="little").tobytes()


def _compression(meta: dict[str, bytes]) -> m.Compression | None:
    scheme = meta.get(COMPRESSION_KEY, b"").decode(errors="replace")
    if scheme not in _COMPRESSIONS:
        return None  # pylance ignores schemes it cannot parse; "fsst" is not written by us
    raw_level = meta.get(COMPRESSION_LEVEL_KEY)
    level = None
    if raw_level is not None:
        try:
            level = int(raw_level.decode(errors="replace"))
        except ValueError:
            level = None
    return m.Compression(scheme, level)


def _fixed_bytes(arr: pa.Array, width: int) -> memoryview:
    """The value bytes of a fixed-width array (its slice of the Arrow buffer, zero-copy)."""
    buf = arr.buffers()[1]
    if buf is None:
        return memoryview(bytes(width * len(arr)))
    return memoryview(buf)[arr.offset * width : (arr.offset + len(arr)) * width]


def _bool_bits(arr: pa.Array) -> bytes:
    """The values bitmap of a boolean array re-aligned to bit 0 (bits under nulls kept as stored)."""
    buf = arr.buffers()[1]
    n = len(arr)
    if buf is None:
        return bytes((n + 7) // 8)
    if arr.offset % 8 == 0:
        start = arr.offset // 8
        out = bytearray(memoryview(buf)[start : start + (n + 7) // 8])
        if n % 8:
            out[-1] &= (1 << (n % 8)) - 1
        return bytes(out)
    bits = np.unpackbits(np.frombuffer(buf, dtype=np.uint8), bitorder="little")[arr.offset : arr.offset + n]
    return _packbits(bits.astype(bool))


def _nullable(arr: pa.Array, bufs: PageBuffers, values: Any) -> m.ArrayEncoding:
    """Wrap a values encoder in the nullability node; the validity bitmap comes first."""
    if arr.null_count:
        validity = bufs.add(_packbits(_valid(arr)))
        return m.SomeNull(m.Flat(1, validity), values())
    return m.NoNull(values())


def encode_values(
    arr: pa.Array,
    bufs: PageBuffers,
    meta: dict[str, bytes] | None = None,
    name: str = "",
    *,
    dict_threshold: int = DICT_ENCODING_THRESHOLD,
) -> m.ArrayEncoding:
    """Encode one page of a value column.

    Parameters
    ----------
    arr:
        The page's rows (any offset).
    bufs:
        Receives the page buffers.
    meta:
        The field's metadata (compression options).
    name:
        The field's name, for error messages.
    dict_threshold:
        A string page with fewer distinct values is dictionary-encoded.

    Returns
    -------
    ArrayEncoding
        The page's encoding tree.
    """
    t = arr.type
    n = len(arr)
    meta = meta or {}
    if pa.types.is_dictionary(t):
        return _encode_arrow_dictionary(arr, bufs, name)
    if is_binary_like(t):
        if pa.types.is_string(t) and _auto_dictionary(arr, dict_threshold):
            return _encode_auto_dictionary(arr, bufs)
        compression = _compression(meta)
        if compression is not None and compression.scheme == "fsst":
            # pylance's FSST takes 32-bit offsets and some valid value (it panics otherwise).
            if (pa.types.is_string(t) or pa.types.is_binary(t)) and arr.null_count < n:
                return m.Fsst(encode_binary(arr, bufs), _FSST_PASSTHROUGH_TABLE)
            compression = None
        return encode_binary(arr, bufs, compression)
    if n == 0 or pa.types.is_null(t) or arr.null_count == n:
        return m.AllNull()
    if pa.types.is_boolean(t):
        return _nullable(arr, bufs, lambda: m.Flat(1, bufs.add(_bool_bits(arr))))
    if pa.types.is_fixed_size_list(t):
        dim = t.list_size
        items = arr.values.slice(arr.offset * dim, n * dim)
        return _nullable(arr, bufs, lambda: m.FixedSizeList(dim, encode_values(items, bufs, None, name)))
    if pa.types.is_struct(t):
        return encode_packed_struct(arr, bufs, name)
    width = _fixed_width(t)
    if not width:
        raise NotSupportedError(f"field {name!r}: cannot write {t} in a 2.0 file")
    return _nullable(arr, bufs, lambda: m.Flat(width * 8, bufs.add(_fixed_bytes(arr, width))))


def _fixed_width(t: pa.DataType) -> int:
    if pa.types.is_fixed_size_binary(t):
        return int(t.byte_width)
    try:
        bits = int(t.bit_width)
    except ValueError:
        return 0
    return bits // 8 if bits % 8 == 0 else 0


# -- variable width ---------------------------------------------------------------------------------
def _auto_dictionary(arr: pa.Array, threshold: int) -> bool:
    if len(arr) < threshold:
        return False
    # Indices are one byte (0 = null), so at most 255 items whatever the threshold says.
    distinct = int(pc.count_distinct(arr, mode="only_valid").as_py())
    return distinct < min(threshold, 256)


def encode_binary(arr: pa.Array, bufs: PageBuffers, compression: m.Compression | None = None) -> m.Binary:
    """u64 end offsets (a null row adds ``null_adjustment``) and the bytes (optionally compressed)."""
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    n = len(arr)
    raw = arr.buffers()[1]
    if raw is None or n == 0:
        offs = np.zeros(n + 1, dtype=np.int64)
    else:
        dtype = np.int64 if large else np.int32
        offs = np.frombuffer(raw, dtype=dtype)[arr.offset : arr.offset + n + 1].astype(np.int64)
    start, end = int(offs[0]), int(offs[-1])
    data = arr.buffers()[2]
    body = memoryview(data)[start:end] if data is not None else memoryview(b"")
    ends = (offs[1:] - start).astype(np.uint64)
    # No rows: pylance writes a zero adjustment and two empty buffers.
    adjustment = end - start + 1 if n else 0
    if arr.null_count:
        ends[~_valid(arr)] += np.uint64(adjustment)
    offsets_ref = bufs.add(ends.astype("<u8").tobytes())
    if compression is not None and compression.scheme != "none":
        bytes_ref = bufs.add(compress(compression.scheme, body, compression.level))
    else:
        bytes_ref = bufs.add(body)
    return m.Binary(m.NoNull(m.Flat(64, offsets_ref)), m.Flat(8, bytes_ref, compression), adjustment)


def _encode_auto_dictionary(arr: pa.Array, bufs: PageBuffers) -> m.Dictionary:
    """Items in order of first appearance, u8 indices with 0 for null and k for items[k - 1]."""
    items = pc.unique(arr.drop_null())
    if len(items) == 0:
        # pylance keeps one null item when every row is null.
        items = pa.nulls(1, arr.type)
        indices = np.zeros(len(arr), dtype=np.uint8)
    else:
        pos = pc.index_in(arr, value_set=items)
        indices = np.asarray(pc.fill_null(pc.add(pos, 1), 0).to_numpy(zero_copy_only=False)).astype(np.uint8)
    idx_ref = bufs.add(indices.tobytes())
    item_enc = encode_binary(items, bufs)
    return m.Dictionary(m.NoNull(m.Flat(8, idx_ref)), item_enc, len(items))


def _encode_arrow_dictionary(arr: pa.Array, bufs: PageBuffers, name: str) -> m.Dictionary:
    """0-based keys; logically null rows point at the dictionary's first null item (added if none)."""
    key_type = arr.type.index_type
    items = arr.dictionary
    n = len(arr)
    valid = _valid(arr)
    if n == 0 or not valid.any():
        # Nothing valid: pylance writes zero keys and a single null item.
        keys = np.zeros(n, dtype=np.int64)
        items = pa.nulls(1, items.type)
        bits = key_type.bit_width
    else:
        keys = np.array(pc.fill_null(arr.indices, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
        bits = key_type.bit_width
        if not valid.all():
            null_items = np.flatnonzero(~_valid(items)) if items.null_count else np.zeros(0, dtype=np.int64)
            if len(null_items):
                null_index = int(null_items[0])
            else:
                items = pa.concat_arrays([items, pa.nulls(1, items.type)])
                null_index = len(items) - 1
                if null_index > _max_key(key_type):
                    # pylance 14 would need wider keys than the declared type and refuses too.
                    raise NotSupportedError(
                        f"field {name!r}: no room for a null item in a dictionary of {len(items) - 1} values "
                        f"with {key_type} keys; use a wider key type"
                    )
            keys[~valid] = null_index
    # Keys are never negative, so their unsigned bytes equal the signed ones.
    idx_ref = bufs.add(keys.astype(f"<u{bits // 8}").tobytes())
    # The items never become a dictionary themselves (pylance turns that off for them).
    item_enc = (
        encode_binary(items, bufs) if is_binary_like(items.type) else encode_values(items, bufs, None, name)
    )
    return m.Dictionary(m.NoNull(m.Flat(bits, idx_ref)), item_enc, len(items))


def _max_key(t: pa.DataType) -> int:
    bits = int(t.bit_width)
    return (1 << (bits - 1)) - 1 if pa.types.is_signed_integer(t) else (1 << bits) - 1


# -- packed structs ---------------------------------------------------------------------------------
def packed_child_width(t: pa.DataType) -> int:
    """Bytes per row of a packed-struct child, 0 when it cannot be packed (bool, variable width)."""
    if pa.types.is_fixed_size_list(t):
        return int(t.list_size) * packed_child_width(t.value_type)
    if pa.types.is_boolean(t) or pa.types.is_null(t) or is_binary_like(t) or pa.types.is_nested(t):
        return 0
    if pa.types.is_dictionary(t):
        return 0
    return _fixed_width(t)


def _packed_child_encoding(t: pa.DataType) -> m.ArrayEncoding:
    # Each child is encoded on its own with buffer numbering restarting at 0, as pylance does.
    if pa.types.is_fixed_size_list(t):
        return m.NoNull(m.FixedSizeList(t.list_size, _packed_child_encoding(t.value_type)))
    return m.NoNull(m.Flat(_fixed_width(t) * 8, m.Buffer(0)))


def _child_matrix(arr: pa.Array, n: int, width: int) -> npt.NDArray[np.uint8]:
    """``(n, width)`` bytes of one packed child (fixed-size lists flattened row-major)."""
    if arr.null_count:
        raise InvalidInputError("packed struct children must not contain nulls")
    t = arr.type
    if pa.types.is_fixed_size_list(t):
        dim = t.list_size
        items = arr.values.slice(arr.offset * dim, n * dim)
        return _child_matrix(items, n * dim, width // dim).reshape(n, width)
    return np.frombuffer(_fixed_bytes(arr, width), dtype=np.uint8).reshape(n, width)


def encode_packed_struct(arr: pa.Array, bufs: PageBuffers, name: str) -> m.ArrayEncoding:
    """All children of a struct row-major in one buffer (fixed width, no nulls, full bytes)."""
    t = arr.type
    n = len(arr)
    if n == 0:
        return m.AllNull()
    if arr.null_count:
        raise NotSupportedError(
            f"field {name!r}: Lance file version 2.0 does not encode struct validity; "
            "use file version 2.1 or later"
        )
    widths = [packed_child_width(f.type) for f in t]
    if not widths or not all(widths):
        raise NotSupportedError(f"field {name!r}: a packed struct needs fixed-width children of whole bytes")
    try:
        columns = [_child_matrix(arr.field(i), n, w) for i, w in enumerate(widths)]
    except InvalidInputError:
        raise NotSupportedError(f"field {name!r}: packed struct children must not contain nulls") from None
    packed = np.concatenate(columns, axis=1) if len(columns) > 1 else columns[0]
    ref = bufs.add(np.ascontiguousarray(packed).reshape(-1))
    return m.PackedStruct(tuple(_packed_child_encoding(f.type) for f in t), ref)
