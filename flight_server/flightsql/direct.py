"""Simple queries straight to our scanner: ``SELECT cols FROM t [WHERE p] [LIMIT n] [OFFSET m]``.

DataFusion pushes projections and filters into a ``pyarrow.dataset.Dataset`` but not limits: a
``LIMIT 5`` there still starts every fragment's scan and reads a good part of the table. A query
that is only a projection, a filter and a limit/offset over one table needs nothing DataFusion
adds, so it becomes one :meth:`LanceDataset.scanner` call (zone maps prune, limits stop reading,
rows come in table order). Anything else (joins, aggregates, ordering, expressions in the select
list, names DataFusion would fold differently) returns ``None`` and runs in DataFusion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import TokenType, exp

from flight_server.flightsql.text import clause_text

__all__ = ["SimpleScan", "simple_scan"]

#: The parts of a SELECT a simple scan may have; any other (a WITH, joins, grouping, ordering,
#: DISTINCT, windows, SAMPLE, ...) runs in DataFusion. An allow-list, as sqlglot renames its keys
#: between versions ("with" became "with_" in 30; a WITH over a table's own name then ran as a
#: scan of the table, not of the CTE).
_SIMPLE_PARTS = frozenset({"expressions", "from", "from_", "where", "limit", "offset"})

#: Functions our filter parser takes but answers otherwise than the server's DataFusion (it
#: follows pylance's): the direct scan leaves them to DataFusion, so a query's answer does not
#: depend on the path. ``sqrt`` of a negative number is NaN in pylance, an error in DataFusion 55;
#: ``replace`` with an empty pattern inserts the replacement between characters in pylance and
#: returns the string unchanged in DataFusion 55.
_UNLIKE_DATAFUSION: tuple[type[exp.Expression], ...] = (exp.Sqrt, exp.Replace)
#: Cast targets DataFusion's SQL refuses (BINARY, VARBINARY, BLOB: "Unsupported SQL type") and
#: our filter parser takes (sqlglot reads BYTEA, which DataFusion takes, as VARBINARY too), and
#: DECIMAL: pylance casts '' to 0, DataFusion 55 to NULL (TRY_CAST) or an error.
_UNLIKE_TYPES = {exp.DataType.Type.BINARY, exp.DataType.Type.VARBINARY, exp.DataType.Type.DECIMAL}


def _unlike_datafusion(tree: exp.Expression) -> bool:
    """Whether ``tree`` holds something our filters and DataFusion answer differently."""
    for node in tree.find_all(exp.Expression):
        if isinstance(node, _UNLIKE_DATAFUSION):
            return True
        if isinstance(node, exp.Cast) and node.to.this in _UNLIKE_TYPES:  # TryCast is a Cast
            return True
    return False


@dataclass(frozen=True)
class SimpleScan:
    """What a simple query reads: the table node, ``(column, output name)`` pairs, filter, paging."""

    table: exp.Table
    columns: list[tuple[str, str]] | None  # None: every column (SELECT *)
    filter: str | None
    limit: int | None
    offset: int | None


def _count(node: exp.Expression | None) -> tuple[bool, int | None]:
    """``(plain, n)`` of a LIMIT / OFFSET clause: ``plain`` is false unless absent or an integer."""
    if node is None:
        return True, None
    value = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return True, int(value.this)
    return False, None


def _plain(column: exp.Column, names: set[str]) -> bool:
    """A column DataFusion and our filter parser resolve alike: unqualified by another table and
    spelled as stored (unquoted identifiers fold to lower case in DataFusion)."""
    ident = column.this
    if not isinstance(ident, exp.Identifier) or column.args.get("db") or column.args.get("catalog"):
        return False
    return column.table in names and (ident.quoted or column.name == column.name.lower())


def simple_scan(
    tree: exp.Expression, sql: str, dialect: str, literal: Callable[[int], str] | None = None
) -> SimpleScan | None:
    """The scan ``tree`` is, when it is a simple one (placeholders already substituted).

    ``tree`` is ``sql`` as ``dialect`` parsed it; ``literal(n)`` is parameter ``n`` as SQL (the
    statement's placeholders). The filter is the WHERE clause as written, not as sqlglot writes it
    back (see :mod:`.text`), with its placeholders replaced by ``literal``.
    """
    if not isinstance(tree, exp.Select) or any(v for k, v in tree.args.items() if k not in _SIMPLE_PARTS):
        return None
    source = tree.args.get("from_") or tree.args.get("from")
    if source is None or not isinstance(source.this, exp.Table) or source.args.get("expressions"):
        return None
    table = source.this
    if any(isinstance(n, exp.Subquery | exp.AggFunc | exp.Window) for n in tree.find_all(exp.Expression)):
        return None
    if _unlike_datafusion(tree):
        return None
    names = {"", table.alias_or_name}  # aliased, a table is known by its alias alone
    columns: list[tuple[str, str]] | None = []
    for item in tree.expressions:
        if isinstance(item, exp.Star) and len(tree.expressions) == 1:
            columns = None
            break
        target, alias = (item.this, item.alias) if isinstance(item, exp.Alias) else (item, None)
        if not isinstance(target, exp.Column) or not _plain(target, names):
            return None
        assert columns is not None
        columns.append((target.name, alias or target.name))
    where = tree.args.get("where")
    filt = None
    if where is not None:
        condition = where.this.copy()
        for column in list(condition.find_all(exp.Column)):
            if not _plain(column, names):
                return None
            column.set("table", None)
        if any(isinstance(n, exp.Placeholder | exp.Parameter) for n in condition.find_all(exp.Expression)):
            return None
        until = {TokenType.LIMIT, TokenType.OFFSET, TokenType.SEMICOLON}
        filt = clause_text(sql, dialect, TokenType.WHERE, until, names - {""}, literal)
        if filt is None:
            return None
    (plain_limit, limit), (plain_offset, offset) = (
        _count(tree.args.get("limit")),
        _count(tree.args.get("offset")),
    )
    if not (plain_limit and plain_offset):
        return None
    return SimpleScan(table, columns, filt, limit, offset)
