"""Flight SQL wire facts and metadata answers, checked with hand-written bytes and a raw Flight client.

The bytes below were written by hand from Arrow's FlightSql.proto (package, message names and
field numbers) and the protobuf wire format; the result schemas are the ones the spec lists.
"""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import lance_format
from flight_server.errors import error_code
from flight_server.flightsql import DataFusionBatches
from flight_server.flightsql._serde import pack, serialize, unpack
from flight_server.flightsql.engine import SqlEngine
from flight_server.flightsql.interrupt import QueryRun
from flight_server.flightsql.server import sql_text
from tests.server.service_fixtures import Recorder, Served, start, stop

PREFIX = b"type.googleapis.com/arrow.flight.protocol.sql."


def _any(name: bytes, value: bytes) -> bytes:
    url = PREFIX + name
    return bytes([0x0A, len(url)]) + url + bytes([0x12, len(value)]) + value


@pytest.mark.parametrize(
    ("name", "value", "fields"),
    [
        (b"CommandStatementQuery", bytes.fromhex("0a08") + b"SELECT 1", {"query": "SELECT 1"}),
        (
            b"CommandGetTables",
            bytes.fromhex("0a05") + b"lance" + bytes.fromhex("2205") + b"TABLE" + bytes.fromhex("2801"),
            {"catalog": "lance", "table_types": ["TABLE"], "include_schema": True},
        ),
        (
            b"CommandStatementIngest",
            bytes.fromhex("0a04 0801 1002  1201 74  c23e06 0a016b 120176"),
            {
                "table_definition_options": {"if_not_exist": 1, "if_exists": 2},
                "table": "t",
                "temporary": False,
                "options": {"k": "v"},
            },
        ),
        (b"CommandGetCrossReference", bytes.fromhex("1a0161 320162"), {"pk_table": "a", "fk_table": "b"}),
        (b"CommandGetXdbcTypeInfo", bytes.fromhex("0804"), {"data_type": 4}),
        (b"CommandGetSqlInfo", bytes.fromhex("0a020008"), {"info": [0, 8]}),
        (b"CommandPreparedStatementQuery", bytes.fromhex("0a0168"), {"prepared_statement_handle": b"h"}),
    ],
)
def test_commands_decode_from_hand_written_bytes(
    name: bytes, value: bytes, fields: dict[str, object]
) -> None:
    cmd = unpack(_any(name, value))
    assert cmd is not None
    assert cmd.kind == name.decode()
    assert cmd.fields == fields


def test_results_encode_to_hand_written_bytes() -> None:
    assert serialize("DoPutUpdateResult", record_count=5) == bytes.fromhex("0805")
    packed = pack(
        "ActionCreatePreparedStatementResult",
        prepared_statement_handle=b"h",
        dataset_schema=b"s",
        parameter_schema=b"p",
    )
    assert packed == _any(b"ActionCreatePreparedStatementResult", bytes.fromhex("0a0168 120173 1a0170"))
    assert serialize("DoPutPreparedStatementResult", prepared_statement_handle=b"x") == bytes.fromhex(
        "0a0178"
    )


def test_what_is_not_flight_sql() -> None:
    assert unpack(b"\x0a\x03abc") is None  # an Any of another type
    assert unpack(b"\xff\xff") is None  # not a protobuf message
    assert sql_text(b"  select 1") == "  select 1"
    assert sql_text(b"(SELECT 1)") == "(SELECT 1)"
    assert sql_text(b"\x0a\x02ab") is None


@pytest.fixture
def served_sql(tmp_path: Path, recorder: Recorder) -> Iterator[Served]:
    s = start(tmp_path / "root", recorder)
    lance_format.write_dataset(pa.table({"id": [1, 2], "s": ["a", "b"]}), str(tmp_path / "root" / "t"))
    try:
        yield s
    finally:
        stop(s)


