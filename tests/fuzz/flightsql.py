"""Flight SQL calls for the fuzzer: ``Any``-wrapped commands, tickets, handles, actions and puts.

Flight SQL shares the port with ``lance_flight.v1``: a descriptor command, ticket or action body
that is a ``google.protobuf.Any`` naming an ``arrow.flight.protocol.sql`` message (or plain SQL
text as a command) goes to ``flight_server.flightsql``. The calls here cover every message the
server answers: statements (queries over the fixture datasets with filters, joins, aggregates,
ordering, time travel, placeholders; DML; SQL it must refuse; queries that run out of DataFusion's
working memory or fail while they run), prepared statements and their handles (as the server
issued them, or forged, since handles are stateless JSON a client can write), metadata commands,
ingest, parameter binding, the refused transaction and Substrait actions, and wrong type URLs.
Values are built as :class:`~tests.fuzz.wire.Msg` trees, so the wire mutations and the shrinker
apply to them as to every other message.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

import pyarrow as pa

from tests.fuzz.wire import WIRE_LEN, WIRE_VARINT, Entry, Msg, Value

if TYPE_CHECKING:
    from tests.fuzz.generate import Call, Generator

__all__ = ["TYPE_URL", "flight_sql_call", "statement"]

TYPE_URL = "type.googleapis.com/arrow.flight.protocol.sql."
#: What a Flight SQL call is, and how often each is drawn.
KINDS: dict[str, int] = {
    "query_info": 10,
    "query_schema": 3,
    "prepared_query": 4,
    "statement_ticket": 4,
    "metadata": 5,
    "text": 2,
    "update": 3,
    "prepared_update": 2,
    "bind": 2,
    "ingest": 3,
    "action": 4,
    "wrong_kind": 2,
}
#: Tables ingest creates (few names: they are replaced and appended to, not piled up).
INGEST_TABLES = ("sql_new0", "sql_new1")
#: SQL the server must refuse or fail cleanly on (never INTERNAL): DDL, several statements,
#: run-time errors, a result bigger than DataFusion's working memory, values no type holds.
HOSTILE_SQL = (
    "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
    "COPY (SELECT 1) TO '/tmp/fuzz-copy.csv'",
    "SET datafusion.execution.batch_size = 1",
    "DROP TABLE t0",
    "CREATE TABLE x AS SELECT 1",
    "SELECT 1; SELECT 2",
    "SELECT 1/0 AS x",
    "SELECT id / 0 FROM t0",
    "SELECT CAST(s AS INT) FROM t0",
    "SELECT * FROM t0 LIMIT -1",
    "SELECT * FROM t0 OFFSET 18446744073709551615",
    "SELECT * FROM t0 LIMIT 99999999999999999999999",
    "SELECT cardinality(x) FROM (SELECT array_agg(value) AS x FROM generate_series(1, 100000000))",
    "SELECT length(repeat('x', 3000000000))",
    "SELECT * FROM t0@99",
    'SELECT * FROM "t0@99"',
    "SELECT * FROM t0 VERSION AS OF 18446744073709551615",
    "SELECT * FROM other.main.t0",
    "SELECT * FROM lance.other.t0",
    "SELECT ?",
    "SELECT * FROM t0 WHERE id = $7",
    "DELETE FROM t0@1 WHERE id = 1",
    "UPDATE t0 SET nope = 1",
    "UPDATE t0 SET id = 'x' WHERE id = -1",
    "INSERT INTO t0 VALUES (1)",
    "INSERT INTO t0 (id, s) SELECT 'a', 1",
    "MERGE INTO t0 USING t1 ON t0.id = t1.id WHEN MATCHED THEN DELETE",
    "EXPLAIN SELECT 1",
    "SELECT * FROM (((((((((((((((((((((t0)))))))))))))))))))))",
)


def _any(gen: Generator, kind: str, inner: Msg | bytes) -> Msg:
    """``inner`` wrapped in an ``Any`` naming ``kind`` (sometimes another or a broken type URL)."""
    url = TYPE_URL + kind
    if gen.chance(gen.hostile / 4):
        url = gen.pick(
            (TYPE_URL + "CommandNope", TYPE_URL, "type.googleapis.com/other.Message", kind, "", "\xff")
        )
    return gen.mutate_wire(
        Msg("Any", (Entry(1, WIRE_LEN, url, "type_url"), Entry(2, WIRE_LEN, inner, "value")))
    )


def _table_ref(gen: Generator, name: str) -> str:
    """A reference to dataset ``name``: plain, qualified, or at a version."""
    info = gen.info(name)
    version = gen.rng.randrange(1, info.versions + 2)
    return gen.pick(
        (
            name,
            name,
            f"main.{name}",
            f"lance.main.{name}",
            f'"{name}@{version}"',
            f"{name} VERSION AS OF {version}",
            name.upper(),
        )
    )


def statement(gen: Generator) -> str:
    """A SQL statement over the fixture datasets: mostly queries, some DML, some hostile."""
    if gen.chance(gen.hostile / 2):
        from tests.fuzz.generate import SQL_GARBAGE

        return str(gen.pick((*HOSTILE_SQL, *SQL_GARBAGE)))
    names = [n for n in sorted(gen.ctx.datasets) if n != "wide"] or sorted(gen.ctx.datasets)
    name = gen.pick(names)
    info = gen.info(name)
    where = gen.sql(info)
    where_text = where.decode("utf-8", "replace") if isinstance(where, bytes) else where
    cols = ", ".join(str(c) for c in gen.column_names(info) if isinstance(c, str)) or "*"
    ref = _table_ref(gen, name)
    n = gen.pick((0, 1, 5, 100, info.rows))
    r = gen.rng.randrange(14)
    if r < 4:
        text = f"SELECT {cols} FROM {ref} WHERE {where_text}"
        if gen.chance(0.5):
            text += f" LIMIT {n}"
        if gen.chance(0.3):
            text += f" OFFSET {gen.pick((0, 3, n))}"
        return text
    if r == 4:
        return f"SELECT s, count(*) AS n, sum(id) AS total, avg(f) FROM {ref} GROUP BY s ORDER BY s"
    if r == 5:
        return f"SELECT a.id, b.s FROM t0 a JOIN t1 b ON a.id = b.id WHERE a.id < {n} ORDER BY a.id"
    if r == 6:
        return f"SELECT id, f FROM {ref} ORDER BY f DESC NULLS LAST LIMIT {n}"
    if r == 7:
        return f"SELECT st.a, st.b, v[1] AS v1, cardinality(v) FROM {ref} WHERE id < {n}"
    if r == 8:
        return f"SELECT * FROM {ref} WHERE id = ? OR s = ?"
    if r == 9:
        return f"WITH x AS (SELECT id FROM {ref} WHERE id > {n}) SELECT count(*) FROM x"
    if r == 10:
        return f"SELECT DISTINCT s FROM {ref} UNION ALL SELECT 'z'"
    # DML: mostly on rows that do not exist (the fixtures stay what the generator knows).
    target = gen.pick(("t0", "t1", *INGEST_TABLES))
    if r == 11:
        return f"DELETE FROM {target} WHERE id = {gen.pick((10**9, -1, n))}"
    if r == 12:
        return f"UPDATE {target} SET s = 'upd' WHERE id = {gen.pick((10**9, n))}"
    return f"INSERT INTO {target} (id, s) VALUES ({10**9 + n}, 'ins')"


def forged_handle(gen: Generator) -> bytes:
    """A statement handle: the server's stateless format, as issued or forged and broken."""
    body: dict[str, object] = {"sql": statement(gen)}
    r = gen.rng.randrange(8)
    if r == 0:
        body["versions"] = {gen.pick(sorted(gen.ctx.datasets)): gen.pick((1, 2, 99, -1, 1 << 70))}
    elif r == 1:
        body["count"] = gen.pick((0, 5, -1, "x", None, 1 << 70))
    elif r == 2:
        sink = pa.BufferOutputStream()
        params = pa.table({"a": [1, 2], "b": ["v1", "x"]})
        with pa.ipc.new_stream(sink, params.schema) as writer:
            writer.write_table(params)
        blob = sink.getvalue().to_pybytes()
        if gen.chance(0.5):
            blob = blob[: gen.rng.randrange(len(blob))]
        body["params"] = base64.b64encode(blob).decode()
    elif r == 3:
        body["params"] = gen.pick(("!!", "", "AAAA"))
    elif r == 4:
        body = gen.pick(({}, {"sql": 5}, {"sql": None}, {"versions": []}))  # type: ignore[assignment]
    text = json.dumps(body).encode()
    if gen.chance(gen.hostile / 2):
        return gen.pick((b"", b"lfsql1:", b"lfsql1:{", b"lfsql2:" + text, text, gen.garbage()))
    return b"lfsql1:" + text


