"""One codec per compressive encoding, found in a registry keyed by the message's dataclass.

A :class:`Codec` implements every context its encoding decodes in:

* ``mini``: the value buffers of a batch of mini-block chunks;
* ``block``: whole buffers of a known number of values (levels, dictionaries);
* ``fixed_rows`` / ``variable_rows``: full-zip values already unzipped from their control words;
* ``mini_take`` / ``one_value``: a few values (or one) of a batch of chunks, addressed directly;
* ``levels_take`` / ``one_level``: the same for a chunk's rep/def levels.

A context a codec does not implement raises :class:`~lance_format.core.errors.NotSupportedError`
(the decode contexts) or returns None (the take contexts: the caller then decodes whole chunks).
The module-level functions (:func:`decode_mini`, ...) are the entry points: each looks the codec up
once per call, which is once per page or batch (never per value), and nested encodings recurse
through them. To add an encoding: its dataclass in :mod:`.model`, its parsing in ``_serde``, a
``Codec`` subclass here decorated with :func:`register` overriding the contexts it supports, and a
sample in ``tests/encodings/test_registry.py`` for each of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Generic, NoReturn, TypeVar

import numpy as np
import numpy.typing as npt

from lance_format.core.errors import NotSupportedError
from lance_format.encodings.registry import Registry
from lance_format.encodings.v21 import minitake as mt
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import Bufs, gather
from lance_format.encodings.v21.compressive import (
    byte_stream_split,
    constant_values,
    decompress_each,
    delta_values,
    flat_values,
    fsl_rows,
    fsst_values,
    general_per_value,
    inline_bitpacked,
    out_of_line_bitpacked,
    range_values,
    rle_block,
    rle_values,
    split_packed,
    split_variable_packed,
    unsupported,
    variable_block,
    variable_mini,
)
from lance_format.encodings.v21.fastlanes import uint_dtype
from lance_format.encodings.v21.values import Fixed, Fsl, Nulls, Struct, Values, VarBin, concat_values

__all__ = [
    "CONTEXTS",
    "Codec",
    "codec_for",
    "decode_block",
    "decode_fixed_rows",
    "decode_levels",
    "decode_mini",
    "decode_mini_take",
    "decode_variable_rows",
    "levels_take",
    "one_level",
    "one_value",
    "page_neutral",
    "register",
    "registered",
]

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
Levels = npt.NDArray[np.uint16]
E = TypeVar("E")

#: The contexts a codec may implement (method names of :class:`Codec`).
CONTEXTS = (
    "mini",
    "block",
    "fixed_rows",
    "variable_rows",
    "mini_take",
    "one_value",
    "levels_take",
    "one_level",
)


class Codec(Generic[E]):
    """How one compressive encoding decodes; the base implements no context."""

    def mini(self, ce: E, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        """Values of a batch of mini-block chunks (``bufs``: one :class:`Bufs` per value buffer)."""
        raise unsupported(path, "mini-block value", ce)

    def block(self, ce: E, bufs: Bufs, counts: I64, path: str) -> Values:
        """Values of whole buffers, ``counts[k]`` in buffer ``k``, concatenated."""
        raise unsupported(path, "block", ce)

    def fixed_rows(self, ce: E, rows: U8, n: int, path: str) -> Values:
        """``n`` full-zip values of equal size, back to back."""
        raise unsupported(path, "full-zip fixed", ce)

    def variable_rows(self, ce: E, values: VarBin, path: str) -> Values:
        """Full-zip variable-width values as stored."""
        raise unsupported(path, "full-zip variable", ce)

    def mini_take(self, ce: E, bufs: Sequence[Bufs], counts: I64, chunk: I64, local: I64) -> Values | None:
        """Values ``local[j]`` of chunk ``chunk[j]``, or None when not addressable."""
        return None

    def one_value(self, ce: E, blob: U8, bufs: list[tuple[int, int]], i: int) -> Values | None:
        """Value ``i`` of one chunk whose value buffers are ``(start, size)`` in ``blob``, or None."""
        return None

    def levels_take(self, ce: E, bufs: Bufs, counts: I64, chunk: I64, local: I64) -> Levels | None:
        """Levels ``local[j]`` of level buffer ``chunk[j]``, or None when not addressable."""
        return None

    def one_level(self, ce: E, blob: U8, start: int, size: int, count: int, i: int) -> int | None:
        """Level ``i`` of one level buffer of ``count`` levels, or None when not addressable."""
        return None

    def page_neutral(self, ce: E) -> E | None:
        """``ce`` without what each page owns (pages of one column then compare equal), or None
        when pages of this encoding cannot be read as one batch (see ``miniblock_merge``)."""
        return ce

    def contexts(self) -> frozenset[str]:
        """The contexts this codec implements (those of :data:`CONTEXTS` it overrides)."""
        return frozenset(c for c in CONTEXTS if getattr(type(self), c) is not getattr(Codec, c))


_REGISTRY: Registry[Codec[Any]] = Registry("a codec")
# The dispatchers below look codecs up here directly: one dict lookup per page, no extra call.
_CODECS = _REGISTRY.table

C = TypeVar("C", bound=type[Codec[Any]])


def register(message: type[Any]) -> Callable[[C], C]:
    """Class decorator: the codec of the dataclass ``message`` (one codec per message type)."""

    def add(cls: C) -> C:
        _REGISTRY.add(message, cls())
        return cls

    return add


def registered() -> Mapping[type[Any], Codec[Any]]:
    """Every message type with its codec (read-only)."""
    return _REGISTRY.view()


def codec_for(ce: object, path: str = "") -> Codec[Any]:
    """The codec of the encoding message ``ce``.

    Raises
    ------
    NotSupportedError
        ``ce`` is no compressive encoding this reader knows.
    """
    return _CODECS.get(type(ce)) or _unknown(ce, path)


def _unknown(ce: object, path: str) -> NoReturn:
    raise NotSupportedError(f"{path}: {type(ce).__name__} is not a known compressive encoding")


def _scheme(b: m.BufferCompression | None) -> str | None:
    return b.scheme if b is not None else None


def _flat_bits(ce: m.CompressiveEncoding) -> int | None:
    """``bits_per_value`` of an uncompressed flat child (the leaf several encodings require)."""
    if isinstance(ce, m.Flat) and _scheme(ce.data) is None:
        return ce.bits_per_value
    return None


# -- entry points -------------------------------------------------------------------------------


def decode_mini(ce: m.CompressiveEncoding, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
    """Decode the value buffers of a batch of mini-block chunks.

    Parameters
    ----------
    ce:
        The layout's ``value_compression``.
    bufs:
        One :class:`Bufs` per value buffer (``num_buffers`` of them), each with one entry per chunk.
    counts:
        Values in each chunk.
    path:
        The file, for error messages.
    """
    return (_CODECS.get(type(ce)) or _unknown(ce, path)).mini(ce, bufs, counts, path)


def decode_block(ce: m.CompressiveEncoding, bufs: Bufs, counts: I64, path: str) -> Values:
    """Decode whole buffers, each holding a known number of values.

    Parameters
    ----------
    ce:
        The buffers' encoding (levels, dictionary, ...).
    bufs:
        The buffers.
    counts:
        Values in each buffer.
    path:
        The file, for error messages.

    Returns
    -------
    Values
        The values of all buffers, concatenated.

    Raises
    ------
    ValueError
        The bytes do not match the encoding (the caller reports a corrupt file).
    NotSupportedError
        An encoding this reader does not implement in block context.
    """
    return (_CODECS.get(type(ce)) or _unknown(ce, path)).block(ce, bufs, counts, path)


def decode_levels(ce: m.CompressiveEncoding, bufs: Bufs, counts: I64, path: str) -> Levels:
    """Repetition or definition levels of a batch of buffers, as u16 (see :func:`decode_block`)."""
    v = decode_block(ce, bufs, counts, path)
    if isinstance(v, Nulls):
        return np.zeros(v.n, dtype=np.uint16)
    if not isinstance(v, Fixed) or v.bits not in (8, 16, 32, 64):
        raise ValueError("levels are not integers")
    return np.ascontiguousarray(v.data).view(uint_dtype(v.bits)).astype(np.uint16)


def decode_fixed_rows(ce: m.CompressiveEncoding, rows: U8, n: int, path: str) -> Values:
    """Full-zip fixed-width values: ``n`` values of equal size in ``rows`` (control words removed)."""
    return (_CODECS.get(type(ce)) or _unknown(ce, path)).fixed_rows(ce, rows, n, path)


def decode_variable_rows(ce: m.CompressiveEncoding, values: VarBin, path: str) -> Values:
    """Full-zip variable-width values, already unzipped from their control words and lengths."""
    return (_CODECS.get(type(ce)) or _unknown(ce, path)).variable_rows(ce, values, path)


def decode_mini_take(
    ce: m.CompressiveEncoding, bufs: Sequence[Bufs], counts: I64, chunk: I64, local: I64
) -> Values | None:
    """Values ``local[j]`` of chunk ``chunk[j]`` for every ``j``, or None when not addressable.

    Raises
    ------
    ValueError
        A wanted value lies outside its chunk or buffer (corrupt data).
    """
    mt.check_local(counts, chunk, local)
    return (_CODECS.get(type(ce)) or _unknown(ce, "")).mini_take(ce, bufs, counts, chunk, local)


def levels_take(ce: m.CompressiveEncoding, bufs: Bufs, counts: I64, chunk: I64, local: I64) -> Levels | None:
    """Levels ``local[j]`` of level buffer ``chunk[j]``, or None when not addressable."""
    return (_CODECS.get(type(ce)) or _unknown(ce, "")).levels_take(ce, bufs, counts, chunk, local)


def one_value(ce: m.CompressiveEncoding, blob: U8, bufs: list[tuple[int, int]], i: int) -> Values | None:
    """Value ``i`` of one mini-block chunk whose value buffers are ``(start, size)`` in ``blob``.

    None when the compression is not one the codecs address directly.

    Raises
    ------
    ValueError
        The value lies outside its buffer (corrupt data).
    """
    return (_CODECS.get(type(ce)) or _unknown(ce, "")).one_value(ce, blob, bufs, i)


def one_level(ce: m.CompressiveEncoding, blob: U8, start: int, size: int, count: int, i: int) -> int | None:
    """Level ``i`` of one chunk's level buffer of ``count`` levels, or None when not addressable."""
    return (_CODECS.get(type(ce)) or _unknown(ce, "")).one_level(ce, blob, start, size, count, i)


