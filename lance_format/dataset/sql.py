"""SQL predicates and value expressions to the predicate IR, parsed with sqlglot.

The dialect is pylance's (DataFusion's) filter SQL: comparisons, ``AND``/``OR``/``NOT``,
``[NOT] IN``, ``[NOT] BETWEEN``, ``IS [NOT] NULL/TRUE/FALSE/UNKNOWN``, ``IS [NOT] DISTINCT FROM``,
``[NOT] LIKE/ILIKE``, arithmetic, ``||``, ``CAST``/``TRY_CAST``/``arrow_cast``, literals
(numbers, strings, ``TRUE``/``FALSE``/``NULL``, ``X'..'`` bytes, ``DATE '..'``, ``TIMESTAMP '..'``,
``[..]`` lists), identifiers quoted with double quotes or backticks, struct fields (``a.b``,
``a['b']``), 1-based list subscripts (``a[1]``, NULL out of range) and the functions listed in
:data:`.expr_arrow.FUNCTIONS` plus ``array_has_any``/``array_has_all`` and ``current_date()``.
Anything else is refused with :class:`~lance_format.core.errors.NotSupportedError` naming it.

Names are bound to the schema while the tree is built: a :class:`.Column` carries its type, and a
string literal compared with a date or timestamp becomes a literal of that type (as DataFusion
coerces it). Imported on first use (sqlglot is not needed to read data).
"""

from __future__ import annotations

import decimal
import re

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import expressions as exp
from sqlglot.errors import SqlglotError

from lance_format.core.errors import InvalidInputError, NotSupportedError
from lance_format.dataset import udfs
from lance_format.dataset.expr import (
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
    Or,
    exact_integer_literal,
    exact_number,
)
from lance_format.dataset.expr_arrow import DECIMAL_TEXT, FUNCTIONS, NO_DIGITS_TEXT, current_date
from lance_format.dataset.sql_dialect import (
    LanceSQL,
    enclosing_function,
    refuse_binary_casts_in_functions,
    refuse_foreign_spellings,
    refuse_is_unknown,
    refuse_type_spellings,
)

__all__ = ["ARROW_TYPE_NAMES", "SQL_TYPE_NAMES", "LanceSQL", "parse_sql"]


_COMPARE: dict[type[exp.Expression], str] = {
    exp.EQ: "eq",
    exp.NEQ: "ne",
    exp.GT: "gt",
    exp.GTE: "ge",
    exp.LT: "lt",
    exp.LTE: "le",
}
_ARITH: dict[type[exp.Expression], str] = {
    exp.Add: "add",
    exp.Sub: "sub",
    exp.Mul: "mul",
    exp.Div: "div",
    exp.Mod: "mod",
}
#: SQL type names (as sqlglot spells them) to Arrow types.
_TYPES: dict[str, pa.DataType] = {
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "UTINYINT": pa.uint8(),
    "USMALLINT": pa.uint16(),
    "UINT": pa.uint32(),
    "UBIGINT": pa.uint64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "TEXT": pa.string(),
    "BOOLEAN": pa.bool_(),
    "DATE": pa.date32(),
    # pylance's planner: a TIMESTAMP without precision is microseconds ("to match PyArrow"), so
    # CAST('..123456789' AS TIMESTAMP) drops the last three digits; TIMESTAMP(p) picks the unit.
    "TIMESTAMP": pa.timestamp("us"),
    "DATETIME": pa.timestamp("us"),
    "BINARY": pa.binary(),
}
#: ``TIMESTAMP(p)`` / ``DATETIME(p)``: the precisions pylance accepts and their units.
_PRECISION_UNITS = {0: "s", 3: "ms", 6: "us", 9: "ns"}
#: ``arrow_cast`` type names (DataFusion prints Arrow types this way).
_ARROW_TYPES: dict[str, pa.DataType] = {
    "Int8": pa.int8(),
    "Int16": pa.int16(),
    "Int32": pa.int32(),
    "Int64": pa.int64(),
    "UInt8": pa.uint8(),
    "UInt16": pa.uint16(),
    "UInt32": pa.uint32(),
    "UInt64": pa.uint64(),
    "Float16": pa.float16(),
    "Float32": pa.float32(),
    "Float64": pa.float64(),
    "Utf8": pa.string(),
    "LargeUtf8": pa.large_string(),
    "Binary": pa.binary(),
    "LargeBinary": pa.large_binary(),
    "Boolean": pa.bool_(),
    "Date32": pa.date32(),
    "Date64": pa.date64(),
    "Timestamp(Second, None)": pa.timestamp("s"),
    "Timestamp(Millisecond, None)": pa.timestamp("ms"),
    "Timestamp(Microsecond, None)": pa.timestamp("us"),
    "Timestamp(Nanosecond, None)": pa.timestamp("ns"),
}
#: Arrow types to the names that parse back to them, for printing trees (:mod:`.sql_print`).
SQL_TYPE_NAMES: dict[pa.DataType, str] = {
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.string(): "STRING",
    pa.bool_(): "BOOLEAN",
    pa.date32(): "DATE",
    pa.timestamp("s"): "TIMESTAMP(0)",
    pa.timestamp("ms"): "TIMESTAMP(3)",
    pa.timestamp("us"): "TIMESTAMP(6)",  # not TIMESTAMP: nanoseconds in a function's arguments
    pa.timestamp("ns"): "TIMESTAMP(9)",
    pa.binary(): "BINARY",
}
ARROW_TYPE_NAMES: dict[pa.DataType, str] = {t: name for name, t in _ARROW_TYPES.items()}
#: sqlglot's node classes for functions of the dialect: (IR name, argument names in order).
_FUNCTION_NODES: dict[type[exp.Expression], tuple[str, tuple[str, ...]]] = {
    exp.Lower: ("lower", ("this",)),
    exp.Upper: ("upper", ("this",)),
    exp.Length: ("length", ("this",)),
    exp.Abs: ("abs", ("this",)),
    exp.Round: ("round", ("this", "decimals")),
    exp.Sqrt: ("sqrt", ("this",)),
    exp.StartsWith: ("starts_with", ("this", "expression")),
    exp.EndsWith: ("ends_with", ("this", "expression")),
    exp.Contains: ("contains", ("this", "expression")),
    exp.StrPosition: ("strpos", ("this", "substr")),
    exp.RegexpLike: ("regexp_like", ("this", "expression", "flag")),
    exp.ArrayContains: ("array_has", ("this", "expression")),
    exp.ArraySize: ("array_length", ("this",)),
    exp.DPipe: ("concat_op", ("this", "expression")),
    exp.Reverse: ("reverse", ("this",)),
    exp.Replace: ("replace", ("this", "expression", "replacement")),
}
# sqlglot releases before exp.Trunc parse TRUNC(x) as an anonymous function, which ends in the same
# IR function: the node class is mapped only where it exists (the minimum-versions job runs those).
_TRUNC = getattr(exp, "Trunc", None)
if _TRUNC is not None:
    _FUNCTION_NODES[_TRUNC] = ("trunc", ("this", "decimals"))