def _handle(gen: Generator) -> bytes:
    if gen.ctx.sql_handles and gen.chance(0.6):
        handle = bytes(gen.pick(gen.ctx.sql_handles))
        if gen.chance(gen.hostile):
            handle = handle[: gen.rng.randrange(len(handle) + 1)]
        return handle
    return forged_handle(gen)


def _fields(gen: Generator, kind: str) -> tuple[Entry, ...]:
    """Fields of metadata command ``kind`` (catalog, schema and table names and patterns)."""
    names = sorted(gen.ctx.datasets)
    catalog = gen.pick(("lance", "lance", "other", "", "LANCE", "%"))
    schema = gen.pick(("main", "main", "other", "", "ma%", "_%"))
    table = gen.pick((*names, *INGEST_TABLES, "nope", "%", "t_", "T0", "\x00"))
    entries: list[Entry] = []
    if kind in ("CommandGetDbSchemas", "CommandGetTables"):
        entries += [
            Entry(1, WIRE_LEN, catalog, "catalog"),
            Entry(2, WIRE_LEN, schema, "db_schema_filter_pattern"),
        ]
    if kind == "CommandGetTables":
        entries.append(Entry(3, WIRE_LEN, table, "table_name_filter_pattern"))
        entries += [
            Entry(4, WIRE_LEN, t, "table_types") for t in gen.pick(([], ["TABLE"], ["VIEW", "TABLE"]))
        ]
        entries.append(Entry(5, WIRE_VARINT, gen.pick((0, 1)), "include_schema"))
    if kind in ("CommandGetPrimaryKeys", "CommandGetExportedKeys", "CommandGetImportedKeys"):
        entries += [
            Entry(1, WIRE_LEN, catalog, "catalog"),
            Entry(2, WIRE_LEN, schema, "db_schema"),
            Entry(3, WIRE_LEN, table, "table"),
        ]
    if kind == "CommandGetCrossReference":
        entries += [Entry(3, WIRE_LEN, table, "pk_table"), Entry(6, WIRE_LEN, gen.pick(names), "fk_table")]
    if kind == "CommandGetSqlInfo":
        info = [
            gen.pick((0, 1, 2, 3, 4, 5, 8, 9, 100, 500, 504, 10_000, 1 << 31))
            for _ in range(gen.rng.randrange(5))
        ]
        entries += [Entry(1, WIRE_VARINT, i, "info") for i in info]
    if kind == "CommandGetXdbcTypeInfo" and gen.chance(0.7):
        entries.append(Entry(1, WIRE_VARINT, gen.pick((4, 12, -5, 0, 93, 1 << 40)), "data_type"))
    return tuple(entries)


