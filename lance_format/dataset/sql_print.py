"""Bound predicate trees back to SQL text: the canonical serialisation of a filter.

The text parses (:func:`.sql.parse_sql`) back to a tree with the same answers: literals keep their
Arrow types (``arrow_cast(1, 'Int32')``), names are quoted part by part. The server writes it into
scan tickets and delete transactions, so a filter that arrived as Substrait travels and is recorded
as SQL. A tree holding something SQL cannot say (an opaque pyarrow Expression, a decimal literal)
raises :class:`~lance_format.core.errors.NotSupportedError`.
"""

from __future__ import annotations

import math

import pyarrow as pa

from lance_format.core.errors import NotSupportedError
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
    Opaque,
    Or,
    Visitor,
)
from lance_format.dataset.sql import ARROW_TYPE_NAMES, SQL_TYPE_NAMES

__all__ = ["to_sql"]

_COMPARE = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%"}
#: IR functions printed under another name (the one the SQL front end reads back to them).
_NAMES = {"trim": "btrim"}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _typed(text: str, t: pa.DataType, default: pa.DataType) -> str:
    """``text`` (which parses as ``default``) as a value of type ``t``."""
    if t == default:
        return text
    name = ARROW_TYPE_NAMES.get(t)
    if name is None:
        raise NotSupportedError(f"a literal of type {t} has no SQL spelling")
    return f"arrow_cast({text}, {_string(name)})"


class _Printer(Visitor[str]):
    def generic(self, node: Node) -> str:
        raise NotSupportedError(f"{type(node).__name__} has no SQL spelling")

    def visit_column(self, node: Column) -> str:
        return ".".join(_quote(p) for p in node.path)

    def visit_literal(self, node: Literal) -> str:
        v, t = node.value, node.type
        if not v.is_valid:
            return "NULL" if pa.types.is_null(t) else _typed("NULL", t, pa.null())
        py = v.as_py()
        if pa.types.is_boolean(t):
            return "TRUE" if py else "FALSE"
        if pa.types.is_integer(t):
            text = str(py) if py >= 0 else f"({py})"
            return _typed(text, t, pa.int64() if -(2**63) <= py < 2**63 else pa.uint64())
        if pa.types.is_floating(t):
            if math.isnan(py) or math.isinf(py):
                text = f"CAST({_string(str(py))} AS DOUBLE)"
            else:
                text = repr(float(py))
                text = f"({text})" if text.startswith("-") else text
                if "e" not in text and "." not in text:
                    text += ".0"
            return _typed(text, t, pa.float64())
        if pa.types.is_string(t):
            return _string(py)
        if pa.types.is_binary(t):
            return f"X'{py.hex()}'"
        if pa.types.is_date32(t):
            return f"DATE '{py.isoformat()}'"
        if pa.types.is_timestamp(t) and t.tz is None:
            # Printed in the value's own unit: TIMESTAMP alone is microseconds (pylance's).
            return f"CAST('{v.cast(pa.string()).as_py()}' AS {SQL_TYPE_NAMES[t]})"
        if isinstance(t, pa.Decimal128Type) and t.scale >= 0:
            return f"CAST({_string(str(py))} AS DECIMAL({t.precision}, {t.scale}))"
        if pa.types.is_list(t):
            items = [self.visit_literal(Literal(x)) for x in v.values]
            text = f"[{', '.join(items)}]"
            if not items or t.value_type not in (pa.int64(), pa.float64(), pa.string(), pa.bool_()):
                raise NotSupportedError(f"a list literal of type {t} has no SQL spelling")
            return text
        raise NotSupportedError(f"a literal of type {t} has no SQL spelling")

    def visit_compare(self, node: Compare) -> str:
        return f"({self.visit(node.left)} {_COMPARE[node.op]} {self.visit(node.right)})"

    def visit_and(self, node: And) -> str:
        return "(" + " AND ".join(self.visit(a) for a in node.args) + ")"

    def visit_or(self, node: Or) -> str:
        return "(" + " OR ".join(self.visit(a) for a in node.args) + ")"

    def visit_not(self, node: Not) -> str:
        return f"(NOT {self.visit(node.arg)})"

    def visit_inlist(self, node: InList) -> str:
        if not node.options:
            # NULL for a NULL value, else FALSE: what ``x IN ()`` means.
            return f"(({self.visit(node.value)} IS NULL) AND arrow_cast(NULL, 'Boolean'))"
        return f"({self.visit(node.value)} IN ({', '.join(self.visit(o) for o in node.options)}))"

    def visit_between(self, node: Between) -> str:
        return f"({self.visit(node.value)} BETWEEN {self.visit(node.low)} AND {self.visit(node.high)})"

    def visit_isnull(self, node: IsNull) -> str:
        return f"({self.visit(node.arg)} IS NULL)"

    def visit_isnan(self, node: IsNan) -> str:
        return f"isnan({self.visit(node.arg)})"

    def visit_isbool(self, node: IsBool) -> str:
        what = {True: "TRUE", False: "FALSE", None: "NULL"}[node.value]
        return f"({self.visit(node.arg)} IS {what})"

    def visit_like(self, node: Like) -> str:
        op = "ILIKE" if node.ignore_case else "LIKE"
        return f"({self.visit(node.arg)} {op} {_string(node.pattern)})"

    def visit_cast(self, node: Cast) -> str:
        name = SQL_TYPE_NAMES.get(node.to)
        if isinstance(node.to, pa.Decimal128Type) and node.to.scale >= 0:
            name = f"DECIMAL({node.to.precision}, {node.to.scale})"
        if name is not None:
            return f"{'CAST' if node.safe else 'TRY_CAST'}({self.visit(node.arg)} AS {name})"
        arrow = ARROW_TYPE_NAMES.get(node.to)
        if arrow is None or not node.safe:
            raise NotSupportedError(f"a cast to {node.to} has no SQL spelling")
        return f"arrow_cast({self.visit(node.arg)}, {_string(arrow)})"

    def visit_arith(self, node: Arith) -> str:
        return f"({self.visit(node.left)} {_ARITH[node.op]} {self.visit(node.right)})"

    def visit_negate(self, node: Negate) -> str:
        return f"(-{self.visit(node.arg)})"

    def visit_call(self, node: Call) -> str:
        args = [self.visit(a) for a in node.args]
        if node.name == "list_get":
            return f"{args[0]}[{args[1]}]"
        if node.name == "concat_op":
            return f"({args[0]} || {args[1]})"
        if node.name in ("like", "ilike"):
            return f"({args[0]} {node.name.upper()} {args[1]})"
        return f"{_NAMES.get(node.name, node.name)}({', '.join(args)})"

    def visit_opaque(self, node: Opaque) -> str:
        raise NotSupportedError(f"the pyarrow Expression {node.text} has no SQL spelling")


def to_sql(node: Node) -> str:
    """SQL text that parses back to a tree with the same answers as ``node``.

    Raises
    ------
    NotSupportedError
        ``node`` holds something the SQL dialect cannot say.
    """
    return _Printer().visit(node)
