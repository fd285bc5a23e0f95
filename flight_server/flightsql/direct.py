"""Simple queries straight to our scanner: ``SELECT cols FROM t [WHERE p] [LIMIT n] [OFFSET m]``.

DataFusion pushes projections and filters into a ``pyarrow.dataset.Dataset`` but not limits: a
``LIMIT 5`` there still starts every fragment's scan and reads a good part of the table. A query
that is only a projection, a filter and a limit/offset over one table needs nothing DataFusion
adds, so it becomes one :meth:`LanceDataset.scanner` call (zone maps prune, limits stop reading,
rows come in table order). Anything else (joins, aggregates, ordering, expressions in the select
list, names DataFusion would fold differently) returns ``None`` and runs in DataFusion.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

__all__ = ["SimpleScan", "simple_scan"]

_NOT_SIMPLE = (
    "joins",
    "group",
    "having",
    "order",
    "distinct",
    "qualify",
    "windows",
    "with",
    "laterals",
    "pivots",
)


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


def simple_scan(tree: exp.Expression) -> SimpleScan | None:
    """The scan ``tree`` is, when it is a simple one (placeholders already substituted)."""
    if not isinstance(tree, exp.Select) or any(tree.args.get(k) for k in _NOT_SIMPLE):
        return None
    source = tree.args.get("from_") or tree.args.get("from")
    if source is None or not isinstance(source.this, exp.Table) or source.args.get("expressions"):
        return None
    table = source.this
    if any(isinstance(n, exp.Subquery | exp.AggFunc | exp.Window) for n in tree.find_all(exp.Expression)):
        return None
    names = {"", table.name, table.alias_or_name}
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
        filt = condition.sql()
    (plain_limit, limit), (plain_offset, offset) = (
        _count(tree.args.get("limit")),
        _count(tree.args.get("offset")),
    )
    if not (plain_limit and plain_offset):
        return None
    return SimpleScan(table, columns, filt, limit, offset)
