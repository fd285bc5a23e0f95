"""The encoding registries cover every message kind, and every registered context decodes.

Walks the 2.1/2.2 codec registry (one codec per compressive-encoding dataclass), the page-reader
registry (one per page layout) and the 2.0 node-decoder and protobuf-writer registries. For each
codec, every context it claims decodes a small hand-built sample to known values, and every
context it does not claim refuses cleanly (NotSupportedError, or None for the take contexts).
The byte-level behaviour against pylance is covered by the interop and encoding tests.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from lance_format.core.errors import NotSupportedError
from lance_format.encodings import buffer_compression
from lance_format.encodings.v20 import _serde as v20_serde
from lance_format.encodings.v20 import model as m20
from lance_format.encodings.v20 import pages as v20_pages
from lance_format.encodings.v21 import codecs, page_layout_from_raw, readers
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import Bufs
from lance_format.encodings.v21.encode import _serde as v21_encode_serde
from lance_format.encodings.v21.encode.bitpack import pack_blocks
from lance_format.encodings.v21.encode.fsst import fsst_compress
from lance_format.encodings.v21.fastlanes import FL_BLOCK
from lance_format.encodings.v21.values import Fixed, Fsl, Nulls, Values, VarBin


def _dataclasses_of(module: Any) -> set[type[Any]]:
    return {
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__
    }


# -- coverage ---------------------------------------------------------------------------------

# Parts of messages, never dispatched on: a buffer's compression and a field of a packed struct.
_V21_PARTS = {m.BufferCompression, m.VariablePackedField}


def test_every_v21_dataclass_is_a_compressive_encoding_or_a_page_layout() -> None:
    kinds = set(typing.get_args(m.CompressiveEncoding)) | set(typing.get_args(m.PageLayout))
    assert _dataclasses_of(m) - _V21_PARTS == kinds


def test_every_v21_compressive_encoding_has_a_codec() -> None:
    assert set(codecs.registered()) == set(typing.get_args(m.CompressiveEncoding))


def test_every_v21_page_layout_has_a_page_reader() -> None:
    assert set(readers.registered()) == set(typing.get_args(m.PageLayout))


def test_every_v20_array_encoding_has_a_decoder_and_a_writer() -> None:
    kinds = set(typing.get_args(m20.ArrayEncoding))
    assert _dataclasses_of(m20) - {m20.Buffer, m20.Compression, m20.Values, m20.Blob, m20.ZoneIndex} == kinds
    assert set(v20_pages.registered()) == kinds
    assert set(v20_serde.array_encoding_writers()) == kinds


def test_a_second_codec_for_one_message_is_refused() -> None:
    with pytest.raises(ValueError, match="already has a codec"):
        codecs.register(m.Flat)(codecs.Codec)
    with pytest.raises(ValueError, match="already has a page reader"):
        readers.register(m.FullZipLayout, readers.registered()[m.FullZipLayout])


def test_an_unknown_message_is_not_supported() -> None:
    empty = Bufs(np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64))
    with pytest.raises(NotSupportedError):
        codecs.decode_block(typing.cast(Any, object()), empty, np.zeros(0, np.int64), "f")
    with pytest.raises(NotSupportedError):
        readers.page_reader_for(object(), "f")
    assert not readers.can_merge_pages(object())


# -- samples ----------------------------------------------------------------------------------


def _py(v: Values) -> list[Any]:
    """Values as Python objects, for comparison."""
    if isinstance(v, Nulls):
        return [None] * v.n
    if isinstance(v, Fixed):
        if v.bits == 1:
            return [bool(b) for b in np.asarray(v.data)[: v.n]]
        return list(np.ascontiguousarray(v.data).view(f"<u{v.bits // 8}").tolist())
    if isinstance(v, VarBin):
        return [
            bytes(v.data[a:b]) for a, b in zip(v.offsets[:-1].tolist(), v.offsets[1:].tolist(), strict=True)
        ]
    if isinstance(v, Fsl):
        items = _py(v.child)
        return [items[i * v.dim : (i + 1) * v.dim] for i in range(v.n)]
    kids = [_py(c) for c in v.children]
    return [tuple(k[i] for k in kids) for i in range(v.n)]


def _bufs(parts: list[bytes]) -> Bufs:
    """One batch of buffers, each padded by 3 bytes so no buffer starts at 0 but the first."""
    blob = b"".join(p + b"\xee" * 3 for p in parts)
    sizes = np.array([len(p) for p in parts], dtype=np.int64)
    starts = np.cumsum(sizes + 3) - (sizes + 3)
    return Bufs(np.frombuffer(blob, dtype=np.uint8), starts, sizes)


def _u32(values: list[int]) -> bytes:
    return np.array(values, dtype="<u4").tobytes()


def _one(b: Bufs) -> tuple[np.ndarray[Any, Any], list[tuple[int, int]]]:
    return b.blob, list(zip(b.starts.tolist(), b.sizes.tolist(), strict=True))


def _variable_chunk(strings: list[bytes]) -> bytes:
    """A mini-block variable-width buffer: ``n + 1`` u32 offsets from the buffer start, then bytes."""
    head = 4 * (len(strings) + 1)
    offs = np.concatenate([[0], np.cumsum([len(s) for s in strings])]) + head
    return _u32(offs.tolist()) + b"".join(strings)


def _variable_block(strings: list[bytes]) -> bytes:
    """A block variable-width buffer: u32 offset width, u32 start of the bytes, offsets, bytes."""
    offs = np.concatenate([[0], np.cumsum([len(s) for s in strings])]).tolist()
    start = 8 + 4 * len(offs)
    return _u32([32, start]) + _u32(offs) + b"".join(strings)


def _inline_block(values: list[int], width: int) -> bytes:
    """One inline bit-packed buffer: the u32 bit width, then the FastLanes block."""
    block = np.zeros((1, FL_BLOCK), dtype=np.uint32)
    block[0, : len(values)] = values
    return _u32([width]) + pack_blocks(block, width).tobytes()


# Enough bytes (32 KiB) for the encoder to use FSST at all.
STRINGS = [b"alpha beta gamma %d" % (i % 7) for i in range(2000)]
_FSST = fsst_compress(
    np.frombuffer(b"".join(STRINGS), dtype=np.uint8),
    np.concatenate([[0], np.cumsum([len(s) for s in STRINGS])]).astype(np.int64),
)
assert _FSST is not None
FSST_TABLE, FSST_OFFSETS, FSST_CODES = _FSST
CODES = [
    bytes(FSST_CODES[a:b]) for a, b in zip(FSST_OFFSETS[:-1].tolist(), FSST_OFFSETS[1:].tolist(), strict=True)
]

FLAT32 = m.Flat(32)
FLAT16 = m.Flat(16)
VARIABLE = m.Variable(FLAT32)
FSST = m.Fsst(FSST_TABLE, VARIABLE)
FSL = m.FixedSizeList(2, FLAT32)
OOL = m.OutOfLineBitpacking(16, m.Flat(5))
INLINE = m.InlineBitpacking(32)
ZSTD = m.General(m.BufferCompression("zstd"), FLAT32)
RLE = m.Rle(FLAT32, m.Flat(8))
BSS = m.ByteStreamSplit(FLAT32)
PACKED = m.PackedStruct((32, 16), m.Flat(48))
CONSTANT = m.Constant(_u32([7]))


def _ints(*xs: int) -> np.ndarray[Any, Any]:
    return np.array(xs, dtype=np.int64)


def _bss(values: list[int]) -> bytes:
    return np.array(values, dtype="<u4").view(np.uint8).reshape(-1, 4).T.tobytes()


def _rle_block(values: list[int], runs: list[int]) -> bytes:
    body = _u32(values)
    return np.array([len(body)], dtype="<u8").tobytes() + body + bytes(runs)


def _packed_rows(rows: list[tuple[int, int]]) -> bytes:
    return b"".join(_u32([a]) + np.array([b], dtype="<u2").tobytes() for a, b in rows)


def _var_rows(rows: list[bytes]) -> VarBin:
    offs = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    return VarBin(offs, np.frombuffer(b"".join(rows), dtype=np.uint8))


def _zstd(data: bytes) -> bytes:
    return buffer_compression.compress("zstd", data)


def _bitpacked_levels(levels: list[int]) -> bytes:
    block = np.zeros((1, FL_BLOCK), dtype=np.uint16)
    block[0, : len(levels)] = levels
    return pack_blocks(block, 5).tobytes()


LEVELS = [i % 31 for i in range(FL_BLOCK)]
# (message, context) -> a thunk returning (decoded, expected). One per context a codec claims.
Sample = Callable[[], tuple[Any, Any]]
SAMPLES: dict[tuple[type[Any], str], Sample] = {
    # Flat
    (m.Flat, "mini"): lambda: (
        codecs.decode_mini(FLAT32, [_bufs([_u32([1, 2, 3]), _u32([4, 5])])], _ints(3, 2), "f"),
        [1, 2, 3, 4, 5],
    ),
    (m.Flat, "block"): lambda: (
        codecs.decode_block(m.Flat(1), _bufs([bytes([0b101])]), _ints(3), "f"),
        [True, False, True],
    ),
    (m.Flat, "fixed_rows"): lambda: (
        codecs.decode_fixed_rows(FLAT32, np.frombuffer(_u32([9, 8]), dtype=np.uint8), 2, "f"),
        [9, 8],
    ),
    (m.Flat, "mini_take"): lambda: (
        codecs.decode_mini_take(
            FLAT32, [_bufs([_u32([1, 2, 3]), _u32([4, 5])])], _ints(3, 2), _ints(0, 1), _ints(2, 0)
        ),
        [3, 4],
    ),
    (m.Flat, "one_value"): lambda: (
        codecs.one_value(FLAT32, *_one(_bufs([_u32([1, 2, 3])])), 1),
        [2],
    ),
    (m.Flat, "levels_take"): lambda: (
        codecs.levels_take(
            FLAT16, _bufs([np.array([0, 1, 2], "<u2").tobytes()]), _ints(3), _ints(0), _ints(1)
        ),
        [1],
    ),
    (m.Flat, "one_level"): lambda: (
        codecs.one_level(FLAT16, np.frombuffer(np.array([0, 1, 2], "<u2").tobytes(), np.uint8), 0, 6, 3, 2),
        2,
    ),
    # Inline bit-packing
    (m.InlineBitpacking, "mini"): lambda: (
        codecs.decode_mini(
            INLINE, [_bufs([_inline_block([1, 2, 3], 2), _inline_block([5], 3)])], _ints(3, 1), "f"
        ),
        [1, 2, 3, 5],
    ),
    (m.InlineBitpacking, "block"): lambda: (
        codecs.decode_block(INLINE, _bufs([_inline_block([6, 0, 7], 3)]), _ints(3), "f"),
        [6, 0, 7],
    ),
    (m.InlineBitpacking, "mini_take"): lambda: (
        codecs.decode_mini_take(
            INLINE,
            [_bufs([_inline_block([1, 2, 3], 2), _inline_block([5], 3)])],
            _ints(3, 1),
            _ints(0, 1),
            _ints(2, 0),
        ),
        [3, 5],
    ),
    (m.InlineBitpacking, "one_value"): lambda: (
        codecs.one_value(INLINE, *_one(_bufs([_inline_block([4, 9, 1], 4)])), 1),
        [9],
    ),
    # Out-of-line bit-packing (levels)
    (m.OutOfLineBitpacking, "block"): lambda: (
        codecs.decode_block(OOL, _bufs([_bitpacked_levels(LEVELS)]), _ints(FL_BLOCK), "f"),
        LEVELS,
    ),
    (m.OutOfLineBitpacking, "levels_take"): lambda: (
        codecs.levels_take(
            OOL, _bufs([_bitpacked_levels(LEVELS)]), _ints(FL_BLOCK), _ints(0, 0), _ints(5, 1000)
        ),
        [LEVELS[5], LEVELS[1000]],
    ),
    (m.OutOfLineBitpacking, "one_level"): lambda: (
        codecs.one_level(OOL, np.frombuffer(_bitpacked_levels(LEVELS), np.uint8), 0, 640, FL_BLOCK, 77),
        LEVELS[77],
    ),
    # Variable width
    (m.Variable, "mini"): lambda: (
        codecs.decode_mini(
            VARIABLE,
            [_bufs([_variable_chunk([b"a", b"", b"cd"]), _variable_chunk([b"xyz"])])],
            _ints(3, 1),
            "f",
        ),
        [b"a", b"", b"cd", b"xyz"],
    ),
    (m.Variable, "block"): lambda: (
        codecs.decode_block(
            VARIABLE, _bufs([_variable_block([b"ab", b"c"]), _variable_block([b"d"])]), _ints(2, 1), "f"
        ),
        [b"ab", b"c", b"d"],
    ),
    (m.Variable, "variable_rows"): lambda: (
        codecs.decode_variable_rows(VARIABLE, VarBin(_ints(0, 1, 3), np.frombuffer(b"abc", np.uint8)), "f"),
        [b"a", b"bc"],
    ),
    (m.Variable, "mini_take"): lambda: (
        codecs.decode_mini_take(
            VARIABLE,
            [_bufs([_variable_chunk([b"a", b"", b"cd"]), _variable_chunk([b"xyz"])])],
            _ints(3, 1),
            _ints(0, 1),
            _ints(2, 0),
        ),
        [b"cd", b"xyz"],
    ),
    (m.Variable, "one_value"): lambda: (
        codecs.one_value(VARIABLE, *_one(_bufs([_variable_chunk([b"a", b"", b"cd"])])), 2),
        [b"cd"],
    ),
    # FSST
    (m.Fsst, "mini"): lambda: (
        codecs.decode_mini(
            FSST,
            [_bufs([_variable_chunk(CODES[:1000]), _variable_chunk(CODES[1000:])])],
            _ints(1000, 1000),
            "f",
        ),
        STRINGS,
    ),
    (m.Fsst, "block"): lambda: (
        codecs.decode_block(FSST, _bufs([_variable_block(CODES)]), _ints(len(CODES)), "f"),
        STRINGS,
    ),
    (m.Fsst, "variable_rows"): lambda: (
        codecs.decode_variable_rows(FSST, VarBin(FSST_OFFSETS - FSST_OFFSETS[0], FSST_CODES), "f"),
        STRINGS,
    ),
    (m.Fsst, "mini_take"): lambda: (
        codecs.decode_mini_take(
            FSST,
            [_bufs([_variable_chunk(CODES[:1000]), _variable_chunk(CODES[1000:])])],
            _ints(1000, 1000),
            _ints(0, 1),
            _ints(3, 999),
        ),
        [STRINGS[3], STRINGS[1999]],
    ),
    (m.Fsst, "one_value"): lambda: (
        codecs.one_value(FSST, *_one(_bufs([_variable_chunk(CODES)])), 5),
        [STRINGS[5]],
    ),
    # General-purpose compression
    (m.General, "mini"): lambda: (
        codecs.decode_mini(ZSTD, [_bufs([_zstd(_u32([1, 2])), _zstd(_u32([3]))])], _ints(2, 1), "f"),
        [1, 2, 3],
    ),
    (m.General, "block"): lambda: (
        codecs.decode_block(ZSTD, _bufs([_zstd(_u32([4, 5]))]), _ints(2), "f"),
        [4, 5],
    ),
    (m.General, "variable_rows"): lambda: (
        codecs.decode_variable_rows(
            m.General(m.BufferCompression("zstd"), VARIABLE),
            VarBin(
                np.cumsum([0, len(_zstd(b"hello")), 0, len(_zstd(b"x"))]).astype(np.int64),
                np.frombuffer(_zstd(b"hello") + _zstd(b"x"), np.uint8),
            ),
            "f",
        ),
        [b"hello", b"", b"x"],
    ),
    # Run-length
    (m.Rle, "mini"): lambda: (
        codecs.decode_mini(
            RLE, [_bufs([_u32([7, 8]), _u32([9])]), _bufs([bytes([2, 1]), bytes([3])])], _ints(3, 3), "f"
        ),
        [7, 7, 8, 9, 9, 9],
    ),
    (m.Rle, "block"): lambda: (
        codecs.decode_block(RLE, _bufs([_rle_block([1, 2], [1, 3])]), _ints(4), "f"),
        [1, 2, 2, 2],
    ),
    # Byte-stream split
    (m.ByteStreamSplit, "mini"): lambda: (
        codecs.decode_mini(BSS, [_bufs([_bss([1, 70000]), _bss([3])])], _ints(2, 1), "f"),
        [1, 70000, 3],
    ),
    (m.ByteStreamSplit, "block"): lambda: (
        codecs.decode_block(BSS, _bufs([_bss([5, 2**31])]), _ints(2), "f"),
        [5, 2**31],
    ),
    # Fixed-size lists
    (m.FixedSizeList, "mini"): lambda: (
        codecs.decode_mini(FSL, [_bufs([_u32([1, 2, 3, 4]), _u32([5, 6])])], _ints(2, 1), "f"),
        [[1, 2], [3, 4], [5, 6]],
    ),
    (m.FixedSizeList, "block"): lambda: (
        codecs.decode_block(FSL, _bufs([_u32([1, 2, 3, 4])]), _ints(2), "f"),
        [[1, 2], [3, 4]],
    ),
    (m.FixedSizeList, "fixed_rows"): lambda: (
        codecs.decode_fixed_rows(
            m.FixedSizeList(2, FLAT32, has_validity=True),
            np.frombuffer(bytes([0b10]) + _u32([0, 2]) + bytes([0b11]) + _u32([3, 4]), np.uint8),
            2,
            "f",
        ),
        [[0, 2], [3, 4]],
    ),
    (m.FixedSizeList, "mini_take"): lambda: (
        codecs.decode_mini_take(
            FSL, [_bufs([_u32([1, 2, 3, 4]), _u32([5, 6])])], _ints(2, 1), _ints(0, 1), _ints(1, 0)
        ),
        [[3, 4], [5, 6]],
    ),
    (m.FixedSizeList, "one_value"): lambda: (
        codecs.one_value(FSL, *_one(_bufs([_u32([1, 2, 3, 4])])), 1),
        [[3, 4]],
    ),
    # Packed struct
    (m.PackedStruct, "mini"): lambda: (
        codecs.decode_mini(
            PACKED, [_bufs([_packed_rows([(1, 2), (3, 4)]), _packed_rows([(5, 6)])])], _ints(2, 1), "f"
        ),
        [(1, 2), (3, 4), (5, 6)],
    ),
    # Range: start + step * i, restarting in each chunk / buffer (no bytes stored)
    (m.RangeSequence, "mini"): lambda: (
        codecs.decode_mini(m.RangeSequence(32, 5, 3), [_bufs([b"", b""])], _ints(3, 2), "f"),
        [5, 8, 11, 5, 8],
    ),
    (m.RangeSequence, "block"): lambda: (
        codecs.decode_block(m.RangeSequence(64, 2**64 - 2, 1), _bufs([b""]), _ints(4), "f"),
        [2**64 - 2, 2**64 - 1, 0, 1],  # wraps at the width like the stored integers
    ),
    # Delta: the base, then n - 1 differences in the child encoding, per chunk / buffer
    (m.Delta, "mini"): lambda: (
        codecs.decode_mini(
            m.Delta(32, 7, FLAT32), [_bufs([_u32([0, 4]), _u32([1]), b""])], _ints(3, 2, 1), "f"
        ),
        [7, 7, 11, 7, 8, 7],
    ),
    (m.Delta, "block"): lambda: (
        codecs.decode_block(
            m.Delta(64, 10, m.Flat(64)),
            _bufs([np.array([5, 0, 2**40], dtype="<u8").tobytes()]),
            _ints(4),
            "f",
        ),
        [10, 15, 15, 15 + 2**40],
    ),
    # Variable packed struct: per row, u32 field then a u32 length and the bytes (FSST codes here)
    (m.VariablePackedStruct, "variable_rows"): lambda: (
        codecs.decode_variable_rows(
            m.VariablePackedStruct(
                (
                    m.VariablePackedField(FLAT32, bits_per_value=32),
                    m.VariablePackedField(FSST, bits_per_length=32),
                )
            ),
            _var_rows([_u32([i]) + _u32([len(CODES[i])]) + CODES[i] for i in range(3)]),
            "f",
        ),
        [(i, STRINGS[i]) for i in range(3)],
    ),
    # Constant
    (m.Constant, "mini"): lambda: (codecs.decode_mini(CONSTANT, [], _ints(2, 1), "f"), [7, 7, 7]),
    (m.Constant, "block"): lambda: (
        codecs.decode_block(m.Constant(None), _bufs([b""]), _ints(2), "f"),
        [None, None],
    ),
    (m.Constant, "fixed_rows"): lambda: (
        codecs.decode_fixed_rows(CONSTANT, np.zeros(0, np.uint8), 2, "f"),
        [7, 7],
    ),
}

_CLAIMED = [(kind, ctx) for kind, codec in codecs.registered().items() for ctx in sorted(codec.contexts())]
_NOT_CLAIMED = [
    (kind, ctx)
    for kind, codec in codecs.registered().items()
    for ctx in codecs.CONTEXTS
    if ctx not in codec.contexts()
]


def test_every_claimed_context_has_a_sample() -> None:
    assert set(SAMPLES) == set(_CLAIMED)


@pytest.mark.parametrize(("kind", "context"), _CLAIMED, ids=lambda x: getattr(x, "__name__", x))
def test_each_codec_decodes_each_context_it_claims(kind: type[Any], context: str) -> None:
    got, want = SAMPLES[(kind, context)]()
    assert got is not None
    if isinstance(got, np.ndarray):  # levels
        got = got.tolist()
    elif not isinstance(got, int):
        got = _py(got)
    assert got == want


def _instance(kind: type[Any]) -> Any:
    """Some message of ``kind`` (its fields' values do not matter: the context refuses first)."""
    args: dict[str, Any] = {}
    for f in dataclasses.fields(kind):
        if f.default is not dataclasses.MISSING:
            continue
        args[f.name] = FLAT32 if "Encoding" in str(f.type) else (() if "tuple" in str(f.type) else 0)
    return kind(**args)


@pytest.mark.parametrize(("kind", "context"), _NOT_CLAIMED, ids=lambda x: getattr(x, "__name__", x))
def test_each_codec_refuses_each_context_it_does_not_claim(kind: type[Any], context: str) -> None:
    ce = _instance(kind)
    empty = Bufs(np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64))
    none = np.zeros(0, np.int64)
    calls: dict[str, Callable[[], Any]] = {
        "mini": lambda: codecs.decode_mini(ce, [empty], none, "f"),
        "block": lambda: codecs.decode_block(ce, empty, none, "f"),
        "fixed_rows": lambda: codecs.decode_fixed_rows(ce, np.zeros(0, np.uint8), 0, "f"),
        "variable_rows": lambda: codecs.decode_variable_rows(
            ce, VarBin(_ints(0), np.zeros(0, np.uint8)), "f"
        ),
    }
    if context in calls:
        with pytest.raises(NotSupportedError, match=type(ce).__name__):
            calls[context]()
        return
    takes: dict[str, Callable[[], Any]] = {
        "mini_take": lambda: codecs.decode_mini_take(ce, [empty], none, none, none),
        "one_value": lambda: codecs.one_value(ce, np.zeros(0, np.uint8), [(0, 0)], 0),
        "levels_take": lambda: codecs.levels_take(ce, empty, none, none, none),
        "one_level": lambda: codecs.one_level(ce, np.zeros(0, np.uint8), 0, 0, 0, 0),
    }
    assert takes[context]() is None


