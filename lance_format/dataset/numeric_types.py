"""The numeric types DataFusion computes in, by rule (no evaluation): the one copy of its coercions.

:mod:`.expr_arrow` asks these when it types arithmetic, comparisons and ``coalesce``; they are pure
functions of Arrow types, so they are cheap to ask once per node.
"""

from __future__ import annotations

import pyarrow as pa

from lance_format.core.errors import InvalidInputError

__all__ = [
    "EXACT",
    "INT_DIGITS",
    "SIGNED",
    "UNSIGNED",
    "exact_decimal",
    "float_result",
    "implicitly_coerces",
    "is_number",
    "union_type",
    "wide_decimal",
    "wider_int",
]

SIGNED = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}
UNSIGNED = {8: pa.uint8(), 16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}
#: Decimal digits that hold every integer of a bit width (DataFusion's integer-to-decimal types).
INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}
#: uint64 meeting a signed integer: DataFusion computes in a 20-digit decimal (exact: ``u - 6 < 0``
#: holds for 5, ``u + 1`` of 2**64 - 1 is 2**64); 256 bits so a product's 41 digits fit.
EXACT = pa.decimal256(20, 0)
#: The decimal a float becomes next to a decimal in DataFusion's type union (``coalesce(dec, f)``):
#: (precision, scale) by the float's width.
_FLOAT_DECIMALS = {16: (6, 3), 32: (14, 7), 64: (30, 15)}
#: Widest decimal128, the precision DataFusion's union caps a decimal at.
_MAX_DECIMAL128 = 38


def is_number(t: pa.DataType) -> bool:
    """Whether ``t`` is an integer or floating-point type."""
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def wide_decimal(digits: int, scale: int) -> pa.DataType:
    """The narrowest decimal type with ``digits`` integer digits and ``scale`` fraction digits."""
    precision = digits + scale
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(min(precision, 76), scale)


def float_result(types: list[pa.DataType]) -> pa.DataType:
    """The float type numbers meet in, as DataFusion coerces them: the widest float among them,
    whatever the integers (``f32 * 2`` is a float32, so it overflows to infinity as pylance's does)."""
    floats = [t for t in types if pa.types.is_floating(t)]
    return max(floats, key=lambda t: t.bit_width) if floats else pa.float64()


