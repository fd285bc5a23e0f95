"""Filters and computed columns: SQL strings, Substrait bytes or pyarrow Expressions, bound once.

Every filter becomes a :class:`~lance_format.dataset.expr.Predicate`: the typed IR tree (built by
:mod:`.sql`, :mod:`._serde` or :mod:`.expr_arrow`), bound to the schema, with its pyarrow compute
form built and checked on an empty table, so a bad filter fails before any data is read and a good
one is never parsed again (scanners, pruning and the server all pass the Predicate on).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import NamedTuple, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from lance_format.core.types import empty_array
from lance_format.dataset.expr import (
    Arith,
    Cast,
    Column,
    Literal,
    Node,
    Predicate,
    columns_of,
    exact_integer_literal,
)

__all__ = [
    "ComputedValue",
    "Filter",
    "Predicate",
    "evaluate",
    "filter_columns",
    "parse_filter",
    "parse_substrait",
    "parse_value",
]

Filter: TypeAlias = "str | pc.Expression | Predicate"

_EVAL_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError)


def _tree(flt: str | pc.Expression, schema: pa.Schema) -> tuple[Node, str]:
    if isinstance(flt, pa.BooleanScalar):
        # DataFusion's pushdown into a pyarrow dataset passes a filter it folded to a constant
        # (`WHERE x = x AND false`) as a scalar, not an Expression
        flt = pc.scalar(flt)
    if isinstance(flt, pc.Expression):
        from lance_format.dataset.expr_arrow import from_arrow

        return from_arrow(flt, schema), str(flt)
    if not isinstance(flt, str):
        raise InvalidTypeError(
            f"filter must be a SQL string or a pyarrow Expression, not {type(flt).__name__}"
        )
    if not flt.strip():
        raise InvalidInputError("filter is empty")
    from lance_format.dataset.sql import as_condition, parse_sql

    return as_condition(parse_sql(flt, schema, predicate=True)), flt


def _empty(schema: pa.Schema, names: set[str]) -> pa.Table:
    """An empty table of the columns a filter reads (``Schema.empty_table`` refuses extension types
    nested in structs and lists; reading only those columns keeps wide schemas cheap)."""
    fields = [f for f in schema if f.name in names]
    return pa.table([empty_array(f.type) for f in fields], schema=pa.schema(fields))


def bind(tree: Node, schema: pa.Schema, text: str) -> Predicate:
    """A Predicate of ``tree``: its pyarrow form built and checked to be a boolean over ``schema``."""
    from lance_format.dataset.expr_arrow import ToArrow
    from lance_format.dataset.nullability import fold_logic

    try:
        binder = ToArrow(schema)
        tree = fold_logic(tree, schema, binder.type_of)
        expr = binder.visit(tree)
        _empty(schema, columns_of(tree)).filter(expr)
    except _EVAL_ERRORS as e:
        raise InvalidInputError(f"invalid filter {text}: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise InvalidInputError(f"invalid filter {text[:80]}...: nested too deeply") from None
    return Predicate(tree, schema, expr, text)


def parse_filter(flt: Filter, schema: pa.Schema) -> Predicate:
    """The bound Predicate of a SQL string or pyarrow Expression (a Predicate is checked and kept).

    Raises
    ------
    InvalidInputError
        Unparsable, unknown columns, or not a boolean over the columns' types.
    NotSupportedError
        A construct the dialect does not have (named in the message).
    """
    if isinstance(flt, Predicate):
        missing = flt.columns - set(schema.names)
        if missing:
            raise InvalidInputError(f"filter {flt} reads columns {sorted(missing)} not in the dataset")
        return flt
    tree, text = _tree(flt, schema)
    return bind(tree, schema, text)


def parse_substrait(data: bytes, schema: pa.Schema) -> Predicate:
    """The bound Predicate of a Substrait ``ExtendedExpression`` holding one boolean expression."""
    from lance_format.dataset._serde import predicate_from_substrait
    from lance_format.dataset.sql_print import to_sql

    tree = predicate_from_substrait(data, schema)
    try:
        text = to_sql(tree)  # what the filter is recorded as (a delete's transaction, messages)
    except NotSupportedError:
        text = "<substrait filter>"
    return bind(tree, schema, text)


class ComputedValue(NamedTuple):
    """A SQL value expression (a computed column) parsed and bound once."""

    expression: pc.Expression
    """Its pyarrow compute form."""
    columns: set[str]
    """The top-level columns it reads."""
    nullable: bool
    """Whether it may be NULL, as pylance types it (``id * 2`` of a non-null ``id`` is not)."""


def parse_value(sql: str, schema: pa.Schema, to: pa.DataType | None = None) -> ComputedValue:
    """The :class:`ComputedValue` of a SQL value expression (a computed column).

    ``to``: the type the value is stored as (an update's column), cast the way SQL casts (a
    decimal with more digits is rounded, half away from zero).
    """
    from lance_format.dataset.expr_arrow import ToArrow
    from lance_format.dataset.expr_functions import presented_type
    from lance_format.dataset.nullability import may_be_null

    if not isinstance(sql, str):
        raise InvalidTypeError(f"a computed column must be a SQL expression, not {sql!r}")
    if not sql.strip():
        raise InvalidInputError(f"a computed column must be a SQL expression, not {sql!r}")
    from lance_format.dataset.expr import Cast
    from lance_format.dataset.sql import parse_sql

    # Literals compared with columns are checked as in a filter: pylance's planner refuses
    # ``i8 < 1000`` or ``d > '2020-01-01'`` as a computed column too.
    tree = _literal_in_column_type(parse_sql(sql, schema, literals=True))
    if to is not None:
        tree = Cast(tree, to)
    try:
        binder = ToArrow(schema)
        expression = binder.visit(tree)
        presented = presented_type(binder, tree)
        if presented is not None:
            expression = expression.cast(presented)  # string views, computed as large strings
        return ComputedValue(expression, columns_of(tree), may_be_null(tree, schema, binder.type_of))
    except _EVAL_ERRORS as e:
        raise InvalidInputError(f"invalid expression {sql!r}: {e}") from None


def _literal_in_column_type(tree: Node) -> Node:
    """``col <op> literal`` (or ``literal <op> col``) with the integer literal in ``col``'s integer
    type when it holds it, as pylance's planner types a value expression whose operand is a column:
    the arithmetic then happens, and wraps, in that type (``i8 * 2`` of 100 is -56, ``u64 - 1`` of
    0 is 2**64 - 1). Only at the top: deeper, or in a filter, DataFusion's wider type applies."""
    if not isinstance(tree, Arith):
        return tree
    for col, lit, side in ((tree.left, tree.right, "right"), (tree.right, tree.left, "left")):
        if not (isinstance(col, Column) and isinstance(lit, Literal)):
            continue
        t = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
        if pa.types.is_floating(t) and t != col.type:
            continue  # a dictionary of floats: computed as its values, in DataFusion's wider type
        if (
            pa.types.is_floating(t)
            and lit.value.is_valid
            and pa.types.is_floating(lit.type)
            and t != lit.type
        ):
            # The literal in the column's float type: f32 + 0.1 computes in float32, and f32 + 1e300
            # overflows to infinity, as pylance's computed column does.
            typed_float = Literal(lit.value.cast(t, safe=False))
            return replace(tree, right=typed_float) if side == "right" else replace(tree, left=typed_float)
        if (
            (pa.types.is_integer(t) or pa.types.is_decimal(t))
            and lit.value.is_valid
            and pa.types.is_floating(lit.type)
        ):
            # pylance refuses it too ("Received literal Float64(0.5) and could not convert").
            raise InvalidInputError(f"the literal {lit.value} does not convert to {col}'s type {t}")
        if pa.types.is_integer(t) and pa.types.is_integer(lit.type):
            typed, out_of_range = exact_integer_literal(lit.value, t)
            if out_of_range:
                raise InvalidInputError(
                    f"the literal {lit.value} does not convert to {col}'s type {t} (out of range)"
                )
            if typed is not None and t != col.type:
                # A dictionary column: its values and the literal in their type (pylance wraps
                # di * 2 in Int32 in a computed column).
                values = Cast(col, t)
                return (
                    replace(tree, left=values, right=Literal(typed))
                    if side == "right"
                    else replace(tree, left=Literal(typed), right=values)
                )
            if typed is not None:
                return (
                    replace(tree, right=Literal(typed))
                    if side == "right"
                    else replace(tree, left=Literal(typed))
                )
    return tree


