"""SQL-style predicates to pyarrow compute Expressions, parsed with sqlglot.

Supported SQL: comparisons, ``AND``/``OR``/``NOT``, ``IN``, ``BETWEEN``, ``IS [NOT] NULL``,
``LIKE``/``ILIKE`` (``'prefix%'`` becomes ``starts_with``), arithmetic, ``CAST``, and
``TRUE``/``FALSE``/``NULL`` literals. Identifiers may be quoted with double quotes or backticks;
``a.b`` addresses a struct child. Imported on first use (sqlglot is not needed to read data).

Floating-point comparisons follow pylance (DataFusion), not IEEE 754: NaN sorts above every number
and equals itself, so ``x > 0.5`` selects NaN rows and ``NOT (x > 0.5)`` does not. Two corners of
pylance's total order are not copied: comparing two columns it orders ``-0.0`` below ``0.0`` (here
they are equal), and a negated NaN (``-x``) sorts below every number (here it is still NaN, above).
"""

from __future__ import annotations

import decimal
import operator
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import expressions as exp
from sqlglot.errors import SqlglotError

from lance_format.core.errors import InvalidInputError

__all__ = ["sql_to_expression"]

# Comparisons are in _NAN_ORDERED (they order NaN like pylance); these are the other operators.
_BINARY: dict[type[exp.Expression], Callable[[Any, Any], Any]] = {
    exp.And: lambda a, b: a & b,
    exp.Or: lambda a, b: a | b,
    exp.Add: lambda a, b: pc.add_checked(a, b),
    exp.Sub: lambda a, b: pc.subtract_checked(a, b),
    exp.Mul: lambda a, b: pc.multiply_checked(a, b),
    exp.Div: lambda a, b: pc.divide(a, b),
    exp.Mod: lambda a, b: a - pc.multiply(pc.divide(a, b), b),
}


#: Comparisons that order NaN above every number when an operand is floating point.
_NAN_ORDERED: dict[type[exp.Expression], str] = {
    exp.GT: "gt",
    exp.GTE: "ge",
    exp.LT: "lt",
    exp.LTE: "le",
    exp.EQ: "eq",
    exp.NEQ: "ne",
}
_FLOAT_CASTS = ("float", "real", "double", "double precision", "float4", "float8")
_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
    "eq": operator.eq,
    "ne": operator.ne,
}


def _expr(v: Any) -> pc.Expression:
    return v if isinstance(v, pc.Expression) else pc.scalar(v)


def _nan_ordered(kind: str, a: pc.Expression, b: pc.Expression, a_nan: bool, b_nan: bool) -> pc.Expression:
    """``a <kind> b`` with NaN above every number and equal to itself (``*_nan``: may be NaN)."""
    plain = _COMPARISONS[kind](a, b)
    if a_nan or b_nan:
        # The NaN terms below must stay null where either side is null (``NULL <= NaN`` is null,
        # not true): mask them with both sides' validity.
        both = a.is_valid() & b.is_valid()
    na = pc.is_nan(a) & both if a_nan else None
    nb = pc.is_nan(b) & both if b_nan else None
    if kind == "gt" and na is not None:
        return plain | (na if nb is None else na & ~nb)
    if kind == "ge" and na is not None:
        return plain | na
    if kind == "lt" and nb is not None:
        return plain | (nb if na is None else nb & ~na)
    if kind == "le" and nb is not None:
        return plain | nb
    if kind == "eq" and na is not None and nb is not None:
        return plain | (na & nb)
    if kind == "ne" and na is not None and nb is not None:
        return plain & ~(na & nb)
    return plain


_FLIPPED = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge", "eq": "eq", "ne": "ne"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_range(t: pa.DataType) -> tuple[int, int]:
    info = np.iinfo(t.to_pandas_dtype())
    return int(info.min), int(info.max)


def _int_compare(kind: str, column: pc.Expression, t: pa.DataType, value: int) -> pc.Expression:
    """``column <kind> value`` for an integer or decimal column, exact over the column's range.

    An integer column's literal takes the column's type, so a uint64 column is never cast to int64
    (which fails for values above 2**63) and 2**64 - 1 is a valid literal. A decimal column's
    literal is a decimal of scale 0 and just its digits (pyarrow's common type of a decimal column
    and a 38-digit literal overflows 38 digits). A literal outside the type's range makes the
    comparison constant: true or false on valid rows, null on null rows (as SQL has it).
    """
    if pa.types.is_decimal(t):
        bound = 10 ** (t.precision - t.scale)
        lo, hi = -bound + 1, bound - 1
        literal = pa.scalar(decimal.Decimal(value), pa.decimal128(max(len(str(abs(value))), 1), 0))
    else:
        lo, hi = _int_range(t)
        literal = pa.scalar(value, t) if lo <= value <= hi else None
    if lo <= value <= hi:
        return _COMPARISONS[kind](column, pc.scalar(literal))
    below = value < lo
    holds = kind in ("gt", "ge", "ne") if below else kind in ("lt", "le", "ne")
    return pc.if_else(column.is_valid(), pc.scalar(holds), pc.scalar(pa.scalar(None, pa.bool_())))


