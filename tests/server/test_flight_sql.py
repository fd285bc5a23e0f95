"""Flight SQL on the service's port, through the real ADBC Flight SQL driver (and plain pyarrow.flight).

The server is the real one wired by ``build_server`` (auth, TLS, metrics); query results are
compared cell by cell with pylance reading the same datasets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest

import lance_format
from flight_server.config import load_settings
from flight_server.service import LanceFlightService
from flight_server.settings import ServerSettings, Token
from flight_server.workers import build_server
from lance_format.io import io_stats
from tests.server.certs import Authority, write

adbc = pytest.importorskip("adbc_driver_flightsql.dbapi")
adbc_flightsql = pytest.importorskip("adbc_driver_flightsql")
lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

TOKEN = "sql-writer"
ROWS = 20_000


def _items(n: int) -> pa.Table:
    a = np.arange(n, dtype=np.int64)
    return pa.table(
        {
            "id": a,
            "grp": pa.array(a % 5, pa.int32()),
            "name": pa.array([f"item-{i:05d}" for i in range(n)]),
            "price": pa.array(np.round(np.cos(a) * 50 + 50, 3)),
        }
    )


def _groups() -> pa.Table:
    return pa.table({"grp": pa.array(range(5), pa.int32()), "label": ["zero", "one", "two", "three", "four"]})


def _serve(settings: ServerSettings) -> Any:
    return build_server(replace(settings, port=0), 0, (), None, None, LanceFlightService)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlroot")
    lance_format.write_dataset(_items(ROWS), str(path / "items"), max_rows_per_file=5_000)
    ds = lance_format.dataset(str(path / "items"))
    ds.create_scalar_index("id", "ZONEMAP", rows_per_zone=1000)
    lance_format.write_dataset(_groups(), str(path / "groups"))
    return path


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[Any]:
    s = _serve(ServerSettings(root=str(root), tokens=(Token(TOKEN),), metrics_port=-1))
    try:
        yield s
    finally:
        s.shutdown()


def _connect(server: Any, tls: bool = False, **extra: str) -> Any:
    scheme = "grpc+tls" if tls else "grpc"
    kwargs = {adbc_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {TOKEN}", **extra}
    # autocommit: the server refuses transactions (it says so in SqlInfo), so the DBAPI's default
    # of opening one would fail.
    return adbc.connect(f"{scheme}://127.0.0.1:{server.port}", db_kwargs=kwargs, autocommit=True)


@pytest.fixture
def conn(server: Any) -> Iterator[Any]:
    with _connect(server) as c:
        yield c


def _query(conn: Any, sql: str, params: Any = None) -> pa.Table:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetch_arrow_table()  # type: ignore[no-any-return]


def _oracle(root: Path, name: str) -> pa.Table:
    return lance.dataset(str(root / name)).to_table()  # type: ignore[no-any-return]


def test_refused_without_a_token(server: Any) -> None:
    with (
        adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True) as c,
        pytest.raises(Exception, match=r"(?i)unauth"),
    ):
        _query(c, "SELECT 1")


def test_select_filter_projection_limit(conn: Any, root: Path) -> None:
    items = _oracle(root, "items")
    got = _query(conn, "SELECT id, name FROM items WHERE id >= 1000 AND id < 1010 ORDER BY id")
    want = items.filter((pc.field("id") >= 1000) & (pc.field("id") < 1010)).select(["id", "name"])
    assert got.to_pylist() == want.to_pylist()
    got = _query(conn, "SELECT price FROM items WHERE grp = 3 ORDER BY id LIMIT 7")
    assert (
        got.column("price").to_pylist() == items.filter(pc.field("grp") == 3).column("price").to_pylist()[:7]
    )


def test_join_and_aggregate(conn: Any, root: Path) -> None:
    items, groups = _oracle(root, "items"), _oracle(root, "groups")
    got = _query(
        conn,
        "SELECT g.label, count(*) AS n, sum(i.price) AS total FROM items i JOIN groups g ON i.grp = g.grp "
        "WHERE i.id < 5000 GROUP BY g.label ORDER BY g.label",
    )
    want = (
        items.filter(pc.field("id") < 5000)
        .join(groups, "grp")
        .group_by("label")
        .aggregate([("id", "count"), ("price", "sum")])
        .sort_by("label")
    )
    assert got.column("label").to_pylist() == want.column("label").to_pylist()
    assert got.column("n").to_pylist() == want.column("id_count").to_pylist()
    assert got.column("total").to_pylist() == pytest.approx(want.column("price_sum").to_pylist())


def test_parameter_binding(conn: Any, root: Path) -> None:
    items = _oracle(root, "items")
    got = _query(conn, "SELECT id, name FROM items WHERE id = ?", (4242,))
    assert got.to_pylist() == items.filter(pc.field("id") == 4242).select(["id", "name"]).to_pylist()


def test_parameters_bind_in_text_order(conn: Any) -> None:
    """The first ? is nested deeper than the second: binding follows the text, not tree depth."""
    got = _query(
        conn,
        "SELECT id FROM items WHERE grp IN (SELECT grp FROM groups WHERE label = ?) AND id < ? ORDER BY id",
        ("two", 20),
    )
    assert got.column("id").to_pylist() == [2, 7, 12, 17]


def test_metadata(conn: Any, root: Path) -> None:
    objects = conn.adbc_get_objects().read_all().to_pylist()
    assert [c["catalog_name"] for c in objects] == ["lance"]
    schemas = objects[0]["catalog_db_schemas"]
    assert [s["db_schema_name"] for s in schemas] == ["main"]
    assert sorted(t["table_name"] for t in schemas[0]["db_schema_tables"]) == ["groups", "items"]
    schema = conn.adbc_get_table_schema("items")
    assert schema.names == lance.dataset(str(root / "items")).schema.names
    assert [f.type for f in schema] == [f.type for f in lance.dataset(str(root / "items")).schema]
    assert conn.adbc_get_table_types() == ["TABLE"]
    info = conn.adbc_get_info()
    assert info["vendor_name"] == "lance-flight"


def test_pandas_and_duckdb_read_results(conn: Any, root: Path) -> None:
    import duckdb

    with conn.cursor() as cur:
        cur.execute("SELECT grp, count(*) AS n FROM items GROUP BY grp ORDER BY grp")
        frame = cur.fetch_df()
    assert frame["n"].tolist() == [ROWS // 5] * 5
    with conn.cursor() as cur:
        cur.execute("SELECT id, price FROM items WHERE id < 100")
        result = cur.fetch_arrow_table()
    total = duckdb.from_arrow(result).aggregate("sum(price)").fetchall()
    assert total[0][0] == pytest.approx(sum(_oracle(root, "items").column("price").to_pylist()[:100]))


def test_ingest_create_append_and_dml(server: Any, root: Path) -> None:
    data = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})
    with _connect(server) as conn:
        with conn.cursor() as cur:
            assert cur.adbc_ingest("fresh", data, mode="create") == 3
            assert cur.adbc_ingest("fresh", data, mode="append") == 3
            with pytest.raises(Exception, match=r"(?i)exist"):
                cur.adbc_ingest("fresh", data, mode="create")
        assert lance.dataset(str(root / "fresh")).to_table().to_pylist() == (data.to_pylist() * 2)
        _query(conn, "DELETE FROM fresh WHERE k = 2")
        assert lance.dataset(str(root / "fresh")).to_table().column("k").to_pylist() == [1, 3, 1, 3]
        _query(conn, "UPDATE fresh SET v = 'z' WHERE k = 3")
        _query(conn, "INSERT INTO fresh VALUES (9, 'nine')")
        got = _query(conn, "SELECT k, v FROM fresh ORDER BY k, v")
        assert (
            got.to_pylist()
            == lance.dataset(str(root / "fresh"))
            .to_table()
            .sort_by([("k", "ascending"), ("v", "ascending")])
            .to_pylist()
        )
        with conn.cursor() as cur:
            cur.adbc_ingest("fresh", data, mode="replace")
        assert lance.dataset(str(root / "fresh")).to_table().to_pylist() == data.to_pylist()


def test_time_travel(conn: Any, server: Any, root: Path) -> None:
    with _connect(server) as c, c.cursor() as cur:
        cur.adbc_ingest("tt", pa.table({"x": [1, 2]}), mode="create")
        cur.adbc_ingest("tt", pa.table({"x": [3]}), mode="append")
    assert _query(conn, 'SELECT count(*) AS n FROM "tt@1"').column("n").to_pylist() == [2]
    assert _query(conn, "SELECT count(*) AS n FROM tt VERSION AS OF 1").column("n").to_pylist() == [2]
    assert _query(conn, "SELECT count(*) AS n FROM tt").column("n").to_pylist() == [3]


def test_transactions_are_refused(server: Any) -> None:
    """Every transaction action is UNIMPLEMENTED (pyarrow: ArrowNotImplementedError), as SqlInfo says."""
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
    for name in ("BeginTransaction", "EndTransaction", "BeginSavepoint", "EndSavepoint"):
        with pytest.raises(pa.ArrowNotImplementedError, match="transactions are not supported"):
            list(client.do_action(flight.Action(name, b""), options))
    with pytest.raises(Exception, match=r"(?i)cannot disable autocommit"):
        adbc.connect(
            f"grpc://127.0.0.1:{server.port}",
            db_kwargs={adbc_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {TOKEN}"},
            autocommit=False,
        )


def test_plain_flight_client_sends_sql_text(server: Any, root: Path) -> None:
    """No protobuf at all: SQL text as the command; rows come back pinned and ordered."""
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
    info = client.get_flight_info(
        flight.FlightDescriptor.for_command(b"SELECT id FROM items WHERE id < 5 ORDER BY id"), options
    )
    assert info.ordered
    assert all(e.expiration_time is not None for e in info.endpoints)  # pinned to a version
    table = pa.concat_tables(client.do_get(e.ticket, options).read_all() for e in info.endpoints)
    assert table.column("id").to_pylist() == [0, 1, 2, 3, 4]
    assert json.dumps(table.schema.names) == '["id"]'


def _bytes_read(conn: Any, sql: str) -> int:
    before = io_stats()
    _query(conn, sql)
    return (io_stats() - before).bytes_read


def test_selective_sql_prunes_like_a_filtered_scan(conn: Any) -> None:
    """The server is in this process: its I/O counters show the zone map pruned the SQL filter,
    both for a plain filtered select (our scanner directly) and under an aggregate (DataFusion)."""
    selective = _bytes_read(conn, "SELECT name FROM items WHERE id >= 12000 AND id < 12050")
    full = _bytes_read(conn, "SELECT name FROM items")
    assert selective * 4 < full
    grouped = "SELECT grp, count(*) AS n, max(name) AS m FROM items {} GROUP BY grp"
    selective = _bytes_read(conn, grouped.format("WHERE id >= 12000 AND id < 12050"))
    full = _bytes_read(conn, grouped.format(""))
    assert selective * 4 < full


def test_limits_reach_the_scanner(conn: Any, root: Path) -> None:
    """A LIMIT reads the rows it returns, not whole fragments; rows come in table order."""
    assert _bytes_read(conn, "SELECT * FROM items LIMIT 5") * 20 < _bytes_read(conn, "SELECT * FROM items")
    got = _query(conn, "SELECT id AS ident, name FROM items WHERE grp = 2 LIMIT 5 OFFSET 3")
    want = lance.dataset(str(root / "items")).to_table(
        columns=["id", "name"], filter="grp = 2", limit=5, offset=3
    )
    assert got.column("ident").to_pylist() == want.column("id").to_pylist()
    assert got.column("name").to_pylist() == want.column("name").to_pylist()


def test_tls(tmp_path: Path, root: Path) -> None:
    ca = Authority.create("sql-ca")
    cert = ca.issue("server", server=True)
    flags = [
        "--tls-cert",
        write(tmp_path, "s.pem", cert.cert),
        "--tls-key",
        write(tmp_path, "s.key", cert.key),
    ]
    settings = replace(load_settings(flags, env={}), root=str(root), tokens=(Token(TOKEN),), metrics_port=-1)
    s = _serve(settings)
    try:
        opts = {adbc_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: ca.pem.decode()}
        with _connect(s, tls=True, **opts) as conn:
            assert _query(conn, "SELECT count(*) AS n FROM items").column("n").to_pylist() == [ROWS]
    finally:
        s.shutdown()


def test_prepared_update_with_many_parameter_rows(server: Any, root: Path) -> None:
    with _connect(server) as conn:
        with conn.cursor() as cur:
            cur.adbc_ingest("prep", pa.table({"k": pa.array(range(10), pa.int64())}), mode="create")
            cur.executemany("DELETE FROM prep WHERE k = ?", [(2,), (5,), (7,)])
        assert lance.dataset(str(root / "prep")).to_table().column("k").to_pylist() == [0, 1, 3, 4, 6, 8, 9]
        with conn.cursor() as cur:
            cur.adbc_prepare("SELECT k FROM prep WHERE k > ? ORDER BY k")
            cur.execute("SELECT k FROM prep WHERE k > ? ORDER BY k", (4,))
            assert cur.fetch_arrow_table().column("k").to_pylist() == [6, 8, 9]


def test_read_only_token_cannot_change_data(root: Path) -> None:
    s = _serve(
        ServerSettings(root=str(root), tokens=(Token(TOKEN), Token("peek", read_only=True)), metrics_port=-1)
    )
    kwargs = {adbc_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: "Bearer peek"}
    try:
        with adbc.connect(f"grpc://127.0.0.1:{s.port}", db_kwargs=kwargs, autocommit=True) as conn:
            assert _query(conn, "SELECT count(*) AS n FROM groups").column("n").to_pylist() == [5]
            with pytest.raises(Exception, match=r"(?i)read-only"):
                _query(conn, "DELETE FROM groups")
            with conn.cursor() as cur, pytest.raises(Exception, match=r"(?i)read-only"):
                cur.adbc_ingest("groups", _groups(), mode="append")
        assert lance.dataset(str(root / "groups")).count_rows() == 5
    finally:
        s.shutdown()


def test_get_objects_lists_columns(conn: Any) -> None:
    objects = conn.adbc_get_objects(depth="all", table_name_filter="items").read_all().to_pylist()
    tables = objects[0]["catalog_db_schemas"][0]["db_schema_tables"]
    assert [t["table_name"] for t in tables] == ["items"]
    assert [c["column_name"] for c in tables[0]["table_columns"]] == ["id", "grp", "name", "price"]


def test_result_tickets_are_pinned_to_the_versions_planned(server: Any) -> None:
    """Rows appended between get_flight_info and do_get are not in the result (both query paths)."""
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
    with _connect(server) as conn, conn.cursor() as cur:
        cur.adbc_ingest("pinned", pa.table({"x": [1, 2]}), mode="create")
        aggregate = client.get_flight_info(
            flight.FlightDescriptor.for_command(b"SELECT count(*) AS n FROM pinned"), options
        )
        plain = client.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT x FROM pinned"), options)
        cur.adbc_ingest("pinned", pa.table({"x": [3]}), mode="append")
        assert client.do_get(aggregate.endpoints[0].ticket, options).read_all().column("n").to_pylist() == [2]
        assert client.do_get(plain.endpoints[0].ticket, options).read_all().column("x").to_pylist() == [1, 2]