#: Arguments sqlglot sets on function nodes that are not the caller's arguments.
_FLAG_ARGUMENTS = frozenset({"safe", "coalesce"})
#: ``ltrim``/``rtrim`` (sqlglot's Trim with a position); pylance refuses ``TRIM(..)`` itself, as it
#: refuses ``CEIL``, ``FLOOR`` and ``SUBSTR``/``SUBSTRING`` ("not supported SQL in lance"): its
#: planner has no case for the syntax nodes they parse to (``btrim`` is a plain function).
_TRIMS = {"LEADING": "ltrim", "TRAILING": "rtrim"}


def _with_offset_as_utc(value: pa.Scalar, to: pa.DataType) -> pa.Scalar | None:
    """A string with a UTC offset (``'2020-01-02 00:00:00+02:00'``) as a timestamp without time zone:
    the UTC instant, as DataFusion reads it; ``None`` when that does not apply or parse."""
    if not (pa.types.is_string(value.type) and pa.types.is_timestamp(to) and to.tz is None):
        return None
    try:
        return value.cast(pa.timestamp(to.unit, tz="UTC")).cast(to)
    except (pa.ArrowException, ValueError, OverflowError):
        return None


#: Timestamp units, coarsest first.
_UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def _in_coarser_unit(value: pa.Scalar, to: pa.DataType) -> pa.Scalar | None:
    """A timestamp string beyond ``to``'s range (years past 2262 in nanoseconds) parsed in the
    finest unit that holds it: compared with a column of that unit or coarser it takes the
    column's unit anyway (see ``coerce``), as DataFusion compares in the coarser unit."""
    if not pa.types.is_timestamp(to) or not pa.types.is_string(value.type):
        return None
    for unit in [u for u, rank in _UNITS.items() if rank < _UNITS[to.unit]][::-1]:
        try:
            return value.cast(pa.timestamp(unit, to.tz))
        except (pa.ArrowException, ValueError, OverflowError):
            continue
    return None


