"""The predicate IR to pyarrow compute Expressions, and pyarrow Expressions to the IR.

Floating-point comparisons follow pylance (DataFusion), not IEEE 754: NaN sorts above every number
and equals itself, so ``x > 0.5`` selects NaN rows and ``NOT (x > 0.5)`` does not, and a NaN with
the sign bit set (``-x`` of a NaN) sorts below every number. Comparing two values that both read
a column, ``-0.0`` sorts below ``0.0`` (arrow-rs's total order of two arrays); against a constant
the two zeros are equal, as in pylance.

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
    columns_of,
    exact_integer_literal,
    exact_number,
    holds_out_of_range,
    may_be_nan,
    walk,
)
from lance_format.dataset.expr_functions import FUNCTIONS, regexp_call, rust_timestamp_text
from lance_format.dataset.nullability import constant_value
from lance_format.dataset.numeric_types import (
    EXACT,
    INT_DIGITS,
    exact_decimal,
    float_result,
    is_number,
    union_type,
    wide_decimal,
    wider_int,
)
from lance_format.dataset.value_text import list_text_supported, timestamp_text

_BOOLEAN_NODES = (Compare, And, Or, Not, InList, Between, IsNull, IsNan, IsBool, Like)
#: Functions that fail on no value (an abs overflows, a coalesce casts, a concat writes bytes as
#: text): an AND/OR need not guard them (see ToArrow.guarded).
_NEVER_FAILING_CALLS = frozenset(
    {
        "lower", "upper", "length", "octet_length", "reverse", "array_length", "list_get",
        "starts_with", "ends_with", "contains", "strpos", "replace", "trim", "ltrim", "rtrim",
        "regexp_like", "regexp_match", "round", "trunc", "sqrt", "ceil", "floor",
    }
)  # fmt: skip

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
_NULL_RANK = pc.scalar(pa.scalar(None, pa.int8()))


def _nan_ordered(
    kind: str,
    a: pc.Expression,
    b: pc.Expression,
    ra: pc.Expression | None,
    rb: pc.Expression | None,
    signed_zeros: bool = False,
) -> pc.Expression:
    """``a <kind> b`` in DataFusion's total order of floats.

    ``ra``/``rb`` rank each side (``None``: never NaN): 0 for a number, 1 for NaN (above every
    number, equal to itself), -1 for a NaN with the sign bit set (below every number). Where
    either side is NaN the ranks decide, unless the other is NULL; elsewhere the plain comparison
    does. ``signed_zeros`` (two floats neither of which is a constant, see
    :meth:`ToArrow.visit_compare`): ``-0.0`` is below ``0.0`` and not equal to it, as arrow-rs
    compares two float arrays.
    """
    plain = _OPS[kind](a, b)
    if signed_zeros:
        # 1 / x tells the zeros apart (-inf for -0.0); pyarrow's unchecked divide does not raise
        zeros = (a == pc.scalar(0)) & (b == pc.scalar(0))
        za, zb = (pc.divide(pc.scalar(1.0), x.cast(pa.float64())) < pc.scalar(0.0) for x in (a, b))
        plain = pc.if_else(zeros, _OPS[kind](zb, za), plain)  # a sign bit sorts lower: compare flipped
    if ra is None and rb is None:
        return plain
    # a side that is never NaN ranks 0, or NULL where it is NULL (NaN against NULL is NULL)
    ra = pc.if_else(a.is_valid(), _ZERO_RANK, _NULL_RANK) if ra is None else ra
    rb = pc.if_else(b.is_valid(), _ZERO_RANK, _NULL_RANK) if rb is None else rb
    return pc.if_else((ra != _ZERO_RANK) | (rb != _ZERO_RANK), _OPS[kind](ra, rb), plain)


#: Integer arithmetic wraps around on overflow, as DataFusion's does (pylance answers, not errors).
_ARITH: dict[str, Callable[[Any, Any], pc.Expression]] = {
    "add": pc.add,
    "sub": pc.subtract,
    "mul": pc.multiply,
    "div": pc.divide,
}


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


def _int_as_decimal(node: Node, t: pa.DataType, decimal: pa.DataType) -> tuple[int, int]:
    """(precision, scale) DataFusion gives integer operand ``node`` (type ``t``) next to a
    ``decimal``: a literal takes the decimal's own, a column the decimal that holds all its values
    (Int32 -> Decimal(10, 0)). The one copy of the rule, for comparisons and arithmetic."""
    if isinstance(node, Literal) and pa.types.is_decimal(decimal):
        return decimal.precision, decimal.scale
    return INT_DIGITS[t.bit_width], 0


#: Digits DataFusion adds to the dividend's scale for a decimal quotient.
_DECIMAL_DIV_SCALE = 4
#: Digits of a truncated quotient of two :data:`.numeric_types.EXACT` decimals (for ``%``).
_EXACT_QUOTIENT_DIGITS = 41
#: Precision of the widest decimal128, where DataFusion caps a decimal result.
_DECIMAL128_DIGITS = 38
#: Precision of the widest decimal256.
_DECIMAL256_DIGITS = 76


def _absorbed(args: tuple[Node, ...], inner: type[And] | type[Or]) -> tuple[Node, ...]:
    """The operands of ``a OR b OR ..`` (``inner`` And) or ``a AND b AND ..`` (``inner`` Or) less
    those the others absorb: ``a OR (a AND c)`` is ``a`` (in three-valued logic too), and
    DataFusion's simplifier drops the ``(a AND c)``, so ``c`` is never evaluated (nor fails)."""
    kept = tuple(a for a in args if not (isinstance(a, inner) and any(x in args for x in a.args)))
    return kept or args


