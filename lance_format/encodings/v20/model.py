"""The 2.0 encodings as frozen dataclasses, mirrors of the ``lance.encodings`` protobuf messages.

A 2.0 page's encoding is a tree of :data:`ArrayEncoding` nodes; leaves name page buffers by index
(:class:`Buffer`). A column's :data:`ColumnEncoding` says whether pages hold the values themselves
(:class:`Values`) or descriptions of out-of-line blobs (:class:`Blob`). Only ``_serde`` converts
these to and from protobuf.
"""

from __future__ import annotations

from dataclasses import dataclass

from lance_format.core.records import fast_init

__all__ = [
    "AllNull",
    "ArrayEncoding",
    "Binary",
    "Bitpacked",
    "BitpackedForNonNeg",
    "Blob",
    "Buffer",
    "BufferKind",
    "ColumnEncoding",
    "Compression",
    "Constant",
    "Dictionary",
    "FixedSizeBinary",
    "FixedSizeList",
    "Flat",
    "Fsst",
    "List",
    "NoNull",
    "PackedStruct",
    "SimpleStruct",
    "SomeNull",
    "Values",
    "ZoneIndex",
]


class BufferKind:
    """``Buffer.buffer_type``: where a buffer index points."""

    PAGE = 0
    COLUMN = 1
    FILE = 2


@dataclass(frozen=True)
class Buffer:
    """A buffer by index among the page's (``kind`` 0), column's (1) or file's (2) buffers."""

    index: int
    kind: int = BufferKind.PAGE


@dataclass(frozen=True)
class Compression:
    """General-purpose compression of a whole flat buffer (``"zstd"``, ``"lz4"``; ``"none"``)."""

    scheme: str
    level: int | None = None


@fast_init
@dataclass(frozen=True)
class Flat:
    """Fixed-width values, ``bits`` per value, in one buffer (1 bit: an LSB-first bitmap)."""

    bits: int
    buffer: Buffer
    compression: Compression | None = None


@dataclass(frozen=True)
class NoNull:
    """``Nullable.no_nulls``: every value is valid."""

    values: ArrayEncoding


@dataclass(frozen=True)
class SomeNull:
    """``Nullable.some_nulls``: a validity bitmap (1 = valid) next to the values."""

    validity: ArrayEncoding
    values: ArrayEncoding


@dataclass(frozen=True)
class AllNull:
    """``Nullable.all_nulls``: every value is null; no buffers."""


@fast_init
@dataclass(frozen=True)
class FixedSizeList:
    """``dimension`` items per row, row-major, encoded as one child array."""

    dimension: int
    items: ArrayEncoding
    has_validity: bool = False


@dataclass(frozen=True)
class List:
    """Page-local u64 end offsets of a list column; the items are the next column's values.

    A null row stores its end offset plus ``null_offset_adjustment``; ``num_items`` says how many
    items of the item column this page covers.
    """

    offsets: ArrayEncoding
    null_offset_adjustment: int
    num_items: int


@dataclass(frozen=True)
class SimpleStruct:
    """A struct whose children are their own columns (the page has no buffers)."""


@dataclass(frozen=True)
class Binary:
    """Variable-width values: u64 end offsets (``indices``) and the bytes.

    A null row stores its end offset plus ``null_adjustment``.
    """

    indices: ArrayEncoding
    bytes: ArrayEncoding
    null_adjustment: int


@dataclass(frozen=True)
class Dictionary:
    """Per-row indices into a page-local dictionary of ``num_dictionary_items`` items."""

    indices: ArrayEncoding
    items: ArrayEncoding
    num_dictionary_items: int


@fast_init
@dataclass(frozen=True)
class Fsst:
    """Strings compressed with an FSST symbol table; ``binary`` holds the compressed strings."""

    binary: ArrayEncoding
    symbol_table: bytes


@dataclass(frozen=True)
class PackedStruct:
    """A struct of fixed-width children stored row-major in one buffer."""

    inner: tuple[ArrayEncoding, ...]
    buffer: Buffer


@dataclass(frozen=True)
class FixedSizeBinary:
    """Strings or binary values that all have ``byte_width`` bytes, stored back to back."""

    bytes: ArrayEncoding
    byte_width: int


@dataclass(frozen=True)
class Bitpacked:
    """Integers as a sequential LSB-first bit stream of ``compressed_bits`` bits per value."""

    compressed_bits: int
    uncompressed_bits: int
    buffer: Buffer
    signed: bool = False


@dataclass(frozen=True)
class BitpackedForNonNeg:
    """Non-negative integers bit-packed in FastLanes chunks of 1024 values (never in 2.0 files)."""

    compressed_bits: int
    uncompressed_bits: int
    buffer: Buffer


@dataclass(frozen=True)
class Constant:
    """Every value equals ``value`` (the little-endian bytes of one value)."""

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
    | Fsst
    | PackedStruct
    | FixedSizeBinary
    | Bitpacked
    | BitpackedForNonNeg
    | Constant
)


@fast_init
@dataclass(frozen=True)
class Values:
    """Column encoding of a plain column: its pages hold the data."""


@dataclass(frozen=True)
class Blob:
    """Column encoding of a blob column: pages hold (position, size) descriptions of the bytes."""

    inner: ColumnEncoding


@dataclass(frozen=True)
class ZoneIndex:
    """Column encoding with a zone map (statistics every ``rows_per_zone`` rows) in a buffer."""

    rows_per_zone: int
    zone_map_buffer: Buffer
    inner: ColumnEncoding


ColumnEncoding = Values | Blob | ZoneIndex