# -- 2.0 protobuf writers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", sorted(v20_serde.array_encoding_writers(), key=lambda k: k.__name__), ids=lambda k: k.__name__
)
def test_each_v20_writer_round_trips(kind: type[Any]) -> None:
    buf = m20.Buffer(0)
    leaf = m20.Flat(32, buf)
    samples: dict[type[Any], Any] = {
        m20.Flat: m20.Flat(8, m20.Buffer(1, m20.BufferKind.COLUMN), m20.Compression("zstd", 3)),
        m20.NoNull: m20.NoNull(leaf),
        m20.SomeNull: m20.SomeNull(m20.Flat(1, m20.Buffer(1)), leaf),
        m20.AllNull: m20.AllNull(),
        m20.FixedSizeList: m20.FixedSizeList(3, leaf, True),
        m20.List: m20.List(m20.Flat(64, buf), 5, 9),
        m20.SimpleStruct: m20.SimpleStruct(),
        m20.Binary: m20.Binary(m20.Flat(64, buf), m20.Flat(8, m20.Buffer(1)), 4),
        m20.Dictionary: m20.Dictionary(m20.Flat(8, buf), m20.Flat(32, m20.Buffer(1)), 3),
        m20.Fsst: m20.Fsst(m20.Binary(leaf, leaf, 0), b"table"),
        m20.PackedStruct: m20.PackedStruct((leaf, m20.Flat(16, buf)), m20.Buffer(2)),
        m20.FixedSizeBinary: m20.FixedSizeBinary(m20.Flat(8, buf), 4),
        m20.Bitpacked: m20.Bitpacked(3, 32, buf, True),
        m20.BitpackedForNonNeg: m20.BitpackedForNonNeg(3, 32, buf),
        m20.Constant: m20.Constant(b"\x01\x02"),
    }
    enc = samples[kind]
    name, raw = v20_serde.array_encoding_to_bytes(enc)
    assert v20_serde.page_encoding_from_raw((name, raw), "f") == enc