def _fetch(served: Served, name: str, **fields: object) -> pa.Table:
    info = served.raw.get_flight_info(flight.FlightDescriptor.for_command(pack(name, **fields)))
    table = pa.concat_tables(served.raw.do_get(e.ticket).read_all() for e in info.endpoints)
    assert table.schema.equals(info.schema)
    schema = served.raw.get_schema(flight.FlightDescriptor.for_command(pack(name, **fields))).schema
    assert schema.equals(table.schema)
    return table


def _s(name: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, pa.utf8(), nullable)


KEY_SCHEMA = pa.schema(
    [
        _s("pk_catalog_name"), _s("pk_db_schema_name"), _s("pk_table_name", False),
        _s("pk_column_name", False), _s("fk_catalog_name"), _s("fk_db_schema_name"),
        _s("fk_table_name", False), _s("fk_column_name", False),
        pa.field("key_sequence", pa.int32(), False), _s("fk_key_name"), _s("pk_key_name"),
        pa.field("update_rule", pa.uint8(), False), pa.field("delete_rule", pa.uint8(), False),
    ]
)  # fmt: skip


def test_metadata_commands_answer_with_the_spec_schemas(served_sql: Served) -> None:
    s = served_sql
    assert _fetch(s, "CommandGetCatalogs").to_pylist() == [{"catalog_name": "lance"}]
    assert _fetch(s, "CommandGetDbSchemas", db_schema_filter_pattern="ma%").to_pylist() == [
        {"catalog_name": "lance", "db_schema_name": "main"}
    ]
    assert _fetch(s, "CommandGetDbSchemas", catalog="other").num_rows == 0
    tables = _fetch(s, "CommandGetTables", include_schema=True, table_name_filter_pattern="_")
    assert tables.schema == pa.schema(
        [_s("catalog_name"), _s("db_schema_name"), _s("table_name", False), _s("table_type", False),
         pa.field("table_schema", pa.binary(), False)]
    )  # fmt: skip
    assert tables.column("table_name").to_pylist() == ["t"]
    schema = pa.ipc.read_schema(pa.py_buffer(tables.column("table_schema")[0].as_py()))
    assert schema.names == ["id", "s"]
    assert schema.field("id").metadata[b"ARROW:FLIGHT:SQL:TABLE_NAME"] == b"t"
    assert _fetch(s, "CommandGetTables", table_types=["VIEW"]).num_rows == 0
    assert _fetch(s, "CommandGetTableTypes").to_pylist() == [{"table_type": "TABLE"}]
    pk = _fetch(s, "CommandGetPrimaryKeys", table="t")
    assert pk.num_rows == 0
    assert pk.schema.field("key_sequence").type == pa.int32()
    for name, extra in [
        ("CommandGetExportedKeys", {"table": "t"}),
        ("CommandGetImportedKeys", {"table": "t"}),
        ("CommandGetCrossReference", {"pk_table": "t", "fk_table": "t"}),
    ]:
        keys = _fetch(s, name, **extra)
        assert keys.schema == KEY_SCHEMA
        assert keys.num_rows == 0
    types = _fetch(s, "CommandGetXdbcTypeInfo")
    assert types.column("data_type").to_pylist() == sorted(types.column("data_type").to_pylist())
    assert "VARCHAR" in types.column("type_name").to_pylist()
    assert _fetch(s, "CommandGetXdbcTypeInfo", data_type=12).column("type_name").to_pylist() == ["VARCHAR"]
    info = _fetch(s, "CommandGetSqlInfo", info=[0, 3, 8, 504])
    assert info.schema.field("info_name").type == pa.uint32()
    assert info.schema.field("value").type.type_codes == [0, 1, 2, 3, 4, 5]
    values = dict(zip(info.column("info_name").to_pylist(), info.column("value").to_pylist(), strict=True))
    assert values == {0: "lance-flight", 3: False, 8: 0, 504: '"'}


