"""Whether a computed column may hold NULL, decided as pylance's planner (DataFusion) decides it.

pylance marks a computed column ``not null`` when its expression cannot produce a NULL from its
inputs: ``id * 2`` over a non-null ``id`` is ``int64 not null``, ``id + n`` over a nullable ``n`` is
nullable. The rules here are DataFusion's as pylance 14.0.2 shows them (each checked against it in
``tests/dataset/test_computed_nullability.py``):

- a column is nullable when it or a struct above it is; ``_rowid`` / ``_rowaddr`` are; a literal
  is when it is NULL;
- operators (comparisons, ``AND`` / ``OR`` / ``NOT``, arithmetic, negation, ``BETWEEN``, ``IN``,
  ``LIKE``, ``||``, ``CAST``, ``IS [NOT] TRUE/FALSE``, ``IS [NOT] DISTINCT FROM``) are nullable when
  an operand is (a division by zero is an error or a float infinity, never a NULL);
- ``IS [NOT] NULL`` never is, and of a non-null value it is a constant, which decides an ``AND``
  (false) or an ``OR`` (true) it is part of: ``s IS NULL AND n > 1`` is not null (so is ``x = x``
  of a non-null ``x``, true); ``a AND (b OR a)`` is ``a`` (absorption, as DataFusion simplifies);
- ``TRY_CAST`` always is nullable, unless it casts to the type it already has;
- scalar functions are nullable, except ``coalesce`` (when some argument is not) and the ones
  DataFusion types from their arguments (:data:`_FROM_ARGUMENTS`).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from lance_format.dataset.expr import (
    And,
    Call,
    Cast,
    Column,
    Compare,
    IsNan,
    IsNull,
    Like,
    Literal,
    Node,
    Not,
    Opaque,
    Or,
    children,
)

__all__ = ["constant_value", "fold_logic", "may_be_null"]

#: Functions that are nullable only when an argument is: DataFusion rewrites them into operators
#: (``regexp_like`` with a pattern, ``||``; ``LIKE`` with a pattern per row is one) or types their
#: result from their arguments (``strpos``, ``round``). The others (``upper``, ``length``, ``abs``,
#: ``sqrt``, ``contains`` ...) are always nullable in pylance, whatever their arguments.
_FROM_ARGUMENTS = frozenset({"strpos", "round", "regexp_like", "concat_op", "like", "ilike"})


def _column_may_be_null(node: Column, schema: pa.Schema) -> bool:
    """Whether the column (or struct member) at ``node.path`` or a struct above it is nullable."""
    index = schema.get_field_index(node.path[0])
    if index < 0:
        return True
    field = schema.field(index)
    nullable = bool(field.nullable)
    for name in node.path[1:]:
        if not pa.types.is_struct(field.type) or field.type.get_field_index(name) < 0:
            return True
        field = field.type.field(name)
        nullable = nullable or bool(field.nullable)
    return nullable


def may_be_null(node: Node, schema: pa.Schema, type_of: Callable[[Node], pa.DataType]) -> bool:
    """Whether the value of ``node`` (bound to ``schema``) may be NULL, as pylance types it.

    Parameters
    ----------
    node:
        The bound expression tree.
    schema:
        The schema it was bound to (field nullability is read from it).
    type_of:
        The Arrow type of a sub-expression (``TRY_CAST`` to the type it has is no cast).

    Returns
    -------
    bool
        ``False`` when pylance marks the computed column ``not null``.
    """
    return _Folder(schema, type_of).visit(node)


def fold_logic(node: Node, schema: pa.Schema, type_of: Callable[[Node], pa.DataType]) -> Node:
    """``node`` with the parts of its ``AND`` / ``OR`` / ``NOT`` skeleton that DataFusion folds
    to a constant replaced by it (``x IS NULL`` of a non-null ``x`` is false, and decides an
    ``AND`` it is part of): pylance never evaluates what a folded constant decides, so an error
    there (a NaN cast to a decimal) does not fail its filter. Same arguments as
    :func:`may_be_null`; the result means what ``node`` means."""
    return _Folder(schema, type_of).simplify(node)


def constant_value(node: Node, schema: pa.Schema, type_of: Callable[[Node], pa.DataType]) -> bool | None:
    """The constant DataFusion's simplifier folds boolean ``node`` to before evaluating it, or
    ``None``: ``coalesce(x, 1) IS NULL`` (of a value that cannot be NULL) is false, so ``f(x) AND
    coalesce(x, 1) IS NULL`` is false too, and ``f(x)`` is never evaluated (nor fails). Parameters
    as :func:`may_be_null`'s."""
    return _Folder(schema, type_of).fold(node)[1]


