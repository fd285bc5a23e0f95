"""The predicate IR to pyarrow compute Expressions, and pyarrow Expressions to the IR.

Floating-point comparisons follow pylance (DataFusion), not IEEE 754: NaN sorts above every number
and equals itself, so ``x > 0.5`` selects NaN rows and ``NOT (x > 0.5)`` does not, and a NaN with
the sign bit set (``-x`` of a NaN) sorts below every number. One corner of pylance's total order
is not copied: comparing two columns it orders ``-0.0`` below ``0.0`` (here they are equal).

A pyarrow Expression enters the IR through Substrait (its public, versioned serialisation): the
expression is serialised against the schema and decoded by :mod:`._serde`. The few Expressions
Substrait cannot carry (``match_like``, safe casts, zoned timestamp literals...) become one
:class:`.Opaque` leaf, evaluated as given; the columns it reads are found by binding it to the
schema without each candidate column.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import operator
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError, NotSupportedError
from lance_format.dataset import udfs
from lance_format.dataset.expr import (
    FLIPPED,
    And,
    Arith,
    Between,
    Call,
    Cast,
    Column,
    Compare,
    InList,
    IsBool,
    IsNan,
    IsNull,
    Like,
    Literal,
    Negate,
    Node,
    Not,
    Opaque,
    Or,
    Visitor,
    children,
    exact_integer_literal,
    exact_number,
    holds_out_of_range,
    may_be_nan,
)

_BOOLEAN_NODES = (Compare, And, Or, Not, InList, Between, IsNull, IsNan, IsBool, Like)

__all__ = ["DECIMAL_TEXT", "FUNCTIONS", "NO_DIGITS_TEXT", "from_arrow", "to_arrow"]

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
    "eq": operator.eq,
    "ne": operator.ne,
}
_NULL_BOOL = pc.scalar(pa.scalar(None, pa.bool_()))


_ZERO_RANK = pc.scalar(pa.scalar(0, pa.int8()))


def _nan_ordered(
    kind: str, a: pc.Expression, b: pc.Expression, ra: pc.Expression | None, rb: pc.Expression | None
) -> pc.Expression:
    """``a <kind> b`` in DataFusion's total order of floats.

    ``ra``/``rb`` rank each side (``None``: never NaN): 0 for a number, 1 for NaN (above every
    number, equal to itself), -1 for a NaN with the sign bit set (below every number). Where
    either side is NaN the ranks decide, unless the other is NULL; elsewhere the plain comparison
    does.
    """
    plain = _OPS[kind](a, b)
    if ra is None and rb is None:
        return plain
    ra = _ZERO_RANK if ra is None else ra
    rb = _ZERO_RANK if rb is None else rb
    # A NULL side is NULL, NaN or not (NaN BETWEEN 1 AND NULL is NULL in pylance, not false).
    ranked = ((ra != _ZERO_RANK) | (rb != _ZERO_RANK)) & a.is_valid() & b.is_valid()
    return pc.if_else(ranked, _OPS[kind](ra, rb), plain)


def _literal_str(node: Node, what: str) -> str:
    if not isinstance(node, Literal) or not pa.types.is_string(node.type) or not node.value.is_valid:
        raise NotSupportedError(f"{what} needs a string literal, got {node}")
    return str(node.value.as_py())


def _literal_int(node: Node, what: str) -> int:
    if not isinstance(node, Literal) or not pa.types.is_integer(node.type) or not node.value.is_valid:
        raise NotSupportedError(f"{what} needs an integer literal, got {node}")
    return int(node.value.as_py())


def _string_literal(node: Node) -> bool:
    return isinstance(node, Literal) and pa.types.is_string(node.type) and node.value.is_valid


def _per_row(b: ToArrow, name: str, args: tuple[Node, ...]) -> pc.Expression | None:
    """``name(args)`` when an argument past the first is not a string literal: NULL when one is a
    NULL literal (as in DataFusion), else computed row by row (:func:`.udfs.text_function`).
    ``None``: every such argument is a string literal (pyarrow's kernels take it)."""
    if all(_string_literal(a) for a in args[1:]):
        return None
    types = [b.type_of(a) for a in args]
    if any(isinstance(a, Literal) and not a.value.is_valid for a in args[1:]):
        return pc.scalar(pa.scalar(None, udfs.text_result_type(name, types)))
    for a, t in zip(args, types, strict=True):
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise InvalidInputError(f"{name}() takes strings, got {t} for {a}")
    return udfs.call(udfs.text_function(name, types), [b.visit(a) for a in args])


def _strpos(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """1-based character position of a substring, 0 when absent (empty substring: 1)."""
    per_row = _per_row(b, "strpos", args)
    if per_row is not None:
        return per_row
    s, sub = b.visit(args[0]), _literal_str(args[1], "strpos")
    out = udfs.text_result_type("strpos", [b.type_of(a) for a in args])
    if not sub:
        return pc.if_else(s.is_valid(), pc.scalar(pa.scalar(1, out)), pc.scalar(pa.scalar(None, out)))
    before = pc.list_element(pc.split_pattern(s, pattern=sub, max_splits=1), 0)
    found = pc.add(pc.utf8_length(before).cast(out), pc.scalar(pa.scalar(1, out)))
    return pc.if_else(pc.match_substring(s, pattern=sub), found, pc.scalar(pa.scalar(0, out)))


def _substr(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``substr(s, start[, count])``: 1-based start, characters before 1 count against ``count``."""
    s = b.visit(args[0])
    start = _literal_int(args[1], "substr") - 1
    stop = None
    if len(args) > 2:
        count = _literal_int(args[2], "substr")
        if count < 0:
            raise InvalidInputError(f"substr: negative length {count}")
        stop = max(start + count, 0)
    return pc.utf8_slice_codeunits(s, start=max(start, 0), stop=stop if stop is not None else 2**62)


def _trim(kind: str) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    fn = {"both": pc.utf8_trim, "left": pc.utf8_ltrim, "right": pc.utf8_rtrim}[kind]

    def build(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
        per_row = _per_row(b, {"both": "trim", "left": "ltrim", "right": "rtrim"}[kind], args)
        if per_row is not None and len(args) > 1:
            return per_row
        chars = _literal_str(args[1], "trim") if len(args) > 1 else " "
        return fn(b.visit(args[0]), characters=chars)

    return build


def _regexp(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    flags = _literal_str(args[2], "regexp flags") if len(args) > 2 else ""
    if set(flags) - {"i"}:
        raise NotSupportedError(f"regexp flags {flags!r} (only 'i' is supported)")
    pattern = _literal_str(args[1], "regexp pattern")
    return pc.match_substring_regex(b.visit(args[0]), pattern=pattern, ignore_case="i" in flags)


def _regexp_match(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    # As a condition it is rewritten (sql.as_condition) to IS NOT NULL, which visit_isnull answers.
    raise NotSupportedError("regexp_match as a value (test it with IS [NOT] NULL, or use regexp_like)")


def _array_length(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    lt = b.type_of(args[0])
    if not (pa.types.is_list(lt) or pa.types.is_large_list(lt) or pa.types.is_fixed_size_list(lt)):
        raise InvalidInputError(f"array_length needs a list, got {lt}")
    # DataFusion's array_length is UInt64 (NULL for a NULL list).
    return pc.list_value_length(b.visit(args[0])).cast(pa.uint64())


def _array_has(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    lists, value = args
    lt = b.type_of(lists)
    if not (pa.types.is_list(lt) or pa.types.is_large_list(lt) or pa.types.is_fixed_size_list(lt)):
        raise InvalidInputError(f"array_has needs a list, got {lt}")
    v = b.visit(value)
    if not isinstance(value, Literal) and b.type_of(value) != lt.value_type:
        v = v.cast(lt.value_type)  # DataFusion compares in the list's item type (int32 n in int64s)
    if isinstance(value, Literal) and value.type != lt.value_type:
        v = (
            pc.scalar(value.value.cast(lt.value_type))
            if value.value.is_valid
            else pc.scalar(pa.scalar(None, lt.value_type))
        )
    return udfs.call(udfs.array_has(lt, lt.value_type), [b.visit(lists), v])


def _list_get(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    lt = b.type_of(args[0])
    index = b.visit(args[1])
    if isinstance(args[1], Literal):
        index = pc.scalar(args[1].value.cast(pa.int64()))
    return udfs.call(udfs.list_get(lt), [b.visit(args[0]), index])


def _unary(fn: Callable[[Any], pc.Expression]) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    return lambda b, args: fn(b.visit(args[0]))


def _pattern(
    name: str, fn: Callable[..., pc.Expression]
) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    def build(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
        per_row = _per_row(b, name, args)
        if per_row is not None:
            return per_row
        return fn(b.visit(args[0]), pattern=_literal_str(args[1], name))

    return build


#: The NaN x86's square root (and so DataFusion's) gives for a negative number: the sign bit set, so
#: it orders below every number (pyarrow's kernel returns a positive NaN instead).
_NEGATIVE_NAN = pc.scalar(-math.nan)


def _sqrt(value: pc.Expression) -> pc.Expression:
    return pc.if_else(pc.less(value, 0), _NEGATIVE_NAN, pc.sqrt(value))


def _string_parts(b: ToArrow, args: tuple[Node, ...]) -> tuple[list[pc.Expression], pc.Expression]:
    """The arguments of a concatenation and its empty separator, all large strings when any is
    (the kernel takes one string type)."""
    parts = [b.visit(a) for a in args]
    if any(pa.types.is_large_string(b.type_of(a)) for a in args):
        return [p.cast(pa.large_string()) for p in parts], pc.scalar(pa.scalar("", pa.large_string()))
    return parts, pc.scalar("")


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_bytes(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t))


def _null_literal(node: Node) -> bool:
    return isinstance(node, Literal) and not node.value.is_valid


def _as_text(b: ToArrow, node: Node) -> Node:
    """``node`` as text the way DataFusion's string functions coerce their arguments: strings as
    they are, anything else as ``CAST(node AS STRING)`` (Rust's text: ``1.0``, ``true``)."""
    t = b.type_of(node)
    if _is_text(t):
        return node
    if pa.types.is_nested(t):
        raise NotSupportedError(f"{t} values as text (their text differs from DataFusion's)")
    return Cast(node, pa.string())


def _concat(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    # concat() skips NULL arguments (DataFusion); `||` (op "concat_op") propagates them. Other
    # types are written as text first (concat(s, 1.5) is 's1.5').
    kept = tuple(_as_text(b, a) for a in args if not _null_literal(a))
    if not kept:
        return pc.scalar("")
    parts, empty = _string_parts(b, kept)
    return pc.binary_join_element_wise(*(pc.coalesce(p, empty) for p in parts), empty)


def _concat_op(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``a || b`` typed as DataFusion types it: two byte strings join as bytes; with a string on
    one side the other is written as text (``s || i``), a byte string there is refused; a NULL
    makes the result NULL."""
    left, right = args
    ta, tb = b.type_of(left), b.type_of(right)
    if _null_literal(left) or _null_literal(right):
        other = tb if _null_literal(left) else ta
        if not (_is_text(other) or _is_bytes(other)):
            raise InvalidInputError(f"cannot infer a common string type for {ta} || {tb}")
        return pc.scalar(pa.scalar(None, other))
    if _is_bytes(ta) and _is_bytes(tb):
        large = pa.types.is_large_binary(ta) or pa.types.is_large_binary(tb)
        t = pa.large_binary() if large else pa.binary()
        empty = pc.scalar(pa.scalar(b"", t))
        return pc.binary_join_element_wise(b.visit(left).cast(t), b.visit(right).cast(t), empty)
    if not (_is_text(ta) or _is_text(tb)) or _is_bytes(ta) or _is_bytes(tb):
        raise InvalidInputError(f"cannot infer a common string type for {ta} || {tb}")
    parts, empty = _string_parts(b, (_as_text(b, left), _as_text(b, right)))
    return pc.binary_join_element_wise(*parts, empty)


def _case_map(upper: bool) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    def build(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
        t = b.type_of(args[0])
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise InvalidInputError(f"{'upper' if upper else 'lower'}() needs a string, got {t}")
        return udfs.call(udfs.case_map(t, upper), [b.visit(args[0])])

    return build


def _literal_type(node: Node, t: pa.DataType) -> pa.DataType:
    """The type DataFusion gives a literal in a function's arguments: Int64 (UInt64 past it) for
    an integer, Float64 for a float; others keep theirs."""
    if isinstance(node, Literal) and node.value.is_valid and pa.types.is_integer(t):
        return pa.int64() if int(node.value.as_py()) <= 2**63 - 1 else pa.uint64()
    if isinstance(node, Literal) and node.value.is_valid and pa.types.is_floating(t):
        return pa.float64()
    return t


def _decimal_of(t: pa.DataType) -> tuple[int, int] | None:
    """``(integer digits, scale)`` a number type takes as a decimal in DataFusion's coercion."""
    if pa.types.is_decimal(t):
        return t.precision - t.scale, t.scale
    if pa.types.is_integer(t):
        return _INT_DIGITS[t.bit_width], 0
    if pa.types.is_floating(t):
        return 15, 15
    return None


def _union_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type both meet in among coalesce's arguments (DataFusion's type union), or None when
    no rule here covers them."""
    if a == b or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_integer(a) and pa.types.is_integer(b):
        return pa.decimal128(20, 0) if _exact_decimal(a, b) else _wider_int(a, b)
    if _is_number(a) and _is_number(b):
        return _float_result([a, b])
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        da, db = _decimal_of(a), _decimal_of(b)
        if da is None or db is None:
            return None
        scale = max(da[1], db[1])
        return pa.decimal128(min(38, max(da[0], db[0]) + scale), scale)
    if _is_text(a) and _is_text(b):
        return pa.large_string() if pa.types.is_large_string(a) or pa.types.is_large_string(b) else a
    return None


def _coalesce(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """The first non-NULL argument, in the type every argument meets in, as DataFusion types it:
    integer literals count as Int64 (``coalesce(i8, 1)`` is an int64, ``coalesce(u64, 1)`` a
    ``decimal128(20, 0)``), float literals as Float64, a decimal meets an integer in a decimal
    holding both."""
    types = [b.type_of(a) for a in args]
    parts = [b.visit(a) for a in args]
    common: pa.DataType | None = pa.null()
    for a, t in zip(args, types, strict=True):
        if common is not None and not _null_literal(a):
            common = _union_type(common, _literal_type(a, t))
    if common is None:  # no rule: the first non-literal argument's type, pyarrow's casts
        common = next((t for a, t in zip(args, types, strict=True) if not isinstance(a, Literal)), None)
        common = common or next((t for t in types if not pa.types.is_null(t)), None)
    if common is None or pa.types.is_null(common):
        return pc.scalar(pa.scalar(None, pa.null()))
    for i, (a, t) in enumerate(zip(args, types, strict=True)):
        if _null_literal(a):
            parts[i] = pc.scalar(pa.scalar(None, common))
        elif (
            isinstance(a, Literal)
            and pa.types.is_integer(t)
            and (pa.types.is_integer(common) or pa.types.is_decimal(common))
        ):
            value = int(a.value.as_py())
            parts[i] = pc.scalar(pa.scalar(Decimal(value) if pa.types.is_decimal(common) else value, common))
        elif t != common:
            parts[i] = parts[i].cast(common)
    return pc.coalesce(*parts)


def _replace(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``replace(s, from, to)``: every non-overlapping ``from`` in ``s`` by ``to``, left to right.

    An empty ``from`` matches between every two characters and at both ends (``replace('ab', '',
    'x')`` is ``'xaxbx'``, ``replace('', '', 'x')`` is ``'x'``), as DataFusion's (Rust's
    ``str::replace``); pyarrow's literal kernel loops forever on an empty pattern, while its regex
    kernel's empty match gives exactly that. A NULL ``from`` or ``to`` makes every row NULL.
    """
    t = b.type_of(args[0])
    values = t.value_type if pa.types.is_dictionary(t) else t
    if not (pa.types.is_string(values) or pa.types.is_large_string(values)):
        raise InvalidInputError(f"replace() needs a string, got {t}")
    text = b.visit(args[0])
    if pa.types.is_dictionary(t):
        text = text.cast(values)
    if any(isinstance(a, Literal) and not a.value.is_valid for a in args[1:]):
        return pc.if_else(pc.scalar(False), text, pc.scalar(pa.scalar(None, values)))
    per_row = _per_row(b, "replace", (Cast(args[0], values) if values != t else args[0], *args[1:]))
    if per_row is not None:
        return per_row
    pattern, replacement = _literal_str(args[1], "replace"), _literal_str(args[2], "replace")
    if not pattern:
        # RE2 reads backslashes in the replacement as group references: escape them.
        escaped = replacement.replace("\\", "\\\\")
        return pc.replace_substring_regex(text, pattern="", replacement=escaped)
    return pc.replace_substring(text, pattern=pattern, replacement=replacement)


def _float_operand(b: ToArrow, node: Node) -> pc.Expression:
    """A number as DataFusion's float functions take it: floats as they are, others as float64."""
    value = b.visit(node)
    return value if pa.types.is_floating(b.type_of(node)) else value.cast(pa.float64())


def _round(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    # DataFusion rounds half away from zero, to n digits as round(x * 10^n) / 10^n.
    value = _float_operand(b, args[0])
    digits = 0
    if len(args) == 2:
        if not isinstance(args[1], Literal) or not pa.types.is_integer(args[1].type):
            raise NotSupportedError("round() takes a literal integer number of digits")
        digits = int(args[1].value.as_py()) if args[1].value.is_valid else 0
    if digits == 0:
        return pc.round(value, round_mode="half_towards_infinity")
    scale = pc.scalar(10.0**digits)
    return pc.divide(pc.round(pc.multiply(value, scale), round_mode="half_towards_infinity"), scale)


def _trunc(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    return pc.trunc(_float_operand(b, args[0]))


#: Rewrites of pyarrow's timestamp text (``2020-01-01 12:30:00.500000``) into Rust's
#: (``2020-01-01T12:30:00.500``): a zero fraction is dropped, and the rest is cut to 3, 6 or 9
#: digits, the fewest that hold it (chrono's layout); UTC keeps its ``Z``.
_FRACTION_TRIMS = (
    (r"\.(?:000)+(Z?)$", r"\1"),
    (r"(\.[0-9]{3})(?:000)+(Z?)$", r"\1\2"),
    (r"(\.[0-9]{6})(?:000)+(Z?)$", r"\1\2"),
)


def _rust_timestamp_text(t: pa.DataType) -> bool:
    """Whether :func:`_timestamp_text` spells ``t`` as Rust does: timestamps without a time zone
    or in UTC (Rust writes another zone's local time and offset; pyarrow writes UTC)."""
    return bool(pa.types.is_timestamp(t) and (t.tz is None or t.tz in ("UTC", "+00:00", "Z")))


def _timestamp_text(value: pc.Expression) -> pc.Expression:
    text = pc.replace_substring(value.cast(pa.string()), pattern=" ", replacement="T", max_replacements=1)
    for pattern, replacement in _FRACTION_TRIMS:
        text = pc.replace_substring_regex(text, pattern=pattern, replacement=replacement)
    return text


def _spelled_alike(t: pa.DataType) -> bool:
    """Whether pyarrow spells values of ``t`` as text exactly as Arrow's Rust cast does (integers,
    booleans, dates, decimals); floats and timestamps it spells otherwise (``1e+20``, not ``1e20``)."""
    return bool(
        pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_date(t) or pa.types.is_decimal(t)
    )


def _length(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    # Characters of a string; DataFusion casts other scalars to text first (length(-12) is 3).
    t = b.type_of(args[0])
    values = t.value_type if pa.types.is_dictionary(t) else t
    if _spelled_alike(values):
        return pc.utf8_length(b.visit(Cast(args[0], pa.string())))
    if pa.types.is_floating(values) and values.bit_width in (32, 64):
        value = b.visit(args[0])
        value = value.cast(values) if values != t else value
        return pc.utf8_length(udfs.call(udfs.float_text(values), [value]))
    if _rust_timestamp_text(values):
        return pc.utf8_length(b.visit(Cast(args[0], pa.string())))
    if pa.types.is_floating(values) or pa.types.is_temporal(values):
        raise NotSupportedError(f"length() of {values} values (their text differs from DataFusion's)")
    return pc.utf8_length(b.visit(args[0]))


#: Scalar functions of the dialect: name -> (arity range, builder).
FUNCTIONS: dict[str, tuple[tuple[int, int], Callable[[ToArrow, tuple[Node, ...]], pc.Expression]]] = {
    "lower": ((1, 1), _case_map(upper=False)),
    "upper": ((1, 1), _case_map(upper=True)),
    # Int32 of strings, Int64 of large strings (the kernels' types are DataFusion's).
    "length": ((1, 1), _length),
    "octet_length": ((1, 1), _unary(pc.binary_length)),
    "reverse": ((1, 1), _unary(pc.utf8_reverse)),
    "abs": ((1, 1), _unary(pc.abs_checked)),
    "ceil": ((1, 1), _unary(pc.ceil)),
    "floor": ((1, 1), _unary(pc.floor)),
    "round": ((1, 2), _round),
    "trunc": ((1, 1), _trunc),
    "sqrt": ((1, 1), _unary(_sqrt)),
    "starts_with": ((2, 2), _pattern("starts_with", pc.starts_with)),
    "ends_with": ((2, 2), _pattern("ends_with", pc.ends_with)),
    "contains": ((2, 2), _pattern("contains", pc.match_substring)),
    "strpos": ((2, 2), _strpos),
    "replace": ((3, 3), _replace),
    "substr": ((2, 3), _substr),
    "trim": ((1, 2), _trim("both")),
    "ltrim": ((1, 2), _trim("left")),
    "rtrim": ((1, 2), _trim("right")),
    "regexp_like": ((2, 3), _regexp),
    "regexp_match": ((2, 3), _regexp_match),
    "concat": ((1, 64), _concat),
    "concat_op": ((2, 2), _concat_op),
    "array_has": ((2, 2), _array_has),
    "array_length": ((1, 1), _array_length),
    "list_get": ((2, 2), _list_get),
    "coalesce": ((1, 64), _coalesce),
}

#: Integer arithmetic wraps around on overflow, as DataFusion's does (pylance answers, not errors).
_ARITH: dict[str, Callable[[Any, Any], pc.Expression]] = {
    "add": pc.add,
    "sub": pc.subtract,
    "mul": pc.multiply,
    "div": pc.divide,
}
_SIGNED = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}
#: Decimal digits that hold every integer of a bit width (DataFusion's integer-to-decimal types).
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}


def _unwrapped_literal(source: pa.DataType, to: pa.DataType, lit: Node) -> Literal | None:
    """The literal that ``x`` of type ``source`` is compared with in place of ``CAST(x AS to)``
    (``CAST`` or ``TRY_CAST``), or ``None`` when DataFusion's planner keeps the cast.

    DataFusion unwraps a cast between integer and decimal types when the literal converts exactly
    to the target type and to the value's own type: ``CAST(i AS DECIMAL(10, 2)) > 1.0`` compares
    ``i > 1`` while ``.. > 1.5`` evaluates the cast (which fails on an ``i`` past 10 digits);
    ``CAST(d AS INT) = 1`` compares ``d = 1.00``; ``TRY_CAST(b AS INT) > 1`` compares ``b > 1`` (no
    NULL for a ``b`` past int32) while ``CAST(b AS TINYINT) < 300`` evaluates the cast.
    """
    if not (isinstance(lit, Literal) and lit.value.is_valid and _exact_or_int(source) and _exact_or_int(to)):
        return None
    lt = lit.type
    if pa.types.is_integer(lt) or pa.types.is_decimal(lt):
        value = Decimal(lit.value.as_py())
    elif pa.types.is_floating(lt) and pa.types.is_decimal(to) and math.isfinite(lit.value.as_py()):
        value = Decimal(lit.value.as_py())  # the float's exact binary value
    else:
        return None
    if pa.types.is_integer(to) and not pa.types.is_integer(lt):
        return None
    if exact_number(value, to) is None:
        return None
    typed = exact_number(value, source)
    return None if typed is None else Literal(typed)


def _exact_or_int(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_decimal(t))


#: Decimal text as DataFusion reads it: digits with an optional sign and point, no exponent.
DECIMAL_TEXT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)$"
#: Decimal text without a digit, which DataFusion reads as zero (to a scale above 0; at scale 0
#: it does not convert): empty, a sign, a point.
NO_DIGITS_TEXT = r"^[+-]?\.?$"
#: Digits of the decimal that text is read into before it is rounded to the target's scale.
_TEXT_DECIMAL_DIGITS = 76


def _text_decimal(to: pa.DataType) -> tuple[pa.DataType, str]:
    """The decimal type text is read into for a cast to decimal ``to``, and the regex that cuts the
    text's fraction to fit it: one digit past ``to``'s scale, the one DataFusion rounds on (half
    away from zero), so any number of fraction digits converts (``'0.' + 40 * '5'`` to
    ``DECIMAL(38, 38)`` is ``0.55..56``)."""
    keep = max(to.scale + 1, 1)
    return pa.decimal256(_TEXT_DECIMAL_DIGITS, keep), rf"(\.[0-9]{{{keep}}})[0-9]+$"


def _wide_decimal(digits: int, scale: int) -> pa.DataType:
    """The narrowest decimal type with ``digits`` integer digits and ``scale`` fraction digits."""
    precision = digits + scale
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(min(precision, 76), scale)


def _int_as_decimal(node: Node, t: pa.DataType, decimal: pa.DataType) -> tuple[int, int]:
    """(precision, scale) DataFusion gives integer operand ``node`` (type ``t``) next to a
    ``decimal``: a literal takes the decimal's own, a column the decimal that holds all its values
    (Int32 -> Decimal(10, 0)). The one copy of the rule, for comparisons and arithmetic."""
    if isinstance(node, Literal) and pa.types.is_decimal(decimal):
        return decimal.precision, decimal.scale
    return _INT_DIGITS[t.bit_width], 0


#: Digits DataFusion adds to the dividend's scale for a decimal quotient.
_DECIMAL_DIV_SCALE = 4
_UNSIGNED = {8: pa.uint8(), 16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}


def _values_of(node: Node, t: pa.DataType) -> Node:
    """``node`` (of type ``t``) as its dictionary's values when it is dictionary-encoded."""
    return Cast(node, t.value_type) if pa.types.is_dictionary(t) else node


def _number_dictionary(t: pa.DataType) -> bool:
    return pa.types.is_dictionary(t) and _is_number(t.value_type)


def _is_number(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def _float_result(types: list[pa.DataType]) -> pa.DataType:
    """The float type numbers meet in, as DataFusion coerces them: the widest float among them,
    whatever the integers (``f32 * 2`` is a float32, so it overflows to infinity as pylance's does)."""
    floats = [t for t in types if pa.types.is_floating(t)]
    return max(floats, key=lambda t: t.bit_width) if floats else pa.float64()


#: uint64 meeting a signed integer: DataFusion computes in a 20-digit decimal (exact: ``u - 6 < 0``
#: holds for 5, ``u + 1`` of 2**64 - 1 is 2**64); 256 bits so a product's 41 digits fit.
_EXACT = pa.decimal256(20, 0)
#: Digits of a truncated quotient of two such decimals (for ``%``).
_EXACT_QUOTIENT_DIGITS = 41


def _exact_decimal(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether integers of types ``a`` and ``b`` meet in :data:`_EXACT` (no integer type holds both)."""
    if not (pa.types.is_integer(a) and pa.types.is_integer(b)):
        return False
    return bool(a == pa.uint64() and pa.types.is_signed_integer(b)) or (
        b == pa.uint64() and pa.types.is_signed_integer(a)
    )


def _wider_int(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The integer type both ``a`` and ``b`` widen to (signed when either is)."""
    if pa.types.is_signed_integer(a) == pa.types.is_signed_integer(b):
        table = _SIGNED if pa.types.is_signed_integer(a) else _UNSIGNED
        return table[max(a.bit_width, b.bit_width)]
    unsigned = a if pa.types.is_unsigned_integer(a) else b
    signed = b if unsigned is a else a
    return _SIGNED[min(64, max(signed.bit_width, 2 * unsigned.bit_width))]


class ToArrow(Visitor[pc.Expression]):
    """Builds the pyarrow compute Expression of a bound tree (fields referenced by name)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        # Results per (value-equal) node: types and sub-expressions are asked for repeatedly
        # while the tree is built, and each type costs an evaluation on an empty table.
        self._types: dict[Node, pa.DataType] = {}
        self._exprs: dict[Node, pc.Expression] = {}

    def visit(self, node: Node) -> pc.Expression:
        try:
            return self._exprs[node]
        except (KeyError, TypeError):  # TypeError: a literal that cannot be hashed (lists)
            pass
        out = super().visit(node)
        with contextlib.suppress(TypeError):
            self._exprs[node] = out
        return out

    def type_of(self, node: Node) -> pa.DataType:
        """The Arrow type of ``node`` (bound on an empty table: pyarrow's own rules)."""
        if isinstance(node, Column | Literal):
            return node.type
        if isinstance(node, Cast):
            return node.to
        if isinstance(node, _BOOLEAN_NODES):
            return pa.bool_()
        with contextlib.suppress(KeyError, TypeError):
            return self._types[node]
        if isinstance(node, Arith | Negate):
            # Numbers by rule (an evaluation per level of a long chain costs quadratic time).
            types = [self.type_of(a) for a in children(node)]
            if all(_is_number(t) for t in types):
                if any(pa.types.is_floating(t) for t in types):
                    t = _float_result(types)
                elif not any(_exact_decimal(a, b) for a in types for b in types):
                    t = types[0]
                    for other in types[1:]:
                        t = _wider_int(t, other)
                else:
                    t = None  # a decimal: its precision and scale as pyarrow computes them, below
                if t is not None:
                    self._types[node] = t
                    return t
        import pyarrow.dataset as pds  # imported on first use: it pulls in much of pyarrow

        empty = self.schema.empty_table()
        t = pds.dataset(empty).to_table(columns={"v": self.visit(node)}).schema.field("v").type
        with contextlib.suppress(TypeError):
            self._types[node] = t
        return t

    def visit_column(self, node: Column) -> pc.Expression:
        return pc.field(*node.path)

    def visit_literal(self, node: Literal) -> pc.Expression:
        return pc.scalar(node.value)

    def visit_compare(self, node: Compare) -> pc.Expression:
        left, right = self.visit(node.left), self.visit(node.right)
        lt = self.type_of(node.left)
        if pa.types.is_list(lt) or pa.types.is_large_list(lt) or pa.types.is_fixed_size_list(lt):
            if node.op not in ("eq", "ne"):
                raise NotSupportedError(f"ordering comparison {node.op!r} of lists")
            equal = udfs.call(udfs.list_equal(lt, self.type_of(node.right)), [left, right])
            return equal if node.op == "eq" else ~equal
        rt = self.type_of(node.right)
        if _number_dictionary(lt) or _number_dictionary(rt):
            # A dictionary of numbers compares as its values, in DataFusion's common type with the
            # other side (pyarrow would cast int32 values to a float literal's float32 and refuse
            # those outside its exact range: NOT (di = 0.5) was an error).
            return self.visit_compare(Compare(node.op, _values_of(node.left, lt), _values_of(node.right, rt)))
        unwrapped = self.unwrap_integer_cast(node)
        if unwrapped is not None:
            return self.visit(unwrapped)
        exact = self.integer_literal_compare(node.op, node.left, node.right, left, right)
        if exact is not None:
            return exact
        ra, rb = self.nan_rank(node.left, left), self.nan_rank(node.right, right)
        left, right = self.numeric(node.left, node.right, left, right)
        return _nan_ordered(node.op, left, right, ra, rb)

    def unwrap_integer_cast(self, node: Compare) -> Compare | None:
        """``CAST(x AS T) <op> literal`` as ``x <op> literal``, as DataFusion's planner rewrites it
        (and then never evaluates the cast, which could fail or, for ``TRY_CAST``, be NULL on a
        value outside ``T``). ``None``: not such a comparison. See :func:`_unwrapped_literal`."""
        cast, lit, op = node.left, node.right, node.op
        if isinstance(cast, Literal):
            cast, lit, op = lit, cast, FLIPPED[op]
        if not (isinstance(cast, Cast) and isinstance(lit, Literal)):
            return None
        unwrapped = _unwrapped_literal(self.type_of(cast.arg), cast.to, lit)
        return None if unwrapped is None else Compare(op, cast.arg, unwrapped)

    def integer_literal_compare(
        self, op: str, a: Node, b: Node, ea: pc.Expression, eb: pc.Expression
    ) -> pc.Expression | None:
        """``a <op> b`` with an integer literal in the type of the integer or decimal it meets.

        See :func:`.expr.exact_integer_literal`; a literal out of that type's range makes the
        comparison constant (true or false on valid rows, NULL on NULL rows). ``None``: not
        such a comparison.
        """
        if isinstance(a, Literal):
            a, b, ea, eb, op = b, a, eb, ea, FLIPPED[op]
        if not isinstance(b, Literal) or isinstance(a, Literal):
            return None
        scalar, side = exact_integer_literal(b.value, self.type_of(a))
        if scalar is not None:
            return _OPS[op](ea, pc.scalar(scalar))
        if side == 0:
            return None
        holds = holds_out_of_range(op, side)
        return pc.if_else(ea.is_valid(), pc.scalar(holds), _NULL_BOOL)

    def nan_rank(self, node: Node, value: pc.Expression) -> pc.Expression | None:
        """``value``'s NaN rank for :func:`_nan_ordered` (``None`` when it is never NaN)."""
        if not may_be_nan(node):
            return None
        if isinstance(node, Literal):
            v = node.value.as_py()
            return pc.scalar(pa.scalar(-1 if math.copysign(1.0, v) < 0 else 1, pa.int8()))
        return udfs.call(udfs.nan_rank(self.type_of(node)), [value])

    def numeric(
        self, left_node: Node, right_node: Node, left: pc.Expression, right: pc.Expression
    ) -> tuple[pc.Expression, pc.Expression]:
        """Both operands in the type DataFusion computes in: the wider integer, or float64.

        pyarrow would instead narrow a literal to the column's type (and overflow there) or cast
        integers to floats with a range check that refuses integers above 2**53.
        """
        ta, tb = self.type_of(left_node), self.type_of(right_node)
        if pa.types.is_decimal(ta) != pa.types.is_decimal(tb):
            return self.decimal_operands(left_node, right_node, left, right, ta, tb)
        if ta == tb or not (_is_number(ta) and _is_number(tb)):
            return left, right
        if _exact_decimal(ta, tb):
            return left.cast(_EXACT), right.cast(_EXACT)
        if pa.types.is_integer(ta) and pa.types.is_integer(tb):
            wide = _wider_int(ta, tb)
            return left.cast(wide), right.cast(wide)
        t = _float_result([ta, tb])
        return left.cast(t, safe=False), right.cast(t, safe=False)

    def decimal_operands(
        self,
        left_node: Node,
        right_node: Node,
        left: pc.Expression,
        right: pc.Expression,
        ta: pa.DataType,
        tb: pa.DataType,
    ) -> tuple[pc.Expression, pc.Expression]:
        """A decimal with a number of another kind, typed as DataFusion does: an integer literal
        takes the decimal's type, an integer column the decimal that holds all its values
        (Int32 -> Decimal(10, 0)), and with a float both are float64."""
        decimal_left = pa.types.is_decimal(ta)
        decimal = ta if decimal_left else tb
        node, expr, t = (right_node, right, tb) if decimal_left else (left_node, left, ta)
        if pa.types.is_floating(t):
            return left.cast(pa.float64()), right.cast(pa.float64())
        if not pa.types.is_integer(t):
            return left, right
        if isinstance(node, Literal):
            try:  # through Python: pyarrow casts integer types only to decimals of 19+ digits
                converted = pc.scalar(pa.scalar(Decimal(node.value.as_py()), decimal))
            except (pa.ArrowException, ValueError, OverflowError, TypeError):
                raise InvalidInputError(f"{node.value} does not fit {decimal}") from None
        else:
            converted = expr.cast(pa.decimal128(*_int_as_decimal(node, t, decimal)))
        return (left, converted) if decimal_left else (converted, right)

    def visit_and(self, node: And) -> pc.Expression:
        out = self.visit(node.args[0])
        for a in node.args[1:]:
            out = out & self.visit(a)
        return out

    def visit_or(self, node: Or) -> pc.Expression:
        out = self.visit(node.args[0])
        for a in node.args[1:]:
            out = out | self.visit(a)
        return out

    def visit_not(self, node: Not) -> pc.Expression:
        return ~self.visit(node.arg)

    def visit_inlist(self, node: InList) -> pc.Expression:
        if isinstance(node.value, Cast) and node.options:
            # DataFusion unwraps the cast of ``CAST(x AS T) IN (..)`` as of a comparison.
            source = self.type_of(node.value.arg)
            options = [_unwrapped_literal(source, node.value.to, o) for o in node.options]
            if all(o is not None for o in options):
                return self.visit(InList(node.value.arg, tuple(o for o in options if o is not None)))
        target = self.visit(node.value)
        if not node.options:
            return pc.if_else(target.is_valid(), pc.scalar(False), _NULL_BOOL)
        values = [o.value for o in node.options]
        t = self.type_of(node.value)
        common = t.value_type if pa.types.is_dictionary(t) else t
        if (pa.types.is_integer(t) or pa.types.is_decimal(t)) and all(
            pa.types.is_integer(v.type) for v in values
        ):
            # In the value's own type, leaving out what it cannot hold (a uint64 column is never
            # -1): a common type would cast a uint64 column to int64 and fail above 2**63.
            typed = (exact_integer_literal(v, t)[0] for v in values)
            kept = pa.array([s.as_py() for s in typed if s is not None], t)
            return pc.if_else(target.is_valid(), pc.is_in(target, value_set=kept), _NULL_BOOL)
        if _is_number(t) and any(_is_number(v.type) and v.type != t for v in values):
            # One type for the value and the list, as DataFusion coerces (pyarrow would cast the
            # list to the column's type, truncating 0.5 to 0 for an integer column).
            if pa.types.is_floating(t) or any(pa.types.is_floating(v.type) for v in values):
                common = pa.float64()
            else:
                for v in values:
                    common = _wider_int(common, v.type) if pa.types.is_integer(v.type) else common
            target = target.cast(common, safe=False)
        if pa.types.is_floating(common) and any(v.as_py() == 0 for v in values):
            # hashing tells -0.0 from 0.0; SQL equality does not
            values += [pa.scalar(0.0), pa.scalar(-0.0)]
        try:
            value_set = pa.array([v.as_py() for v in values], common)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            value_set = pa.array([v.as_py() for v in values])
        found = pc.is_in(target, value_set=value_set)
        # SQL: NULL IN (...) is NULL (so NOT IN does not select it either).
        return pc.if_else(target.is_valid(), found, _NULL_BOOL)

    def visit_between(self, node: Between) -> pc.Expression:
        return self.visit(Compare("ge", node.value, node.low)) & self.visit(
            Compare("le", node.value, node.high)
        )

    def visit_isnull(self, node: IsNull) -> pc.Expression:
        if isinstance(node.arg, Call) and node.arg.name == "regexp_match":
            # regexp_match is NULL exactly when nothing matches (or an input is NULL).
            return ~pc.coalesce(_regexp(self, self.call_args(node.arg)), pc.scalar(False))
        return self.visit(node.arg).is_null()

    def visit_isnan(self, node: IsNan) -> pc.Expression:
        return pc.is_nan(self.visit(node.arg))

    def visit_isbool(self, node: IsBool) -> pc.Expression:
        value = self.visit(node.arg)
        if node.value is None:
            return value.is_null()
        hit = value if node.value else ~value
        return pc.coalesce(hit, pc.scalar(False))

    def visit_like(self, node: Like) -> pc.Expression:
        target = self.visit(node.arg)
        t = self.type_of(node.arg)
        if pa.types.is_dictionary(t):
            target = target.cast(t.value_type)  # the string kernels take no dictionaries
        prefix = node.pattern[:-1]
        if node.pattern.endswith("%") and not re.search(r"[%_\\]", prefix):
            return pc.starts_with(target, pattern=prefix, ignore_case=node.ignore_case)
        return pc.match_like(target, pattern=node.pattern, ignore_case=node.ignore_case)

    def visit_cast(self, node: Cast) -> pc.Expression:
        value = self.visit(node.arg)
        source = self.type_of(node.arg)
        if (pa.types.is_string(source) or pa.types.is_large_string(source)) and pa.types.is_decimal(node.to):
            # DataFusion reads decimal text around whitespace, without exponents ('1e2' does not
            # convert; pyarrow would read it), and rounds to the target's scale (below). Text that
            # does not convert becomes NULL for TRY_CAST, or text pyarrow refuses too for CAST.
            text = pc.utf8_trim_whitespace(value)
            if node.to.scale > 0:
                # arrow-rs reads text without digits ('', '-', '.') as zero, at a scale above 0 only
                text = pc.replace_substring_regex(text, pattern=NO_DIGITS_TEXT, replacement="0")
            bad = pc.scalar(pa.scalar("not a number" if node.safe else None, source))
            text = pc.if_else(pc.match_substring_regex(text, DECIMAL_TEXT), text, bad)
            wide, cut = _text_decimal(node.to)
            text = pc.replace_substring_regex(text, pattern=cut, replacement=r"\1")
            value = text.cast(wide) if node.safe else udfs.call(udfs.cast(source, wide, True), [text])
            source = wide
        if pa.types.is_decimal(source) and pa.types.is_decimal(node.to) and node.to.scale < source.scale:
            # SQL rounds a decimal to fewer digits (half away from zero); pyarrow refuses the loss.
            value = pc.round(value, ndigits=node.to.scale, round_mode="half_towards_infinity")
        if pa.types.is_floating(source) and pa.types.is_decimal128(node.to):
            return udfs.call(udfs.float_decimal(source, node.to, not node.safe), [value])
        if pa.types.is_integer(source) and pa.types.is_floating(node.to):
            return value.cast(node.to, safe=False)  # rounds above 2**53, as DataFusion's cast does
        if pa.types.is_integer(source) and (pa.types.is_binary(node.to) or pa.types.is_large_binary(node.to)):
            # DataFusion writes an integer's little-endian bytes (pyarrow has no such cast).
            return udfs.call(udfs.int_bytes(source), [value]).cast(node.to)
        to_text = pa.types.is_string(node.to) or pa.types.is_large_string(node.to)
        if to_text and pa.types.is_floating(source) and source.bit_width in (32, 64):
            # Rust's text of floats (1.0, 1e20, NaN), not pyarrow's (1, 1e+20, nan).
            return udfs.call(udfs.float_text(source), [value]).cast(node.to)
        if to_text and _rust_timestamp_text(source):
            return _timestamp_text(value).cast(node.to)
        if to_text and pa.types.is_timestamp(source):
            raise NotSupportedError(f"CAST of {source} to a string (its text differs from DataFusion's)")
        if pa.types.is_decimal(source) and pa.types.is_integer(node.to):
            # DataFusion truncates the fraction (CAST(1.5 AS INT) is 1); pyarrow refuses the loss.
            value = pc.round(value, ndigits=0, round_mode="towards_zero")
        if pa.types.is_integer(source) and pa.types.is_decimal(node.to):
            # pyarrow refuses an integer type whose widest value would not fit the decimal (int32
            # to DECIMAL(10, 2)); DataFusion checks each value. Through a decimal that holds every
            # value of the type, the narrowing cast checks values.
            source = _wide_decimal(_INT_DIGITS[source.bit_width], node.to.scale)
            value = value.cast(source)
        if pa.types.is_timestamp(source) and pa.types.is_timestamp(node.to):
            # DataFusion truncates to a coarser unit (CAST(ns AS TIMESTAMP) drops nanoseconds).
            return value.cast(options=pc.CastOptions(node.to, allow_time_truncate=True))
        if node.safe and not (pa.types.is_floating(source) and pa.types.is_integer(node.to)):
            return value.cast(node.to)
        # Floats truncate to integers, and TRY_CAST gives NULL where a value does not convert:
        # neither is one of pyarrow's cast options (safe=False wraps out-of-range values).
        return udfs.call(udfs.cast(source, node.to, not node.safe), [value])

    def visit_arith(self, node: Arith) -> pc.Expression:
        left_t, right_t = self.type_of(node.left), self.type_of(node.right)
        if pa.types.is_dictionary(left_t) or pa.types.is_dictionary(right_t):
            # A dictionary operand computes as its values, in DataFusion's common type with the
            # other operand (a filter's di * 2 is an int64, as pylance's is: no int32 wrap).
            node = Arith(node.op, _values_of(node.left, left_t), _values_of(node.right, right_t))
        a, b = self.numeric(node.left, node.right, self.visit(node.left), self.visit(node.right))
        if node.op == "mod":
            quotient = pc.divide(a, b)
            ta, tb = self.type_of(node.left), self.type_of(node.right)
            if _exact_decimal(ta, tb):
                quotient = quotient.cast(pa.decimal256(_EXACT_QUOTIENT_DIGITS, 0), safe=False)  # truncates
            rest = a - pc.multiply(quotient, b)
            if pa.types.is_signed_integer(ta) and pa.types.is_signed_integer(tb):
                # x % -1 is 0, also for the least value, whose quotient by -1 wraps (pylance: 0)
                return pc.if_else(pc.equal(b, pc.scalar(-1)), a - a, rest)
            return rest
        if node.op == "div":
            ta, tb = self.type_of(node.left), self.type_of(node.right)
            if pa.types.is_decimal(ta) or pa.types.is_decimal(tb):
                return self.decimal_quotient(node, a, b)
        return _ARITH[node.op](a, b)

    def decimal_quotient(self, node: Arith, a: pc.Expression, b: pc.Expression) -> pc.Expression:
        """``a / b`` of decimals in DataFusion's type, (p1 - s1 + s2 + s, s) with s = s1 + 4,
        truncated (pyarrow's own quotient keeps more digits)."""
        ta, tb = self.type_of(node.left), self.type_of(node.right)
        left_shape = self.decimal_shape(node.left, ta, tb)
        right_shape = self.decimal_shape(node.right, tb, ta)
        if left_shape is None or right_shape is None:  # a float operand: float64 division
            return pc.divide(a, b)
        (p1, s1), (_, s2) = left_shape, right_shape
        scale = s1 + _DECIMAL_DIV_SCALE
        precision = min(38, p1 - s1 + s2 + scale)
        quotient = pc.round(pc.divide(a, b), ndigits=scale, round_mode="towards_zero")
        return quotient.cast(pa.decimal128(precision, min(scale, precision)))

    def decimal_shape(self, node: Node, t: pa.DataType, other: pa.DataType) -> tuple[int, int] | None:
        """(precision, scale) an operand has in decimal arithmetic (see :meth:`decimal_operands`)."""
        if pa.types.is_decimal(t):
            return t.precision, t.scale
        if pa.types.is_integer(t):
            return _int_as_decimal(node, t, other)
        return None

    def visit_negate(self, node: Negate) -> pc.Expression:
        return pc.negate(self.visit(node.arg))

    def visit_call(self, node: Call) -> pc.Expression:
        spec = FUNCTIONS.get(node.name)
        if spec is None:
            raise NotSupportedError(f"function {node.name}() is not supported in filters")
        (lo, hi), build = spec
        if not lo <= len(node.args) <= hi:
            raise InvalidInputError(f"{node.name}() takes {lo}..{hi} arguments, got {len(node.args)}")
        return build(self, self.call_args(node))

    def call_args(self, node: Call) -> tuple[Node, ...]:
        """A function's arguments, a dictionary argument as its values (the kernels take no
        dictionaries; DataFusion unpacks them the same way): length(ds), ds || 'x', upper(ds)."""
        return tuple(
            Cast(a, t.value_type) if pa.types.is_dictionary(t := self.type_of(a)) else a for a in node.args
        )

    def visit_opaque(self, node: Opaque) -> pc.Expression:
        return node.expression


def to_arrow(node: Node, schema: pa.Schema) -> pc.Expression:
    """The pyarrow compute Expression of ``node`` (bound to ``schema``)."""
    return ToArrow(schema).visit(node)


_BIND_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError)


def _binds(expr: pc.Expression, schema: pa.Schema) -> bool:
    try:
        schema.empty_table().filter(expr)
    except _BIND_ERRORS:
        return False
    return True


def _opaque(expr: pc.Expression, schema: pa.Schema) -> Opaque:
    """``expr`` as a leaf; its columns are those without which it no longer binds."""
    text = str(expr)
    try:
        schema.empty_table().filter(expr)
    except _BIND_ERRORS as e:
        raise InvalidInputError(f"invalid filter {text}: {e}") from None
    # Only a column whose name appears in the text can be referenced; binding decides.
    candidates = [n for n in schema.names if n in text]
    used = {n for n in candidates if not _binds(expr, pa.schema([f for f in schema if f.name != n]))}
    return Opaque(expr, frozenset(used), text)


def from_arrow(expr: pc.Expression, schema: pa.Schema) -> Node:
    """The IR of a pyarrow Expression bound to ``schema``."""
    import pyarrow.substrait as ps  # imported on first use: loads Arrow's Substrait producer

    from lance_format.dataset._serde import predicate_from_substrait

    try:
        data = ps.serialize_expressions([expr], ["filter"], schema)
    except (pa.ArrowException, ValueError, TypeError):
        return _opaque(expr, schema)  # not expressible in Substrait: evaluated as given
    try:
        return predicate_from_substrait(bytes(data), schema)
    except NotSupportedError:
        return _opaque(expr, schema)


def current_date() -> dt.date:
    """Today's date in UTC (``current_date()`` is folded to a literal when a filter is bound)."""
    return dt.datetime.now(dt.UTC).date()
