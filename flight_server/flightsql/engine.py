"""SQL over the catalog's datasets: DataFusion plans and runs queries; DML runs in our engine.

Every table a statement names is opened through the :class:`~flight_server.catalog.Catalog` at one
version and registered with a fresh DataFusion context as a ``pyarrow.dataset.Dataset`` (our
``LanceDataset``), so DataFusion pushes projections and filters into our scanner (zone maps apply)
and runs joins, aggregates, sorts and limits itself. The versions read are returned with the plan,
so result tickets re-run the statement on exactly that snapshot.

Time travel: ``FROM t VERSION AS OF 3`` or ``FROM "t@3"`` (a name with ``@`` can never be a
dataset: names are ``[A-Za-z0-9_.-]``). ``DELETE``, ``UPDATE`` and ``INSERT`` are parsed with
sqlglot and run by the engine's own delete / update / append, each one commit.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import sqlglot
from sqlglot import TokenType, exp

from flight_server.catalog import Catalog
from flight_server.errors import QueryTimedOut
from flight_server.flightsql.direct import simple_scan
from flight_server.flightsql.interrupt import QueryRun, QuerySlots
from flight_server.flightsql.text import (
    Edit,
    apply_edits,
    assigned_texts,
    clause_text,
    insert_source_text,
    node_span,
    tokens,
)
from flight_server.settings import DEFAULT_SQL_MEMORY_BYTES, DEFAULT_SQL_TIMEOUT_SECONDS
from lance_format import LanceDataset, write_dataset
from lance_format.core.errors import InvalidInputError, LanceError, NotFoundError, NotSupportedError

__all__ = [
    "CATALOG_NAME",
    "SCHEMA_NAME",
    "DataFusionBatches",
    "Plan",
    "SqlEngine",
    "has_parameters",
    "is_query",
]

#: The one catalog and schema every dataset lives in (Flight SQL clients need non-empty names).
CATALOG_NAME = "lance"
SCHEMA_NAME = "main"
#: sqlglot's dialect for reading statements: it knows ``VERSION AS OF`` and ``?`` / ``$n``
#: placeholders, and its identifiers follow DataFusion's rules (unquoted names fold to lower case).
_READ_DIALECT = "databricks"
_WRITE_DIALECT = "postgres"  # DataFusion's SQL is closest to PostgreSQL's
#: Tokens that end the clause of an update statement's text read as written (see .text).
_STATEMENT_END = frozenset({TokenType.SEMICOLON, TokenType.RETURNING})
# Statements sqlglot writes back keep function names in lower case: DataFusion finds table
# functions (generate_series, range) only so (GENERATE_SERIES: "table function not found").


@dataclass(frozen=True)
class Plan:
    """A query bound to dataset versions: its result schema and how to run it again."""

    sql: str
    versions: dict[str, int]
    schema: pa.Schema
    params: pa.Table | None = None


@dataclass
class _Bound:
    sql: str
    tables: dict[str, tuple[str, int | None]] = field(default_factory=dict)


def _version_of(table: exp.Table) -> int | None:
    version = table.args.get("version")
    if version is None:
        return None
    value = version.expression
    if not isinstance(value, exp.Literal) or value.is_string:
        raise InvalidInputError("VERSION AS OF takes a version number")
    return int(value.this)


def _query_error(exc: Exception, doing: str) -> Exception:
    """What a client gets for an error DataFusion raised planning or running a query.

    DataFusion raises plain ``Exception`` for planning and optimizer errors (``LIMIT -1``, an
    ``OFFSET`` no integer type holds) and ``ArrowInvalid`` for errors on the data (division by
    zero, a cast that fails): the statement's fault, so ``INVALID_ARGUMENT``. An exception our own
    code raised inside DataFusion (the dataset it scans) comes back wrapped as ``PyErr`` with its
    traceback in the message: that one stays as it is, an internal error logged server-side, its
    text (paths, source lines) never sent.
    """
    text = str(exc)
    if "PyErr" in text and "'pyarrow.lib.BooleanScalar' and 'pyarrow._compute.Expression'" in text:
        # datafusion-python 55 combines the filters it pushes into a dataset with `&`, which
        # fails when the first one folded to a constant (`NOT (s = s OR ...)`): its bug, and
        # a query it cannot run is not an internal error of ours
        return NotSupportedError(
            f"{doing}: DataFusion cannot push this filter into the scan (a condition it folds to a "
            "constant before others); write the condition without the constant part"
        )
    if "PyErr" in text:
        return exc
    if "Resources exhausted" in text:
        text += " (the limit is limits.sqlMemoryBytes)"
    return InvalidInputError(f"{doing}: {text}")


class DataFusionBatches(Iterator[pa.RecordBatch]):
    """The batches of a query DataFusion runs: each ``next`` may wait on DataFusion's Rust threads
    (without the GIL) for as long as the query computes. The service therefore produces them
    outside its fair scheduler's turns (a query of hours must not hold a turn every other client
    needs) and hands the query its call's cancellation (:meth:`watch`): a client that goes away
    stops the query, as ``limits.sqlTimeoutSeconds`` does.
    """

    def __init__(self, batches: Iterator[pa.RecordBatch], run: QueryRun) -> None:
        self._batches = batches
        self._run = run

    def watch(self, cancelled: Callable[[], bool], principal: str = "") -> None:
        """Stop the query once ``cancelled()`` is true; it runs in ``principal``'s share of slots."""
        self._run.watch(cancelled, principal)

    def __next__(self) -> pa.RecordBatch:
        return next(self._batches)