def _constant(n: Node) -> bool | None:
    """The value of a boolean literal (None: not one, or NULL)."""
    if isinstance(n, Literal) and n.value.is_valid and pa.types.is_boolean(n.type):
        return bool(n.value.as_py())
    return None


class _Folder:
    """The folds of :func:`may_be_null`, :func:`constant_value` and :func:`fold_logic` over one schema."""

    def __init__(self, schema: pa.Schema, type_of: Callable[[Node], pa.DataType]) -> None:
        self.schema = schema
        self.type_of = type_of

    def visit(self, n: Node) -> bool:
        return self.fold(n)[0]

    def simplify(self, n: Node) -> Node:
        # Down the logical skeleton only, folding just the leaves that fold (a comparison of
        # arithmetic 200 deep is not walked again).
        if isinstance(n, Not):
            arg = self.simplify(n.arg)
            value = _constant(arg)
            if value is not None:
                return Literal(pa.scalar(not value))
            return n if arg is n.arg else Not(arg)
        if isinstance(n, And | Or):
            decisive = isinstance(n, Or)  # the value that decides the whole: TRUE for OR
            args = [self.simplify(a) for a in n.args]
            if any(_constant(a) is decisive for a in args):
                return Literal(pa.scalar(decisive))
            kept = [a for a in args if _constant(a) is None]
            if not kept:
                return Literal(pa.scalar(not decisive))
            if len(kept) == 1:
                return kept[0]
            if len(kept) == len(n.args) and all(a is b for a, b in zip(kept, n.args, strict=True)):
                return n
            return type(n)(tuple(kept))
        folds = (
            isinstance(n, IsNull)
            or (isinstance(n, Like) and not n.pattern.strip("%"))
            or (isinstance(n, Compare) and n.op == "eq" and n.left == n.right)
        )
        value = self.fold(n)[1] if folds else None
        return n if value is None else Literal(pa.scalar(value))

    def fold(self, n: Node) -> tuple[bool, bool | None]:
        """``(may be null, constant value or None)``: DataFusion folds ``x IS NULL`` of a non-null
        ``x`` to false before typing, so ``x IS NULL AND n > 1`` is false, never NULL."""
        if isinstance(n, Literal):
            value = n.value.as_py() if n.value.is_valid and pa.types.is_boolean(n.type) else None
            return not n.value.is_valid, value
        if isinstance(n, IsNull):
            return False, False if not self.visit(n.arg) else None
        if isinstance(n, Not):
            nullable, value = self.fold(n.arg)
            return nullable, None if value is None else not value
        if isinstance(n, And | Or):
            # Absorption, as DataFusion simplifies: A AND (B OR A) is A, A OR (B AND A) is A.
            inner = Or if isinstance(n, And) else And
            args = [
                a
                for a in n.args
                if not (isinstance(a, inner) and any(o is not a and o in a.args for o in n.args))
            ]
            folded = [self.fold(a) for a in args]
            decisive = isinstance(n, Or)  # the value that decides the whole: TRUE for OR
            if any(value is decisive for _, value in folded):
                return False, decisive
            if all(value is not None for _, value in folded):
                return False, not decisive
            return any(nullable for nullable, _ in folded), None
        if isinstance(n, Like) and not n.pattern.strip("%") and not self.visit(n.arg):
            return False, True  # ``s LIKE '%'`` of a non-null s: DataFusion folds it to true
        if isinstance(n, Compare) and n.op == "eq" and n.left == n.right and not self.visit(n.left):
            return False, True  # DataFusion folds ``x = x`` of a non-null x (not ``x <> x``)
        return self.single(n), None

    def single(self, n: Node) -> bool:
        if isinstance(n, Column):
            return _column_may_be_null(n, self.schema)
        if isinstance(n, IsNan | Opaque):
            return True
        if isinstance(n, Cast) and not n.safe:
            return n.to != self.type_of(n.arg) or self.visit(n.arg)
        if isinstance(n, Call):
            if n.name == "coalesce":
                return all(self.visit(a) for a in n.args)
            if n.name == "starts_with":
                # with a literal prefix DataFusion rewrites it to LIKE 'prefix%' (an operator)
                prefix = n.args[1]
                literal = isinstance(prefix, Literal) and prefix.value.is_valid
                return not literal or any(self.visit(a) for a in n.args)
            return n.name not in _FROM_ARGUMENTS or any(self.visit(a) for a in n.args)
        return any(self.visit(c) for c in children(n))
