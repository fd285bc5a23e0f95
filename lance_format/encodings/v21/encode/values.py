"""Leaf values as plain numpy buffers, ready to be cut into chunks or zipped with levels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import NotSupportedError
from lance_format.core.jit import kernel, warm
from lance_format.encodings.v21.encode._chunks import copy_bytes

__all__ = ["FixedVals", "PageBuffers", "VarVals", "compact_strings", "extract", "longest_value", "warm_up"]

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
_NO_BYTES = np.zeros(0, np.uint8)
#: A page's buffers: bytes or arrays the writer takes as they are (no copy to bytes).
PageBuffers = list[bytes | npt.NDArray[Any]]


@dataclass(frozen=True)
class FixedVals:
    """``n`` values of ``width`` bytes (``width == 0``: booleans in ``bools``).

    ``dims`` is the fixed-size-list nesting (outermost first) and ``level_valid`` holds, per
    nesting level, the validity of that level's items (None when all are valid). ``int_bits`` is
    set when the values are integers that bit-pack.
    """

    data: U8
    width: int
    n: int
    bools: npt.NDArray[np.bool_] | None = None
    dims: tuple[int, ...] = ()
    level_valid: tuple[npt.NDArray[np.bool_] | None, ...] = ()
    int_bits: int | None = None
    #: Bits of each field of a packed struct (its rows are the fields' bytes side by side).
    packed_bits: tuple[int, ...] = ()
    #: Booleans packed least significant bit first, bits past the last value zero: set instead
    #: of ``bools`` when Arrow's own bitmap could be taken as it is (see :meth:`bits`).
    bitmap: U8 | None = None

    @property
    def items(self) -> int:
        """Innermost items per value."""
        return int(np.prod(self.dims)) if self.dims else 1

    def bits(self) -> npt.NDArray[np.bool_]:
        """The booleans, one per byte (unpacked from :attr:`bitmap` when that holds them)."""
        if self.bools is not None:
            return self.bools
        assert self.bitmap is not None
        count = self.n * self.items
        return np.unpackbits(self.bitmap, count=count, bitorder="little").view(np.bool_)


@dataclass(frozen=True)
class VarVals:
    """``n`` variable-width values: ``offsets`` (``n + 1``) into ``data``."""

    offsets: I64
    data: U8
    #: Large (64-bit offset) Arrow type: pylance wants 64-bit offsets for those.
    large: bool = False

    @property
    def n(self) -> int:
        return len(self.offsets) - 1


def _is_int_storage(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_duration(t)
    )


def _bitmap(arr: pa.Array) -> U8 | None:
    """Arrow's value bitmap of booleans as :attr:`FixedVals.bitmap` (no unpacking), or None when
    the values do not start on a byte."""
    buf = arr.buffers()[1]
    if buf is None or arr.offset % 8:
        return None
    n = len(arr)
    start = arr.offset // 8
    bm = np.frombuffer(buf, dtype=np.uint8)[start : start + (n + 7) // 8]
    if n % 8:
        # Arrow leaves the bits past the last value undefined; the file has them zero.
        bm = bm.copy()
        bm[-1] &= (1 << (n % 8)) - 1
    return bm  # (read-only when Arrow's: no copy of a whole page)


def _bits(arr: pa.Array) -> npt.NDArray[np.bool_]:
    buf = arr.buffers()[1]
    raw = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
    # unpackbits gives 0/1 bytes: read them as booleans without a copy.
    return np.unpackbits(raw, bitorder="little")[arr.offset : arr.offset + len(arr)].view(np.bool_)


def _valid(arr: pa.Array) -> npt.NDArray[np.bool_] | None:
    if arr.null_count == 0:
        return None
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _packed(arr: pa.Array) -> FixedVals:
    """A packed struct: each row is its fields' value bytes, one after another."""
    kids = [extract(arr.field(i)) for i in range(arr.type.num_fields)]
    if not kids or any(not isinstance(k, FixedVals) or k.width == 0 or k.dims for k in kids):
        raise NotSupportedError(f"packed structs need fixed-width, byte-sized fields; got {arr.type}")
    fixed = [k for k in kids if isinstance(k, FixedVals)]
    n = len(arr)
    mat = np.concatenate([k.data.reshape(n, k.width) for k in fixed], axis=1)
    width = sum(k.width for k in fixed)
    return FixedVals(
        np.ascontiguousarray(mat).reshape(-1), width, n, packed_bits=tuple(8 * k.width for k in fixed)
    )


