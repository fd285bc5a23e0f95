"""Protobuf <-> dataclass conversion of the 2.0 encodings (this package's only protobuf user).

Reading turns a serialized ``lance.encodings.ArrayEncoding`` / ``ColumnEncoding`` into the trees of
:mod:`.model`; writing does the reverse. Sub-messages pylance writes are always made *present* on
write, even when all their fields are defaults (``Flat.buffer {}`` with index 0): pylance unwraps
them and panics on a missing one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from google.protobuf.message import DecodeError

from lance_format._proto import encodings_v2_0_pb2 as pb
from lance_format.core.errors import CorruptFileError, NotSupportedError
from lance_format.encodings.v20 import model as m

__all__ = [
    "ARRAY_ENCODING",
    "COLUMN_ENCODING",
    "RawEncoding",
    "array_encoding_from_pb",
    "array_encoding_to_bytes",
    "array_encoding_writers",
    "column_encoding_from_raw",
    "column_encoding_to_bytes",
    "page_encoding_from_raw",
]

#: ``(message name, serialized message)``, as the file container hands encodings around.
RawEncoding = tuple[str, bytes]

ARRAY_ENCODING = "lance.encodings.ArrayEncoding"
COLUMN_ENCODING = "lance.encodings.ColumnEncoding"

# Real encodings nest a handful of levels; deeper trees only come from damaged or hostile input.
_MAX_DEPTH = 64

# Encodings of the ArrayEncoding oneof that are early 2.1 experiments: never in a 2.0 page.
_DRAFTS = frozenset(
    {
        "inline_bitpacking",
        "out_of_line_bitpacking",
        "variable",
        "packed_struct_fixed_width_mini_block",
        "block",
        "rle",
        "general_mini_block",
        "byte_stream_split",
    }
)


# -- reading ---------------------------------------------------------------------------------------
def _buffer(b: pb.Buffer, path: str) -> m.Buffer:
    if b.buffer_type not in (m.BufferKind.PAGE, m.BufferKind.COLUMN, m.BufferKind.FILE):
        raise CorruptFileError(path, f"unknown buffer type {b.buffer_type}")
    return m.Buffer(b.buffer_index, b.buffer_type)


def _required(parent: object, name: str, path: str, what: str) -> None:
    if not parent.HasField(name):  # type: ignore[attr-defined]
        raise CorruptFileError(path, f"{what} encoding has no {name}")


def array_encoding_from_pb(e: pb.ArrayEncoding, path: str, depth: int = 0) -> m.ArrayEncoding:
    """The dataclass tree of a parsed ``ArrayEncoding``.

    Parameters
    ----------
    e:
        The parsed message.
    path:
        The file, for error messages.
    depth:
        Nesting level (guards against runaway recursion on hostile input).

    Returns
    -------
    ArrayEncoding
        The tree.

    Raises
    ------
    CorruptFileError
        An empty or inconsistent message.
    NotSupportedError
        An encoding that 2.0 files do not use.
    """
    if depth > _MAX_DEPTH:
        raise CorruptFileError(path, "array encoding nests too deeply")

    def sub(x: pb.ArrayEncoding) -> m.ArrayEncoding:
        return array_encoding_from_pb(x, path, depth + 1)

    kind = e.WhichOneof("array_encoding")
    if kind == "flat":
        f = e.flat
        _required(f, "buffer", path, "flat")
        comp = None
        if f.HasField("compression"):
            level = f.compression.level if f.compression.HasField("level") else None
            comp = m.Compression(f.compression.scheme, level)
        return m.Flat(f.bits_per_value, _buffer(f.buffer, path), comp)
    if kind == "nullable":
        n = e.nullable
        which = n.WhichOneof("nullability")
        if which == "no_nulls":
            return m.NoNull(sub(n.no_nulls.values))
        if which == "some_nulls":
            return m.SomeNull(sub(n.some_nulls.validity), sub(n.some_nulls.values))
        if which == "all_nulls":
            return m.AllNull()
        raise CorruptFileError(path, "nullable encoding without a nullability case")
    if kind == "fixed_size_list":
        fsl = e.fixed_size_list
        if fsl.dimension == 0:
            raise CorruptFileError(path, "fixed-size list of dimension 0")
        return m.FixedSizeList(fsl.dimension, sub(fsl.items), fsl.has_validity)
    if kind == "list":
        lst = e.list
        return m.List(sub(lst.offsets), lst.null_offset_adjustment, lst.num_items)
    if kind == "struct":
        return m.SimpleStruct()
    if kind == "binary":
        b = e.binary
        return m.Binary(sub(b.indices), sub(b.bytes), b.null_adjustment)
    if kind == "dictionary":
        d = e.dictionary
        return m.Dictionary(sub(d.indices), sub(d.items), d.num_dictionary_items)
    if kind == "fsst":
        return m.Fsst(sub(e.fsst.binary), bytes(e.fsst.symbol_table))
    if kind == "packed_struct":
        p = e.packed_struct
        _required(p, "buffer", path, "packed struct")
        return m.PackedStruct(tuple(sub(i) for i in p.inner), _buffer(p.buffer, path))
    if kind == "fixed_size_binary":
        fb = e.fixed_size_binary
        if fb.byte_width == 0:
            raise CorruptFileError(path, "fixed-size binary of width 0")
        return m.FixedSizeBinary(sub(fb.bytes), fb.byte_width)
    if kind == "bitpacked":
        bp = e.bitpacked
        _required(bp, "buffer", path, "bitpacked")
        return m.Bitpacked(
            bp.compressed_bits_per_value, bp.uncompressed_bits_per_value, _buffer(bp.buffer, path), bp.signed
        )
    if kind == "bitpacked_for_non_neg":
        bn = e.bitpacked_for_non_neg
        _required(bn, "buffer", path, "bitpacked")
        return m.BitpackedForNonNeg(
            bn.compressed_bits_per_value, bn.uncompressed_bits_per_value, _buffer(bn.buffer, path)
        )
    if kind == "constant":
        return m.Constant(bytes(e.constant.value))
    if kind is None:
        raise CorruptFileError(path, "empty array encoding")
    what = "a 2.1 draft encoding" if kind in _DRAFTS else "not supported"
    raise NotSupportedError(f"{path}: the 2.0 array encoding {kind!r} is {what} in a 2.0 page")


def page_encoding_from_raw(raw: RawEncoding, path: str) -> m.ArrayEncoding:
    """Parse a 2.0 page encoding.

    Parameters
    ----------
    raw:
        ``(message name, serialized bytes)``; the name must be ``lance.encodings.ArrayEncoding``.
    path:
        The file, for error messages.

    Returns
    -------
    ArrayEncoding
        The encoding tree.

    Raises
    ------
    NotSupportedError
        Another message type, or an encoding 2.0 files do not use.
    CorruptFileError
        Bytes that do not parse.
    """
    name, value = raw
    if name != ARRAY_ENCODING:
        raise NotSupportedError(f"{path}: page encoding {name!r} is not a 2.0 encoding")
    e = pb.ArrayEncoding()
    try:
        e.ParseFromString(value)
    except (DecodeError, RecursionError) as err:
        raise CorruptFileError(path, f"cannot decode page encoding: {err}") from None
    return array_encoding_from_pb(e, path)


def _column_from_pb(c: pb.ColumnEncoding, path: str, depth: int = 0) -> m.ColumnEncoding:
    if depth > _MAX_DEPTH:
        raise CorruptFileError(path, "column encoding nests too deeply")
    kind = c.WhichOneof("column_encoding")
    if kind == "values":
        return m.Values()
    if kind == "blob":
        _required(c.blob, "inner", path, "blob column")
        return m.Blob(_column_from_pb(c.blob.inner, path, depth + 1))
    if kind == "zone_index":
        z = c.zone_index
        _required(z, "inner", path, "zone index")
        return m.ZoneIndex(
            z.rows_per_zone, _buffer(z.zone_map_buffer, path), _column_from_pb(z.inner, path, depth + 1)
        )
    raise CorruptFileError(path, "column encoding has no case set")


def column_encoding_from_raw(raw: RawEncoding, path: str) -> m.ColumnEncoding:
    """Parse a column-level encoding (``lance.encodings.ColumnEncoding``, 2.0 and 2.1+ files).

    Parameters
    ----------
    raw:
        ``(message name, serialized bytes)``.
    path:
        The file, for error messages.

    Returns
    -------
    ColumnEncoding
        :class:`~.model.Values`, :class:`~.model.Blob` or :class:`~.model.ZoneIndex`.

    Raises
    ------
    NotSupportedError
        Another message type.
    CorruptFileError
        Bytes that do not parse, or no case set.
    """
    name, value = raw
    if name != COLUMN_ENCODING:
        raise NotSupportedError(f"{path}: unknown column encoding {name!r}")
    c = pb.ColumnEncoding()
    try:
        c.ParseFromString(value)
    except (DecodeError, RecursionError) as err:
        raise CorruptFileError(path, f"cannot decode column encoding: {err}") from None
    return _column_from_pb(c, path)


# -- writing ---------------------------------------------------------------------------------------
def _set_buffer(target: pb.Buffer, ref: m.Buffer) -> None:
    target.SetInParent()  # present even with index 0: pylance unwraps it
    target.buffer_index = ref.index
    target.buffer_type = ref.kind  # type: ignore[assignment]


def _array_to_pb(enc: m.ArrayEncoding, out: pb.ArrayEncoding) -> None:
    writer = _WRITERS.get(type(enc))
    if writer is None:  # pragma: no cover - every kind of the union has a writer
        raise TypeError(f"not a 2.0 array encoding: {enc!r}")
    writer(enc, out)


def _flat_to_pb(enc: m.Flat, out: pb.ArrayEncoding) -> None:
    out.flat.bits_per_value = enc.bits
    _set_buffer(out.flat.buffer, enc.buffer)
    if enc.compression is not None:
        out.flat.compression.scheme = enc.compression.scheme
        if enc.compression.level is not None:
            out.flat.compression.level = enc.compression.level


def _no_null_to_pb(enc: m.NoNull, out: pb.ArrayEncoding) -> None:
    _array_to_pb(enc.values, out.nullable.no_nulls.values)


def _some_null_to_pb(enc: m.SomeNull, out: pb.ArrayEncoding) -> None:
    _array_to_pb(enc.validity, out.nullable.some_nulls.validity)
    _array_to_pb(enc.values, out.nullable.some_nulls.values)


def _all_null_to_pb(enc: m.AllNull, out: pb.ArrayEncoding) -> None:
    out.nullable.all_nulls.SetInParent()


def _fixed_size_list_to_pb(enc: m.FixedSizeList, out: pb.ArrayEncoding) -> None:
    out.fixed_size_list.dimension = enc.dimension
    out.fixed_size_list.has_validity = enc.has_validity
    _array_to_pb(enc.items, out.fixed_size_list.items)


def _list_to_pb(enc: m.List, out: pb.ArrayEncoding) -> None:
    _array_to_pb(enc.offsets, out.list.offsets)
    out.list.null_offset_adjustment = enc.null_offset_adjustment
    out.list.num_items = enc.num_items


def _struct_to_pb(enc: m.SimpleStruct, out: pb.ArrayEncoding) -> None:
    out.struct.SetInParent()


def _binary_to_pb(enc: m.Binary, out: pb.ArrayEncoding) -> None:
    _array_to_pb(enc.indices, out.binary.indices)
    _array_to_pb(enc.bytes, out.binary.bytes)
    out.binary.null_adjustment = enc.null_adjustment


def _dictionary_to_pb(enc: m.Dictionary, out: pb.ArrayEncoding) -> None:
    _array_to_pb(enc.indices, out.dictionary.indices)
    _array_to_pb(enc.items, out.dictionary.items)
    out.dictionary.num_dictionary_items = enc.num_dictionary_items


def _fsst_to_pb(enc: m.Fsst, out: pb.ArrayEncoding) -> None:
    _array_to_pb(enc.binary, out.fsst.binary)
    out.fsst.symbol_table = enc.symbol_table


def _packed_struct_to_pb(enc: m.PackedStruct, out: pb.ArrayEncoding) -> None:
    out.packed_struct.SetInParent()
    for inner in enc.inner:
        _array_to_pb(inner, out.packed_struct.inner.add())
    _set_buffer(out.packed_struct.buffer, enc.buffer)


def _fixed_size_binary_to_pb(enc: m.FixedSizeBinary, out: pb.ArrayEncoding) -> None:
    _array_to_pb(enc.bytes, out.fixed_size_binary.bytes)
    out.fixed_size_binary.byte_width = enc.byte_width


def _bitpacked_to_pb(enc: m.Bitpacked, out: pb.ArrayEncoding) -> None:
    out.bitpacked.compressed_bits_per_value = enc.compressed_bits
    out.bitpacked.uncompressed_bits_per_value = enc.uncompressed_bits
    _set_buffer(out.bitpacked.buffer, enc.buffer)
    out.bitpacked.signed = enc.signed


def _bitpacked_non_neg_to_pb(enc: m.BitpackedForNonNeg, out: pb.ArrayEncoding) -> None:
    out.bitpacked_for_non_neg.compressed_bits_per_value = enc.compressed_bits
    out.bitpacked_for_non_neg.uncompressed_bits_per_value = enc.uncompressed_bits
    _set_buffer(out.bitpacked_for_non_neg.buffer, enc.buffer)


def _constant_to_pb(enc: m.Constant, out: pb.ArrayEncoding) -> None:
    out.constant.SetInParent()
    out.constant.value = enc.value


#: The protobuf writer of every 2.0 array-encoding dataclass (one per kind of the union).
_WRITERS: dict[type[Any], Callable[[Any, pb.ArrayEncoding], None]] = {
    m.Flat: _flat_to_pb,
    m.NoNull: _no_null_to_pb,
    m.SomeNull: _some_null_to_pb,
    m.AllNull: _all_null_to_pb,
    m.FixedSizeList: _fixed_size_list_to_pb,
    m.List: _list_to_pb,
    m.SimpleStruct: _struct_to_pb,
    m.Binary: _binary_to_pb,
    m.Dictionary: _dictionary_to_pb,
    m.Fsst: _fsst_to_pb,
    m.PackedStruct: _packed_struct_to_pb,
    m.FixedSizeBinary: _fixed_size_binary_to_pb,
    m.Bitpacked: _bitpacked_to_pb,
    m.BitpackedForNonNeg: _bitpacked_non_neg_to_pb,
    m.Constant: _constant_to_pb,
}


def array_encoding_writers() -> Mapping[type[Any], Callable[[Any, pb.ArrayEncoding], None]]:
    """Every 2.0 array-encoding dataclass with its protobuf writer (read-only)."""
    return MappingProxyType(_WRITERS)


def array_encoding_to_bytes(enc: m.ArrayEncoding) -> RawEncoding:
    """Serialize a page encoding tree as ``("lance.encodings.ArrayEncoding", bytes)``."""
    out = pb.ArrayEncoding()
    _array_to_pb(enc, out)
    return ARRAY_ENCODING, out.SerializeToString()


def _column_to_pb(enc: m.ColumnEncoding, out: pb.ColumnEncoding) -> None:
    _COLUMN_WRITERS[type(enc)](enc, out)


def _values_to_pb(enc: m.Values, out: pb.ColumnEncoding) -> None:
    out.values.SetInParent()


def _blob_to_pb(enc: m.Blob, out: pb.ColumnEncoding) -> None:
    out.blob.SetInParent()
    _column_to_pb(enc.inner, out.blob.inner)


def _zone_index_to_pb(enc: m.ZoneIndex, out: pb.ColumnEncoding) -> None:
    out.zone_index.rows_per_zone = enc.rows_per_zone
    _set_buffer(out.zone_index.zone_map_buffer, enc.zone_map_buffer)
    _column_to_pb(enc.inner, out.zone_index.inner)


#: The protobuf writer of every column-encoding dataclass.
_COLUMN_WRITERS: dict[type[Any], Callable[[Any, pb.ColumnEncoding], None]] = {
    m.Values: _values_to_pb,
    m.Blob: _blob_to_pb,
    m.ZoneIndex: _zone_index_to_pb,
}


def column_encoding_to_bytes(enc: m.ColumnEncoding) -> RawEncoding:
    """Serialize a column encoding as ``("lance.encodings.ColumnEncoding", bytes)``."""
    out = pb.ColumnEncoding()
    _column_to_pb(enc, out)
    return COLUMN_ENCODING, out.SerializeToString()
