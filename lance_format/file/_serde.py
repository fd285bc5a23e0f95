"""Protobuf <-> dataclass conversion for the file container (the only protobuf user in this layer)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TypeVar

from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from lance_format._proto import file2_pb2, file_pb2
from lance_format.core.errors import CorruptFileError
from lance_format.core.types import LanceField, LanceSchema

__all__ = [
    "RawColumn",
    "RawEncoding",
    "RawPage",
    "column_metadata_bytes",
    "field_from_pb",
    "field_to_pb",
    "file_descriptor_bytes",
    "map_to_dict",
    "parse_column_metadata",
    "parse_file_descriptor",
    "wrap_any",
]

T = TypeVar("T")

# (message name after the last "/", serialized message); e.g. ("lance.encodings.ArrayEncoding", b"...")
RawEncoding = tuple[str, bytes]


class RawPage:
    """A page with its encoding still serialized."""

    __slots__ = ("buffer_offsets", "buffer_sizes", "encoding", "length", "priority")

    def __init__(
        self,
        offsets: tuple[int, ...],
        sizes: tuple[int, ...],
        length: int,
        priority: int,
        encoding: RawEncoding,
    ) -> None:
        self.buffer_offsets = offsets
        self.buffer_sizes = sizes
        self.length = length
        self.priority = priority
        self.encoding = encoding


class RawColumn:
    """A column's metadata with encodings still serialized."""

    __slots__ = ("buffer_offsets", "buffer_sizes", "encoding", "pages")

    def __init__(
        self, encoding: RawEncoding, pages: list[RawPage], offsets: tuple[int, ...], sizes: tuple[int, ...]
    ) -> None:
        self.encoding = encoding
        self.pages = pages
        self.buffer_offsets = offsets
        self.buffer_sizes = sizes


def _parse(msg: Message, data: bytes | memoryview, path: str, what: str) -> None:
    try:
        msg.ParseFromString(bytes(data))
    except (DecodeError, RecursionError, ValueError) as e:
        raise CorruptFileError(path, f"cannot decode {what}: {e}") from None


def map_to_dict(m: Mapping[str, T]) -> dict[str, T]:
    """A protobuf map field as a dict: ``dict(m)`` of an upb map goes through the ``Mapping`` ABC
    (~5 us even when empty, as most field and schema metadata is; ~15 us with entries)."""
    return dict(m.items()) if len(m) else {}


def field_from_pb(f: file_pb2.Field) -> LanceField:
    """A flat Lance field (no children yet) from its protobuf."""
    return LanceField(
        id=f.id,
        parent_id=f.parent_id,
        name=f.name,
        logical_type=f.logical_type,
        nullable=f.nullable,
        metadata=map_to_dict(f.metadata),
        encoding=f.encoding,  # the enum value as it is (its NewType call costs ~1 us)
    )


def field_to_pb(f: LanceField) -> file_pb2.Field:
    """The protobuf of one field (children are separate entries of the flat list)."""
    pb = file_pb2.Field(
        name=f.name,
        id=f.id,
        parent_id=f.parent_id,
        logical_type=f.logical_type,
        nullable=f.nullable,
        encoding=file_pb2.Encoding.ValueType(f.encoding),
    )
    for k, v in f.metadata.items():
        pb.metadata[k] = v
    if f.logical_type.startswith("dict:"):
        # pylance writes an empty legacy Dictionary sub-message for dictionary fields.
        pb.dictionary.SetInParent()
    return pb


def parse_file_descriptor(data: bytes | memoryview, path: str) -> tuple[LanceSchema, int]:
    """``(schema, number of rows)`` from global buffer 0."""
    fd = file_pb2.FileDescriptor()
    _parse(fd, data, path, "file descriptor")
    fields = [field_from_pb(f) for f in fd.schema.fields[:]]  # [:]: see parse_column_metadata
    schema = LanceSchema.from_flat(fields, map_to_dict(fd.schema.metadata), path)
    for f in schema.fields:
        try:
            # Validates the logical type strings of the field and its descendants; the Arrow
            # field is memoized, so the reader's schema reuses it instead of converting again.
            f.to_arrow()
        except ValueError as e:
            raise CorruptFileError(path, f"field {f.name!r}: {e}") from None
    return schema, fd.length


def file_descriptor_bytes(schema: LanceSchema, num_rows: int) -> bytes:
    fd = file_pb2.FileDescriptor(length=num_rows)
    fd.schema.fields.extend(field_to_pb(f) for f in schema.walk())
    for k, v in schema.metadata.items():
        fd.schema.metadata[k] = v
    return bytes(fd.SerializeToString())