def _truncated_to_unit(value: pa.Scalar, to: pa.DataType) -> pa.Scalar | None:
    """A timestamp string with more fractional digits than ``to``'s unit holds, truncated to it
    (DataFusion drops the extra digits: ``CAST('..123456789' AS TIMESTAMP)`` is ``..123456`` in
    microseconds; before 1970 that is the earlier instant, a floor, where pyarrow's unsafe cast
    rounds toward zero, one unit later: found by the differential run of seed 1302)."""
    if not pa.types.is_timestamp(to) or not pa.types.is_string(value.type):
        return None
    for unit in [u for u, rank in _UNITS.items() if rank > _UNITS[to.unit]]:
        try:
            fine = value.cast(pa.timestamp(unit, to.tz))
        except (pa.ArrowException, ValueError, OverflowError):
            continue
        if not fine.is_valid:
            return pa.scalar(None, to)
        step = 1000 ** (_UNITS[unit] - _UNITS[to.unit])
        return pa.scalar(fine.value // step, to)
    return None


def _integer_decimal_cast(value: pa.Scalar, to: pa.DataType) -> pa.Scalar | None:
    """An integer literal cast to a decimal type, or a decimal literal to an integer type, as
    DataFusion casts them: checked by value (pyarrow refuses ``CAST(1 AS DECIMAL(10, 2))`` by
    type, int64 needing 19 digits) and the fraction truncated toward zero (``CAST(1.5 AS INT)`` is
    1). A NULL scalar of ``to`` when the value does not fit; ``None`` for any other cast."""
    if not value.is_valid:
        return None
    source = value.type
    if pa.types.is_integer(source) and pa.types.is_decimal(to):
        number = decimal.Decimal(value.as_py())
    elif pa.types.is_decimal(source) and pa.types.is_integer(to):
        number = value.as_py().to_integral_value(rounding=decimal.ROUND_DOWN)
    else:
        return None
    exact = exact_number(number, to)
    return pa.scalar(None, to) if exact is None else exact


def _decimal_text(text: str, to: pa.DataType) -> decimal.Decimal | None:
    """Text as DataFusion reads it into decimal type ``to`` (``None``: it does not convert): around
    whitespace, without an exponent, no digits at all as zero (at a scale above 0), rounded half
    away from zero to the scale, within the precision: the literal's twin of the array rule in
    ``ToArrow.visit_cast``."""
    text = text.strip()
    if to.scale > 0 and re.fullmatch(NO_DIGITS_TEXT, text):
        text = "0"
    if not re.fullmatch(DECIMAL_TEXT, text):
        return None
    with decimal.localcontext(prec=len(text) + 80):
        number = decimal.Decimal(text).quantize(decimal.Decimal(1).scaleb(-to.scale), decimal.ROUND_HALF_UP)
    return number if abs(number) < decimal.Decimal(10) ** (to.precision - to.scale) else None


def _is_temporal(t: pa.DataType) -> bool:
    return bool(pa.types.is_temporal(t))


class _Binder:
    """Builds the bound IR of one sqlglot tree."""

    def __init__(self, schema: pa.Schema, text: str) -> None:
        from lance_format.dataset.expr_arrow import ToArrow

        self.schema = schema
        self.text = text
        self.arrow = ToArrow(schema)  # one instance: it caches the types it works out
        # float64 literals compared with a float32 column, by id: taken as float32 (check_literal)
        self.narrowed: set[int] = set()

    def fail(self, what: str) -> InvalidInputError:
        return InvalidInputError(f"invalid filter {self.text!r}: {what}")

    def unsupported(self, node: exp.Expression) -> NotSupportedError:
        return NotSupportedError(
            f"filter {self.text!r}: {node.sql(dialect=LanceSQL)!r} ({type(node).__name__}) is not supported"
        )

    # -- names ---------------------------------------------------------------------------------
    def column(self, parts: list[str]) -> Column:
        top = parts[0]
        if top not in self.schema.names:
            raise self.fail(f"no column {'.'.join(parts)!r}; columns are {self.schema.names}")
        t: pa.DataType = self.schema.field(top).type
        for i, part in enumerate(parts[1:], 1):
            if not pa.types.is_struct(t) or t.get_field_index(part) < 0:
                raise self.fail(f"no field {part!r} in {'.'.join(parts[:i])!r} ({t})")
            t = t.field(part).type
        return Column(tuple(parts), t)

    def subscript(self, node: exp.Bracket) -> Node:
        if len(node.expressions) != 1:
            raise self.unsupported(node)
        base = self.convert(node.this)
        key = self.convert(node.expressions[0])
        t = self.type_of(base)
        if pa.types.is_struct(t) and isinstance(key, Literal) and pa.types.is_string(key.type):
            if not isinstance(base, Column):
                raise self.unsupported(node)
            return self.column([*base.path, str(key.value.as_py())])
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return Call("list_get", (base, key))
        raise self.fail(f"cannot subscript {t} with {key}")

    def type_of(self, node: Node) -> pa.DataType:
        try:
            return self.arrow.type_of(node)
        except (pa.ArrowException, KeyError) as e:
            raise self.fail(str(e).splitlines()[0]) from None

    # -- literals ------------------------------------------------------------------------------
    def literal(self, node: exp.Literal) -> Literal:
        if node.is_string:
            return Literal(pa.scalar(node.this, pa.string()))
        text = node.this
        try:
            value = int(text)
        except ValueError:
            try:
                return Literal(pa.scalar(float(text), pa.float64()))
            except ValueError:
                raise self.fail(f"bad number {text!r}") from None
        if -(2**63) <= value < 2**63:
            return Literal(pa.scalar(value, pa.int64()))
        if 0 <= value < 2**64:
            return Literal(pa.scalar(value, pa.uint64()))
        return Literal(pa.scalar(float(value), pa.float64()))

    def array(self, node: exp.Array) -> Literal:
        items = [self.convert(v) for v in node.expressions]
        if not all(isinstance(i, Literal) for i in items):
            raise self.fail("list literals must hold literals")
        values = [i.value for i in items if isinstance(i, Literal)]
        try:
            arr = pa.array([v.as_py() for v in values])
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise self.fail(f"list literal of mixed types: {e}") from None
        return Literal(pa.scalar(arr.to_pylist(), pa.list_(arr.type)))

    def coerce(self, target: Node, lit: Node) -> Node:
        """A literal compared with a temporal value, as DataFusion types it: a string is parsed as
        the value's type; a timestamp without time zone compared with one with a zone is the wall
        time in that zone."""
        if not isinstance(lit, Literal) or isinstance(target, Literal):
            return lit
        if pa.types.is_timestamp(lit.type) and lit.type.tz is None:
            t = self.type_of(target)
            if pa.types.is_timestamp(t) and t.tz is not None and lit.value.is_valid:
                try:
                    local = pc.assume_timezone(pa.array([lit.value]), timezone=t.tz, ambiguous="earliest")
                except (pa.ArrowException, ValueError) as e:
                    raise self.fail(f"{lit.value} in time zone {t.tz}: {str(e).splitlines()[0]}") from None
                return Literal(local[0].cast(t))
            if pa.types.is_timestamp(t) and t.tz is None and _UNITS[t.unit] < _UNITS[lit.type.unit]:
                # DataFusion compares two units in the coarser one: the literal takes the column's
                # unit (truncated), so column values outside the finer unit's range still compare.
                return Literal(lit.value.cast(t, safe=False))
            return lit
        if not pa.types.is_string(lit.type):
            return lit
        t = self.type_of(target)
        if _is_temporal(t):
            return self.fold(Cast(lit, t))
        return lit

    def fold(self, node: Cast) -> Node:
        """A cast of a literal, computed now (``DATE '..'`` is a date literal, not a cast)."""
        if not isinstance(node.arg, Literal):
            return node
        if pa.types.is_string(node.arg.type) and pa.types.is_decimal(node.to) and node.arg.value.is_valid:
            number = _decimal_text(str(node.arg.value.as_py()), node.to)
            if number is not None:
                return Literal(pa.scalar(number, node.to))
            if not node.safe:
                return Literal(pa.scalar(None, node.to))
            raise self.fail(f"cannot cast {node.arg} to {node.to}")
        if pa.types.is_integer(node.arg.type) and (
            pa.types.is_binary(node.to) or pa.types.is_large_binary(node.to)
        ):
            value = udfs.int_bytes_of(pa.array([node.arg.value], node.arg.type))[0]
            return Literal(value.cast(node.to))
        exact = _integer_decimal_cast(node.arg.value, node.to)
        if exact is not None:
            if exact.is_valid or not node.safe:
                return Literal(exact)
            raise self.fail(f"cannot cast {node.arg} to {node.to}: the value does not fit")
        # Timestamps truncate to a coarser unit, as DataFusion's cast does.
        truncates = pa.types.is_timestamp(node.arg.type) and pa.types.is_timestamp(node.to)
        try:
            return Literal(node.arg.value.cast(node.to, safe=node.safe and not truncates))
        except (pa.ArrowException, ValueError, OverflowError) as e:
            offset = _with_offset_as_utc(node.arg.value, node.to)
            if offset is not None:
                return Literal(offset)
            coarser = _in_coarser_unit(node.arg.value, node.to)
            if coarser is not None:
                return Literal(coarser)
            truncated = _truncated_to_unit(node.arg.value, node.to)
            if truncated is not None:
                return Literal(truncated)
            if not node.safe:
                return Literal(pa.scalar(None, node.to))
            raise self.fail(f"cannot cast {node.arg} to {node.to}: {str(e).splitlines()[0]}") from None

    def sql_type(self, node: exp.DataType) -> pa.DataType:
        name = node.this.name if hasattr(node.this, "name") else str(node.this)
        if name == "DECIMAL" and node.expressions:
            precision, scale = (int(p.this.this) for p in node.expressions[:2])
            return pa.decimal128(precision, scale)
        if name in ("TIMESTAMP", "DATETIME") and node.expressions:
            precision = node.expressions[0].this
            unit = _PRECISION_UNITS.get(int(precision.this)) if isinstance(precision, exp.Literal) else None
            if unit is None:
                raise self.fail(f"unsupported datetime resolution {precision.sql()} (0, 3, 6 or 9)")
            return pa.timestamp(unit)
        if name in ("TIMESTAMP", "DATETIME") and enclosing_function(node) is not None:
            # A function's arguments are planned by DataFusion's SQL planner, whose TIMESTAMP is
            # nanoseconds (pylance's own, for the rest, is microseconds): coalesce(ts_ns,
            # CAST(x AS TIMESTAMP)) keeps nanoseconds, array_has(l_us, TIMESTAMP '..') is refused;
            # it has no DATETIME ("Unsupported SQL type DATETIME").
            if name == "DATETIME":
                raise NotSupportedError(f"filter {self.text!r}: DATETIME as a function's argument")
            return pa.timestamp("ns")
        t = _TYPES.get(name)
        if t is None:
            raise NotSupportedError(
                f"filter {self.text!r}: CAST to {node.sql(dialect=LanceSQL)} is not supported"
            )
        return t

    # -- the tree ------------------------------------------------------------------------------
    def convert(self, node: exp.Expression) -> Node:
        if self.narrowed and id(node) in self.narrowed:
            self.narrowed.discard(id(node))
            wide = self.convert(node)
            self.narrowed.add(id(node))
            if isinstance(wide, Literal) and pa.types.is_float64(wide.type):
                return Literal(pc.cast(wide.value, pa.float32(), safe=False))
            return wide
        if isinstance(node, exp.Paren):
            return self.convert(node.this)
        if isinstance(node, exp.Column):
            return self.column([p.name for p in node.parts])
        if isinstance(node, exp.Dot):
            base = self.convert(node.this)
            if not isinstance(base, Column) or not isinstance(node.expression, exp.Identifier):
                raise self.unsupported(node)
            return self.column([*base.path, node.expression.name])
        if isinstance(node, exp.Bracket):
            return self.subscript(node)
        if isinstance(node, exp.Literal):
            return self.literal(node)
        if isinstance(node, exp.HexString):
            try:
                return Literal(pa.scalar(bytes.fromhex(node.this), pa.binary()))
            except ValueError:
                raise self.fail(f"bad hex string X'{node.this}'") from None
        if isinstance(node, exp.Boolean):
            return Literal(pa.scalar(bool(node.this), pa.bool_()))
        if isinstance(node, exp.Null):
            return Literal(pa.scalar(None, pa.null()))
        if isinstance(node, exp.Array):
            return self.array(node)
        if isinstance(node, exp.Neg):
            inner = self.convert(node.this)
            if isinstance(inner, Literal) and inner.value.is_valid:
                value = -inner.value.as_py()
                t = pa.int64() if pa.types.is_unsigned_integer(inner.type) else inner.type
                try:
                    return Literal(pa.scalar(value, t))
                except (pa.ArrowException, OverflowError):
                    raise self.fail(f"number {value} is out of range") from None
            if pa.types.is_unsigned_integer(self.type_of(inner)):
                # DataFusion: "Negation only supports numeric, interval and timestamp types" (of
                # any unsigned value: -u64, -(array_length(l)); -(coalesce(u64, 1)) is a decimal).
                raise self.fail(f"cannot negate {inner} of unsigned type {self.type_of(inner)}")
            return Negate(inner)
        if isinstance(node, exp.Not):
            return Not(_logic_operand(self.convert(node.this)))
        if isinstance(node, exp.And | exp.Or):
            # A chain of one connective is flattened without recursion (long generated filters).
            kind = type(node)
            operands: list[exp.Expression] = []
            stack: list[exp.Expression] = [node]
            while stack:
                current = stack.pop()
                while isinstance(current, exp.Paren) and type(current.this) is kind:
                    current = current.this
                if type(current) is kind:
                    stack.extend((current.expression, current.this))
                else:
                    operands.append(current)
            return (And if kind is exp.And else Or)(tuple(_logic_operand(self.convert(o)) for o in operands))
        op = _COMPARE.get(type(node))
        if op is not None:
            return self.compare(op, self.convert(node.this), self.convert(node.expression))
        if isinstance(node, exp.NullSafeEQ | exp.NullSafeNEQ):
            a, b = self.convert(node.this), self.convert(node.expression)
            b, a = self.coerce(a, b), self.coerce(b, a)
            same = Or((IsBool(Compare("eq", a, b), True), And((IsNull(a), IsNull(b)))))
            return same if isinstance(node, exp.NullSafeEQ) else Not(same)
        arith = _ARITH.get(type(node))
        if arith is not None:
            left, right = self.convert(node.this), self.convert(node.expression)
            # SQL: arithmetic with NULL is NULL (of the other operand's type).
            if isinstance(right, Literal) and pa.types.is_null(right.type):
                right = Literal(pa.scalar(None, self.type_of(left)))
            if isinstance(left, Literal) and pa.types.is_null(left.type):
                left = Literal(pa.scalar(None, self.type_of(right)))
            return Arith(arith, left, right)
        if isinstance(node, exp.Is):
            return self.is_(node)
        if isinstance(node, exp.In):
            return self.in_(node)
        if isinstance(node, exp.Between):
            value = self.convert(node.this)
            low, high = self.convert(node.args["low"]), self.convert(node.args["high"])
            return Between(value, self.coerce(value, low), self.coerce(value, high))
        if isinstance(node, exp.Like | exp.ILike):
            return self.like(node, "\\")
        if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like | exp.ILike):
            esc = self.convert(node.expression)
            if not isinstance(esc, Literal) or esc.value.as_py() != "\\":
                raise NotSupportedError(f"filter {self.text!r}: LIKE ... ESCAPE other than '\\\\'")
            return self.like(node.this, "\\")
        if isinstance(node, exp.TryCast):
            return self.fold(Cast(self.convert(node.this), self.sql_type(node.to), safe=False))
        if isinstance(node, exp.Cast):
            return self.fold(Cast(self.convert(node.this), self.sql_type(node.to)))
        if isinstance(node, exp.IsNan):
            return IsNan(self.convert(node.this))
        if isinstance(node, exp.CurrentDate):
            return Literal(pa.scalar(current_date(), pa.date32()))
        if isinstance(node, exp.Trim):
            return self.trim(node)
        if isinstance(node, exp.Concat):  # ConcatWs is a Concat too: its separator comes first
            name = "concat_ws" if isinstance(node, exp.ConcatWs) else "concat"
            return Call(name, tuple(self.convert(e) for e in node.expressions))
        if isinstance(node, exp.Greatest | exp.Least | exp.Nullif | exp.Pow | exp.Ln | exp.Exp | exp.Log):
            return self.math(node)
        if isinstance(node, exp.Coalesce):
            return Call("coalesce", tuple(self.convert(e) for e in [node.this, *node.expressions]))
        if isinstance(node, exp.ArrayContainsAll):
            return self.array_has_set("array_has_all", [node.this, node.expression])
        if isinstance(node, exp.DPipe):
            return self.concat_op(node)
        spec = _FUNCTION_NODES.get(type(node))
        if spec is not None:
            name, arg_names = spec
            self.refuse_dropped_arguments(node, arg_names)
            return Call(
                name, tuple(self.convert(node.args[a]) for a in arg_names if node.args.get(a) is not None)
            )
        if isinstance(node, exp.Anonymous):
            return self.anonymous(node)
        raise self.unsupported(node)

    # -- literals against columns, as pylance's filter planner resolves them -------------------
    def check_literals(self, node: exp.Expression) -> None:
        """Refuse a literal compared with a column of a type it does not convert to, as pylance's
        filter planner does ("Received literal Int64(1000) and could not convert to literal of
        type 'Int8'"): in comparisons (a column or struct field against a literal), ``IN`` lists
        and ``BETWEEN`` bounds of a plain column, under ``AND``/``OR`` (not under ``NOT (..)``,
        which pylance leaves as it is)."""
        stack = [node]
        while stack:
            current = stack.pop()
            while isinstance(current, exp.Paren):
                current = current.this
            if isinstance(current, exp.And | exp.Or):
                stack.extend((current.this, current.expression))
                continue
            if isinstance(current, exp.Not) and isinstance(current.this, exp.In | exp.Between):
                current = current.this  # ``x NOT IN (..)``, ``x NOT BETWEEN``
            if type(current) in _COMPARE or isinstance(current, exp.NullSafeEQ | exp.NullSafeNEQ):
                left, right = _unparen(current.this), _unparen(current.expression)
                for col, lit in ((left, right), (right, left)):
                    if isinstance(col, exp.Column | exp.Dot | exp.Bracket) and _is_literal(lit):
                        self.check_literal(col, lit)
            elif isinstance(current, exp.In) and _is_plain_column(current.this):
                for item in current.expressions:
                    if _is_literal(_unparen(item)):
                        self.check_literal(current.this, _unparen(item))
            elif isinstance(current, exp.Between) and _is_plain_column(current.this):
                for bound in (current.args["low"], current.args["high"]):
                    if _is_literal(_unparen(bound)):
                        self.check_literal(current.this, _unparen(bound))

    def check_literal(self, column: exp.Expression, literal: exp.Expression) -> None:
        target = self.convert(column)
        lit = self.convert(literal)
        if not isinstance(target, Column) or not isinstance(lit, Literal) or not lit.value.is_valid:
            return  # st['x'] is a column; l[1] (a list element) is not checked by pylance either
        t = self.type_of(target)
        if pa.types.is_dictionary(t):
            t = t.value_type
        if not literal_converts(lit.value, t):
            raise self.fail(
                f"the literal {literal.sql(dialect=LanceSQL)} ({lit.type}) does not convert to "
                f"{column.sql(dialect=LanceSQL)}'s type {t}"
            )
        if pa.types.is_float32(t) and pa.types.is_float64(lit.type):
            # pylance's planner takes the literal in the column's type: f32 = 1e300 holds for
            # infinity, f32 = 1e-50 for zero (not under NOT (..), which it leaves as it is)
            self.narrowed.add(id(literal))

    def unwrap_cast(self, cast: Node, lit: Node) -> tuple[Node, Node]:
        """``CAST(ts AS <timestamp>)`` compared with a timestamp literal, as DataFusion's optimizer
        rewrites it: the value in its own unit against the literal converted to that unit
        (truncated when finer), so ``CAST(ns AS TIMESTAMP) = CAST('..123456789' AS TIMESTAMP)``
        compares nanoseconds with ``..123456000``."""
        if not (isinstance(cast, Cast) and isinstance(lit, Literal) and pa.types.is_timestamp(lit.type)):
            return cast, lit
        source = self.type_of(cast.arg)
        timestamps = (source, cast.to, lit.type)
        if not all(pa.types.is_timestamp(t) and t.tz is None for t in timestamps):
            return cast, lit
        # The literal first takes the cast's unit (DataFusion coerces the comparison to it), then
        # the value's.
        return cast.arg, Literal(lit.value.cast(cast.to, safe=False).cast(source, safe=False))

    def compare(self, op: str, left: Node, right: Node) -> Node:
        left, right = self.unwrap_cast(left, right)
        right, left = self.unwrap_cast(right, left)
        right, left = self.coerce(left, right), self.coerce(right, left)
        for side in (left, right):
            if isinstance(side, Literal) and not side.value.is_valid:
                # SQL: a comparison with NULL is NULL.
                return Literal(pa.scalar(None, pa.bool_()))
        return Compare(op, left, right)

    def is_(self, node: exp.Is) -> Node:
        target = self.convert(node.this)
        what = node.expression
        if isinstance(what, exp.Null):
            return IsNull(target)
        if isinstance(what, exp.Boolean):
            return IsBool(target, bool(what.this))
        raise self.unsupported(node)

    def in_(self, node: exp.In) -> Node:
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise NotSupportedError(f"filter {self.text!r}: IN (subquery) is not supported")
        value = self.convert(node.this)
        options: list[Literal] = []
        others: list[Node] = []  # items that are not constants: x IN (y, 1) is x = y OR x IN (1)
        has_null = False
        for v in node.expressions:
            item = self.coerce(value, self.convert(v))
            if not isinstance(item, Literal):
                others.append(self.compare("eq", value, item))
            elif item.value.is_valid:
                options.append(item)
            else:
                has_null = True
        found: Node = InList(value, tuple(options))
        if others:
            found = (
                Or((*others, found)) if options else (others[0] if len(others) == 1 else Or(tuple(others)))
            )
        # SQL: x IN (.., NULL) is TRUE when found, else NULL (so NOT IN never selects).
        return Or((found, Literal(pa.scalar(None, pa.bool_())))) if has_null else found

    def like(self, node: exp.Like | exp.ILike, escape: str) -> Node:
        pattern = self.convert(node.expression)
        target = self.convert(node.this)
        like: Node
        if not isinstance(pattern, Literal):
            pt = self.type_of(pattern)
            if not (pa.types.is_string(pt) or pa.types.is_large_string(pt)):
                raise self.fail("LIKE needs a string pattern")
            # a pattern per row (s LIKE p): the "like"/"ilike" functions, not the Like node
            like = Call("ilike" if isinstance(node, exp.ILike) else "like", (target, pattern))
            return Not(like) if node.args.get("negate") else like
        if not pattern.value.is_valid:  # s LIKE NULL is NULL
            return Literal(pa.scalar(None, pa.bool_()))
        if not pa.types.is_string(pattern.type):
            raise self.fail("LIKE needs a string pattern")
        like = Like(target, str(pattern.value.as_py()), isinstance(node, exp.ILike))
        # sqlglot parses ``s NOT LIKE p`` as one node with ``negate`` set, not as NOT(LIKE).
        return Not(like) if node.args.get("negate") else like

    def concat_op(self, node: exp.DPipe) -> Node:
        """``a || b``; a literal next to a column must convert to the column's type, as pylance's
        planner checks it (``s || 1`` and ``i || 'x'`` are refused, ``upper(s) || 1`` is not)."""
        left, right = self.convert(node.this), self.convert(node.expression)
        for col, lit in ((left, right), (right, left)):
            if isinstance(col, Column) and isinstance(lit, Literal) and lit.value.is_valid:
                t = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
                text = pa.types.is_string(t) or pa.types.is_large_string(t)
                if not (pa.types.is_string(lit.type) if text else literal_converts(lit.value, t)):
                    raise self.fail(
                        f"the literal {lit.value} ({lit.type}) does not convert to {col}'s type {t}"
                    )
        return Call("concat_op", (left, right))

    def refuse_dropped_arguments(self, node: exp.Expression, taken: tuple[str, ...]) -> None:
        """Refuse arguments sqlglot reads into a function's node that the IR call would drop
        (``strpos(s, 'a', 2)``'s position, ``round(x, 1, 2)``, ``length(s, 1)``): pylance refuses
        them ("expects 2 arguments"), and dropping one answered otherwise (``array_length(l, 2)``
        is NULL in pylance). ``array_length(l, 1)`` is the length."""
        for key, value in node.args.items():
            if key in taken or key in _FLAG_ARGUMENTS or value in (None, False, []):
                continue
            if isinstance(node, exp.ArraySize) and key == "expression":
                dim = self.convert(value)
                if isinstance(dim, Literal) and pa.types.is_integer(dim.type) and dim.value.as_py() == 1:
                    continue
            raise NotSupportedError(
                f"filter {self.text!r}: {node.sql(dialect=LanceSQL)!r}: too many arguments"
            )

    def math(self, node: exp.Expression) -> Node:
        """``greatest``/``least``/``nullif`` and the float functions (``log(b, x)``: base first)."""
        if isinstance(node, exp.Greatest | exp.Least):
            name = "greatest" if isinstance(node, exp.Greatest) else "least"
            return Call(name, tuple(self.convert(e) for e in [node.this, *node.expressions]))
        names: dict[type[exp.Expression], str] = {exp.Nullif: "nullif", exp.Pow: "power", exp.Ln: "ln"}
        names.update({exp.Exp: "exp", exp.Log: "log"})
        parts = [node.this] + ([node.expression] if node.args.get("expression") is not None else [])
        return Call(names[type(node)], tuple(self.convert(e) for e in parts))

    def trim(self, node: exp.Trim) -> Node:
        position = node.args.get("position")
        name = _TRIMS.get(str(position).upper()) if position else None
        if name is None:
            raise self.unsupported(node)
        args = [self.convert(node.this)]
        if node.expression is not None:
            args.append(self.convert(node.expression))
        return Call(name, tuple(args))

    def array_has_set(self, name: str, raw: list[exp.Expression]) -> Node:
        lists, values = self.convert(raw[0]), self.convert(raw[1])
        if not isinstance(values, Literal) or not pa.types.is_list(values.type):
            raise self.fail(f"{name} needs a list literal as its second argument")
        items = [Literal(v) for v in values.value.values] if values.value.is_valid else []
        if not values.value.is_valid:
            return Literal(pa.scalar(None, pa.bool_()))
        tests: tuple[Node, ...] = tuple(Call("array_has", (lists, item)) for item in items)
        if name == "array_has_any":
            return Or(tests) if tests else Literal(pa.scalar(False))
        return And(tests) if tests else Literal(pa.scalar(True))

    def anonymous(self, node: exp.Anonymous) -> Node:
        name = str(node.this).lower()
        if name == "isnan" and len(node.expressions) == 1:
            return IsNan(self.convert(node.expressions[0]))
        if name in ("array_has_any", "array_has_all") and len(node.expressions) == 2:
            return self.array_has_set(name, list(node.expressions))
        if name == "arrow_cast" and len(node.expressions) == 2:
            target = self.convert(node.expressions[1])
            spelled = target.value.as_py() if isinstance(target, Literal) else None
            t = _ARROW_TYPES.get(spelled) if isinstance(spelled, str) else None
            if t is None:
                raise NotSupportedError(f"filter {self.text!r}: arrow_cast to {spelled!r} is not supported")
            return self.fold(Cast(self.convert(node.expressions[0]), t))
        aliases = {
            "btrim": "trim",
            "char_length": "length",
            "character_length": "length",
            "array_contains": "array_has",
            "list_has": "array_has",
            "list_length": "array_length",
            "cardinality": "array_length",
            "instr": "strpos",
            "substring": "substr",
        }
        if name in ("substr", "substring", "trim", "ceil", "floor"):
            raise NotSupportedError(f"filter {self.text!r}: {name.upper()}() is not supported")
        name = aliases.get(name, name)
        if name == "octet_length" and len(node.expressions) == 1:
            arg = self.convert(node.expressions[0])
            t = self.type_of(arg)
            if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t)):
                raise self.fail(f"octet_length() needs a string, got {t}")
            return Call(name, (arg,))
        if name not in FUNCTIONS or name in ("list_get", "concat_op", "like", "ilike"):
            raise NotSupportedError(f"filter {self.text!r}: function {name}() is not supported")
        return Call(name, tuple(self.convert(e) for e in node.expressions))


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _is_literal(node: exp.Expression) -> bool:
    """A literal as pylance's planner sees one: a number (``-129`` included, not ``-(129)``), a
    string, a boolean (not NULL, which converts to every type)."""
    if isinstance(node, exp.Neg):
        return isinstance(node.this, exp.Literal) and not node.this.is_string
    return isinstance(node, exp.Literal | exp.Boolean)


