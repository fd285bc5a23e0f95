"""Flight SQL on the service's own port: which calls are Flight SQL, and what they answer.

:class:`FlightSql` is called by :class:`~flight_server.service.LanceFlightService` for descriptors,
tickets and actions that carry Flight SQL messages (or plain SQL text as a command descriptor);
the service keeps auth, stream limits, metrics and error mapping exactly as for its own messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from importlib import metadata as importlib_metadata
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.catalog import Catalog
from flight_server.flightsql import metadata as md
from flight_server.flightsql._serde import pack, serialize, unpack
from flight_server.flightsql.commands import Handle, SqlCommand, decode_handle, encode_handle
from flight_server.flightsql.engine import CATALOG_NAME, SCHEMA_NAME, SqlEngine, has_parameters, is_query
from flight_server.flightsql.interrupt import QuerySlots
from flight_server.handlers.put import write_stream
from flight_server.handlers.scan import ticket_expiration
from flight_server.requests import WriteMode, WriteRequest
from flight_server.settings import (
    DEFAULT_SQL_MEMORY_BYTES,
    DEFAULT_SQL_TIMEOUT_SECONDS,
    DEFAULT_TICKET_LIFETIME_SECONDS,
)
from lance_format.core.errors import (
    DatasetAlreadyExistsError,
    InvalidInputError,
    NotFoundError,
    NotSupportedError,
)

__all__ = ["SQL_ACTIONS", "FlightSql", "sql_text"]

#: Plain SQL text sent as a command descriptor by clients without any protobuf (first keyword).
_SQL_TEXT = re.compile(rb"\s*\(*\s*(select|with|values|delete|update|insert)\b", re.I)

_TRANSACTIONS = ("BeginTransaction", "EndTransaction", "BeginSavepoint", "EndSavepoint")
#: Flight SQL actions (name -> description for list_actions).
SQL_ACTIONS = {
    "CreatePreparedStatement": "Flight SQL: prepare a statement (ActionCreatePreparedStatementRequest)",
    "ClosePreparedStatement": "Flight SQL: close a prepared statement (handles hold no server state)",
    **{name: "Flight SQL: transactions are not supported (UNIMPLEMENTED)" for name in _TRANSACTIONS},
    "CancelQuery": "Flight SQL: not supported (UNIMPLEMENTED); results are pulled, so stop reading",
    "CreatePreparedSubstraitPlan": "Flight SQL: Substrait plans are not supported (UNIMPLEMENTED)",
}
_SUBSTRAIT = "Substrait plans are not supported (SqlInfo FLIGHT_SQL_SERVER_SUBSTRAIT is false): send SQL"
_METADATA = {
    "CommandGetSqlInfo",
    "CommandGetXdbcTypeInfo",
    "CommandGetCatalogs",
    "CommandGetDbSchemas",
    "CommandGetTables",
    "CommandGetTableTypes",
    "CommandGetPrimaryKeys",
    "CommandGetExportedKeys",
    "CommandGetImportedKeys",
    "CommandGetCrossReference",
}
_COUNT_SCHEMA = pa.schema([pa.field("count", pa.int64(), nullable=False)])


def sql_text(data: bytes) -> str | None:
    """The SQL statement a plain-text command descriptor holds, or ``None``."""
    if not _SQL_TEXT.match(data):
        return None
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError("SQL text must be UTF-8") from None


def _server_version() -> str:
    try:
        return importlib_metadata.version("lance-flight")
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


def _refuse_substrait(cmd: SqlCommand) -> None:
    if cmd.kind == "CommandStatementSubstraitPlan":
        raise NotSupportedError(_SUBSTRAIT)


def _no_transaction(cmd: SqlCommand) -> None:
    if cmd.get("transaction_id"):
        raise NotSupportedError("transactions are not supported: every statement commits on its own")


class FlightSql:
    """Answers Flight SQL commands, tickets, puts and actions over ``catalog``.

    Parameters
    ----------
    catalog:
        The server's datasets.
    max_message_bytes:
        ``limits.maxMessageBytes``, for ingest streams (as for every do_put).
    ticket_lifetime:
        ``limits.ticketLifetimeSeconds``: the expiration_time of result tickets pinned to versions.
    read_only:
        Reported in SqlInfo (whether the server takes writes at all).
    memory_bytes:
        ``limits.sqlMemoryBytes``: the working memory of one query in DataFusion.
    timeout_seconds:
        ``limits.sqlTimeoutSeconds``: how long one query may run in DataFusion (``0``: no limit).
    slots:
        ``limits.maxConcurrentSqlQueries``: the queries that may run in DataFusion at once.
    """

    def __init__(
        self,
        catalog: Catalog,
        max_message_bytes: int,
        ticket_lifetime: int = DEFAULT_TICKET_LIFETIME_SECONDS,
        read_only: bool = False,
        memory_bytes: int = DEFAULT_SQL_MEMORY_BYTES,
        timeout_seconds: float = DEFAULT_SQL_TIMEOUT_SECONDS,
        slots: QuerySlots | None = None,
    ) -> None:
        self.catalog = catalog
        self.ticket_lifetime = ticket_lifetime
        self.engine = SqlEngine(catalog, memory_bytes, timeout_seconds, slots)
        self.max_message_bytes = max_message_bytes
        self.sql_info_values: dict[int, Any] = {
            0: "lance-flight",
            1: _server_version(),
            2: pa.__version__,
            3: read_only,
            4: True,  # SQL
            5: False,  # Substrait plans
            8: md.int32(0),  # SQL_SUPPORTED_TRANSACTION_NONE
            9: False,  # CancelQuery
            100: md.int32(0),  # statement handles never time out (they hold no state)
            101: md.int32(0),
            500: False,  # CREATE/DROP CATALOG
            501: False,  # CREATE/DROP SCHEMA
            502: False,  # CREATE/DROP TABLE through SQL (tables come from ingest)
            503: md.int32(3),  # unquoted identifiers fold to lower case
            504: '"',
            505: md.int32(0),
            506: True,
        }

    # -- recognizing Flight SQL --------------------------------------------------------------------
    def command(self, descriptor: flight.FlightDescriptor) -> SqlCommand | None:
        """The Flight SQL command of a descriptor (plain SQL text included), or ``None``."""
        if descriptor.descriptor_type != flight.DescriptorType.CMD:
            return None
        raw = bytes(descriptor.command or b"")
        cmd = unpack(raw)
        if cmd is not None:
            return cmd
        text = sql_text(raw)
        return None if text is None else SqlCommand("CommandStatementQuery", {"query": text})

    # -- get_flight_info / get_schema --------------------------------------------------------------
    def flight_info(
        self, cmd: SqlCommand, descriptor: flight.FlightDescriptor, require_write: Callable[[], None]
    ) -> flight.FlightInfo:
        """Plan ``cmd``; one endpoint whose ticket any worker can serve (row order is kept)."""
        _refuse_substrait(cmd)
        expires = None
        if cmd.kind in _METADATA:
            schema, ticket = self.schema(cmd), bytes(descriptor.command)
        elif cmd.kind in ("CommandStatementQuery", "CommandPreparedStatementQuery"):
            schema, handle = self._statement(cmd, require_write)
            ticket = pack("TicketStatementQuery", statement_handle=encode_handle(handle))
            if handle.versions:  # pinned: readable while cleanup keeps those versions
                expires = ticket_expiration(self.ticket_lifetime)
        else:
            raise InvalidInputError(f"{cmd.kind} is not a get_flight_info command")
        # No location: read it where you asked (any worker could serve it).
        endpoint = flight.FlightEndpoint(ticket, [], expiration_time=expires)
        return flight.FlightInfo(schema, descriptor, [endpoint], -1, -1, ordered=True)

    def _statement(self, cmd: SqlCommand, require_write: Callable[[], None]) -> tuple[pa.Schema, Handle]:
        _no_transaction(cmd)
        if cmd.kind == "CommandStatementQuery":
            handle = Handle(sql=str(cmd.get("query", "")))
        else:
            handle = decode_handle(cmd.get("prepared_statement_handle", b""))
        if not is_query(handle.sql):
            # DML sent as a query (ADBC's cursor.execute does this): run it now, once; the ticket
            # returns the count and never runs it again.
            require_write()
            count = self.engine.update(handle.sql, handle.params)
            return _COUNT_SCHEMA, Handle(sql=handle.sql, count=count)
        plan = self.engine.plan(handle.sql, handle.params)
        return plan.schema, Handle(sql=handle.sql, versions=plan.versions, params=handle.params)

    def schema(self, cmd: SqlCommand) -> pa.Schema:
        """The result schema of ``cmd`` (``get_schema``)."""
        _refuse_substrait(cmd)
        kind = cmd.kind
        if kind in ("CommandStatementQuery", "CommandPreparedStatementQuery"):
            _no_transaction(cmd)
            handle = (
                Handle(sql=str(cmd.get("query", "")))
                if kind == "CommandStatementQuery"
                else decode_handle(cmd.get("prepared_statement_handle", b""))
            )
            if not is_query(handle.sql):
                return _COUNT_SCHEMA
            return self.engine.plan(handle.sql, handle.params).schema
        fixed = {
            "CommandGetSqlInfo": md.SQL_INFO_SCHEMA,
            "CommandGetXdbcTypeInfo": md.XDBC_TYPE_INFO_SCHEMA,
            "CommandGetCatalogs": md.CATALOGS_SCHEMA,
            "CommandGetDbSchemas": md.DB_SCHEMAS_SCHEMA,
            "CommandGetTableTypes": md.TABLE_TYPES_SCHEMA,
            "CommandGetPrimaryKeys": md.PRIMARY_KEYS_SCHEMA,
            "CommandGetExportedKeys": md.KEYS_SCHEMA,
            "CommandGetImportedKeys": md.KEYS_SCHEMA,
            "CommandGetCrossReference": md.KEYS_SCHEMA,
        }
        if kind == "CommandGetTables":
            return md.tables_schema(bool(cmd.get("include_schema", False)))
        if kind not in fixed:
            raise InvalidInputError(f"{kind} has no result schema")
        return fixed[kind]

    # -- do_get ----------------------------------------------------------------------------------
    def stream(self, ticket: bytes) -> tuple[pa.Schema, Iterator[pa.RecordBatch]] | None:
        """The result a Flight SQL ticket names, or ``None`` when it is not one."""
        cmd = unpack(ticket)
        if cmd is None:
            return None
        if cmd.kind == "TicketStatementQuery":
            handle = decode_handle(cmd.get("statement_handle", b""))
            if handle.count is not None:
                return _COUNT_SCHEMA, iter(pa.table({"count": [handle.count]}, _COUNT_SCHEMA).to_batches())
            return self.engine.run(handle.sql, handle.params, pinned=handle.versions)
        if cmd.kind in _METADATA:
            table = self._metadata(cmd)
            return table.schema, iter(table.to_batches())
        raise InvalidInputError(f"{cmd.kind} is not a Flight SQL ticket")

    def _metadata(self, cmd: SqlCommand) -> pa.Table:
        kind = cmd.kind
        if kind == "CommandGetSqlInfo":
            return md.sql_info(list(cmd.get("info", [])), self.sql_info_values)
        if kind == "CommandGetXdbcTypeInfo":
            return md.xdbc_type_info(cmd.get("data_type"))
        if kind == "CommandGetCatalogs":
            return md.catalogs()
        if kind == "CommandGetDbSchemas":
            return md.db_schemas(cmd.get("catalog"), cmd.get("db_schema_filter_pattern"))
        if kind == "CommandGetTables":
            names = md.matching_tables(
                self.catalog.names(),
                cmd.get("catalog"),
                cmd.get("db_schema_filter_pattern"),
                cmd.get("table_name_filter_pattern"),
                list(cmd.get("table_types", [])),
            )
            schemas = [self.catalog.open(n).schema for n in names] if cmd.get("include_schema") else None
            return md.tables(names, schemas)
        if kind == "CommandGetTableTypes":
            return md.table_types()
        if kind == "CommandGetPrimaryKeys":
            table = str(cmd.get("table", ""))
            here = cmd.get("catalog") in (None, CATALOG_NAME) and cmd.get("db_schema") in (None, SCHEMA_NAME)
            schema = self.catalog.open(table).schema if here and self.catalog.exists(table) else None
            return md.primary_keys(table, schema)
        return md.keys()

    # -- do_put ----------------------------------------------------------------------------------
    def put(
        self,
        cmd: SqlCommand,
        reader: flight.MetadataRecordBatchReader,
        require_write: Callable[[], None],
        metrics: Any = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> bytes:
        """Run a Flight SQL do_put; the app_metadata of its one PutResult."""
        _refuse_substrait(cmd)
        kind = cmd.kind
        if kind == "CommandPreparedStatementQuery":
            handle = decode_handle(cmd.get("prepared_statement_handle", b""))
            params = reader.read_all()
            bound = Handle(sql=handle.sql, params=params if params.num_columns and params.num_rows else None)
            return serialize("DoPutPreparedStatementResult", prepared_statement_handle=encode_handle(bound))
        require_write()
        _no_transaction(cmd)
        if kind == "CommandStatementUpdate":
            count = self.engine.update(str(cmd.get("query", "")))
        elif kind == "CommandPreparedStatementUpdate":
            handle = decode_handle(cmd.get("prepared_statement_handle", b""))
            params = reader.read_all()
            values = params if params.num_columns and params.num_rows else handle.params
            count = self.engine.update(handle.sql, values)
        elif kind == "CommandStatementIngest":
            count = self._ingest(cmd, reader, metrics, cancelled)
        else:
            raise InvalidInputError(f"{kind} is not a do_put command")
        return serialize("DoPutUpdateResult", record_count=count)

    def _ingest(
        self,
        cmd: SqlCommand,
        reader: flight.MetadataRecordBatchReader,
        metrics: Any,
        cancelled: Callable[[], bool] | None,
    ) -> int:
        table = str(cmd.get("table", ""))
        if cmd.get("temporary"):
            raise NotSupportedError("temporary tables are not supported")
        if cmd.get("catalog") not in (None, CATALOG_NAME) or cmd.get("schema") not in (None, SCHEMA_NAME):
            raise NotFoundError(f"ingest goes to catalog {CATALOG_NAME!r}, schema {SCHEMA_NAME!r}")
        options = cmd.get("table_definition_options", {})
        if_not_exist, if_exists = int(options.get("if_not_exist", 0)), int(options.get("if_exists", 0))
        mode: WriteMode
        if self.catalog.exists(table):
            modes: dict[int, WriteMode] = {2: "append", 3: "overwrite"}
            if if_exists == 1:
                raise DatasetAlreadyExistsError(f"table {table!r} already exists")
            if if_exists not in modes:
                raise InvalidInputError("CommandStatementIngest needs table_definition_options.if_exists")
            mode = modes[if_exists]
        else:
            if if_not_exist == 2:
                raise NotFoundError(f"table {table!r} not found")
            if if_not_exist != 1:
                raise InvalidInputError("CommandStatementIngest needs table_definition_options.if_not_exist")
            mode = "create"
        try:
            result = write_stream(
                self.catalog, WriteRequest(table, mode), reader, self.max_message_bytes, metrics, cancelled
            )
        finally:
            self.catalog.written(table)
        return result.rows_written

    # -- do_action -------------------------------------------------------------------------------
    def action(self, name: str, body: bytes) -> list[bytes]:
        """Run Flight SQL action ``name``; its results."""
        if name in _TRANSACTIONS:
            raise NotSupportedError("transactions are not supported: every statement commits on its own")
        if name == "CreatePreparedSubstraitPlan":
            raise NotSupportedError(_SUBSTRAIT)
        if name == "CancelQuery":
            raise NotSupportedError("CancelQuery is not supported: stop reading the stream instead")
        cmd = unpack(body)
        if name == "ClosePreparedStatement":
            return []  # handles carry their statement: nothing to free
        if cmd is None or cmd.kind != "ActionCreatePreparedStatementRequest":
            raise InvalidInputError(f"{name} takes an Any-wrapped ActionCreatePreparedStatementRequest")
        _no_transaction(cmd)
        sql = str(cmd.get("query", ""))
        # A query's result schema; with unbound parameters it is known once they are bound.
        schema = self.engine.plan(sql).schema if is_query(sql) and not has_parameters(sql) else None
        result = pack(
            "ActionCreatePreparedStatementResult",
            prepared_statement_handle=encode_handle(Handle(sql=sql)),
            dataset_schema=b"" if schema is None else schema.serialize().to_pybytes(),
            parameter_schema=b"",
        )
        return [result]