def page_neutral(ce: m.CompressiveEncoding) -> m.CompressiveEncoding | None:
    """``ce`` without what each page owns, or None when its pages cannot merge (see :class:`Codec`)."""
    result: m.CompressiveEncoding | None = codec_for(ce).page_neutral(ce)
    return result


# -- the codecs ---------------------------------------------------------------------------------


@register(m.Flat)
class FlatCodec(Codec[m.Flat]):
    """Fixed-width values (1 bit: a bitmap), optionally LZ4/ZSTD-compressed as a whole buffer."""

    def mini(self, ce: m.Flat, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        return flat_values(decompress_each(bufs[0], _scheme(ce.data), path), ce.bits_per_value, counts)

    def block(self, ce: m.Flat, bufs: Bufs, counts: I64, path: str) -> Values:
        return flat_values(decompress_each(bufs, _scheme(ce.data), path), ce.bits_per_value, counts)

    def fixed_rows(self, ce: m.Flat, rows: U8, n: int, path: str) -> Values:
        if _scheme(ce.data) is not None:
            raise unsupported(path, "compressed full-zip", ce)
        return Fixed(rows, ce.bits_per_value, n)

    def mini_take(
        self, ce: m.Flat, bufs: Sequence[Bufs], counts: I64, chunk: I64, local: I64
    ) -> Values | None:
        if _scheme(ce.data) is not None:
            return None
        return mt.take_flat(bufs[0], ce.bits_per_value, chunk, local)

    def one_value(self, ce: m.Flat, blob: U8, bufs: list[tuple[int, int]], i: int) -> Values | None:
        bits = ce.bits_per_value
        if _scheme(ce.data) is not None or bits % 8 or not bits:
            return None
        return mt.one_flat(blob, bufs[0], bits, i)

    def levels_take(self, ce: m.Flat, bufs: Bufs, counts: I64, chunk: I64, local: I64) -> Levels | None:
        if ce.bits_per_value not in (8, 16) or _scheme(ce.data) is not None:
            return None
        return mt.take_flat_levels(bufs, ce.bits_per_value, chunk, local)

    def one_level(self, ce: m.Flat, blob: U8, start: int, size: int, count: int, i: int) -> int | None:
        if ce.bits_per_value not in (8, 16) or _scheme(ce.data) is not None:
            return None
        return mt.one_level_flat(blob, start, size, ce.bits_per_value, i)


@register(m.InlineBitpacking)
class InlineBitpackingCodec(Codec[m.InlineBitpacking]):
    """FastLanes blocks of 1024 values, each led by its bit width."""

    def mini(self, ce: m.InlineBitpacking, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        b0 = decompress_each(bufs[0], _scheme(ce.values), path)
        return inline_bitpacked(b0, ce.uncompressed_bits_per_value, counts)

    def block(self, ce: m.InlineBitpacking, bufs: Bufs, counts: I64, path: str) -> Values:
        b = decompress_each(bufs, _scheme(ce.values), path)
        return inline_bitpacked(b, ce.uncompressed_bits_per_value, counts)

    def mini_take(
        self, ce: m.InlineBitpacking, bufs: Sequence[Bufs], counts: I64, chunk: I64, local: I64
    ) -> Values | None:
        if _scheme(ce.values) is not None:
            return None
        return mt.take_inline_bitpacked(bufs[0], ce.uncompressed_bits_per_value, chunk, local)

    def one_value(
        self, ce: m.InlineBitpacking, blob: U8, bufs: list[tuple[int, int]], i: int
    ) -> Values | None:
        t = ce.uncompressed_bits_per_value
        if _scheme(ce.values) is not None or t not in (8, 16, 32, 64):
            return None
        return mt.one_inline_bitpacked(blob, bufs[0], t, i)


@register(m.OutOfLineBitpacking)
class OutOfLineBitpackingCodec(Codec[m.OutOfLineBitpacking]):
    """FastLanes blocks with one bit width for the whole buffer (levels, in block context)."""

    def block(self, ce: m.OutOfLineBitpacking, bufs: Bufs, counts: I64, path: str) -> Values:
        if not isinstance(ce.values, m.Flat):
            raise unsupported(path, "out-of-line bit-packing child", ce.values)
        return out_of_line_bitpacked(bufs, ce.uncompressed_bits_per_value, ce.values.bits_per_value, counts)

    def levels_take(
        self, ce: m.OutOfLineBitpacking, bufs: Bufs, counts: I64, chunk: I64, local: I64
    ) -> Levels | None:
        if not isinstance(ce.values, m.Flat):
            return None
        t, w = ce.uncompressed_bits_per_value, ce.values.bits_per_value
        return mt.take_levels_bitpacked(bufs, counts, chunk, local, t, w)

    def one_level(
        self, ce: m.OutOfLineBitpacking, blob: U8, start: int, size: int, count: int, i: int
    ) -> int | None:
        if not isinstance(ce.values, m.Flat):
            return None
        t, w = ce.uncompressed_bits_per_value, ce.values.bits_per_value
        return mt.one_level_bitpacked(blob, start, size, count, i, t, w)


@register(m.Variable)
class VariableCodec(Codec[m.Variable]):
    """Variable-width values: offsets (flat) and bytes."""

    def mini(self, ce: m.Variable, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        if _scheme(ce.values) is not None:
            raise unsupported(path, "compressed variable", ce)
        if not isinstance(ce.offsets, m.Flat):
            raise unsupported(path, "variable offsets", ce.offsets)
        return variable_mini(bufs[0], ce.offsets.bits_per_value, counts)

    def block(self, ce: m.Variable, bufs: Bufs, counts: I64, path: str) -> Values:
        parts: list[Values] = [variable_block(bufs.one(k), int(counts[k])) for k in range(len(bufs))]
        return parts[0] if len(parts) == 1 else concat_values(parts)

    def variable_rows(self, ce: m.Variable, values: VarBin, path: str) -> Values:
        return values

    def mini_take(
        self, ce: m.Variable, bufs: Sequence[Bufs], counts: I64, chunk: I64, local: I64
    ) -> Values | None:
        if _scheme(ce.values) is not None or not isinstance(ce.offsets, m.Flat):
            return None
        return mt.take_variable(bufs[0], ce.offsets.bits_per_value, chunk, local)

    def one_value(self, ce: m.Variable, blob: U8, bufs: list[tuple[int, int]], i: int) -> Values | None:
        if _scheme(ce.values) is not None or not isinstance(ce.offsets, m.Flat):
            return None
        return mt.one_variable(blob, bufs[0], ce.offsets.bits_per_value, i)


@register(m.Fsst)
class FsstCodec(Codec[m.Fsst]):
    """FSST-compressed strings over an inner (variable-width) encoding of the codes."""

    def mini(self, ce: m.Fsst, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        return fsst_values(ce.symbol_table, decode_mini(ce.values, bufs, counts, path))

    def block(self, ce: m.Fsst, bufs: Bufs, counts: I64, path: str) -> Values:
        return fsst_values(ce.symbol_table, decode_block(ce.values, bufs, counts, path))

    def variable_rows(self, ce: m.Fsst, values: VarBin, path: str) -> Values:
        return fsst_values(ce.symbol_table, decode_variable_rows(ce.values, values, path))

    def mini_take(
        self, ce: m.Fsst, bufs: Sequence[Bufs], counts: I64, chunk: I64, local: I64
    ) -> Values | None:
        inner = decode_mini_take(ce.values, bufs, counts, chunk, local)
        return fsst_values(ce.symbol_table, inner) if isinstance(inner, VarBin) else None

    def one_value(self, ce: m.Fsst, blob: U8, bufs: list[tuple[int, int]], i: int) -> Values | None:
        inner = one_value(ce.values, blob, bufs, i)
        return fsst_values(ce.symbol_table, inner) if isinstance(inner, VarBin) else None

    def page_neutral(self, ce: m.Fsst) -> m.Fsst | None:
        # Each page has its own symbol table: pages merge only over plain variable-width codes,
        # which a take always addresses directly (see ``miniblock._fsst_by_page``).
        codes = ce.values
        if not isinstance(codes, m.Variable) or _scheme(codes.values) is not None:
            return None
        return replace(ce, symbol_table=b"") if isinstance(codes.offsets, m.Flat) else None


@register(m.General)
class GeneralCodec(Codec[m.General]):
    """LZ4/ZSTD around an inner encoding (the first value buffer; per value in full-zip)."""

    def mini(self, ce: m.General, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        b0 = decompress_each(bufs[0], ce.compression.scheme, path)
        return decode_mini(ce.values, [b0, *bufs[1:]], counts, path)

    def block(self, ce: m.General, bufs: Bufs, counts: I64, path: str) -> Values:
        return decode_block(ce.values, decompress_each(bufs, ce.compression.scheme, path), counts, path)

    def variable_rows(self, ce: m.General, values: VarBin, path: str) -> Values:
        return general_per_value(values, ce.compression.scheme, path)


@register(m.Rle)
class RleCodec(Codec[m.Rle]):
    """Run values and run lengths (both flat)."""

    def mini(self, ce: m.Rle, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        bits = self._bits(ce, path)
        vb, lb = bufs[0], bufs[1]
        values = gather(vb.blob, vb.starts, vb.sizes)
        lengths = gather(lb.blob, lb.starts, lb.sizes)
        return rle_values(values, bits, lengths, lb.sizes, counts)

    def block(self, ce: m.Rle, bufs: Bufs, counts: I64, path: str) -> Values:
        return rle_block(bufs, self._bits(ce, path), counts)

    @staticmethod
    def _bits(ce: m.Rle, path: str) -> int:
        if not isinstance(ce.values, m.Flat) or not isinstance(ce.run_lengths, m.Flat):
            raise unsupported(path, "RLE child", ce)
        return ce.values.bits_per_value


@register(m.ByteStreamSplit)
class ByteStreamSplitCodec(Codec[m.ByteStreamSplit]):
    """Byte ``k`` of every value, then byte ``k + 1``... (a flat child gives the width)."""

    def mini(self, ce: m.ByteStreamSplit, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        return byte_stream_split(bufs[0], self._bits(ce, path), counts)

    def block(self, ce: m.ByteStreamSplit, bufs: Bufs, counts: I64, path: str) -> Values:
        return byte_stream_split(bufs, self._bits(ce, path), counts)

    @staticmethod
    def _bits(ce: m.ByteStreamSplit, path: str) -> int:
        if not isinstance(ce.values, m.Flat):
            raise unsupported(path, "byte-stream-split child", ce.values)
        return ce.values.bits_per_value


@register(m.FixedSizeList)
class FixedSizeListCodec(Codec[m.FixedSizeList]):
    """Fixed-size lists flattened to their items, an item bitmap first when ``has_validity``."""

    def mini(self, ce: m.FixedSizeList, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        rest = list(bufs)
        validity = None
        if ce.has_validity:
            vb = rest.pop(0)
            validity = flat_values(vb, 1, counts * ce.items_per_value).data.astype(bool)
        child = decode_mini(ce.values, rest, counts * ce.items_per_value, path)
        return Fsl(ce.items_per_value, validity, child, int(counts.sum()))

    def block(self, ce: m.FixedSizeList, bufs: Bufs, counts: I64, path: str) -> Values:
        return self.mini(ce, [bufs], counts, path)

    def fixed_rows(self, ce: m.FixedSizeList, rows: U8, n: int, path: str) -> Values:
        width = len(rows) // n if n else 0
        return fsl_rows(ce, rows.reshape(n, width), n, path)

    def mini_take(
        self, ce: m.FixedSizeList, bufs: Sequence[Bufs], counts: I64, chunk: I64, local: I64
    ) -> Values | None:
        if ce.has_validity:
            return None
        dim = ce.items_per_value
        items = (local[:, None] * dim + np.arange(dim, dtype=np.int64)[None, :]).reshape(-1)
        child = decode_mini_take(ce.values, bufs, counts * dim, np.repeat(chunk, dim), items)
        return None if child is None else Fsl(dim, None, child, len(chunk))

    def one_value(self, ce: m.FixedSizeList, blob: U8, bufs: list[tuple[int, int]], i: int) -> Values | None:
        bits = _flat_bits(ce.values)
        if ce.has_validity or bits is None or bits % 8 or ce.items_per_value == 0:
            return None
        return mt.one_fsl_flat(blob, bufs[0], bits, ce.items_per_value, i)


@register(m.PackedStruct)
class PackedStructCodec(Codec[m.PackedStruct]):
    """Fixed-width struct fields packed row by row."""

    def mini(self, ce: m.PackedStruct, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        return split_packed(decode_mini(ce.values, bufs, counts, path), ce.bits_per_value, path)


@register(m.Constant)
class ConstantCodec(Codec[m.Constant]):
    """One value repeated (or null); no buffer."""

    def mini(self, ce: m.Constant, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        return constant_values(ce.value, int(counts.sum()))

    def block(self, ce: m.Constant, bufs: Bufs, counts: I64, path: str) -> Values:
        return constant_values(ce.value, int(counts.sum()))

    def fixed_rows(self, ce: m.Constant, rows: U8, n: int, path: str) -> Values:
        return constant_values(ce.value, n)


# A dictionary inside a value tree is a message Lance defines that its writers do not put where
# this reader decodes (a dictionary lives in the layout): registered so every message has a codec,
# decoding in no context.


@register(m.RangeSequence)
class RangeSequenceCodec(Codec[m.RangeSequence]):
    """``start + step * i``, restarting at each buffer (chunk); no bytes stored.

    pylance 14 writes it only in its unstable 2.3 format (which this reader does not open): decoded
    per the 2.1 proto, proven on hand-built pages.
    """

    def mini(self, ce: m.RangeSequence, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        return range_values(ce.uncompressed_bits_per_value, ce.start, ce.step, counts)

    def block(self, ce: m.RangeSequence, bufs: Bufs, counts: I64, path: str) -> Values:
        return range_values(ce.uncompressed_bits_per_value, ce.start, ce.step, counts)


@register(m.Delta)
class DeltaCodec(Codec[m.Delta]):
    """A non-decreasing sequence per buffer (chunk): ``base``, then ``n - 1`` encoded differences.

    pylance 14 writes it only in its unstable 2.3 format: decoded per the 2.1 proto, proven on
    hand-built pages.
    """

    def mini(self, ce: m.Delta, bufs: Sequence[Bufs], counts: I64, path: str) -> Values:
        diffs = decode_mini(ce.deltas, bufs, np.maximum(counts - 1, 0), path)
        return delta_values(diffs, ce.uncompressed_bits_per_value, ce.base, counts)

    def block(self, ce: m.Delta, bufs: Bufs, counts: I64, path: str) -> Values:
        diffs = decode_block(ce.deltas, bufs, np.maximum(counts - 1, 0), path)
        return delta_values(diffs, ce.uncompressed_bits_per_value, ce.base, counts)


@register(m.Dictionary)
class DictionaryCodec(Codec[m.Dictionary]):
    """A dictionary inside a value tree: not decoded by this reader."""


@register(m.VariablePackedStruct)
class VariablePackedStructCodec(Codec[m.VariablePackedStruct]):
    """Struct fields packed row by row where some are variable width (2.2 full-zip pages of a
    struct marked ``lance-encoding:packed``): each field's values decode in its own encoding."""

    def variable_rows(self, ce: m.VariablePackedStruct, values: VarBin, path: str) -> Values:
        kids: list[Values] = []
        n = len(values.offsets) - 1
        for f, raw in split_variable_packed(ce.fields, values):
            if f.value is None:
                raise unsupported(path, "packed struct field without an encoding", ce)
            if isinstance(raw, VarBin):
                kids.append(decode_variable_rows(f.value, raw, path))
            else:
                kids.append(decode_fixed_rows(f.value, raw, n, path))
        return Struct(tuple(kids), n)