def test_sql_errors_map_to_flight_codes_without_tracebacks(served_sql: Served) -> None:
    raw = served_sql.raw
    with pytest.raises(pa.ArrowInvalid) as bad:
        raw.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT FROM WHERE"))
    assert "Traceback" not in str(bad.value)
    with pytest.raises(pa.ArrowKeyError, match="nope"):
        raw.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT * FROM nope"))
    with pytest.raises(pa.ArrowInvalid):
        raw.do_get(flight.Ticket(pack("TicketStatementQuery", statement_handle=b"forged"))).read_all()
    with pytest.raises(pa.ArrowNotImplementedError, match="transactions"):
        raw.get_flight_info(
            flight.FlightDescriptor.for_command(
                pack("CommandStatementQuery", query="SELECT 1", transaction_id=b"t")
            )
        )


def test_statement_update_over_do_put(served_sql: Served) -> None:
    """CommandStatementUpdate: an empty stream in, one PutResult holding DoPutUpdateResult out."""
    descriptor = flight.FlightDescriptor.for_command(
        pack("CommandStatementUpdate", query="UPDATE t SET s = 'z' WHERE id = 2")
    )
    writer, reader = served_sql.raw.do_put(descriptor, pa.schema([]))
    writer.done_writing()
    answer = reader.read()
    writer.close()
    assert answer is not None
    assert answer.to_pybytes() == serialize("DoPutUpdateResult", record_count=1)
    table = lance_format.dataset(str(served_sql.root / "t")).to_table()
    assert table.to_pylist() == [{"id": 1, "s": "a"}, {"id": 2, "s": "z"}]


def test_sql_results_count_as_streams_and_rows(served_sql: Served, recorder: Recorder) -> None:
    info = served_sql.raw.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT id FROM t"))
    assert served_sql.raw.do_get(info.endpoints[0].ticket).read_all().num_rows == 2
    assert [(kind, rows) for kind, rows, _ in recorder.served] == [("sql", 2)]
    assert recorder.streams == 0  # the stream slot was given back


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE EXTERNAL TABLE leak STORED AS CSV LOCATION '/etc/passwd'",
        "COPY (SELECT 1) TO '/tmp/leak.csv'",
        "SET datafusion.execution.batch_size = 1",
        "DROP TABLE t",
    ],
)
def test_statements_other_than_queries_and_dml_are_refused(served_sql: Served, sql: str) -> None:
    descriptor = flight.FlightDescriptor.for_command(pack("CommandStatementQuery", query=sql))
    with pytest.raises((pa.ArrowNotImplementedError, pa.ArrowInvalid)):
        served_sql.raw.get_flight_info(descriptor)
    assert lance_format.dataset(str(served_sql.root / "t")).count_rows() == 2


def test_substrait_plans_are_unimplemented(served_sql: Served) -> None:
    plan = pack("CommandStatementSubstraitPlan", plan={"plan": b"\x00", "version": "0.50.0"})
    with pytest.raises(pa.ArrowNotImplementedError, match="Substrait"):
        served_sql.raw.get_flight_info(flight.FlightDescriptor.for_command(plan))
    with pytest.raises(pa.ArrowNotImplementedError, match="Substrait"):
        list(served_sql.raw.do_action(flight.Action("CreatePreparedSubstraitPlan", b"")))


def _run_sql(served: Served, sql: str) -> pa.Table:
    descriptor = flight.FlightDescriptor.for_command(pack("CommandStatementQuery", query=sql))
    info = served.raw.get_flight_info(descriptor)
    return served.raw.do_get(info.endpoints[0].ticket).read_all()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1/0 AS x",  # an Arrow compute error while the plan runs
        "SELECT id / 0 FROM t",
        "SELECT CAST(s AS INT) FROM t",  # 'a' is no integer
        "SELECT * FROM t LIMIT -1",  # DataFusion's optimizer refuses it when the plan runs
        "SELECT * FROM t OFFSET 18446744073709551615",
        "SELECT s, '; DROP TABLE x; -- FROM t",  # sqlglot's TokenError (an unclosed quote)
    ],
)
def test_query_errors_raised_while_running_are_the_clients(served_sql: Served, sql: str) -> None:
    """Found by fuzzing Flight SQL (session 12): these answered UNKNOWN "internal error
    (ArrowInvalid / Exception); see the server log" with code INTERNAL."""
    with pytest.raises(pa.ArrowInvalid) as refused:
        _run_sql(served_sql, sql)
    assert "internal error" not in str(refused.value)
    assert "Traceback" not in str(refused.value)