def exact_decimal(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether integers of types ``a`` and ``b`` meet in :data:`EXACT` (no integer type holds both)."""
    if not (pa.types.is_integer(a) and pa.types.is_integer(b)):
        return False
    return bool(a == pa.uint64() and pa.types.is_signed_integer(b)) or (
        b == pa.uint64() and pa.types.is_signed_integer(a)
    )


def wider_int(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The integer type both ``a`` and ``b`` widen to (signed when either is)."""
    if pa.types.is_signed_integer(a) == pa.types.is_signed_integer(b):
        table = SIGNED if pa.types.is_signed_integer(a) else UNSIGNED
        return table[max(a.bit_width, b.bit_width)]
    unsigned = a if pa.types.is_unsigned_integer(a) else b
    signed = b if unsigned is a else a
    return SIGNED[min(64, max(signed.bit_width, 2 * unsigned.bit_width))]


def _as_decimal(t: pa.DataType) -> tuple[int, int]:
    """(precision, scale) of the decimal number type ``t`` becomes next to a decimal."""
    if pa.types.is_decimal(t):
        return t.precision, t.scale
    if pa.types.is_integer(t):
        return INT_DIGITS[t.bit_width], 0
    return _FLOAT_DECIMALS[t.bit_width]


#: Timestamp units, coarsest first: two timestamps meet in the coarser unit.
_UNIT_RANK = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def _temporal_union(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """DataFusion's union of a date or timestamp with a timestamp: a date32 and a timestamp meet
    in ``timestamp[ns]`` without a zone, whatever the timestamp's unit or zone (``coalesce(ts_us,
    d)`` is nanoseconds), two timestamps in the coarser unit (``coalesce(ts_ns, ts_us)`` is
    microseconds) and the zone of the second when it has one, else of the first (a zoned and a
    plain one: the zone). ``None``: not such a pair."""
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        unit = min((a.unit, b.unit), key=_UNIT_RANK.__getitem__)
        return pa.timestamp(unit, b.tz if b.tz is not None else a.tz)
    if (pa.types.is_date32(a) and pa.types.is_timestamp(b)) or (
        pa.types.is_timestamp(a) and pa.types.is_date32(b)
    ):
        return pa.timestamp("ns")
    return None


def _union2(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type DataFusion's ``coalesce`` gives values of types ``a`` and ``b``; ``None``: none."""
    if a == b:
        return a
    if pa.types.is_null(a) or pa.types.is_null(b):
        return b if pa.types.is_null(a) else a
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        if not all(pa.types.is_decimal(t) or is_number(t) for t in (a, b)):
            return None
        (pa_, sa), (pb, sb) = _as_decimal(a), _as_decimal(b)
        scale = max(sa, sb)
        precision = min(_MAX_DECIMAL128, max(pa_ - sa, pb - sb) + scale)
        return pa.decimal128(precision, min(scale, precision))
    if is_number(a) and is_number(b):
        if pa.types.is_floating(a) or pa.types.is_floating(b):
            return float_result([a, b])
        if exact_decimal(a, b):
            return pa.decimal128(INT_DIGITS[64], 0)
        return wider_int(a, b)
    temporal = _temporal_union(a, b)
    if temporal is not None:
        return temporal
    text = [t for t in (a, b) if pa.types.is_string(t) or pa.types.is_large_string(t)]
    if len(text) == 2:
        return pa.large_string()  # a string and a large string (equal types returned above)
    if len(text) == 1:
        other = b if text[0] is a else a
        return other if is_number(other) else None  # the number wins: the text is cast to it
    return None


def union_type(types: list[pa.DataType]) -> pa.DataType:
    """The one type DataFusion's ``coalesce`` casts all its arguments to.

    Integers meet in the wider integer (``coalesce(i8, 1)``: the literal is an int64, so int64),
    uint64 with a signed integer in ``Decimal(20, 0)``, integers with a float in that float, numbers
    with a decimal in a decimal holding both (an int64 as ``Decimal(20, 0)``, a float64 as
    ``Decimal(30, 15)``), text with a number in the number, a date with a timestamp in
    ``timestamp[ns]``, timestamps of two units in the coarser. Other mixes are refused.
    """
    out: pa.DataType = pa.null()
    for t in types:
        joined = _union2(out, t)
        if joined is None:
            raise InvalidInputError(f"coalesce() of {out} and {t}: no common type")
        out = joined
    return out


def _int_into(into: pa.DataType, source: pa.DataType) -> bool:
    """Whether integers of type ``source`` widen losslessly into integer type ``into``."""
    if pa.types.is_signed_integer(into):
        if pa.types.is_signed_integer(source):
            return bool(source.bit_width <= into.bit_width)
        return bool(source.bit_width < into.bit_width)
    return bool(pa.types.is_unsigned_integer(source) and source.bit_width <= into.bit_width)


def implicitly_coerces(into: pa.DataType, source: pa.DataType) -> bool:
    """Whether DataFusion coerces a function argument of type ``source`` to ``into`` without being
    asked (its ``coerced_from``): integers to wider ones, numbers to floats (decimals to float64
    only), dates and timestamps without a zone to ``timestamp[ns]``, anything to text. Narrowing,
    and anything into a decimal, is not: ``array_has(li, u64)`` (a uint64 into the ``Decimal(20,
    0)`` it meets an int32 list in) is refused, ``array_has(li, u64 + i8)`` (already that decimal)
    is not."""
    if into == source or pa.types.is_null(source):
        return True
    if pa.types.is_integer(into):
        return pa.types.is_integer(source) and _int_into(into, source)
    if pa.types.is_float32(into):
        return bool(pa.types.is_integer(source))
    if pa.types.is_float64(into):
        return bool(pa.types.is_integer(source) or pa.types.is_float32(source) or pa.types.is_decimal(source))
    if pa.types.is_timestamp(into):
        if into.tz is None and into.unit != "ns":
            return False
        stamp = pa.types.is_timestamp(source) and (source.tz is None or into.tz is not None)
        text = pa.types.is_string(source) or pa.types.is_large_string(source)
        return bool(stamp or text or pa.types.is_date32(source))
    return bool(pa.types.is_string(into) or pa.types.is_large_string(into))