def test_pages_merge_unless_their_encoding_owns_per_page_state() -> None:
    # FSST pages each own a symbol table: they merge (table stripped) only over plain codes.
    assert codecs.page_neutral(FSST) == m.Fsst(b"", VARIABLE)
    assert codecs.page_neutral(m.Fsst(FSST_TABLE, m.Variable(FLAT32, m.BufferCompression("zstd")))) is None
    assert codecs.page_neutral(m.Fsst(FSST_TABLE, ZSTD)) is None
    assert codecs.page_neutral(FLAT32) is FLAT32


# -- 2.1 protobuf writers and parsers ---------------------------------------------------------

V21_SAMPLES: dict[type[Any], Any] = {
    m.Flat: m.Flat(16, m.BufferCompression("lz4")),
    m.Variable: m.Variable(FLAT32, m.BufferCompression("zstd", 5)),
    m.Constant: m.Constant(b"\x01\x02"),
    m.RangeSequence: m.RangeSequence(64, 5, 3),
    m.Delta: m.Delta(32, 7, m.Flat(8)),
    m.OutOfLineBitpacking: OOL,
    m.InlineBitpacking: m.InlineBitpacking(16, m.BufferCompression("lz4")),
    m.Fsst: FSST,
    m.Dictionary: m.Dictionary(m.Flat(8), VARIABLE, 12),
    m.Rle: RLE,
    m.ByteStreamSplit: BSS,
    m.General: ZSTD,
    m.FixedSizeList: m.FixedSizeList(3, FLAT32, has_validity=True),
    m.PackedStruct: PACKED,
    m.VariablePackedStruct: m.VariablePackedStruct(
        (
            m.VariablePackedField(FLAT32, bits_per_value=32),
            m.VariablePackedField(VARIABLE, bits_per_length=16),
        )
    ),
}

