"""Filters from SQL strings or Substrait bytes, checked against the schema before any data is read."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError
from lance_format.dataset.filters import Filter, parse_filter

__all__ = ["resolve_filter"]

_ROW_COLUMNS = (pa.field("_rowid", pa.uint64()), pa.field("_rowaddr", pa.uint64()))


def _substrait(data: bytes) -> pc.Expression:
    import pyarrow.substrait as ps  # imported on first use: loads the Substrait consumer

    try:
        bound = ps.deserialize_expressions(pa.py_buffer(data))
    except (pa.ArrowException, OSError, ValueError, TypeError) as exc:  # pyarrow < 19: OSError
        raise InvalidInputError(f"filter_substrait is not a Substrait ExtendedExpression: {exc}") from None
    exprs = list(bound.expressions.values())
    if len(exprs) != 1:
        raise InvalidInputError(f"filter_substrait must hold exactly one expression, it holds {len(exprs)}")
    return exprs[0]


def resolve_filter(sql: str | None, substrait: bytes | None, schema: pa.Schema) -> Filter | None:
    """The filter a request carries, validated against ``schema``; ``None`` when there is none.

    Raises
    ------
    InvalidInputError
        Both kinds given, unparsable text or bytes, unknown columns, or a predicate that is not a
        boolean over the columns' types.
    """
    if sql is not None and substrait is not None:
        raise InvalidInputError("pass filter_sql or filter_substrait, not both")
    if sql is None and substrait is None:
        return None
    full = schema
    for f in _ROW_COLUMNS:
        if f.name not in full.names:
            full = full.append(f)
    flt: Filter = sql if sql is not None else _substrait(substrait or b"")
    expr, _ = parse_filter(flt, full)
    # Evaluating on zero rows binds names and types without touching data.
    try:
        full.empty_table().filter(expr)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise InvalidInputError(f"invalid filter {expr}: {exc}") from None
    return flt