def with_length(descriptor: bytes, num_rows: int) -> bytes:
    """:func:`file_descriptor_bytes` of ``num_rows`` from that of 0 rows (the schema's bytes are
    the same for every file of a schema): the row count is field 2, which follows the schema."""
    if num_rows == 0:
        return descriptor
    out = bytearray(descriptor)
    out.append(0x10)  # field 2, varint
    n = num_rows
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _unwrap(enc: file2_pb2.Encoding, path: str, what: str) -> RawEncoding:
    kind = enc.WhichOneof("location")
    if kind != "direct":
        raise CorruptFileError(path, f"{what}: expected a direct encoding, found {kind or 'none'}")
    anyp = any_pb2.Any()
    _parse(anyp, enc.direct.encoding, path, what)
    return anyp.type_url.rsplit("/", 1)[-1], anyp.value


def parse_column_metadata(data: bytes | memoryview, path: str, column: int) -> RawColumn:
    cm = file2_pb2.ColumnMetadata()
    _parse(cm, data, path, f"column {column} metadata")
    pages = []
    # Repeated fields are copied out with [:] (one C call): iterating a upb container goes item by
    # item and ends in a formatted IndexError, ~4x the cost for the few items of a column.
    for i, p in enumerate(cm.pages[:]):
        if len(p.buffer_offsets) != len(p.buffer_sizes):
            raise CorruptFileError(
                path, f"column {column} page {i}: buffer offsets and sizes differ in count"
            )
        pages.append(
            RawPage(
                tuple(p.buffer_offsets[:]),
                tuple(p.buffer_sizes[:]),
                p.length,
                p.priority,
                _unwrap(p.encoding, path, f"column {column} page {i}"),
            )
        )
    if not cm.HasField("encoding"):
        raise CorruptFileError(path, f"column {column} is missing its encoding")
    return RawColumn(
        _unwrap(cm.encoding, path, f"column {column}"),
        pages,
        tuple(cm.buffer_offsets[:]),
        tuple(cm.buffer_sizes[:]),
    )


def wrap_any(raw: RawEncoding) -> file2_pb2.Encoding:
    """A direct ``Encoding`` holding the serialized message in an ``Any`` with URL ``/<type_name>``."""
    type_name, value = raw
    anyp = any_pb2.Any(type_url=f"/{type_name}", value=value)
    return file2_pb2.Encoding(direct=file2_pb2.DirectEncoding(encoding=anyp.SerializeToString()))


def column_metadata_bytes(
    column_encoding: RawEncoding,
    pages: Sequence[tuple[Sequence[int], Sequence[int], int, int, RawEncoding]],
) -> bytes:
    """Serialize a column: ``pages`` are ``(offsets, sizes, length, priority, encoding)``.

    Written straight in protobuf's wire format (the bytes protobuf makes of the same
    ``ColumnMetadata``: fields in number order, zeros left out, repeated numbers packed), as
    building the messages cost more than encoding a small file's pages."""
    parts = [_column_encoding_field(column_encoding)]
    for offsets, sizes, length, priority, enc in pages:
        page = b"".join(
            (
                _packed_field(0x0A, offsets),  # 1: buffer_offsets
                _packed_field(0x12, sizes),  # 2: buffer_sizes
                b"\x18" + _varint(length) if length else b"",  # 3: length
                _len_field(0x22, _encoding_message(enc)),  # 4: encoding
                b"\x28" + _varint(priority) if priority else b"",  # 5: priority
            )
        )
        parts.append(_len_field(0x12, page))  # ColumnMetadata 2: pages
    return b"".join(parts)


#: One-byte varints (every value below 128).
_SMALL_VARINTS = [bytes((i,)) for i in range(128)]


def _varint(n: int) -> bytes:
    if n < 128:
        return _SMALL_VARINTS[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len_field(key: int, data: bytes) -> bytes:
    """A length-delimited field (``key``: its tag byte, field number below 16)."""
    return _SMALL_VARINTS[key] + _varint(len(data)) + data


def _packed_field(key: int, values: Sequence[int]) -> bytes:
    """A packed repeated varint field; nothing when empty."""
    if not values:
        return b""
    return _len_field(key, b"".join(_varint(v) for v in values))


def _encoding_message(raw: RawEncoding) -> bytes:
    """The bytes of :func:`wrap_any` of ``raw``: ``Encoding.direct`` (2) holding a
    ``DirectEncoding.encoding`` (1) with an ``Any`` (type_url 1, value 2)."""
    type_name, value = raw
    anyb = _len_field(0x0A, f"/{type_name}".encode()) + (_len_field(0x12, value) if value else b"")
    return _len_field(0x12, _len_field(0x0A, anyb))


@functools.lru_cache(maxsize=64)
def _column_encoding_field(raw: RawEncoding) -> bytes:
    """``ColumnMetadata.encoding`` (1) of a column encoding (a file's columns share a few)."""
    return _len_field(0x0A, _encoding_message(raw))