def _is_plain_column(node: exp.Expression) -> bool:
    node = _unparen(node)
    return isinstance(node, exp.Column) and len(node.parts) == 1


def literal_converts(value: pa.Scalar, t: pa.DataType) -> bool:
    """Whether pylance converts a literal to the type ``t`` of the column it meets (numbers,
    strings and booleans against number, string and boolean columns, strings against date and
    timestamp columns, which it never reads as dates; other pairs are let through)."""
    lt = value.type
    number = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
    text = pa.types.is_string(t) or pa.types.is_large_string(t)
    temporal = pa.types.is_date(t) or pa.types.is_timestamp(t)
    if not (number or text or temporal or pa.types.is_boolean(t)):
        return True
    if temporal and not pa.types.is_string(lt):
        return True
    if pa.types.is_integer(lt):
        if pa.types.is_floating(t):
            return True
        if pa.types.is_integer(t) or pa.types.is_decimal(t):
            return exact_integer_literal(value, t)[1] == 0
        return False
    if pa.types.is_floating(lt):
        return bool(pa.types.is_floating(t))
    if pa.types.is_string(lt):
        return bool(text)  # not as a date or timestamp either: pylance refuses d > '2020-01-01'
    if pa.types.is_boolean(lt):
        return bool(pa.types.is_boolean(t))
    return True


