"""The predicate IR: one typed tree for filters, whatever language they arrived in.

Three front ends build it (SQL text in :mod:`.sql`, Substrait bytes in :mod:`._serde`, pyarrow
Expressions in :mod:`.expr_arrow`), each binding names to the dataset schema as it goes: a
:class:`Column` carries its path and Arrow type, a :class:`Literal` its Arrow scalar, so later
passes never look a name up again. Visitors (:class:`Visitor`) turn the tree into a pyarrow
compute Expression (:mod:`.expr_arrow`) or into zone-map pruning decisions (:mod:`.pruning`).

Nodes are frozen dataclasses, compared and hashed by value. SQL's three-valued logic is the
contract for every node: a comparison with NULL is NULL, ``IS TRUE`` / ``IS UNKNOWN`` never are.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeAlias, TypeVar

import pyarrow as pa

__all__ = [
    "ARITHMETIC",
    "COMPARISONS",
    "And",
    "Arith",
    "Between",
    "Call",
    "Cast",
    "Column",
    "Compare",
    "InList",
    "IsBool",
    "IsNan",
    "IsNull",
    "Like",
    "Literal",
    "Negate",
    "Node",
    "Not",
    "Opaque",
    "Or",
    "Predicate",
    "Visitor",
    "children",
    "columns_of",
    "exact_integer_literal",
    "exact_number",
    "holds_out_of_range",
    "may_be_nan",
    "walk",
]

#: Comparison operators, by the names pyarrow's compute functions use.
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
#: Comparison with the operands swapped: ``a < b`` is ``b > a``.
FLIPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
#: Arithmetic operators.
ARITHMETIC = ("add", "sub", "mul", "div", "mod")


class _Node:
    """Base of the IR nodes (gives every node :meth:`children`)."""

    _child_fields: ClassVar[tuple[str, ...]] = ()


@dataclass(frozen=True)
class Column(_Node):
    """A column, or a child of a struct column: ``path`` from the top-level field down."""

    path: tuple[str, ...]
    type: pa.DataType = field(compare=False)

    def __str__(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Literal(_Node):
    """A constant; ``value`` is an Arrow scalar (a NULL literal is an invalid scalar of its type)."""

    value: pa.Scalar

    @property
    def type(self) -> pa.DataType:
        return self.value.type

    def __str__(self) -> str:
        return repr(self.value.as_py())


@dataclass(frozen=True)
class Compare(_Node):
    """``left <op> right`` for ``op`` in :data:`COMPARISONS`."""

    op: str
    left: Node
    right: Node
    _child_fields: ClassVar[tuple[str, ...]] = ("left", "right")


@dataclass(frozen=True)
class And(_Node):
    """Every argument is true (Kleene logic)."""

    args: tuple[Node, ...]
    _child_fields: ClassVar[tuple[str, ...]] = ("args",)


@dataclass(frozen=True)
class Or(_Node):
    """Some argument is true (Kleene logic)."""

    args: tuple[Node, ...]
    _child_fields: ClassVar[tuple[str, ...]] = ("args",)


@dataclass(frozen=True)
class Not(_Node):
    """Negation (NOT NULL is NULL)."""

    arg: Node
    _child_fields: ClassVar[tuple[str, ...]] = ("arg",)


@dataclass(frozen=True)
class InList(_Node):
    """``value IN (options...)``; the options are literals of one type (NULLs dropped)."""

    value: Node
    options: tuple[Literal, ...]
    _child_fields: ClassVar[tuple[str, ...]] = ("value",)


@dataclass(frozen=True)
class Between(_Node):
    """``low <= value AND value <= high``."""

    value: Node
    low: Node
    high: Node
    _child_fields: ClassVar[tuple[str, ...]] = ("value", "low", "high")


@dataclass(frozen=True)
class IsNull(_Node):
    """``arg IS NULL`` (never NULL itself)."""

    arg: Node
    _child_fields: ClassVar[tuple[str, ...]] = ("arg",)


@dataclass(frozen=True)
class IsNan(_Node):
    """``isnan(arg)`` (NULL for NULL)."""

    arg: Node
    _child_fields: ClassVar[tuple[str, ...]] = ("arg",)


@dataclass(frozen=True)
class IsBool(_Node):
    """``arg IS TRUE`` / ``IS FALSE`` / ``IS UNKNOWN`` (``value`` ``None``); never NULL."""

    arg: Node
    value: bool | None
    _child_fields: ClassVar[tuple[str, ...]] = ("arg",)


@dataclass(frozen=True)
class Like(_Node):
    """SQL ``LIKE`` (``%`` any run, ``_`` one character, ``\\`` escapes)."""

    arg: Node
    pattern: str
    ignore_case: bool = False
    _child_fields: ClassVar[tuple[str, ...]] = ("arg",)


@dataclass(frozen=True)
class Cast(_Node):
    """A cast to ``to``; ``safe`` casts fail on a value that does not fit, ``TRY_CAST`` gives NULL."""

    arg: Node
    to: pa.DataType
    safe: bool = True
    _child_fields: ClassVar[tuple[str, ...]] = ("arg",)


@dataclass(frozen=True)
class Arith(_Node):
    """``left <op> right`` for ``op`` in :data:`ARITHMETIC` (integer overflow is an error)."""

    op: str
    left: Node
    right: Node
    _child_fields: ClassVar[tuple[str, ...]] = ("left", "right")


@dataclass(frozen=True)
class Negate(_Node):
    """``-arg``."""

    arg: Node
    _child_fields: ClassVar[tuple[str, ...]] = ("arg",)


@dataclass(frozen=True)
class Call(_Node):
    """A named scalar function of the dialect (see :data:`.expr_arrow.FUNCTIONS`)."""

    name: str
    args: tuple[Node, ...]
    _child_fields: ClassVar[tuple[str, ...]] = ("args",)


@dataclass(frozen=True)
class Opaque(_Node):
    """A pyarrow Expression no other node can express; evaluated as is, never pruned on.

    ``columns`` are the top-level columns it reads (found by binding, see :mod:`.expr_arrow`).
    """

    expression: Any = field(compare=False)
    columns: frozenset[str]
    text: str


Node: TypeAlias = (
    "Column | Literal | Compare | And | Or | Not | InList | Between | IsNull | IsNan | IsBool | Like"
    " | Cast | Arith | Negate | Call | Opaque"
)


def children(node: Node) -> Iterator[Node]:
    """The direct sub-expressions of ``node``."""
    for name in node._child_fields:
        value = getattr(node, name)
        if isinstance(value, tuple):
            yield from value
        else:
            yield value


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every node below it, parents first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(children(current))))


def columns_of(node: Node) -> set[str]:
    """Top-level columns the tree reads."""
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, Column):
            out.add(n.path[0])
        elif isinstance(n, Opaque):
            out |= n.columns
    return out


#: Functions whose result is floating point when their first argument is.
_FLOAT_PRESERVING = frozenset({"abs", "ceil", "floor", "round", "trunc", "list_element"})


def may_be_nan(node: Node) -> bool:
    """Whether ``node`` has a floating-point type, so its values may be NaN (literals never are)."""
    if isinstance(node, Column):
        return bool(pa.types.is_floating(node.type))
    if isinstance(node, Negate):
        return may_be_nan(node.arg)
    if isinstance(node, Arith):
        return may_be_nan(node.left) or may_be_nan(node.right)
    if isinstance(node, Cast):
        return bool(pa.types.is_floating(node.to))
    if isinstance(node, Call) and node.name in ("coalesce", "greatest", "least", "nullif"):
        return any(may_be_nan(a) for a in node.args)  # a float when any argument is
    if isinstance(node, Call) and node.name in ("ln", "log", "log10", "log2", "power"):
        return True  # of a negative number (exp only of a NaN: its argument's)
    if isinstance(node, Call) and node.name == "exp":
        return may_be_nan(node.args[0])
    if isinstance(node, Call) and node.name in _FLOAT_PRESERVING and node.args:
        return may_be_nan(node.args[0])
    if isinstance(node, Call) and node.name == "sqrt":
        return True  # of a negative number
    if isinstance(node, Call) and node.name == "list_get" and isinstance(node.args[0], Column):
        lt = node.args[0].type
        return bool(pa.types.is_floating(getattr(lt, "value_type", lt)))
    if isinstance(node, Literal):  # only a cast of 'NaN' makes one
        v = node.value.as_py() if pa.types.is_floating(node.type) else None
        return v is not None and v != v
    return False


def _integer_bounds(t: pa.DataType) -> tuple[int, int]:
    """The least and greatest value of integer type ``t``."""
    w = t.bit_width
    return (-(2 ** (w - 1)), 2 ** (w - 1) - 1) if pa.types.is_signed_integer(t) else (0, 2**w - 1)


def exact_integer_literal(literal: pa.Scalar, t: pa.DataType) -> tuple[pa.Scalar | None, int]:
    """An integer literal in the type ``t`` of the value it is compared with, as DataFusion does.

    Returns ``(scalar of type t, 0)`` when ``t`` (an integer or decimal type) holds the literal,
    else ``(None, -1)`` or ``(None, 1)`` for a literal below or above every value of ``t``: the
    comparison is then constant on valid rows. A literal that is not a valid integer, or a ``t``
    that is neither integer nor decimal, gives ``(None, 0)`` (compare as usual). Comparing in the
    common type instead overflows: a uint64 column cast to int64 fails above 2**63, and a decimal
    column meets a 38-digit decimal for an int64 literal ("Precision is not great enough").
    """
    if not (pa.types.is_integer(literal.type) and literal.is_valid):
        return None, 0
    value = int(literal.as_py())
    if pa.types.is_integer(t):
        lo, hi = _integer_bounds(t)
    elif pa.types.is_decimal(t) and t.scale >= 0:  # a negative scale cannot hold every integer
        bound = 10 ** (t.precision - t.scale)
        lo, hi = -bound + 1, bound - 1
    else:
        return None, 0
    if value < lo:
        return None, -1
    if value > hi:
        return None, 1
    if pa.types.is_decimal(t):
        return pa.scalar(decimal.Decimal(value), t), 0
    return pa.scalar(value, t), 0


def exact_number(value: decimal.Decimal, t: pa.DataType) -> pa.Scalar | None:
    """``value`` as a scalar of the integer or decimal type ``t`` when ``t`` holds it exactly."""
    if pa.types.is_integer(t) and value == value.to_integral_value():
        lo, hi = _integer_bounds(t)
        return pa.scalar(int(value), t) if lo <= value <= hi else None
    if pa.types.is_decimal(t) and t.scale >= 0 and abs(value) < 10 ** (t.precision - t.scale):
        quantum = decimal.Decimal(1).scaleb(-t.scale)
        with decimal.localcontext(prec=t.precision + 80):
            exact = value.quantize(quantum)
        return pa.scalar(exact, t) if exact == value else None
    return None


def holds_out_of_range(op: str, side: int) -> bool:
    """Whether ``value <op> literal`` holds for every valid value of a type the literal is below
    (``side`` -1) or above (``side`` 1), see :func:`exact_integer_literal`."""
    return op in ("gt", "ge", "ne") if side < 0 else op in ("lt", "le", "ne")


T = TypeVar("T")


class Visitor(Generic[T]):
    """Dispatches on the node's class to ``visit_<class name in lower case>``.

    Subclasses implement the methods for the nodes they understand; :meth:`generic` handles the
    rest (by default it raises, naming the node).
    """

    def visit(self, node: Node) -> T:
        method: Callable[[Any], T] | None = getattr(self, "visit_" + type(node).__name__.lower(), None)
        if method is None:
            return self.generic(node)
        return method(node)

    def generic(self, node: Node) -> T:
        raise NotImplementedError(f"{type(self).__name__} cannot handle {type(node).__name__}")


@dataclass(frozen=True)
class Predicate:
    """A filter parsed and bound once: its tree, the schema it was bound to, its pyarrow form.

    The scanner, pruning and the server all take this object, so nothing is parsed twice. Build
    one with :func:`lance_format.dataset.filters.parse_filter`.
    """

    tree: Node
    schema: pa.Schema = field(compare=False)
    expression: Any = field(compare=False)  # pyarrow.compute.Expression
    text: str = field(compare=False, default="")

    @property
    def columns(self) -> set[str]:
        """Top-level columns the predicate reads."""
        return columns_of(self.tree)

    def __str__(self) -> str:
        return self.text or repr(self.tree)