def _values_of(node: Node, t: pa.DataType) -> Node:
    """``node`` (of type ``t``) as its dictionary's values when it is dictionary-encoded."""
    return Cast(node, t.value_type) if pa.types.is_dictionary(t) else node


def _number_dictionary(t: pa.DataType) -> bool:
    return pa.types.is_dictionary(t) and is_number(t.value_type)


def _large_text(
    lt: pa.DataType, rt: pa.DataType, left: pc.Expression, right: pc.Expression
) -> tuple[pc.Expression, pc.Expression]:
    """A string (binary) side compared with a large string (large binary) one, cast to the large
    type explicitly: pyarrow's implicit cast there crashes the process when the large side is a
    NULL scalar (``btrim(ls, NULL) = 'a'``: a segmentation fault in pyarrow 26)."""
    for small, large in (
        (pa.types.is_string, pa.types.is_large_string),
        (pa.types.is_binary, pa.types.is_large_binary),
    ):
        if small(lt) and large(rt):
            return left.cast(rt), right
        if large(lt) and small(rt):
            return left, right.cast(lt)
    return left, right


class ToArrow(Visitor[pc.Expression]):
    """Builds the pyarrow compute Expression of a bound tree (fields referenced by name)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        # Results per (value-equal) node: types and sub-expressions are asked for repeatedly
        # while the tree is built, and each type costs an evaluation on an empty table.
        self._types: dict[Node, pa.DataType] = {}
        self._exprs: dict[tuple[int, Node], pc.Expression] = {}
        # The rows the operand being built is evaluated on (see :meth:`guarded`), and its scope's
        # key in the cache (0: every row).
        self._mask: pc.Expression | None = None
        self._scope = 0
        self._scopes = 0

    def visit(self, node: Node) -> pc.Expression:
        try:
            return self._exprs[(self._scope, node)]
        except (KeyError, TypeError):  # TypeError: a literal that cannot be hashed (lists)
            pass
        out = super().visit(node)
        with contextlib.suppress(TypeError):
            self._exprs[(self._scope, node)] = out
        return out

    def may_fail(self, node: Node) -> bool:
        """Whether evaluating ``node`` itself may fail on some value: a cast, arithmetic, a
        function, or a comparison of a decimal with a float (cast to a decimal, which a NaN
        does not fit)."""
        if isinstance(node, Call):
            if node.name in ("regexp_like", "regexp_match") and not isinstance(node.args[1], Literal):
                return True  # a pattern per row may not compile on some row
            if node.name in ("like", "ilike"):
                return False
            if node.name == "abs" and len(node.args) == 1:
                # only a signed integer's least value overflows (a float's or decimal's never)
                return bool(pa.types.is_signed_integer(self.type_of(node.args[0])))
            return node.name not in _NEVER_FAILING_CALLS
        if isinstance(node, Arith):
            return node.op in ("div", "mod") or not all(
                pa.types.is_integer(self.type_of(n)) for n in children(node)
            )  # integers wrap; a division by zero or a decimal overflow fails
        if isinstance(node, Cast):
            source = self.type_of(node.arg)
            widening = pa.types.is_integer(source) and (
                pa.types.is_floating(node.to) or pa.types.is_string(node.to) or node.to == source
            )
            return node.safe and not widening
        if isinstance(node, Opaque):
            return True
        if isinstance(node, Compare | Between | InList):
            types = [self.type_of(n) for n in children(node)]
            return any(pa.types.is_decimal(t) for t in types) and any(pa.types.is_floating(t) for t in types)
        return False

    def fails_somewhere(self, node: Node) -> bool:
        """Whether some node of ``node``'s tree :meth:`may_fail`."""
        return any(self.may_fail(n) for n in walk(node))

    def guarded(self, node: Node, keep: pc.Expression) -> pc.Expression:
        """``node`` evaluated only on the rows ``keep`` holds: elsewhere every column it reads is
        NULL, so a cast, an overflow or a division there cannot fail.

        DataFusion evaluates the right side of ``a AND b`` only when ``a`` is not false for the
        whole batch (of ``a OR b``, not true), so whether an error there fails the scan depends
        on where batches begin; row by row (a batch of one row, ``batch_size=1`` in pylance) it
        fails exactly when a row whose left side is not false fails. That is the answer given
        here: the same on every layout, and pylance's wherever pylance answers.
        """
        if not self.fails_somewhere(node):
            return self.visit(node)
        saved = self._mask, self._scope
        self._scopes += 1
        self._mask = keep if self._mask is None else self._mask & keep
        self._scope = self._scopes
        try:
            return self.visit(node)
        finally:
            self._mask, self._scope = saved

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
            if all(is_number(t) for t in types):
                if any(pa.types.is_floating(t) for t in types):
                    t = float_result(types)
                elif not any(exact_decimal(a, b) for a in types for b in types):
                    t = types[0]
                    for other in types[1:]:
                        t = wider_int(t, other)
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
        field = pc.field(*node.path)
        if self._mask is None or pa.types.is_dictionary(node.type):
            return field
        return pc.if_else(self._mask, field, pc.scalar(pa.scalar(None, node.type)))

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
        literal = isinstance(node.left, Literal) or isinstance(node.right, Literal)
        if pa.types.is_timestamp(lt) and pa.types.is_timestamp(rt) and lt != rt and not literal:
            # DataFusion compares two timestamps in their union: the coarser unit (ts_ns =
            # CAST(ts_ns AS TIMESTAMP) holds, the nanoseconds truncated), a plain one as its wall
            # time in the other's zone (pyarrow refuses the mix, or compares in the finer unit).
            # Against a literal its optimizer casts the literal to the column's type instead
            # (when it converts exactly), so the column keeps its unit: left to pyarrow.
            t = union_type([lt, rt])
            return _OPS[node.op](self.cast_value(left, lt, t, True), self.cast_value(right, rt, t, True))
        unwrapped = self.unwrap_integer_cast(node)
        if unwrapped is not None:
            return self.visit(unwrapped)
        exact = self.integer_literal_compare(node.op, node.left, node.right, left, right)
        if exact is not None:
            return exact
        if (
            {pa.types.is_decimal(lt), pa.types.is_floating(rt)} == {True}
            or (pa.types.is_floating(lt) and pa.types.is_decimal(rt))
            or (pa.types.is_decimal(lt) and pa.types.is_decimal(rt) and lt != rt)
        ):
            # DataFusion compares a decimal with a float as decimals (a float64 is a
            # Decimal(30, 15) there), so a NaN or a float past that precision fails the cast;
            # two decimals in their union, capped at 38 digits (pyarrow's would need more).
            t = union_type([lt, rt])
            return _OPS[node.op](self.cast_value(left, lt, t, True), self.cast_value(right, rt, t, True))
        left, right = _large_text(lt, rt, left, right)
        ra, rb = self.nan_rank(node.left, left), self.nan_rank(node.right, right)
        left, right = self.numeric(node.left, node.right, left, right)
        return _nan_ordered(node.op, left, right, ra, rb, self.signed_zeros(lt, rt, node))

    def signed_zeros(self, lt: pa.DataType, rt: pa.DataType, node: Compare) -> bool:
        """Whether ``node`` compares floats with ``-0.0`` below ``0.0``: pylance does when both
        sides read a column (``a < b``, ``a = -b``, ``f = i``: arrow-rs's total order of two
        arrays) and not against a constant (``a = 0.0`` holds for ``-0.0``)."""
        floats = pa.types.is_floating(lt) or pa.types.is_floating(rt)
        if not (floats and is_number(lt) and is_number(rt)):
            return False
        return bool(columns_of(node.left)) and bool(columns_of(node.right))

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
        if ta == tb or not (is_number(ta) and is_number(tb)):
            return left, right
        if exact_decimal(ta, tb):
            return left.cast(EXACT), right.cast(EXACT)
        if pa.types.is_integer(ta) and pa.types.is_integer(tb):
            wide = wider_int(ta, tb)
            return left.cast(wide), right.cast(wide)
        t = float_result([ta, tb])
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

    def constant(self, node: Node) -> bool | None:
        """The constant DataFusion folds boolean ``node`` to before evaluating it (``None``: it is
        not one), see :func:`.nullability.constant_value`."""
        return constant_value(node, self.schema, self.type_of)

    def visit_and(self, node: And) -> pc.Expression:
        return self.connective(And(_absorbed(node.args, Or)), conjunction=True)

    def visit_or(self, node: Or) -> pc.Expression:
        return self.connective(Or(_absorbed(node.args, And)), conjunction=False)

    def folded(self, args: tuple[Node, ...], conjunction: bool) -> tuple[Node, ...] | pc.Expression:
        """The operands of an AND (``conjunction``) or OR left once the constants are folded, as
        DataFusion's simplifier folds them first: one that is constantly false (of OR, true)
        decides the whole, which is then that constant, the others never evaluated (``dec = f AND
        coalesce(u64, -1) IS NULL`` is false, never a NaN cast failure); constantly true ones
        (of OR, false) are dropped."""
        values = [self.constant(a) for a in args]
        if (not conjunction) in values:
            return pc.scalar(not conjunction)
        kept = tuple(a for a, v in zip(args, values, strict=True) if v is None)
        return kept if kept else pc.scalar(conjunction)

    def connective(self, node: And | Or, conjunction: bool) -> pc.Expression:
        """``a AND b AND ..`` (``a OR b OR ..``), each operand that may fail evaluated only on the
        rows no operand before it has decided (false for AND, true for OR), see :meth:`guarded`.

        The rows are told by the operands before it that cannot fail; one that can is left out
        of the mask (its rows are then evaluated, as a batch would be): a mask holding guarded
        operands would hold their masks in turn, and a chain's Expression would double per link.
        """
        args = self.folded(node.args, conjunction)
        if isinstance(args, pc.Expression):
            return args
        out: pc.Expression | None = None
        keep: pc.Expression | None = None  # rows the plain operands so far left undecided
        for a in args:
            if out is not None and keep is not None and self.fails_somewhere(a):
                value = self.guarded(a, keep)
            else:
                value = self.visit(a)
                if not self.fails_somewhere(a):
                    undecided = (
                        pc.or_kleene(value, value.is_null())
                        if conjunction
                        else ~pc.coalesce(value, pc.scalar(False))
                    )
                    keep = undecided if keep is None else keep & undecided
            out = value if out is None else (out & value if conjunction else out | value)
        assert out is not None
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
        if is_number(t) and any(is_number(v.type) and v.type != t for v in values):
            # One type for the value and the list, as DataFusion coerces (pyarrow would cast the
            # list to the column's type, truncating 0.5 to 0 for an integer column).
            if pa.types.is_floating(t) or any(pa.types.is_floating(v.type) for v in values):
                common = pa.float64()
            else:
                for v in values:
                    common = wider_int(common, v.type) if pa.types.is_integer(v.type) else common
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
            return ~pc.coalesce(regexp_call(self, self.call_args(node.arg)), pc.scalar(False))
        if self.constant(node) is False:
            return pc.scalar(False)  # of a value that cannot be NULL: not evaluated, as DataFusion folds it
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
        return self.cast_value(self.visit(node.arg), self.type_of(node.arg), node.to, node.safe)

    def cast_value(
        self, value: pc.Expression, source: pa.DataType, to: pa.DataType, safe: bool
    ) -> pc.Expression:
        """``value`` (of type ``source``) cast to ``to`` as DataFusion casts; ``safe``: a value
        that does not convert fails (``CAST``), else it is NULL (``TRY_CAST``)."""
        if (pa.types.is_string(source) or pa.types.is_large_string(source)) and pa.types.is_decimal(to):
            # DataFusion reads decimal text around whitespace, without exponents ('1e2' does not
            # convert; pyarrow would read it), and rounds to the target's scale (below). Text that
            # does not convert becomes NULL for TRY_CAST, or text pyarrow refuses too for CAST.
            text = pc.utf8_trim_whitespace(value)
            if to.scale > 0:
                # arrow-rs reads text without digits ('', '-', '.') as zero, at a scale above 0 only
                text = pc.replace_substring_regex(text, pattern=NO_DIGITS_TEXT, replacement="0")
            bad = pc.scalar(pa.scalar("not a number" if safe else None, source))
            text = pc.if_else(pc.match_substring_regex(text, DECIMAL_TEXT), text, bad)
            wide, cut = _text_decimal(to)
            text = pc.replace_substring_regex(text, pattern=cut, replacement=r"\1")
            value = text.cast(wide) if safe else udfs.call(udfs.cast(source, wide, True), [text])
            source = wide
        if pa.types.is_decimal(source) and pa.types.is_decimal(to) and to.scale < source.scale:
            # SQL rounds a decimal to fewer digits (half away from zero); pyarrow refuses the loss.
            value = pc.round(value, ndigits=to.scale, round_mode="half_towards_infinity")
        if pa.types.is_floating(source) and pa.types.is_decimal128(to):
            return udfs.call(udfs.float_decimal(source, to, not safe), [value])
        if pa.types.is_integer(source) and pa.types.is_floating(to):
            return value.cast(to, safe=False)  # rounds above 2**53, as DataFusion's cast does
        if pa.types.is_integer(source) and (pa.types.is_binary(to) or pa.types.is_large_binary(to)):
            # DataFusion writes an integer's little-endian bytes (pyarrow has no such cast).
            return udfs.call(udfs.int_bytes(source), [value]).cast(to)
        to_text = pa.types.is_string(to) or pa.types.is_large_string(to)
        if to_text and list_text_supported(source):
            return udfs.call(udfs.list_text(source), [value]).cast(to)
        if to_text and pa.types.is_floating(source) and source.bit_width in (32, 64):
            # Rust's text of floats (1.0, 1e20, NaN), not pyarrow's (1, 1e+20, nan).
            return udfs.call(udfs.float_text(source), [value]).cast(to)
        if to_text and rust_timestamp_text(source):
            return timestamp_text(value).cast(to)
        if to_text and pa.types.is_timestamp(source):
            raise NotSupportedError(f"CAST of {source} to a string (its text differs from DataFusion's)")
        if pa.types.is_decimal(source) and pa.types.is_integer(to):
            # DataFusion truncates the fraction (CAST(1.5 AS INT) is 1); pyarrow refuses the loss.
            value = pc.round(value, ndigits=0, round_mode="towards_zero")
        if pa.types.is_integer(source) and pa.types.is_decimal(to):
            # pyarrow refuses an integer type whose widest value would not fit the decimal (int32
            # to DECIMAL(10, 2)); DataFusion checks each value. Through a decimal that holds every
            # value of the type, the narrowing cast checks values.
            source = wide_decimal(INT_DIGITS[source.bit_width], to.scale)
            value = value.cast(source)
        if pa.types.is_timestamp(source) and pa.types.is_timestamp(to):
            if source.tz is None and to.tz is not None:
                # a plain timestamp is the wall time in the zone (pyarrow's cast reads it as UTC)
                value = pc.assume_timezone(value, timezone=to.tz)
            # DataFusion truncates to a coarser unit (CAST(ns AS TIMESTAMP) drops nanoseconds).
            return value.cast(options=pc.CastOptions(to, allow_time_truncate=True))
        if safe and not (pa.types.is_floating(source) and pa.types.is_integer(to)):
            return value.cast(to)
        # Floats truncate to integers, and TRY_CAST gives NULL where a value does not convert:
        # neither is one of pyarrow's cast options (safe=False wraps out-of-range values).
        return udfs.call(udfs.cast(source, to, not safe), [value])

    def visit_arith(self, node: Arith) -> pc.Expression:
        left_t, right_t = self.type_of(node.left), self.type_of(node.right)
        if pa.types.is_dictionary(left_t) or pa.types.is_dictionary(right_t):
            # A dictionary operand computes as its values, in DataFusion's common type with the
            # other operand (a filter's di * 2 is an int64, as pylance's is: no int32 wrap).
            node = Arith(node.op, _values_of(node.left, left_t), _values_of(node.right, right_t))
            left_t, right_t = self.type_of(node.left), self.type_of(node.right)
        if node.op == "sub":
            difference = self.temporal_difference(node, left_t, right_t)
            if difference is not None:
                return difference
        if exact_decimal(left_t, right_t):
            # uint64 with a signed integer: both are Decimal(20, 0) in DataFusion, so the result is
            # a decimal128 typed by the decimal rules (u64 + i8 is a Decimal(21, 0), u64 * i32 a
            # Decimal(38, 0), capped)
            wide = pa.decimal128(INT_DIGITS[64], 0)
            node = Arith(node.op, Cast(node.left, wide), Cast(node.right, wide))
        a, b = self.numeric(node.left, node.right, self.visit(node.left), self.visit(node.right))
        capped = self.capped_decimal(node)
        if capped is not None:
            # Past 38 digits: pyarrow refuses the decimal128 result type, DataFusion caps it at 38
            # (and fails on a value that does not fit). Computed in decimal256, then narrowed.
            (p1, s1), (p2, s2) = capped[1:]
            if node.op == "mul":  # the product's digits within decimal256's 76 (a 38-digit value
                p2 = min(p2, _DECIMAL256_DIGITS - 1 - p1)  # times a 38-digit one overflows anyway)
            a, b = a.cast(pa.decimal256(p1, s1)), b.cast(pa.decimal256(p2, s2))
            return self.visit_arith_values(node, a, b).cast(capped[0])
        return self.visit_arith_values(node, a, b)

    def temporal_difference(self, node: Arith, lt: pa.DataType, rt: pa.DataType) -> pc.Expression | None:
        """``a - b`` of two dates or two timestamps as DataFusion computes it: the days between two
        dates as an int64 (pyarrow's is a duration in seconds), two timestamps' duration in the
        coarser unit (``ts_ns - ts_us`` is in microseconds), a plain one taken as its wall time in
        the other's zone; two zones are refused. ``None``: not such a difference."""
        a, b = self.visit(node.left), self.visit(node.right)
        if pa.types.is_date32(lt) and pa.types.is_date32(rt):
            return pc.subtract(a.cast(pa.int32()).cast(pa.int64()), b.cast(pa.int32()).cast(pa.int64()))
        if not (pa.types.is_timestamp(lt) and pa.types.is_timestamp(rt)) or lt == rt:
            return None
        if lt.tz is not None and rt.tz is not None and lt.tz != rt.tz:
            raise InvalidInputError(f"cannot subtract timestamps of two time zones ({lt} - {rt})")
        t = union_type([lt, rt])  # the coarser unit; a plain timestamp as its wall time in the zone
        return pc.subtract(self.cast_value(a, lt, t, True), self.cast_value(b, rt, t, True))

    def capped_decimal(self, node: Arith) -> tuple[pa.DataType, tuple[int, int], tuple[int, int]] | None:
        """DataFusion's result type of decimal ``+ - * %`` when it caps the precision at 38
        (with the operands' (precision, scale)); ``None`` when it does not."""
        ta, tb = self.type_of(node.left), self.type_of(node.right)
        if node.op == "div" or not (pa.types.is_decimal128(ta) or pa.types.is_decimal128(tb)):
            return None
        left, right = self.decimal_shape(node.left, ta, tb), self.decimal_shape(node.right, tb, ta)
        if left is None or right is None or pa.types.is_decimal256(ta) or pa.types.is_decimal256(tb):
            return None
        (p1, s1), (p2, s2) = left, right
        if node.op == "mul":
            precision, scale = p1 + p2 + 1, s1 + s2
        else:
            scale = max(s1, s2)
            precision = max(p1 - s1, p2 - s2) + scale + (0 if node.op == "mod" else 1)
        if precision <= _DECIMAL128_DIGITS or scale > _DECIMAL128_DIGITS:
            return None
        return pa.decimal128(_DECIMAL128_DIGITS, scale), left, right

    def visit_arith_values(self, node: Arith, a: pc.Expression, b: pc.Expression) -> pc.Expression:
        """``a <op> b`` of operands already in the type they compute in."""
        if node.op == "mod":
            decimal_mod = self.decimal_remainder(node, a, b)
            if decimal_mod is not None:
                return decimal_mod
            ta, tb = self.type_of(node.left), self.type_of(node.right)
            if pa.types.is_floating(ta) or pa.types.is_floating(tb):
                decimal = pa.types.is_decimal(ta) or pa.types.is_decimal(tb)
                t = pa.float64() if decimal else float_result([ta, tb])
                return udfs.call(udfs.float_mod(t), [a.cast(t), b.cast(t)])
            quotient = pc.divide(a, b)
            if exact_decimal(self.type_of(node.left), self.type_of(node.right)):
                quotient = quotient.cast(pa.decimal256(_EXACT_QUOTIENT_DIGITS, 0), safe=False)  # truncates
            if pa.types.is_signed_integer(ta) and pa.types.is_signed_integer(tb):
                # x % -1 is 0 (the least value's quotient would wrap: Rust's wrapping_rem); a - a
                # is that 0 with a's NULLs
                return pc.if_else(b == pc.scalar(-1), a - a, a - pc.multiply(quotient, b))
            return a - pc.multiply(quotient, b)
        if node.op == "div":
            ta, tb = self.type_of(node.left), self.type_of(node.right)
            if pa.types.is_decimal(ta) or pa.types.is_decimal(tb):
                return self.decimal_quotient(node, a, b)
        return _ARITH[node.op](a, b)

    def decimal_remainder(self, node: Arith, a: pc.Expression, b: pc.Expression) -> pc.Expression | None:
        """``a % b`` of decimals in DataFusion's type, (min(p1 - s1, p2 - s2) + s, s) with s the
        larger scale: ``a`` less ``b`` times the quotient truncated to an integer (computed in
        decimal256, where the quotient's digits fit). ``None``: not decimals."""
        ta, tb = self.type_of(node.left), self.type_of(node.right)
        if not (pa.types.is_decimal(ta) or pa.types.is_decimal(tb)):
            return None
        left, right = self.decimal_shape(node.left, ta, tb), self.decimal_shape(node.right, tb, ta)
        if left is None or right is None:  # a float operand
            return None
        (p1, s1), (p2, s2) = left, right
        a, b = a.cast(pa.decimal256(p1, s1)), b.cast(pa.decimal256(p2, s2))
        quotient = pc.round(pc.divide(a, b), ndigits=0, round_mode="towards_zero")
        scale = max(s1, s2)
        precision = min(_DECIMAL128_DIGITS, min(p1 - s1, p2 - s2) + scale)
        return (a - pc.multiply(quotient, b)).cast(pa.decimal128(max(precision, 1), scale))

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
        # in decimal256: pyarrow's decimal128 quotient of two 20-digit decimals needs 41 digits
        a, b = a.cast(pa.decimal256(*left_shape)), b.cast(pa.decimal256(*right_shape))
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