def as_condition(node: Node) -> Node:
    """``node`` where a filter wants a boolean: ``regexp_match(...)`` (a list of captures, NULL when
    nothing matches) counts as matched, ``regexp_match(...) IS NOT NULL``, as pylance coerces it."""
    if isinstance(node, Call) and node.name == "regexp_match":
        return Not(IsNull(node))
    return node


def _logic_operand(node: Node) -> Node:
    """An operand of ``NOT``/``AND``/``OR``: :func:`as_condition`, and an untyped ``NULL`` as a
    boolean NULL (``b OR NULL``, as DataFusion coerces it; a bare ``NULL`` filter stays refused)."""
    if isinstance(node, Literal) and pa.types.is_null(node.type):
        return Literal(pa.scalar(None, pa.bool_()))
    return as_condition(node)


def parse_sql(text: str, schema: pa.Schema, *, predicate: bool = False, literals: bool | None = None) -> Node:
    """The bound IR of a SQL predicate or value expression.

    ``predicate``: ``text`` is a filter. ``literals`` (default: ``predicate``): its literals must
    convert to the types of the columns they are compared with (:meth:`_Binder.check_literals`),
    as pylance checks them in filters and computed columns alike.

    Raises
    ------
    InvalidInputError
        Unparsable text, unknown columns, ill-typed literals.
    NotSupportedError
        A construct outside the dialect (named in the message).
    """
    try:
        tree = sqlglot.parse_one(text, dialect=LanceSQL)
    except (SqlglotError, RecursionError) as e:
        raise InvalidInputError(f"invalid filter {text!r}: {str(e).splitlines()[0]}") from None
    if tree is None:
        raise InvalidInputError(f"invalid filter {text!r}")
    refuse_is_unknown(text)
    refuse_foreign_spellings(text)
    refuse_type_spellings(text)
    refuse_binary_casts_in_functions(tree)  # type: ignore[arg-type]
    try:
        binder = _Binder(schema, text)
        if predicate if literals is None else literals:
            binder.check_literals(tree)  # type: ignore[arg-type]
        return binder.convert(tree)  # type: ignore[arg-type]
    except RecursionError:
        raise InvalidInputError(f"invalid filter {text[:80]!r}...: nested too deeply") from None