def _split_name(name: str) -> tuple[str, int | None]:
    """``"t@3"`` -> ``("t", 3)``; ``"t"`` -> ``("t", None)``."""
    if "@" not in name:
        return name, None
    base, _, ver = name.rpartition("@")
    if not ver.isdigit():
        raise InvalidInputError(f"{name!r}: a version after '@' is a number (e.g. \"{base}@3\")")
    return base, int(ver)


def _parse(sql: str) -> exp.Expression:
    try:
        statements = sqlglot.parse(sql, read=_READ_DIALECT)
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as e:  # TokenError: an unclosed quote
        raise InvalidInputError(f"cannot parse SQL: {e}") from None
    found = [s for s in statements if s is not None]
    if len(found) != 1 or not isinstance(found[0], exp.Expression):
        raise InvalidInputError("send one SQL statement per request")
    return found[0]


def is_query(sql: str) -> bool:
    """Whether ``sql`` is a query (``SELECT`` ...) rather than an update."""
    return isinstance(_parse(sql), exp.Query)


def has_parameters(sql: str) -> bool:
    """Whether ``sql`` has placeholders (``?`` or ``$n``) to bind."""
    tree = _parse(sql)
    return any(True for _ in tree.find_all(exp.Placeholder)) or any(
        str(p.name).isdigit() for p in tree.find_all(exp.Parameter)
    )