class _Converter:
    def __init__(self, schema: pa.Schema, text: str) -> None:
        self.schema = schema
        self.text = text
        self.columns: set[str] = set()

    def fail(self, what: str) -> InvalidInputError:
        return InvalidInputError(f"invalid filter {self.text!r}: {what}")

    def column(self, node: exp.Column) -> pc.Expression:
        parts = [p.name for p in node.parts]
        top = parts[0]
        if top not in self.schema.names:
            raise self.fail(f"no column {'.'.join(parts)!r}; columns are {self.schema.names}")
        self.columns.add(top)
        return pc.field(*parts)

    def literal(self, node: exp.Literal) -> Any:
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            raise self.fail(f"bad number {text!r}") from None

    def convert(self, node: exp.Expression) -> Any:
        if isinstance(node, exp.Paren):
            return self.convert(node.this)
        if isinstance(node, exp.Column):
            return self.column(node)
        if isinstance(node, exp.Literal):
            return self.literal(node)
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Neg):
            value = self.convert(node.this)
            return -value if isinstance(value, int | float) else pc.negate_checked(value)
        if isinstance(node, exp.Not):
            return ~_expr(self.convert(node.this))
        kind = _NAN_ORDERED.get(type(node))
        if kind is not None:
            left_node, right_node = node.this, node.expression
            return self.compare(
                kind, left_node, right_node, self.convert(left_node), self.convert(right_node)
            )
        op = _BINARY.get(type(node))
        if op is not None:
            left, right = self.convert(node.this), self.convert(node.expression)
            if left is None or right is None:
                # SQL: an operation with NULL is NULL, which filters every row out.
                return pc.scalar(False)
            return op(_expr(left), _expr(right))
        if isinstance(node, exp.Is):
            target = self.convert(node.expression)
            if target is not None:
                raise self.fail("IS only supports NULL")
            return _expr(self.convert(node.this)).is_null()
        if isinstance(node, exp.In):
            if node.args.get("query") is not None:
                raise self.fail("IN (subquery) is not supported")
            values = [self.convert(v) for v in node.expressions]
            if any(isinstance(v, pc.Expression) for v in values):
                raise self.fail("IN lists must hold literals")
            # SQL: NULL IN (...) is NULL (so NOT IN does not select it either).
            target = _expr(self.convert(node.this))
            listed = [v for v in values if v is not None]
            int_type = self.integer_type(node.this)
            if int_type is not None and pa.types.is_integer(int_type) and all(_is_int(v) for v in listed):
                # Typed in the column's type, leaving out values it cannot hold (a uint64 column
                # is never -1): pyarrow would otherwise cast the column to int64 and fail above 2**63.
                lo, hi = _int_range(int_type)
                listed = pa.array([v for v in listed if lo <= v <= hi], int_type)
            if self.may_be_nan(node.this) and any(isinstance(v, int | float) and v == 0 for v in listed):
                listed += [0.0, -0.0]  # hashing tells -0.0 from 0.0; SQL equality does not
            found = target.isin(listed)
            return pc.if_else(target.is_valid(), found, pc.scalar(pa.scalar(None, pa.bool_())))
        if isinstance(node, exp.Between):
            low, high = node.args["low"], node.args["high"]
            value = self.convert(node.this)
            return self.compare("ge", node.this, low, value, self.convert(low)) & self.compare(
                "le", node.this, high, value, self.convert(high)
            )
        if isinstance(node, exp.Like | exp.ILike):
            return self.like(node)
        if isinstance(node, exp.Cast):
            return self.cast(node)
        raise self.fail(f"unsupported expression {node.sql()!r} ({type(node).__name__})")

    def compare(
        self, kind: str, left_node: exp.Expression, right_node: exp.Expression, left: Any, right: Any
    ) -> pc.Expression:
        """A comparison, NaN-ordered when either side is floating point (see the module doc)."""
        if left is None or right is None:
            return pc.scalar(False)  # SQL: comparison with NULL is NULL, which filters every row out
        int_type = self.integer_type(left_node)
        if int_type is not None and _is_int(right) and isinstance(left, pc.Expression):
            return _int_compare(kind, left, int_type, right)
        int_type = self.integer_type(right_node)
        if int_type is not None and _is_int(left) and isinstance(right, pc.Expression):
            return _int_compare(_FLIPPED[kind], right, int_type, left)
        return _nan_ordered(
            kind, _expr(left), _expr(right), self.may_be_nan(left_node), self.may_be_nan(right_node)
        )

    def column_type(self, node: exp.Expression) -> pa.DataType | None:
        """The Arrow type of a column reference (struct children included), else None."""
        if isinstance(node, exp.Paren):
            return self.column_type(node.this)
        if not isinstance(node, exp.Column) or node.parts[0].name not in self.schema.names:
            return None
        t: pa.DataType = self.schema.field(node.parts[0].name).type
        for part in node.parts[1:]:
            if not pa.types.is_struct(t) or t.get_field_index(part.name) < 0:
                return None
            t = t.field(part.name).type
        return t

    def integer_type(self, node: exp.Expression) -> pa.DataType | None:
        """The type of an integer or decimal column reference, else None."""
        t = self.column_type(node)
        return t if t is not None and (pa.types.is_integer(t) or pa.types.is_decimal(t)) else None

    def may_be_nan(self, node: exp.Expression) -> bool:
        """Whether ``node`` has a floating-point type (literals never hold NaN)."""
        if isinstance(node, exp.Paren | exp.Neg):
            return self.may_be_nan(node.this)
        if isinstance(node, exp.Column):
            t: pa.DataType = self.schema.field(node.parts[0].name).type
            for part in node.parts[1:]:
                if not pa.types.is_struct(t) or t.get_field_index(part.name) < 0:
                    return False
                t = t.field(part.name).type
            return bool(pa.types.is_floating(t))
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div | exp.Mod):
            return self.may_be_nan(node.this) or self.may_be_nan(node.expression)
        if isinstance(node, exp.Cast):
            return bool(node.to.sql(dialect="duckdb").lower() in _FLOAT_CASTS)
        return False

    def like(self, node: exp.Like | exp.ILike) -> pc.Expression:
        pattern = self.convert(node.expression)
        if not isinstance(pattern, str):
            raise self.fail("LIKE needs a string pattern")
        target = _expr(self.convert(node.this))
        t = self.column_type(node.this)
        if t is not None and pa.types.is_dictionary(t):
            target = target.cast(t.value_type)  # the string kernels take no dictionaries
        ignore_case = isinstance(node, exp.ILike)
        prefix = pattern[:-1]
        if pattern.endswith("%") and not re.search(r"[%_\\]", prefix):
            return pc.starts_with(target, pattern=prefix, ignore_case=ignore_case)
        return pc.match_like(target, pattern=pattern, ignore_case=ignore_case)

    def cast(self, node: exp.Cast) -> pc.Expression:
        value = _expr(self.convert(node.this))
        name = node.to.sql(dialect="duckdb").lower()
        types = {
            "int": pa.int32(),
            "integer": pa.int32(),
            "bigint": pa.int64(),
            "smallint": pa.int16(),
            "tinyint": pa.int8(),
            "float": pa.float32(),
            "real": pa.float32(),
            "double": pa.float64(),
            "text": pa.string(),
            "varchar": pa.string(),
            "string": pa.string(),
            "boolean": pa.bool_(),
            "date": pa.date32(),
            "timestamp": pa.timestamp("us"),
        }
        target = types.get(name)
        if target is None:
            raise self.fail(f"unsupported CAST target {name!r}")
        return value.cast(target)


def sql_to_expression(text: str, schema: pa.Schema) -> tuple[pc.Expression, set[str]]:
    """``(expression, top-level columns it reads)`` of a SQL predicate or value expression."""
    try:
        tree = sqlglot.parse_one(text)
    except (SqlglotError, RecursionError) as e:
        raise InvalidInputError(f"invalid filter {text!r}: {str(e).splitlines()[0]}") from None
    conv = _Converter(schema, text)
    try:
        result = conv.convert(tree)  # type: ignore[arg-type]
    except RecursionError:
        raise InvalidInputError(f"invalid filter {text[:80]!r}...: nested too deeply") from None
    if not isinstance(result, pc.Expression):
        result = pc.scalar(result)
    return result, conv.columns
