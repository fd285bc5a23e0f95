"""Decoded leaf values before they become Arrow arrays.

Decoders produce these small numpy-backed containers (no validity at the top level: nulls come
from the definition levels). They can be concatenated and gathered without Python loops over
values, and turned into an Arrow array of a given type exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.records import fast_init
from lance_format.encodings.base import expand_ranges

__all__ = [
    "Fixed",
    "Fsl",
    "Nulls",
    "Struct",
    "Values",
    "VarBin",
    "concat_values",
    "num_values",
    "slice_values",
    "take_values",
    "to_arrow",
]

# Largest 32-bit offset (a constant: np.iinfo costs microseconds per call on the take path).
_I32_MAX = 2**31 - 1

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@fast_init
@dataclass(frozen=True)
class Fixed:
    """``n`` fixed-width values: ``bits == 1`` holds one bool per value, otherwise
    ``n * bits / 8`` little-endian bytes."""

    data: npt.NDArray[np.uint8] | Bools
    bits: int
    n: int


@fast_init
@dataclass(frozen=True)
class VarBin:
    """Variable-width values: ``offsets`` (``n + 1`` int64 positions in ``data``)."""

    offsets: I64
    data: U8

    @property
    def n(self) -> int:
        return len(self.offsets) - 1


@fast_init
@dataclass(frozen=True)
class Fsl:
    """Fixed-size lists of ``dim`` items; ``validity`` covers the ``n * dim`` items (None = valid)."""

    dim: int
    validity: Bools | None
    child: Values
    n: int


@dataclass(frozen=True)
class Struct:
    """Struct values (a packed struct's fields), all valid at this level."""

    children: tuple[Values, ...]
    n: int


@dataclass(frozen=True)
class Nulls:
    """``n`` values that are never visible (all-null pages)."""

    n: int


Values = Fixed | VarBin | Fsl | Struct | Nulls


def num_values(v: Values) -> int:
    """Number of values in ``v``."""
    return v.n


def _fixed_bytes(v: Fixed) -> int:
    return v.bits // 8


def concat_values(parts: Sequence[Values]) -> Values:
    """Concatenate values of one kind.

    Parameters
    ----------
    parts:
        Values of the same kind (as one column's pages or chunks produce).

    Raises
    ------
    ValueError
        The parts are of different kinds.
    """
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    if isinstance(first, Nulls):
        return Nulls(sum(p.n for p in parts))
    if isinstance(first, Fixed):
        fx = [_as_fixed(p) for p in parts]
        return Fixed(np.concatenate([p.data for p in fx]), first.bits, sum(p.n for p in fx))
    if isinstance(first, VarBin):
        vb = [p for p in parts if isinstance(p, VarBin)]
        if len(vb) != len(parts):
            raise ValueError("mixed value kinds")
        lengths = np.concatenate([np.diff(p.offsets) for p in vb])
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = np.concatenate([p.data[p.offsets[0] : p.offsets[-1]] for p in vb])
        return VarBin(offsets, data)
    if isinstance(first, Fsl):
        fl = [p for p in parts if isinstance(p, Fsl)]
        if len(fl) != len(parts):
            raise ValueError("mixed value kinds")
        if all(p.validity is None for p in fl):
            validity = None
        else:
            validity = np.concatenate(
                [p.validity if p.validity is not None else np.ones(p.n * p.dim, bool) for p in fl]
            )
        child = concat_values([p.child for p in fl])
        return Fsl(first.dim, validity, child, sum(p.n for p in fl))
    st = [p for p in parts if isinstance(p, Struct)]
    if len(st) != len(parts):
        raise ValueError("mixed value kinds")
    children = tuple(concat_values([p.children[i] for p in st]) for i in range(len(st[0].children)))
    return Struct(children, sum(p.n for p in st))


def _as_fixed(p: Values) -> Fixed:
    if not isinstance(p, Fixed):
        raise ValueError("mixed value kinds")
    return p


def take_values(v: Values, idx: I64) -> Values:
    """Values at positions ``idx``.

    Parameters
    ----------
    v:
        The values.
    idx:
        Positions, in any order, repeats allowed. ``arange(v.n)`` returns ``v`` itself.
    """
    n = len(idx)
    if isinstance(v, Nulls):
        return Nulls(n)
    if n == v.n and (n == 0 or (idx[0] == 0 and (n == 1 or bool((np.diff(idx) == 1).all())))):
        return v
    if isinstance(v, Fixed):
        if v.bits == 1:
            return Fixed(v.data[idx], 1, n)
        width = _fixed_bytes(v)
        rows = v.data.reshape(-1, width) if width else v.data.reshape(v.n, 0)
        return Fixed(rows[idx].reshape(-1), v.bits, n)
    if isinstance(v, VarBin):
        starts = v.offsets[idx]
        lengths = v.offsets[idx + 1] - starts
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return VarBin(offsets, v.data[expand_ranges(starts, lengths)])
    if isinstance(v, Fsl):
        items = (idx[:, None] * v.dim + np.arange(v.dim, dtype=np.int64)[None, :]).reshape(-1)
        validity = v.validity[items] if v.validity is not None else None
        return Fsl(v.dim, validity, take_values(v.child, items), n)
    return Struct(tuple(take_values(c, idx) for c in v.children), n)


def slice_values(v: Values, start: int, n: int) -> Values:
    """Values ``start .. start + n`` as views of ``v``'s arrays (no copy).

    Parameters
    ----------
    v:
        The values.
    start, n:
        The first value and how many; ``0 <= start`` and ``start + n <= v.n``.

    Raises
    ------
    ValueError
        The range leaves ``v``.
    """
    if start < 0 or n < 0 or start + n > v.n:
        raise ValueError("value range outside the values")
    if start == 0 and n == v.n:
        return v
    if isinstance(v, Nulls):
        return Nulls(n)
    if isinstance(v, Fixed):
        width = 1 if v.bits == 1 else _fixed_bytes(v)
        return Fixed(v.data[start * width : (start + n) * width], v.bits, n)
    if isinstance(v, VarBin):
        offsets = v.offsets[start : start + n + 1]
        lo = int(offsets[0])
        return VarBin(offsets - lo, v.data[lo : int(offsets[-1])])
    if isinstance(v, Fsl):
        d = v.dim
        validity = v.validity[start * d : (start + n) * d] if v.validity is not None else None
        return Fsl(d, validity, slice_values(v.child, start * d, n * d), n)
    return Struct(tuple(slice_values(c, start, n) for c in v.children), n)


def _validity_buffer(valid: Bools | None) -> pa.Buffer | None:
    if valid is None or bool(valid.all()):
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def to_arrow(v: Values, typ: pa.DataType, validity: Bools | None = None) -> pa.Array:
    """Arrow array of type ``typ`` holding ``v``.

    Parameters
    ----------
    v:
        The values.
    typ:
        The Arrow type; its width must agree with the values (a dictionary type gets the values
        dictionary-encoded).
    validity:
        Top-level validity, None when every value is valid.

    Raises
    ------
    ValueError
        The values do not fit the type.
    """
    n = v.n
    vbuf = _validity_buffer(validity)
    if isinstance(v, Nulls):
        if pa.types.is_null(typ):
            return pa.nulls(n)
        return pa.nulls(n, typ)
    if pa.types.is_dictionary(typ):
        plain = to_arrow(v, typ.value_type, validity)
        return plain.dictionary_encode().cast(typ)
    if isinstance(v, Fixed):
        if pa.types.is_boolean(typ) or v.bits == 1:
            if not pa.types.is_boolean(typ):
                raise ValueError(f"bit-packed values do not fit {typ}")
            # Constant pages hold a boolean as one byte.
            bools = v.data if v.bits == 1 else v.data.reshape(n, -1).any(axis=1)
            data = pa.py_buffer(np.packbits(bools, bitorder="little"))
            return pa.Array.from_buffers(typ, n, [vbuf, data])
        width = _fixed_bytes(v)
        expected = _byte_width(typ)
        if expected is not None and expected != width:
            if pa.types.is_null(typ):
                return pa.nulls(n)
            raise ValueError(f"{v.bits}-bit values do not fit {typ}")
        if len(v.data) != n * width:
            raise ValueError("fixed-width buffer has the wrong size")
        return pa.Array.from_buffers(typ, n, [vbuf, pa.py_buffer(v.data)])
    if isinstance(v, VarBin):
        if not (
            pa.types.is_string(typ)
            or pa.types.is_binary(typ)
            or pa.types.is_large_string(typ)
            or pa.types.is_large_binary(typ)
        ):
            raise ValueError(f"variable-width values do not fit {typ}")
        large = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
        offsets = v.offsets - v.offsets[0] if v.offsets[0] else v.offsets
        if not large and len(offsets) and offsets[-1] > _I32_MAX:
            raise ValueError("string data too large for 32-bit offsets")
        obuf = pa.py_buffer(offsets.astype(np.int64 if large else np.int32))
        data = v.data[v.offsets[0] : v.offsets[-1]] if len(v.offsets) else v.data[:0]
        return pa.Array.from_buffers(typ, n, [vbuf, obuf, pa.py_buffer(np.ascontiguousarray(data))])
    if isinstance(v, Fsl):
        if not pa.types.is_fixed_size_list(typ) or typ.list_size != v.dim:
            raise ValueError(f"fixed-size lists of {v.dim} do not fit {typ}")
        child = to_arrow(v.child, typ.value_type, v.validity)
        return pa.Array.from_buffers(typ, n, [vbuf], children=[child])
    if not pa.types.is_struct(typ) or typ.num_fields != len(v.children):
        raise ValueError(f"packed struct values do not fit {typ}")
    kids = [to_arrow(c, typ.field(i).type) for i, c in enumerate(v.children)]
    return pa.Array.from_buffers(typ, n, [vbuf], children=kids)


def _byte_width(typ: pa.DataType) -> int | None:
    try:
        bw = typ.bit_width
    except ValueError:
        return None
    return int(bw) // 8 if bw and bw % 8 == 0 else None
