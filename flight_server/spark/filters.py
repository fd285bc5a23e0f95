"""Spark pushed filters -> the server's SQL-style predicate string.

Spark hands ``pushFilters`` a list of filters to AND together. Each one we can express exactly in
the server's SQL dialect (``lance_format.dataset.sql``) is pushed; every other one is returned to
Spark, which then evaluates it after the scan. "Exactly" is strict: a filter whose literal the SQL
dialect cannot type precisely (decimals, binary, arrays, zoned timestamps, NaN) stays with Spark,
so pushing never changes a query's answer.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

__all__ = ["PushedFilters", "filter_to_sql", "split_filters"]

_COMPARISONS: dict[type[Filter], str] = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}
# LIKE metacharacters: a pattern holding one of these is left to Spark rather than escaped, since
# the escape rules of the server's LIKE are not part of the protocol.
_LIKE_SPECIAL = ("%", "_", "\\")


@dataclass(frozen=True)
class PushedFilters:
    """The outcome of :func:`split_filters`: a SQL conjunction and the filters Spark keeps."""

    sql: str | None
    pushed: tuple[Filter, ...]
    rejected: tuple[Filter, ...]


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _column_type(schema: pa.Schema, path: Sequence[str]) -> pa.DataType | None:
    """Arrow type of a (possibly nested) column, or None if it is not in ``schema``."""
    if not path or path[0] not in schema.names:
        return None
    t: pa.DataType = schema.field(path[0]).type
    for part in path[1:]:
        if not pa.types.is_struct(t) or t.get_field_index(part) < 0:
            return None
        t = t.field(part).type
    if pa.types.is_dictionary(t):
        t = t.value_type
    return t


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _literal(value: object, t: pa.DataType) -> str | None:
    """SQL text of ``value`` compared with a column of type ``t``; None if not exactly expressible."""
    if isinstance(value, bool):
        return ("TRUE" if value else "FALSE") if pa.types.is_boolean(t) else None
    if isinstance(value, int):
        return str(value) if (pa.types.is_integer(t) or pa.types.is_floating(t)) else None
    if isinstance(value, float):
        if not pa.types.is_floating(t) or not math.isfinite(value):
            return None
        return repr(value)
    if isinstance(value, str):
        return _quote_str(value) if _is_string(t) else None
    if isinstance(value, dt.datetime):
        # Only naive timestamps: the dialect's CAST gives a zone-less timestamp, which compares
        # exactly with TimestampNTZ columns and not at all with zoned ones.
        if value.tzinfo is not None or not pa.types.is_timestamp(t) or t.tz is not None:
            return None
        return f"CAST({_quote_str(value.isoformat(sep=' '))} AS TIMESTAMP)"
    if isinstance(value, dt.date):
        return f"CAST({_quote_str(value.isoformat())} AS DATE)" if pa.types.is_date32(t) else None
    return None


def filter_to_sql(f: Filter, schema: pa.Schema) -> str | None:
    """SQL predicate for one Spark filter over a dataset with Arrow ``schema``; None if unpushable.

    Parameters
    ----------
    f : pyspark.sql.datasource.Filter
        One filter from ``DataSourceReader.pushFilters``.
    schema : pyarrow.Schema
        The dataset's Arrow schema: columns and types decide which literals are exact.
    """
    if isinstance(f, Not):
        inner = filter_to_sql(f.child, schema)
        return None if inner is None else f"NOT ({inner})"
    path = getattr(f, "attribute", None)
    if path is None:
        return None
    t = _column_type(schema, path)
    if t is None:
        return None
    col = ".".join(_quote_ident(p) for p in path)
    if isinstance(f, IsNull):
        return f"{col} IS NULL"
    if isinstance(f, IsNotNull):
        return f"{col} IS NOT NULL"
    op = _COMPARISONS.get(type(f))
    if op is not None:
        lit = _literal(f.value, t)  # type: ignore[attr-defined]
        if lit is None:
            return None
        # The server orders NaN above every number and equal to itself, as Spark does.
        return f"{col} {op} {lit}"
    if isinstance(f, EqualNullSafe):
        if f.value is None:
            return f"{col} IS NULL"
        lit = _literal(f.value, t)
        return None if lit is None else f"({col} IS NOT NULL AND {col} = {lit})"
    if isinstance(f, In):
        # NULLs in the list never match (SQL semantics), so they are left out.
        lits = [_literal(v, t) for v in f.value if v is not None]
        if not lits or any(lit is None for lit in lits):
            return None
        return f"{col} IN ({', '.join(lit for lit in lits if lit is not None)})"
    if isinstance(f, StringStartsWith | StringEndsWith | StringContains):
        if not _is_string(t) or any(c in f.value for c in _LIKE_SPECIAL):
            return None
        pattern = {
            StringStartsWith: f"{f.value}%",
            StringEndsWith: f"%{f.value}",
            StringContains: f"%{f.value}%",
        }[type(f)]
        return f"{col} LIKE {_quote_str(pattern)}"
    return None


def split_filters(filters: Iterable[Filter], schema: pa.Schema) -> PushedFilters:
    """Split Spark's filters into one SQL conjunction for the server and the ones Spark keeps."""
    pushed: list[Filter] = []
    rejected: list[Filter] = []
    clauses: list[str] = []
    for f in filters:
        sql = filter_to_sql(f, schema)
        if sql is None:
            rejected.append(f)
        else:
            pushed.append(f)
            clauses.append(f"({sql})")
    return PushedFilters(" AND ".join(clauses) if clauses else None, tuple(pushed), tuple(rejected))