@kernel
def compact_strings(
    offsets: I64, raw: U8, valid: npt.NDArray[np.bool_]
) -> tuple[I64, U8]:  # pragma: no cover
    """The valid strings' bytes back to back and their offsets (nulls empty): one pass, where a
    gather of every byte's position costs ten times the bytes."""
    n = offsets.shape[0] - 1
    new = np.empty(n + 1, dtype=np.int64)
    new[0] = 0
    total = 0
    for i in range(n):
        if valid[i]:
            total += offsets[i + 1] - offsets[i]
        new[i + 1] = total
    out = np.empty(total, dtype=np.uint8)
    for i in range(n):
        a = new[i]
        size = new[i + 1] - a
        if size:
            copy_bytes(out, a, raw, offsets[i], size)
    return new, out


@kernel
def _longest(offsets: I64) -> int:  # pragma: no cover - compiled
    best = 0
    for i in range(offsets.shape[0] - 1):
        best = max(best, offsets[i + 1] - offsets[i])
    return best


def longest_value(offsets: I64) -> int:
    """Bytes of the longest of the values ``offsets`` delimit (0 for none), in one pass: no array
    of lengths (a page's strings are sized more than once on the way to their encoding)."""
    return int(_longest(np.ascontiguousarray(offsets, dtype=np.int64)))


def warm_up() -> None:
    """Compile (or load) the string compaction kernel (bytes and validity may be read-only) and
    the longest-value scan."""
    offsets = np.array([0, 2, 5], dtype=np.int64)
    raw = np.frombuffer(b"abcde", dtype=np.uint8).copy()
    warm(compact_strings, offsets, raw, np.array([True, False]), readonly=(1, 2))
    warm(longest_value, offsets, readonly=(0,))


def extract(arr: pa.Array) -> FixedVals | VarVals:
    """The value bytes of ``arr`` (nulls hold arbitrary bytes or empty values)."""
    t = arr.type
    n = len(arr)
    if pa.types.is_boolean(t):
        bm = _bitmap(arr)
        if bm is not None:
            return FixedVals(_NO_BYTES, 0, n, bitmap=bm)
        return FixedVals(_NO_BYTES, 0, n, bools=_bits(arr))
    if pa.types.is_fixed_size_list(t):
        dims = []
        valids = []
        node = arr
        while pa.types.is_fixed_size_list(node.type):
            d = node.type.list_size
            dims.append(d)
            node = node.values.slice(node.offset * d, len(node) * d)
            valids.append(_valid(node))
        inner = extract(node)
        assert isinstance(inner, FixedVals)
        return FixedVals(
            inner.data, inner.width, n, inner.bools, tuple(dims), tuple(valids), None, bitmap=inner.bitmap
        )
    if pa.types.is_struct(t):
        return _packed(arr)
    if (
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    ):
        large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        bufs = arr.buffers()
        offs = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[arr.offset : arr.offset + n + 1]
        offs = offs.astype(np.int64)
        raw = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        if arr.null_count:
            # Null slots may span bytes in Arrow; they are stored empty.
            valid = _valid(arr)
            assert valid is not None
            new, data = compact_strings(np.asarray(offs, dtype=np.int64), raw, valid)
            return VarVals(new, data, large)
        start, end = int(offs[0]), int(offs[-1])
        own: npt.NDArray[np.int64] = np.asarray(offs, dtype=np.int64)
        if start:
            own -= start  # our own copy (astype above): no second array
        return VarVals(own, raw[start:end], large)
    width = t.bit_width // 8
    buf = arr.buffers()[1]
    raw = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
    data = raw[arr.offset * width : (arr.offset + n) * width]
    return FixedVals(
        data, width, n, int_bits=width * 8 if _is_int_storage(t) and width in (1, 2, 4, 8) else None
    )
