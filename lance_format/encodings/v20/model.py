"""The 2.0 array encodings as frozen dataclasses (mirrors of the ``lance.encodings`` messages)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AllNull",
    "ArrayEncoding",
    "Binary",
    "Blob",
    "BufferRef",
    "ColumnEncoding",
    "Constant",
    "Dictionary",
    "FixedSizeBinary",
    "FixedSizeList",
    "Flat",
    "List",
    "NoNull",
    "PackedStruct",
    "SimpleStruct",
    "SomeNull",
    "Values",
    "ZoneIndex",
]


@dataclass(frozen=True)
class BufferRef:
    """A buffer by index; ``kind`` 0 = page, 1 = column, 2 = file."""

    index: int
    kind: int = 0


@dataclass(frozen=True)
class Flat:
    """Fixed-width values in one buffer (``bits`` per value), optionally compressed as a whole."""

    bits: int
    buffer: BufferRef
    compression: str | None = None


@dataclass(frozen=True)
class NoNull:
    values: ArrayEncoding


@dataclass(frozen=True)
class SomeNull:
    validity: ArrayEncoding
    values: ArrayEncoding


@dataclass(frozen=True)
class AllNull:
    pass


@dataclass(frozen=True)
class FixedSizeList:
    dimension: int
    items: ArrayEncoding
    has_validity: bool = False


@dataclass(frozen=True)
class List:
    """End offsets of one list page; the items are the next column's rows."""

    offsets: ArrayEncoding
    null_offset_adjustment: int
    num_items: int


@dataclass(frozen=True)
class SimpleStruct:
    pass


@dataclass(frozen=True)
class Binary:
    """u64 end offsets (``indices``) and bytes; a null row stores ``end + null_adjustment``."""

    indices: ArrayEncoding
    bytes: ArrayEncoding
    null_adjustment: int


@dataclass(frozen=True)
class Dictionary:
    indices: ArrayEncoding
    items: ArrayEncoding
    num_dictionary_items: int


@dataclass(frozen=True)
class PackedStruct:
    inner: tuple[ArrayEncoding, ...]
    buffer: BufferRef


@dataclass(frozen=True)
class FixedSizeBinary:
    bytes: ArrayEncoding
    byte_width: int


@dataclass(frozen=True)
class Constant:
    value: bytes


ArrayEncoding = (
    Flat
    | NoNull
    | SomeNull
    | AllNull
    | FixedSizeList
    | List
    | SimpleStruct
    | Binary
    | Dictionary
    | PackedStruct
    | FixedSizeBinary
    | Constant
)


@dataclass(frozen=True)
class Values:
    """Plain column: pages hold the data."""


@dataclass(frozen=True)
class Blob:
    inner: ColumnEncoding


@dataclass(frozen=True)
class ZoneIndex:
    rows_per_zone: int
    zone_map_buffer: BufferRef
    inner: ColumnEncoding


ColumnEncoding = Values | Blob | ZoneIndex
