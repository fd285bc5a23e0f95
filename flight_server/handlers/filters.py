"""Filters from SQL strings or Substrait bytes, parsed and bound once, before any data is read."""

from __future__ import annotations

import pyarrow as pa

from lance_format.core.errors import InvalidInputError
from lance_format.dataset.filters import Predicate, parse_filter, parse_substrait
from lance_format.dataset.scanner import LanceScanner

__all__ = ["resolve_filter"]


def resolve_filter(sql: str | None, substrait: bytes | None, schema: pa.Schema) -> Predicate | None:
    """The filter a request carries, bound to ``schema`` (plus ``_rowid``/``_rowaddr``).

    The returned Predicate is handed to the scanner as is, so the request is parsed once. Substrait
    field positions are resolved by name through the message's own base schema, so a filter on a
    column outside the projection reads that column (it never indexes the projected table).

    Raises
    ------
    InvalidInputError
        Both kinds given, unparsable text or bytes, unknown columns, or a predicate that is not a
        boolean over the columns' types.
    NotSupportedError
        A construct the filter dialect does not have.
    """
    if sql is not None and substrait is not None:
        raise InvalidInputError("pass filter_sql or filter_substrait, not both")
    if sql is None and substrait is None:
        return None
    full = LanceScanner.filter_schema(schema)
    if sql is not None:
        return parse_filter(sql, full)
    return parse_substrait(substrait or b"", full)
