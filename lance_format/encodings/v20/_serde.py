"""Protobuf <-> dataclass conversion of 2.0 encodings (the only protobuf user of this package)."""

from __future__ import annotations

from google.protobuf.message import DecodeError

from lance_format._proto import encodings_v2_0_pb2 as pb
from lance_format.core.errors import CorruptFileError, NotSupportedError
from lance_format.encodings.v20 import model as m

__all__ = [
    "ARRAY_ENCODING",
    "COLUMN_ENCODING",
    "array_encoding_from_pb",
    "array_encoding_to_bytes",
    "column_encoding_from_bytes",
    "column_encoding_to_bytes",
]

ARRAY_ENCODING = "lance.encodings.ArrayEncoding"
COLUMN_ENCODING = "lance.encodings.ColumnEncoding"

# Deep trees only come from hostile input; real encodings nest a handful of levels.
_MAX_DEPTH = 64


def _buf(b: pb.Buffer) -> m.BufferRef:
    return m.BufferRef(b.buffer_index, b.buffer_type)


def array_encoding_from_pb(e: pb.ArrayEncoding, path: str, depth: int = 0) -> m.ArrayEncoding:
    """Dataclass tree of a parsed ``ArrayEncoding``."""
    if depth > _MAX_DEPTH:
        raise CorruptFileError(path, "array encoding nests too deeply")

    def sub(x: pb.ArrayEncoding) -> m.ArrayEncoding:
        return array_encoding_from_pb(x, path, depth + 1)

    kind = e.WhichOneof("array_encoding")
    if kind == "flat":
        f = e.flat
        comp = f.compression.scheme if f.HasField("compression") and f.compression.scheme else None
        return m.Flat(f.bits_per_value, _buf(f.buffer), comp)
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
        x = e.fixed_size_list
        return m.FixedSizeList(x.dimension, sub(x.items), x.has_validity)
    if kind == "list":
        x2 = e.list
        return m.List(sub(x2.offsets), x2.null_offset_adjustment, x2.num_items)
    if kind == "struct":
        return m.SimpleStruct()
    if kind == "binary":
        b = e.binary
        return m.Binary(sub(b.indices), sub(b.bytes), b.null_adjustment)
    if kind == "dictionary":
        d = e.dictionary
        return m.Dictionary(sub(d.indices), sub(d.items), d.num_dictionary_items)
    if kind == "packed_struct":
        p = e.packed_struct
        return m.PackedStruct(tuple(sub(i) for i in p.inner), _buf(p.buffer))
    if kind == "fixed_size_binary":
        fb = e.fixed_size_binary
        return m.FixedSizeBinary(sub(fb.bytes), fb.byte_width)
    if kind == "constant":
        return m.Constant(e.constant.value)
    if kind is None:
        raise CorruptFileError(path, "empty array encoding")
    raise NotSupportedError(f"{path}: the 2.0 array encoding {kind!r} is not supported")


def page_encoding_from_raw(raw: tuple[str, bytes], path: str) -> m.ArrayEncoding:
    name, value = raw
    if name != ARRAY_ENCODING:
        raise NotSupportedError(f"{path}: unknown page encoding {name!r} in a 2.0 file")
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
        return m.Blob(_column_from_pb(c.blob.inner, path, depth + 1))
    if kind == "zone_index":
        z = c.zone_index
        return m.ZoneIndex(
            z.rows_per_zone, _buf(z.zone_map_buffer), _column_from_pb(z.inner, path, depth + 1)
        )
    raise CorruptFileError(path, "column encoding has no case set")


def column_encoding_from_bytes(raw: tuple[str, bytes], path: str) -> m.ColumnEncoding:
    name, value = raw
    if name != COLUMN_ENCODING:
        raise NotSupportedError(f"{path}: unknown column encoding {name!r}")
    c = pb.ColumnEncoding()
    try:
        c.ParseFromString(value)
    except (DecodeError, RecursionError) as err:
        raise CorruptFileError(path, f"cannot decode column encoding: {err}") from None
    return _column_from_pb(c, path)


def _set_buf(target: pb.Buffer, ref: m.BufferRef) -> None:
    target.SetInParent()  # pylance requires the sub-message even when it is all defaults
    target.buffer_index = ref.index
    target.buffer_type = ref.kind  # type: ignore[assignment]


def array_encoding_to_pb(enc: m.ArrayEncoding, out: pb.ArrayEncoding) -> None:
    """Fill ``out`` with ``enc``."""
    if isinstance(enc, m.Flat):
        out.flat.bits_per_value = enc.bits
        _set_buf(out.flat.buffer, enc.buffer)
        if enc.compression:
            out.flat.compression.scheme = enc.compression
    elif isinstance(enc, m.NoNull):
        array_encoding_to_pb(enc.values, out.nullable.no_nulls.values)
    elif isinstance(enc, m.SomeNull):
        array_encoding_to_pb(enc.validity, out.nullable.some_nulls.validity)
        array_encoding_to_pb(enc.values, out.nullable.some_nulls.values)
    elif isinstance(enc, m.AllNull):
        out.nullable.all_nulls.SetInParent()
    elif isinstance(enc, m.FixedSizeList):
        out.fixed_size_list.dimension = enc.dimension
        out.fixed_size_list.has_validity = enc.has_validity
        array_encoding_to_pb(enc.items, out.fixed_size_list.items)
    elif isinstance(enc, m.List):
        array_encoding_to_pb(enc.offsets, out.list.offsets)
        out.list.null_offset_adjustment = enc.null_offset_adjustment
        out.list.num_items = enc.num_items
    elif isinstance(enc, m.SimpleStruct):
        out.struct.SetInParent()
    elif isinstance(enc, m.Binary):
        array_encoding_to_pb(enc.indices, out.binary.indices)
        array_encoding_to_pb(enc.bytes, out.binary.bytes)
        out.binary.null_adjustment = enc.null_adjustment
    elif isinstance(enc, m.Dictionary):
        array_encoding_to_pb(enc.indices, out.dictionary.indices)
        array_encoding_to_pb(enc.items, out.dictionary.items)
        out.dictionary.num_dictionary_items = enc.num_dictionary_items
    else:
        raise NotSupportedError(f"writing the 2.0 encoding {type(enc).__name__} is not supported")


def array_encoding_to_bytes(enc: m.ArrayEncoding) -> tuple[str, bytes]:
    out = pb.ArrayEncoding()
    array_encoding_to_pb(enc, out)
    return ARRAY_ENCODING, out.SerializeToString()


def column_encoding_to_bytes(enc: m.ColumnEncoding) -> tuple[str, bytes]:
    c = pb.ColumnEncoding()
    if isinstance(enc, m.Values):
        c.values.SetInParent()
    else:
        raise NotSupportedError(f"writing the column encoding {type(enc).__name__} is not supported")
    return COLUMN_ENCODING, c.SerializeToString()