def evaluate(table: pa.Table, exprs: Mapping[str, pc.Expression | ComputedValue]) -> pa.Table:
    """A table of ``exprs`` computed over ``table``'s rows (one column per entry).

    A :class:`ComputedValue` comes out ``not null`` exactly when it cannot be NULL, as pylance
    types it.
    """
    import pyarrow.dataset as pds  # imported on first use: it pulls in much of pyarrow

    if not table.num_columns:
        table = pa.table({"__n": pa.nulls(table.num_rows, pa.int8())})
    plain = {k: v.expression if isinstance(v, ComputedValue) else v for k, v in exprs.items()}
    try:
        out = pds.dataset(table).to_table(columns=plain)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidInputError(f"cannot evaluate expressions: {e}") from None
    # pyarrow's own answer is the field's: a member of a nullable struct came out not null.
    nullable = {k: v.nullable for k, v in exprs.items() if isinstance(v, ComputedValue)}
    fields = [f.with_nullable(nullable.get(f.name, f.nullable)) for f in out.schema]
    if all(f.nullable == g.nullable for f, g in zip(fields, out.schema, strict=True)):
        return out
    return pa.Table.from_arrays(out.columns, schema=pa.schema(fields, out.schema.metadata))


def filter_columns(flt: Filter | None, schema: pa.Schema) -> set[str]:
    """The top-level columns a filter reads (empty when there is none)."""
    return set() if flt is None else parse_filter(flt, schema).columns
