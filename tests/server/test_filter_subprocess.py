"""Filters over Flight against a server subprocess, checked row for row against pylance.

A Substrait filter was deserialised into positional field references and evaluated on the
projected table: a filter on a column outside the projection read the wrong column, or past the
end of the table and crashed the server process (SIGSEGV in libarrow). The server runs in its own
process here so a crash fails the test instead of killing pytest.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.substrait as ps
import pytest

import lance_format
from flight_server._serde import decode_ticket
from flight_server.client import LanceFlightClient
from flight_server.requests import ScanRequest
from lance_format.dataset.filters import parse_substrait
from lance_format.dataset.scanner import LanceScanner

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop

LANCE_FLIGHT = Path(sys.executable).parent / "lance-flight"
#: A cold start imports pyarrow and the engine; generous so a loaded machine does not flake.
START_TIMEOUT_S = 60.0
SERVING = re.compile(r"msg=serving .*?locations=(\S+)")
#: The server's address-space cap: far above what these scans need, so a runaway fails fast.
MEMORY_CAP_BYTES = 4_000_000_000

TABLE = pa.table(
    {
        "id": pa.array(range(10), pa.int64()),
        "t": pa.array([f"t{i}" for i in range(10)]),
        "s": pa.array(["x", "y", None, "x", "", "z", "x", "y", "ü", "x"]),
        "f": pa.array([0.5, float("nan"), None, 2.0, -1.0, 3.5, float("nan"), 0.0, 1.0, 9.0]),
        "st": pa.array([{"a": i % 3, "b": f"b{i}"} for i in range(10)]),
    }
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[bytes], str, str]]:
    root = tmp_path_factory.mktemp("root")
    lance.write_dataset(TABLE, str(root / "t"), max_rows_per_file=4)
    log = root.parent / f"{root.name}.log"
    cmd = ["prlimit", f"--as={MEMORY_CAP_BYTES}", str(LANCE_FLIGHT), "serve", "--port", "0"]
    cmd += ["--metrics-port", "0", "--root", str(root)]
    with log.open("wb") as sink:
        process = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            match = SERVING.search(log.read_text(errors="replace"))
            if match:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"server did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)
        yield process, match.group(1).split(",")[0], str(root / "t")
    finally:
        process.kill()
        process.wait()


def _cells(table: pa.Table) -> list[dict[str, object]]:
    """Rows as dicts, NaN spelled out so equal tables compare equal."""
    return [{k: "NaN" if v != v else v for k, v in row.items()} for row in table.to_pylist()]


# (projection, filter sent as Substrait, the same filter in SQL for pylance)
CASES = [
    (["id"], pc.field("s") == "x", "s = 'x'"),
    (["id", "t"], pc.field("s") == "x", "s = 'x'"),  # positionally, field 1 of (id, t) is t
    (["t"], pc.field("id") > 4, "id > 4"),  # positionally, field 0 of (t, id) is t: the wrong column
    (["s"], (pc.field("f") > 0.5) & (pc.field("id") < 8), "f > 0.5 AND id < 8"),
    (["id"], pc.field("st", "a") == 1, "st.a = 1"),  # pylance takes no nested Substrait references
    (["t"], pc.field("s").is_null(), "s IS NULL"),
    (["f", "id"], pc.field("s").isin(["x", "ü"]), "s IN ('x', 'ü')"),
]


@pytest.mark.parametrize(("columns", "flt", "sql"), CASES, ids=[c[2] for c in CASES])
def test_substrait_filter_outside_projection(
    server: tuple[subprocess.Popen[bytes], str, str], columns: list[str], flt: pc.Expression, sql: str
) -> None:
    process, uri, path = server
    with LanceFlightClient(uri) as client:
        got = client.scan("t", columns=columns, filter=flt)
    assert process.poll() is None, "the server process died"
    want = lance.dataset(path).to_table(columns=columns, filter=sql)
    assert got.num_rows == want.num_rows
    assert _cells(got) == _cells(want)


def test_sql_filter_outside_projection(server: tuple[subprocess.Popen[bytes], str, str]) -> None:
    process, uri, path = server
    with LanceFlightClient(uri) as client:
        got = client.scan("t", columns=["id"], filter="s NOT LIKE 'x%' AND st.a <> 2")
    assert process.poll() is None, "the server process died"
    want = lance.dataset(path).to_table(columns=["id"], filter="s NOT LIKE 'x%' AND st.a <> 2")
    assert _cells(got) == _cells(want)


def test_tickets_and_deletes_carry_canonical_sql(
    server: tuple[subprocess.Popen[bytes], str, str], tmp_path: Path
) -> None:
    """A Substrait filter is bound once at planning; tickets carry it as canonical SQL, and a
    delete records it as SQL in its transaction."""
    process, uri, path = server
    flt = (pc.field("s") == "x") & (pc.field("id") > 2)
    with LanceFlightClient(uri) as client:
        schema = LanceScanner.filter_schema(client.schema("t"))
        blob = bytes(ps.serialize_expressions([flt], ["filter"], schema))
        info = client.flight_info(ScanRequest("t", columns=("id",), filter_substrait=blob))
        tickets = [decode_ticket(e.ticket.ticket) for e in info.endpoints]
        assert tickets
        for ticket in tickets:
            assert isinstance(ticket, ScanRequest)
            assert ticket.filter_substrait is None
            assert ticket.filter_sql == '(("s" = \'x\') AND ("id" > 2))'
        got = client.scan("t", columns=["id"], filter=flt)
    want = lance.dataset(path).to_table(columns=["id"], filter="s = 'x' AND id > 2")
    assert got.to_pylist() == want.to_pylist()
    # A delete through Substrait, on a copy: pylance reads the predicate as SQL.
    copy = tmp_path / "copy"
    lance.write_dataset(TABLE, str(copy))
    ours = lance_format.dataset(str(copy))
    ours.delete(parse_substrait(blob, LanceScanner.filter_schema(ours.schema)))
    theirs = lance.dataset(str(copy))
    assert theirs.count_rows() == TABLE.num_rows - want.num_rows
    assert "AND" in str(theirs.get_transactions(1)[0].operation.predicate)  # type: ignore[attr-defined]
    assert process.poll() is None