def test_an_unquoted_version_suffix_is_refused_not_read_as_latest(served_sql: Served) -> None:
    """``FROM t@1`` unquoted parses as ``t`` aliased ``$1``: it read the latest version (a wrong
    answer) where ``FROM "t@1"`` reads version 1."""
    lance_format.write_dataset(pa.table({"id": [3], "s": ["c"]}), str(served_sql.root / "t"), mode="append")
    assert _run_sql(served_sql, 'SELECT id FROM "t@1"').num_rows == 2
    with pytest.raises(pa.ArrowInvalid, match="quote"):
        _run_sql(served_sql, "SELECT id FROM t@1")


def test_a_query_past_its_working_memory_fails_instead_of_growing(tmp_path: Path, recorder: Recorder) -> None:
    """An aggregate that holds every value (array_agg of 20M integers, ~160 MB) under a 16 MiB
    ``limits.sqlMemoryBytes`` fails with INVALID_ARGUMENT. Before, the pool was unbounded: a
    bigger one grew the server until the kernel killed it, and went on after its client's
    deadline (RSS 0.8 -> 1.4 GiB in the minute after a cancelled call)."""
    s = start(tmp_path / "root", recorder, sql_memory_bytes=16 << 20)
    try:
        sql = "SELECT cardinality(x) AS n FROM (SELECT array_agg(value) AS x FROM generate_series(1, {}))"
        with pytest.raises(pa.ArrowInvalid, match="sqlMemoryBytes"):
            _run_sql(s, sql.format(20_000_000))
        assert _run_sql(s, sql.format(1000)).to_pylist() == [{"n": 1000}]
    finally:
        stop(s)