_LAYERS = (m.RepDefLayer.NULLABLE_ITEM, m.RepDefLayer.NULLABLE_LIST)
_MINI = m.MiniBlockLayout(FLAT16, m.Flat(8), FSST, None, 0, _LAYERS, 1, 1, 100, has_large_chunk=True)
LAYOUT_SAMPLES: dict[type[Any], Any] = {
    m.MiniBlockLayout: _MINI,
    m.FullZipLayout: m.FullZipLayout(1, 2, None, 32, 10, 9, VARIABLE, _LAYERS),
    m.AllNullLayout: m.AllNullLayout(_LAYERS, b"\x05"),
    m.BlobLayout: m.BlobLayout(_MINI, (m.RepDefLayer.NULLABLE_ITEM,)),
}


def test_every_v21_message_has_a_writer() -> None:
    compressive, layouts = v21_encode_serde.writers()
    assert set(compressive) == set(typing.get_args(m.CompressiveEncoding)) == set(V21_SAMPLES)
    assert set(layouts) == set(typing.get_args(m.PageLayout)) == set(LAYOUT_SAMPLES)


@pytest.mark.parametrize("kind", sorted(V21_SAMPLES, key=lambda k: k.__name__), ids=lambda k: k.__name__)
def test_each_v21_compressive_encoding_round_trips(kind: type[Any]) -> None:
    layout = dataclasses.replace(_MINI, value_compression=V21_SAMPLES[kind])
    assert page_layout_from_raw(v21_encode_serde.page_layout_bytes(layout), "f") == layout


@pytest.mark.parametrize("kind", sorted(LAYOUT_SAMPLES, key=lambda k: k.__name__), ids=lambda k: k.__name__)
def test_each_v21_page_layout_round_trips(kind: type[Any]) -> None:
    layout = LAYOUT_SAMPLES[kind]
    assert page_layout_from_raw(v21_encode_serde.page_layout_bytes(layout), "f") == layout
