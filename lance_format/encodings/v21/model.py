"""The 2.1/2.2 page layouts and compressive encodings as frozen dataclasses.

These mirror the ``lance.encodings21`` protobuf messages (2.2 files use the same package). Only
:mod:`lance_format.encodings.v21._serde` converts between the two; everything else works on these.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from lance_format.core.records import fast_init

__all__ = [
    "AllNullLayout",
    "BlobLayout",
    "BufferCompression",
    "ByteStreamSplit",
    "CompressiveEncoding",
    "Constant",
    "Delta",
    "Dictionary",
    "FixedSizeList",
    "Flat",
    "Fsst",
    "FullZipLayout",
    "General",
    "InlineBitpacking",
    "MiniBlockLayout",
    "OutOfLineBitpacking",
    "PackedStruct",
    "PageLayout",
    "RangeSequence",
    "RepDefLayer",
    "Rle",
    "Variable",
    "VariablePackedField",
    "VariablePackedStruct",
]


class RepDefLayer(IntEnum):
    """What one level of repetition/definition means (layers are listed from the leaf outwards)."""

    UNSPECIFIED = 0
    ALL_VALID_ITEM = 1
    ALL_VALID_LIST = 2
    NULLABLE_ITEM = 3
    NULLABLE_LIST = 4
    EMPTYABLE_LIST = 5
    NULL_AND_EMPTY_LIST = 6

    @property
    def is_list(self) -> bool:
        """Whether the layer is a list (it then owns one repetition level)."""
        return self in _LIST_LAYERS

    @property
    def num_def_levels(self) -> int:
        """Definition levels the layer uses: 0 (all valid), 1 (null or empty) or 2 (both)."""
        return _DEF_LEVELS[self]


_LIST_LAYERS = frozenset(
    {
        RepDefLayer.ALL_VALID_LIST,
        RepDefLayer.NULLABLE_LIST,
        RepDefLayer.EMPTYABLE_LIST,
        RepDefLayer.NULL_AND_EMPTY_LIST,
    }
)
_DEF_LEVELS = {
    RepDefLayer.UNSPECIFIED: 0,
    RepDefLayer.ALL_VALID_ITEM: 0,
    RepDefLayer.ALL_VALID_LIST: 0,
    RepDefLayer.NULLABLE_ITEM: 1,
    RepDefLayer.NULLABLE_LIST: 1,
    RepDefLayer.EMPTYABLE_LIST: 1,
    RepDefLayer.NULL_AND_EMPTY_LIST: 2,
}


# -- buffer-level compression ------------------------------------------------------------------


@dataclass(frozen=True)
class BufferCompression:
    """General-purpose compression of a whole buffer: ``scheme`` is ``"lz4"``, ``"zstd"`` or None."""

    scheme: str | None
    level: int | None = None


# -- compressive encodings ---------------------------------------------------------------------


@fast_init
@dataclass(frozen=True)
class Flat:
    """Fixed-width values, ``bits_per_value`` each (1 = a bitmap)."""

    bits_per_value: int
    data: BufferCompression | None = None


@fast_init
@dataclass(frozen=True)
class Variable:
    """Variable-width values: an offsets buffer (encoded by ``offsets``) plus a bytes buffer."""

    offsets: CompressiveEncoding
    values: BufferCompression | None = None


@dataclass(frozen=True)
class Constant:
    """Every value equals ``value`` (raw little-endian bytes); no buffer."""

    value: bytes | None


@dataclass(frozen=True)
class RangeSequence:
    """``start + step * i`` (the ``Range`` message); no buffer."""

    uncompressed_bits_per_value: int
    start: int
    step: int


@dataclass(frozen=True)
class Delta:
    """A non-decreasing sequence as ``base`` plus encoded differences."""

    uncompressed_bits_per_value: int
    base: int
    deltas: CompressiveEncoding


@dataclass(frozen=True)
class OutOfLineBitpacking:
    """FastLanes bit-packing with one bit width for the whole buffer (stored in ``values``' width)."""

    uncompressed_bits_per_value: int
    values: CompressiveEncoding


@fast_init
@dataclass(frozen=True)
class InlineBitpacking:
    """FastLanes bit-packing of 1024-value blocks, each led by its own bit width."""

    uncompressed_bits_per_value: int
    values: BufferCompression | None = None


@fast_init
@dataclass(frozen=True)
class Fsst:
    """FSST-compressed strings: the serialized symbol table plus the compressed values."""

    symbol_table: bytes
    values: CompressiveEncoding


@dataclass(frozen=True)
class Dictionary:
    """Indices into a dictionary of items (inside one compressive tree)."""

    indices: CompressiveEncoding
    items: CompressiveEncoding
    num_dictionary_items: int


@dataclass(frozen=True)
class Rle:
    """Run-length encoding: run values and run lengths."""

    values: CompressiveEncoding
    run_lengths: CompressiveEncoding


@dataclass(frozen=True)
class ByteStreamSplit:
    """Byte-stream-split of fixed-width values (byte ``k`` of every value, then byte ``k+1``...)."""

    values: CompressiveEncoding


@dataclass(frozen=True)
class General:
    """General-purpose compression (LZ4/ZSTD) wrapped around an inner encoding."""

    compression: BufferCompression
    values: CompressiveEncoding


@fast_init
@dataclass(frozen=True)
class FixedSizeList:
    """Fixed-size lists flattened to their items; ``has_validity`` = an item bitmap comes first."""

    items_per_value: int
    values: CompressiveEncoding
    has_validity: bool = False


@dataclass(frozen=True)
class PackedStruct:
    """Fixed-width struct fields packed row by row (``bits_per_value`` per field)."""

    bits_per_value: tuple[int, ...]
    values: CompressiveEncoding


@dataclass(frozen=True)
class VariablePackedField:
    """One field of a :class:`VariablePackedStruct`: fixed (``bits_per_value``) or variable width."""

    value: CompressiveEncoding | None
    bits_per_value: int | None = None
    bits_per_length: int | None = None


@dataclass(frozen=True)
class VariablePackedStruct:
    """Struct fields packed row by row where some fields are variable width (2.2)."""

    fields: tuple[VariablePackedField, ...]


CompressiveEncoding = (
    Flat
    | Variable
    | Constant
    | RangeSequence
    | Delta
    | OutOfLineBitpacking
    | InlineBitpacking
    | Fsst
    | Dictionary
    | Rle
    | ByteStreamSplit
    | General
    | FixedSizeList
    | PackedStruct
    | VariablePackedStruct
)


# -- page layouts ------------------------------------------------------------------------------


@fast_init
@dataclass(frozen=True)
class MiniBlockLayout:
    """Small values in independently decodable chunks (buffers: chunk metadata, chunks,
    dictionary if any, repetition index if ``repetition_index_depth > 0``)."""

    rep_compression: CompressiveEncoding | None
    def_compression: CompressiveEncoding | None
    value_compression: CompressiveEncoding
    dictionary: CompressiveEncoding | None
    num_dictionary_items: int
    layers: tuple[RepDefLayer, ...]
    num_buffers: int
    repetition_index_depth: int
    num_items: int
    has_large_chunk: bool = False


@dataclass(frozen=True)
class FullZipLayout:
    """Large values one after another, each behind a control word of rep/def levels.

    Exactly one of ``bits_per_value`` (fixed width) and ``bits_per_offset`` (variable width) is set.
    """

    bits_rep: int
    bits_def: int
    bits_per_value: int | None
    bits_per_offset: int | None
    num_items: int
    num_visible_items: int
    value_compression: CompressiveEncoding
    layers: tuple[RepDefLayer, ...]


@dataclass(frozen=True)
class AllNullLayout:
    """A page without value data: all null (``inline_value`` None) or one constant value.

    Lance's 2.1 ``AllNullLayout`` has only ``layers``; newer writers call the message
    ``ConstantLayout`` and add the other fields. Levels, when present, are in buffers 0 (rep) and
    1 (def), plain u16 unless ``rep_compression``/``def_compression`` say otherwise.
    """

    layers: tuple[RepDefLayer, ...]
    inline_value: bytes | None = None
    rep_compression: CompressiveEncoding | None = None
    def_compression: CompressiveEncoding | None = None
    num_rep_values: int = 0
    num_def_values: int = 0


@dataclass(frozen=True)
class BlobLayout:
    """Blob descriptions (position, size) in an inner layout; the bytes live elsewhere."""

    inner_layout: PageLayout
    layers: tuple[RepDefLayer, ...]


PageLayout = MiniBlockLayout | FullZipLayout | AllNullLayout | BlobLayout
