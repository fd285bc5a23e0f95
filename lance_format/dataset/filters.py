"""Filters and computed columns: SQL-style strings or pyarrow compute Expressions.

SQL strings are converted by :mod:`lance_format.dataset.sql` (sqlglot, imported on first use).
"""

from __future__ import annotations

import re
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError
from lance_format.core.types import empty_array

__all__ = ["Filter", "evaluate", "filter_columns", "parse_filter"]

Filter: TypeAlias = "str | pc.Expression"


def parse_filter(flt: Filter, schema: pa.Schema) -> tuple[pc.Expression, set[str]]:
    """``(expression, top-level columns it reads)`` for a SQL string or a pyarrow Expression."""
    if isinstance(flt, pc.Expression):
        return flt, _expression_columns(flt, schema)
    if not isinstance(flt, str):
        raise InvalidInputError(
            f"filter must be a SQL string or a pyarrow Expression, not {type(flt).__name__}"
        )
    if not flt.strip():
        raise InvalidInputError("filter is empty")
    from lance_format.dataset.sql import sql_to_expression

    return sql_to_expression(flt, schema)


def evaluate(table: pa.Table, exprs: dict[str, pc.Expression]) -> pa.Table:
    """A table of ``exprs`` computed over ``table``'s rows (one column per entry)."""
    import pyarrow.dataset as pds  # imported on first use: it pulls in much of pyarrow

    if not table.num_columns:
        table = pa.table({"__n": pa.nulls(table.num_rows, pa.int8())})
    try:
        return pds.dataset(table).to_table(columns=exprs)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidInputError(f"cannot evaluate expressions: {e}") from None


def _expression_columns(expr: pc.Expression, schema: pa.Schema) -> set[str]:
    """Top-level columns an Expression names (found from its string form, then validated)."""
    text = str(expr)
    names = {n for n in schema.names if re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text)}
    try:
        pa.table({n: empty_array(schema.field(n).type) for n in names}).filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError) as e:
        raise InvalidInputError(f"invalid filter {text}: {e}") from None
    return names


def filter_columns(flt: Filter | None, schema: pa.Schema) -> set[str]:
    """The top-level columns a filter reads (empty when there is none)."""
    return set() if flt is None else parse_filter(flt, schema)[1]