class SqlEngine:
    """Runs SQL statements over the datasets of ``catalog``.

    Parameters
    ----------
    catalog:
        The server's datasets.
    memory_bytes:
        Working memory one query may take in DataFusion (``limits.sqlMemoryBytes``); a query that
        needs more fails with :class:`InvalidInputError`.
    timeout_seconds:
        Time one query may run in DataFusion (``limits.sqlTimeoutSeconds``, ``0``: no limit); past
        it the query is stopped and fails with :class:`~flight_server.errors.QueryTimedOut`.
    slots:
        How many queries may run in DataFusion at once (``None``: any number).
    direct_scans:
        Whether simple selects run as one scan of ours (see :mod:`.direct`); ``False`` runs every
        query in DataFusion (tests compare the two: a query's answer never depends on the path).
    """

    def __init__(
        self,
        catalog: Catalog,
        memory_bytes: int = DEFAULT_SQL_MEMORY_BYTES,
        timeout_seconds: float = DEFAULT_SQL_TIMEOUT_SECONDS,
        slots: QuerySlots | None = None,
        direct_scans: bool = True,
    ) -> None:
        self.catalog = catalog
        self.memory_bytes = memory_bytes
        self.timeout_seconds = timeout_seconds
        self.slots = slots
        self.direct_scans = direct_scans

    # -- binding ---------------------------------------------------------------------------------
    def _parse(self, sql: str) -> exp.Expression:
        return _parse(sql)

    def _resolve(self, name: str) -> str:
        """The dataset a table name means (exact, else the one case-insensitive match)."""
        if self.catalog.exists(name):
            return name
        matches = [n for n in self.catalog.names() if n.lower() == name.lower()]
        if len(matches) == 1:
            return matches[0]
        raise NotFoundError(f"table {name!r} not found")

    def _bind(
        self, tree: exp.Expression, pinned: Mapping[str, int] | None = None, sql: str | None = None
    ) -> _Bound:
        """Give every dataset reference a registration name; rewrite SQL only when needed.

        ``tree`` is ``sql`` parsed; the rewrite edits ``sql``'s text where it names a dataset or
        has a ``?`` (see :mod:`.text`), so the rest means in DataFusion what the client wrote.
        """
        ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
        bound = _Bound(sql="")
        edits: list[Edit] = []
        rewrite, spans_known = False, sql is not None
        # In text order (depth first; sqlglot's default walk is breadth first).
        for i, placeholder in enumerate(list(tree.find_all(exp.Placeholder, bfs=False))):
            # DataFusion binds $1, $2 ...; clients of ADBC / JDBC write ?.
            if placeholder.this is None or not str(placeholder.this).isdigit():
                placeholder.replace(exp.Parameter(this=exp.Var(this=str(i + 1))))
                rewrite = True
        if rewrite and sql is not None:
            marks = [t for t in tokens(sql, _READ_DIALECT) if t.token_type == TokenType.PLACEHOLDER]
            edits += [(t.start, t.end, f"${k + 1}") for k, t in enumerate(marks)]
        for table in list(tree.find_all(exp.Table)):
            if not isinstance(table.this, exp.Identifier) or (table.name in ctes and not table.db):
                continue
            alias_node = table.args.get("alias")
            if isinstance(alias_node, exp.TableAlias) and isinstance(alias_node.this, exp.Parameter):
                # `FROM t@3` unquoted parses as t aliased `$3`: it would read the latest version.
                spelled = f"{table.name}@{alias_node.this.name}"
                raise InvalidInputError(
                    f'FROM {spelled}: quote a name with a version (FROM "{spelled}") '
                    f"or write FROM {table.name} VERSION AS OF <version>"
                )
            if table.catalog and table.catalog.lower() != CATALOG_NAME:
                raise NotFoundError(f"catalog {table.catalog!r} not found (there is one: {CATALOG_NAME})")
            if table.db and table.db.lower() != SCHEMA_NAME:
                raise NotFoundError(f"schema {table.db!r} not found (there is one: {SCHEMA_NAME})")
            base, version = _split_name(table.name)
            explicit = _version_of(table)
            if explicit is not None:
                version = explicit
            dataset = self._resolve(base)
            key = f"{dataset}@{version}" if version is not None else dataset
            if version is None and pinned is not None and dataset in pinned:
                version = pinned[dataset]
            bound.tables[key] = (dataset, version)
            if table.catalog or table.db or explicit is not None or key != table.name:
                span, named = node_span(table), node_span(table.this)
                alias_ident = alias_node.this if isinstance(alias_node, exp.TableAlias) else None
                written = node_span(alias_ident) if isinstance(alias_ident, exp.Expression) else named
                if sql is None or span is None or written is None:
                    spans_known = False
                elif alias_ident is not None or table.name != key:
                    edits.append((*span, f'"{key}" AS {sql[written[0] : written[1] + 1]}'))
                else:
                    edits.append((*span, f'"{key}"'))
                alias = table.alias
                new = exp.Table(this=exp.to_identifier(key, quoted=True))
                if alias:
                    new.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
                elif table.name != key:
                    new.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
                table.replace(new)
                rewrite = True
        if rewrite and spans_known and sql is not None:
            bound.sql = apply_edits(sql, edits)
        elif rewrite:  # a tree made in code: sqlglot writes it
            bound.sql = tree.sql(dialect=_WRITE_DIALECT, normalize_functions="lower")
        return bound

    def _context(self, bound: _Bound) -> tuple[Any, dict[str, int]]:
        import datafusion

        config = datafusion.SessionConfig().with_default_catalog_and_schema(CATALOG_NAME, SCHEMA_NAME)
        # A bounded pool and no disk: a runaway join, aggregate or sort fails at the limit (and
        # stops then, even when its client has gone), never spills to the server's disks.
        runtime = datafusion.RuntimeEnvBuilder().with_disk_manager_disabled()
        runtime = runtime.with_greedy_memory_pool(self.memory_bytes)
        ctx = datafusion.SessionContext(config, runtime)
        versions: dict[str, int] = {}
        for key, (dataset, version) in bound.tables.items():
            ds = self.catalog.open(dataset, version)
            versions[key] = ds.version
            ctx.register_dataset(key, ds)
        return ctx, versions

    # -- queries ---------------------------------------------------------------------------------
    def plan(self, sql: str, params: pa.Table | None = None, pinned: Mapping[str, int] | None = None) -> Plan:
        """Bind ``sql`` to the current (or ``pinned``) versions and find its result schema."""
        tree = self._query_tree(sql)
        direct = self._direct(sql, tree, params, 0, pinned)
        if direct is not None:
            return Plan(sql=sql, versions=direct[2], schema=direct[0], params=params)
        bound = self._bind(tree, pinned, sql)
        ctx, versions = self._context(bound)
        text = bound.sql or sql
        df = self._dataframe(ctx, text, params, 0)
        schema = df.schema()
        pins = {bound.tables[k][0]: v for k, v in versions.items() if bound.tables[k][1] is None}
        explicit = {k: v for k, v in versions.items() if bound.tables[k][1] is not None}
        return Plan(sql=sql, versions={**pins, **explicit}, schema=schema, params=params)

    def _query_tree(self, sql: str) -> exp.Expression:
        tree = self._parse(sql)
        if not isinstance(tree, exp.Query):
            raise InvalidInputError(
                "this call runs queries (SELECT ...); send updates as CommandStatementUpdate"
            )
        return tree

    def _dataframe(self, ctx: Any, sql: str, params: pa.Table | None, row: int) -> Any:
        values = None
        if params is not None and params.num_columns:
            values = {str(i + 1): params.column(i)[row].as_py() for i in range(params.num_columns)}
        try:
            # Queries only, even if a statement slipped past the parse check: no DDL (CREATE
            # EXTERNAL TABLE reads server files), no DML, no SET.
            import datafusion

            options = datafusion.SQLOptions().with_allow_ddl(False).with_allow_dml(False)
            options = options.with_allow_statements(False)
            return ctx.sql(sql, options=options, param_values=values)
        except Exception as e:  # DataFusion raises plain Exceptions for every planning error
            raise _query_error(e, "cannot plan query") from None

    def _direct(
        self,
        sql: str,
        tree: exp.Expression,
        params: pa.Table | None,
        row: int,
        pinned: Mapping[str, int] | None,
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch], dict[str, int]] | None:
        """A simple query as one scan of our own (see :mod:`.direct`): schema, batches, versions."""
        if not self.direct_scans:
            return None
        stmt = tree.copy()
        literal = None
        if params is not None and params.num_columns:
            stmt = _substitute(stmt, params, row)
            literal = _literals(params, row)
        spec = simple_scan(stmt, sql, _READ_DIALECT, literal)
        if spec is None:
            return None
        bound = self._bind(exp.select("*").from_(spec.table.copy()), pinned)
        [(key, (dataset, version))] = bound.tables.items()
        ds = self.catalog.open(dataset, version)
        pairs = [(c, c) for c in ds.schema.names] if spec.columns is None else spec.columns
        if any(c not in ds.schema.names for c, _ in pairs):
            return None  # DataFusion reports the unknown column
        try:
            scanner = ds.scanner(
                columns=[c for c, _ in pairs], filter=spec.filter, limit=spec.limit, offset=spec.offset
            )
        except (InvalidInputError, NotSupportedError):
            return None  # a predicate our filter parser does not take: DataFusion runs it
        schema = pa.schema(
            [f.with_name(out) for f, (_, out) in zip(scanner.projected_schema, pairs, strict=True)]
        )
        batches = (pa.RecordBatch.from_arrays(b.columns, schema=schema) for b in scanner.to_batches())
        versions = {key if version is not None else dataset: ds.version}
        return schema, batches, versions

    def runs_as_scan(self, sql: str) -> bool:
        """Whether a query (without parameters) skips DataFusion: one scan of ours (see ``direct``)."""
        return self._direct(sql, self._query_tree(sql), None, 0, None) is not None

    def run(
        self, sql: str, params: pa.Table | None = None, pinned: Mapping[str, int] | None = None
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Run a query on the current (or ``pinned``) versions; its schema and streamed result.

        With several parameter rows the query runs once per row, results one after the other.
        """
        tree = self._query_tree(sql)
        rows = params.num_rows if params is not None and params.num_columns else 1
        first = self._direct(sql, tree, params, 0, pinned)
        leading: list[pa.RecordBatch] = []
        if first is not None:
            # The first batch is read here: a predicate our filter engine accepts but cannot
            # evaluate on these types fails now, and DataFusion runs the statement instead.
            try:
                leading = list(itertools.islice(first[1], 1))
            except InvalidInputError:
                first = None
        if first is not None:
            direct_schema, rest = first[0], first[1]

            def scans() -> Iterator[pa.RecordBatch]:
                yield from leading
                yield from rest
                for row in range(1, rows):
                    direct = self._direct(sql, tree, params, row, pinned)
                    assert direct is not None  # every row gives the statement the same shape
                    yield from direct[1]

            return direct_schema, scans()
        bound = self._bind(tree, pinned, sql)
        ctx, _ = self._context(bound)
        text = bound.sql or sql
        head = self._dataframe(ctx, text, params, 0)
        schema = head.schema()

        run = QueryRun(self.timeout_seconds, self.slots)

        def batches() -> Iterator[pa.RecordBatch]:
            for row in range(rows):
                df = head if row == 0 else self._dataframe(ctx, text, params, row)
                try:
                    # The optimizer runs here, then the plan: errors of either are the query's.
                    for batch in run.batches(df):
                        yield batch.cast(schema) if batch.schema != schema else batch
                except (LanceError, QueryTimedOut, flight.FlightError):
                    raise  # ours (a cancelled call, no free slot), not the statement's
                except Exception as e:  # DataFusion's plain Exceptions and pyarrow's ArrowInvalid
                    raise _query_error(e, "query failed") from None

        return schema, DataFusionBatches(batches(), run)

    # -- updates ---------------------------------------------------------------------------------
    def update(self, sql: str, params: pa.Table | None = None) -> int:
        """Run a ``DELETE``, ``UPDATE`` or ``INSERT``; the number of rows it changed."""
        tree = self._parse(sql)
        rows = params.num_rows if params is not None and params.num_columns else 1
        total = 0
        for row in range(rows):
            stmt = tree.copy()
            literal = None
            if params is not None and params.num_columns:
                stmt = _substitute(stmt, params, row)
                literal = _literals(params, row)
            total += self._update_one(stmt, sql, literal)
        return total

    def _update_one(self, stmt: exp.Expression, sql: str, literal: Callable[[int], str] | None) -> int:
        # Conditions and values go to our engine as the client wrote them (see .text): sqlglot's
        # rewrite of `WHERE "s" = 's'` was `'s' = 's'`, and that DELETE emptied the table.
        qualifiers = {n.alias_or_name for n in stmt.find_all(exp.Table)}
        until = _STATEMENT_END
        if isinstance(stmt, exp.Delete):
            name = self._target(stmt.this)
            where = stmt.args.get("where")
            ds = self.catalog.open(name, shared=False)
            try:
                if where is None:
                    return int(ds.delete("true")["num_deleted_rows"])
                cond = clause_text(sql, _READ_DIALECT, TokenType.WHERE, until, qualifiers, literal)
                if cond is None:
                    raise InvalidInputError("cannot find the DELETE's WHERE clause")
                return int(ds.delete(cond)["num_deleted_rows"])
            finally:
                self.catalog.written(name)
        if isinstance(stmt, exp.Update):
            name = self._target(stmt.this)
            values = assigned_texts(
                sql, _READ_DIALECT, {TokenType.WHERE, TokenType.FROM} | until, qualifiers, literal
            )
            if values is None or len(values) != len(stmt.expressions):
                raise InvalidInputError("UPDATE ... SET takes column = expression pairs")
            sets = {}
            for eq, value in zip(stmt.expressions, values, strict=True):
                if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
                    raise InvalidInputError("UPDATE ... SET takes column = expression pairs")
                sets[eq.this.name] = value
            where = stmt.args.get("where")
            ds = self.catalog.open(name, shared=False)
            try:
                cond = None
                if where is not None:
                    cond = clause_text(sql, _READ_DIALECT, TokenType.WHERE, until, qualifiers, literal)
                return int(ds.update(sets, cond)["num_rows_updated"])
            finally:
                self.catalog.written(name)
        if isinstance(stmt, exp.Insert):
            return self._insert(stmt, sql, literal)
        raise NotSupportedError(
            f"{stmt.key.upper()} statements are not supported: updates are DELETE, UPDATE and INSERT"
        )

    def _target(self, node: exp.Expression) -> str:
        if isinstance(node, exp.Schema):
            node = node.this
        if not isinstance(node, exp.Table):
            raise InvalidInputError("the statement needs a target table")
        if "@" in node.name or node.args.get("version") is not None:
            raise InvalidInputError("only the latest version of a table can be changed")
        return self._resolve(node.name)

    def _insert(self, stmt: exp.Insert, sql: str, literal: Callable[[int], str] | None) -> int:
        name = self._target(stmt.this)
        columns = [c.name for c in stmt.this.expressions] if isinstance(stmt.this, exp.Schema) else None
        source = stmt.expression
        if not isinstance(source, exp.Query | exp.Values):
            raise InvalidInputError("INSERT takes VALUES (...) or a SELECT")
        # The rows' query as the client wrote it (see .text): sqlglot's rewrite read `"s"` as the
        # string 's' and `n / 2` as a float division.
        query = insert_source_text(sql, _READ_DIALECT, _STATEMENT_END, literal)
        if query is None:
            raise InvalidInputError("cannot find the INSERT's VALUES (...) or SELECT")
        if isinstance(source, exp.Values):
            query = f"SELECT * FROM ({query}) AS v"
        schema, batches = self.run(query)
        # The rows are held whole before the append: as much as a query's working memory, not
        # what an INSERT ... SELECT over a huge generate_series or a cross join would make.
        held: list[pa.RecordBatch] = []
        size = 0
        for batch in batches:
            size += batch.nbytes
            if size > self.memory_bytes:
                raise InvalidInputError(
                    f"INSERT ... SELECT makes more than limits.sqlMemoryBytes ({self.memory_bytes} bytes) "
                    "of rows; send big data as an ingest (CommandStatementIngest) or a write"
                )
            held.append(batch)
        data = pa.Table.from_batches(held, schema)
        ds: LanceDataset = self.catalog.open(name, shared=False)
        target = ds.schema
        names = columns if columns is not None else target.names[: data.num_columns]
        if len(names) != data.num_columns:
            raise InvalidInputError(f"INSERT gives {data.num_columns} values for {len(names)} columns")
        data = data.rename_columns(names)
        missing = [f for f in target if f.name not in names]
        for f in missing:
            data = data.append_column(f, pa.nulls(data.num_rows, f.type))
        try:
            data = data.select(target.names).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise InvalidInputError(f"INSERT values do not fit the table's columns: {e}") from None
        try:
            write_dataset(
                data,
                ds.uri,
                mode="append",
                storage_options=self.catalog.storage_options or None,
                session=self.catalog.session,
            )
        finally:
            self.catalog.written(name)
        return int(data.num_rows)


def _parameter(params: pa.Table, row: int, index: int) -> exp.Expression:
    """Parameter ``index`` (0-based) of row ``row`` as a SQL literal."""
    if index >= params.num_columns:
        raise InvalidInputError(f"the statement uses parameter {index + 1}; {params.num_columns} were bound")
    converted = exp.convert(params.column(index)[row].as_py())
    assert isinstance(converted, exp.Expression)
    return converted


def _literals(params: pa.Table, row: int) -> Callable[[int], str]:
    """Row ``row``'s parameters as SQL text, by 0-based index."""
    return lambda index: _parameter(params, row, index).sql()


def _substitute(stmt: exp.Expression, params: pa.Table, row: int) -> exp.Expression:
    """``stmt`` with its placeholders (``?`` in order, or ``$n``) replaced by row ``row``'s values."""
    n = 0

    def literal(index: int) -> exp.Expression:
        return _parameter(params, row, index)

    def visit(node: exp.Expression) -> exp.Expression:
        nonlocal n
        if isinstance(node, exp.Placeholder):
            if node.this is not None and str(node.this).isdigit():
                return literal(int(str(node.this)) - 1)
            n += 1
            return literal(n - 1)
        if isinstance(node, exp.Parameter) and str(node.name).isdigit():
            return literal(int(node.name) - 1)
        return node

    return stmt.transform(visit)