METADATA = (
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
)


def _query(gen: Generator, kind: str = "CommandStatementQuery") -> Msg:
    entries: tuple[Entry, ...] = (Entry(1, WIRE_LEN, statement(gen), "query"),)
    if gen.chance(gen.hostile / 4):
        entries += (Entry(2, WIRE_LEN, b"txn", "transaction_id"),)
    return _any(gen, kind, Msg(kind, entries))


def _params(gen: Generator) -> pa.Table:
    r = gen.rng.randrange(4)
    if r == 0:
        return pa.table({"a": [gen.rng.randrange(-5, 1200)], "b": [f"v{gen.rng.randrange(50)}"]})
    if r == 1:
        return pa.table({"a": [1, 2, 700], "b": ["v1", None, "x"]})
    if r == 2:
        return pa.table({})
    from tests.fuzz.generate import random_table

    return random_table(gen.rng, max_cols=3, max_rows=4)


def flight_sql_call(gen: Generator) -> Call:
    """One Flight SQL call."""
    from tests.fuzz.generate import Call, PutData, conforming_table, random_table

    kind = gen.rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
    note = f"flight-sql {kind}"
    if kind in ("query_info", "query_schema"):
        rpc = "get_flight_info" if kind == "query_info" else "get_schema"
        return Call(rpc, msg=_query(gen), note=note)
    if kind == "prepared_query":
        inner = Msg(
            "CommandPreparedStatementQuery", (Entry(1, WIRE_LEN, _handle(gen), "prepared_statement_handle"),)
        )
        return Call(gen.pick(("get_flight_info", "get_schema")), msg=_any(gen, inner.name, inner), note=note)
    if kind == "statement_ticket":
        inner = Msg("TicketStatementQuery", (Entry(1, WIRE_LEN, _handle(gen), "statement_handle"),))
        return Call("do_get", msg=_any(gen, inner.name, inner), note=note)
    if kind == "metadata":
        name = gen.pick(METADATA)
        msg = _any(gen, name, Msg(name, _fields(gen, name)))
        return Call(gen.pick(("get_flight_info", "get_schema", "do_get")), msg=msg, note=f"{note} {name}")
    if kind == "text":
        return Call(
            gen.pick(("get_flight_info", "get_schema")),
            raw=statement(gen).encode("utf-8", "surrogatepass"),
            note=note,
        )
    if kind == "update":
        return Call(
            "do_put", msg=_query(gen, "CommandStatementUpdate"), data=PutData(pa.table({})), note=note
        )
    if kind in ("prepared_update", "bind"):
        name = (
            "CommandPreparedStatementUpdate" if kind == "prepared_update" else "CommandPreparedStatementQuery"
        )
        inner = Msg(name, (Entry(1, WIRE_LEN, _handle(gen), "prepared_statement_handle"),))
        return Call("do_put", msg=_any(gen, name, inner), data=PutData(_params(gen)), note=note)
    if kind == "ingest":
        name = gen.pick((*INGEST_TABLES, *INGEST_TABLES, "t1", "", "../x", "a/b"))
        options = Msg(
            "TableDefinitionOptions",
            (
                Entry(1, WIRE_VARINT, gen.pick((0, 1, 2, 3, 99)), "if_not_exist"),
                Entry(2, WIRE_VARINT, gen.pick((0, 1, 2, 3, 3, 99)), "if_exists"),
            ),
        )
        entries = [Entry(1, WIRE_LEN, options, "table_definition_options"), Entry(2, WIRE_LEN, name, "table")]
        if gen.chance(0.2):
            entries.append(Entry(4, WIRE_LEN, gen.pick(("lance", "other")), "catalog"))
        if gen.chance(0.1):
            entries.append(Entry(5, WIRE_VARINT, 1, "temporary"))
        inner = Msg("CommandStatementIngest", tuple(entries))
        if name == "t1" or gen.chance(0.5):
            table = conforming_table(gen.rng, gen.info("t1").schema, gen.rng.randrange(0, 50))
        else:
            table = random_table(gen.rng, max_cols=5, max_rows=40)
        return Call("do_put", msg=_any(gen, inner.name, inner), data=PutData(table), note=note)
    if kind == "action":
        action = gen.pick(
            (
                "CreatePreparedStatement",
                "CreatePreparedStatement",
                "CreatePreparedStatement",
                "ClosePreparedStatement",
                "BeginTransaction",
                "EndTransaction",
                "BeginSavepoint",
                "CancelQuery",
                "CreatePreparedSubstraitPlan",
            )
        )
        if action == "CreatePreparedStatement":
            body = _query(gen, "ActionCreatePreparedStatementRequest")
        else:
            name = "ActionClosePreparedStatementRequest"
            body = _any(
                gen, name, Msg(name, (Entry(1, WIRE_LEN, _handle(gen), "prepared_statement_handle"),))
            )
        if gen.chance(0.05):
            return Call("do_action", action=action, raw=gen.garbage(), note=note)
        return Call("do_action", action=action, msg=body, note=note)
    # A Flight SQL message where another belongs (a ticket as a command, a result as a ticket...).
    name = gen.pick(
        (
            "DoPutUpdateResult",
            "ActionCreatePreparedStatementResult",
            "CommandStatementSubstraitPlan",
            "SubstraitPlan",
            "CommandStatementUpdate",
            "TicketStatementQuery",
        )
    )
    value: Value = gen.message(name, None)
    return Call(
        gen.pick(("get_flight_info", "get_schema", "do_get")),
        msg=_any(gen, name, value),
        note=f"{note} {name}",
    )