def test_a_query_running_in_datafusion_holds_no_turn(
    tmp_path: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query DataFusion computes for a long time (here: blocked until released) must not hold
    one of the fair scheduler's turns: with one turn, another client's take is still served.
    Before, three abandoned ``count(*)`` queries over ``generate_series(1, 1e11)`` held every turn
    and every other call timed out for minutes (DataFusion goes on after a cancel)."""
    started, release = threading.Event(), threading.Event()
    real_run = SqlEngine.run

    def blocking_run(self: SqlEngine, *args: Any, **kwargs: Any) -> Any:
        schema, batches = real_run(self, *args, **kwargs)
        assert isinstance(batches, DataFusionBatches)  # an aggregate runs in DataFusion

        def blocked() -> Iterator[pa.RecordBatch]:
            started.set()
            release.wait(60)
            yield from batches

        return schema, DataFusionBatches(blocked(), QueryRun(0))

    monkeypatch.setattr(SqlEngine, "run", blocking_run)
    s = start(tmp_path / "root", recorder, work_slots=1)
    lance_format.write_dataset(pa.table({"id": [1, 2, 3]}), str(tmp_path / "root" / "t"))
    answers: list[pa.Table] = []
    query = threading.Thread(target=lambda: answers.append(_run_sql(s, "SELECT count(*) AS n FROM t")))
    query.start()
    try:
        assert started.wait(30)
        assert s.client.take("t", indices=[2]).to_pylist() == [{"id": 3}]
    finally:
        release.set()
        query.join(60)
        stop(s)
    assert answers[0].to_pylist() == [{"n": 3}]


#: A query that computes for many minutes in DataFusion and sends nothing until it ends.
_ENDLESS = "SELECT count(*) AS n FROM generate_series(1, 100000000000) AS g(v) WHERE v % 7 = 3"


def _cpu_seconds_over(seconds: float) -> float:
    """CPU time this process (the server runs in it) uses in the next ``seconds``."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(seconds)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_a_query_past_the_time_limit_is_stopped(tmp_path: Path, recorder: Recorder) -> None:
    """``limits.sqlTimeoutSeconds``: a runaway query fails with code QUERY_TIMEOUT and stops
    computing. Before, nothing could stop a query DataFusion was computing: it ran for minutes
    (here the client's 60 s deadline would pass first, and the server went on burning CPU)."""
    s = start(tmp_path / "root", recorder, sql_timeout_seconds=1.0)
    try:
        descriptor = flight.FlightDescriptor.for_command(pack("CommandStatementQuery", query=_ENDLESS))
        info = s.raw.get_flight_info(descriptor)
        options = flight.FlightCallOptions(timeout=60)
        expected = r"sqlTimeoutSeconds .*\[QUERY_TIMEOUT\]"
        with pytest.raises(flight.FlightServerError, match=expected) as caught:
            s.raw.do_get(info.endpoints[0].ticket, options).read_all()
        assert error_code(caught.value) == "QUERY_TIMEOUT"
        assert _cpu_seconds_over(2.0) < 0.6  # stopped: a running query takes ~1 s per core
        assert _run_sql(s, "SELECT count(*) AS n FROM generate_series(1, 10)").to_pylist() == [{"n": 10}]
    finally:
        stop(s)


def test_a_query_whose_client_leaves_is_stopped(tmp_path: Path, recorder: Recorder) -> None:
    """A client whose deadline passes (or that goes away) stops its query. Before, DataFusion went
    on computing a blocking aggregate after the call was cancelled: three such queries held every
    core for minutes."""
    s = start(tmp_path / "root", recorder)
    try:
        descriptor = flight.FlightDescriptor.for_command(pack("CommandStatementQuery", query=_ENDLESS))
        info = s.raw.get_flight_info(descriptor)
        with pytest.raises(flight.FlightTimedOutError):
            s.raw.do_get(info.endpoints[0].ticket, flight.FlightCallOptions(timeout=1.0)).read_all()
        time.sleep(1.0)  # the server notices within CANCEL_CHECK_INTERVAL_S + POLL_SECONDS
        assert _cpu_seconds_over(2.0) < 0.6
    finally:
        stop(s)


def test_running_sql_queries_are_bounded_per_process_and_per_client(
    tmp_path: Path, recorder: Recorder
) -> None:
    """``limits.maxConcurrentSqlQueries``: each running query may take ``limits.sqlMemoryBytes``,
    so their number is bounded (one client: half of them). Before, every stream slot (64, 32 for one
    client) could run one: 32 queries of 256 MiB each, 8 GiB, for a client alone."""
    s = start(tmp_path / "root", recorder, max_concurrent_sql_queries=2, stream_wait_seconds=0.5)
    other = flight.connect(s.location)  # another connection: another principal without auth
    descriptor = flight.FlightDescriptor.for_command(pack("CommandStatementQuery", query=_ENDLESS))
    ticket = s.raw.get_flight_info(descriptor).endpoints[0].ticket

    def run_endless() -> None:
        with pytest.raises(flight.FlightTimedOutError):
            s.raw.do_get(ticket, flight.FlightCallOptions(timeout=4)).read_all()

    endless = threading.Thread(target=run_endless)
    endless.start()
    try:
        time.sleep(1.0)  # the endless query holds this client's one slot
        with pytest.raises(flight.FlightError, match=r"RESOURCE_EXHAUSTED") as caught:
            _run_sql(s, "SELECT count(*) AS n FROM generate_series(1, 10)")
        assert error_code(caught.value) == "RESOURCE_EXHAUSTED"
        info = other.get_flight_info(
            flight.FlightDescriptor.for_command(
                pack("CommandStatementQuery", query="SELECT count(*) AS n FROM generate_series(1, 10)")
            )
        )
        assert other.do_get(info.endpoints[0].ticket).read_all().to_pylist() == [{"n": 10}]
        endless.join(30)
        time.sleep(0.5)  # the cancelled query gives its slot back
        assert _run_sql(s, "SELECT count(*) AS n FROM generate_series(1, 10)").to_pylist() == [{"n": 10}]
    finally:
        endless.join(30)
        other.close()
        stop(s)


def _forged(body: object) -> bytes:
    import json

    return b"lfsql1:" + json.dumps(body).encode()


def _truncated_params() -> str:
    import base64

    sink = pa.BufferOutputStream()
    params = pa.table({"a": [1, 2]})
    with pa.ipc.new_stream(sink, params.schema) as writer:
        writer.write_table(params)
    return base64.b64encode(sink.getvalue().to_pybytes()[:40]).decode()


@pytest.mark.parametrize(
    "handle",
    [
        _forged({"versions": []}),  # AttributeError before
        _forged([1]),
        _forged({"sql": 5}),
        _forged({"sql": "SELECT id FROM t", "versions": []}),
        _forged({"sql": "SELECT id FROM t", "params": _truncated_params()}),  # OSError / ArrowInvalid
        _forged({"sql": "SELECT id FROM t", "count": 2**70}),  # an int64 column cannot hold it
        _forged({"sql": "SELECT id FROM t", "versions": {"t": -1}}),
    ],
)
def test_forged_statement_handles_are_refused(served_sql: Served, handle: bytes) -> None:
    """Handles are stateless JSON a client can write: found by the Flight SQL fuzz calls, these
    answered INTERNAL (AttributeError, OSError) on every call that takes a handle."""
    ticket = flight.Ticket(pack("TicketStatementQuery", statement_handle=handle))
    with pytest.raises(pa.ArrowInvalid, match="corrupt statement handle"):
        served_sql.raw.do_get(ticket).read_all()
    prepared = pack("CommandPreparedStatementQuery", prepared_statement_handle=handle)
    with pytest.raises(pa.ArrowInvalid, match="corrupt statement handle"):
        served_sql.raw.get_flight_info(flight.FlightDescriptor.for_command(prepared))


def test_insert_select_holds_at_most_the_sql_memory_limit(tmp_path: Path, recorder: Recorder) -> None:
    """``INSERT ... SELECT`` held its whole result before appending it: 2,000,000 generated rows
    (16 MB of ids) under a 4 MiB ``limits.sqlMemoryBytes`` are refused; 1,000 rows are inserted."""
    s = start(tmp_path / "root", recorder, sql_memory_bytes=4 << 20)
    lance_format.write_dataset(pa.table({"id": [1], "s": ["a"]}), str(tmp_path / "root" / "t"))
    try:

        def update(sql: str) -> bytes:
            descriptor = flight.FlightDescriptor.for_command(pack("CommandStatementUpdate", query=sql))
            writer, reader = s.raw.do_put(descriptor, pa.schema([]))
            writer.done_writing()
            answer = reader.read()
            writer.close()
            assert answer is not None
            return bytes(answer.to_pybytes())

        with pytest.raises(pa.ArrowInvalid, match="sqlMemoryBytes"):
            update("INSERT INTO t (id, s) SELECT value, 'x' FROM generate_series(1, 2000000)")
        assert update("INSERT INTO t (id, s) SELECT value, 'x' FROM generate_series(1, 1000)") == serialize(
            "DoPutUpdateResult", record_count=1000
        )
        assert lance_format.dataset(str(tmp_path / "root" / "t")).count_rows() == 1001
    finally:
        stop(s)


def test_rewritten_statements_keep_table_functions_callable(served_sql: Served) -> None:
    """A statement sqlglot writes back (time travel rewrites the table name; INSERT renders its
    SELECT) spelled table functions in capitals, which DataFusion does not find: "table function
    'GENERATE_SERIES' not found"."""
    sql = 'SELECT count(*) AS n FROM generate_series(1, 5) g JOIN "t@1" t ON g.value = t.id'
    assert _run_sql(served_sql, sql).to_pylist() == [{"n": 2}]
    insert = "INSERT INTO t (id, s) SELECT value, 'g' FROM generate_series(10, 12)"
    descriptor = flight.FlightDescriptor.for_command(pack("CommandStatementUpdate", query=insert))
    writer, reader = served_sql.raw.do_put(descriptor, pa.schema([]))
    writer.done_writing()
    answer = reader.read()
    writer.close()
    assert answer is not None
    assert answer.to_pybytes() == serialize("DoPutUpdateResult", record_count=3)
