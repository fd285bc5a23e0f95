"""Issue 14: unread takes cannot grow the server's memory past its budget.

The server runs in a subprocess under an address-space cap (a runaway could otherwise take the
machine), with a small result-memory budget. Before the fix each take was materialized whole and
held by gRPC until the client read it: two dozen unread takes of 60 MB held over a GB. Now a take is
read and sent in chunks of ~8 MiB charged to the budget, so the same takes hold a few chunks and
the ones that find no room are refused with RESOURCE_EXHAUSTED. (Growth is measured after a warm-up
take, so memory the allocator kept from it is reused and not counted: the bound is on what the
unread takes add, with room for what the bookkeeping does not see: a take's transient decoding
buffers, requests' id arrays and what the allocator keeps; measured ~200 MiB now, ~850 MiB before.)
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server._serde import encode_ticket
from flight_server.errors import error_code
from flight_server.requests import TakeRequest
from lance_format import write_dataset

LANCE_FLIGHT = Path(sys.executable).parent / "lance-flight"
SERVING = re.compile(r"msg=serving .*?locations=(\S+)")
#: The server's address-space cap: far above what it needs (~1-2 GB of mostly reserved space),
#: far below what would hurt the machine.
ADDRESS_SPACE_CAP = 6 * 1024**3
ROWS, COLUMNS = 300_000, 25  # 200 bytes a row: 60 MB per full take
UNREAD_TAKES = 24
BUDGET = 64 * 1024 * 1024


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))


def _rss(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", text)
    assert match, text
    return int(match.group(1)) * 1024


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    root = tmp_path / "data"
    values = np.arange(ROWS, dtype=np.float64)
    write_dataset(pa.table({f"c{i}": values + i for i in range(COLUMNS)}), str(root / "wide"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANCE_FLIGHT_")}
    env |= {"LANCE_FLIGHT_MEMORY_BUDGET_BYTES": str(BUDGET), "LANCE_FLIGHT_STREAM_WAIT_SECONDS": "0.2"}
    log = tmp_path / "server.log"
    args = ["--port", "0", "--metrics-port", "-1", "--root", str(root)]
    args += ["--page-cache-bytes", "0", "--decoded-cache-bytes", "0", "--batch-cache-bytes", "0"]
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [str(LANCE_FLIGHT), "serve", *args],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            preexec_fn=_cap,
        )
    try:
        deadline = time.monotonic() + 60
        while not (match := SERVING.search(log.read_text(errors="replace"))):
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        yield proc, match.group(1).split(",")[0]
    finally:
        proc.kill()
        proc.wait()


def test_unread_takes_stay_within_the_memory_budget(server: tuple[subprocess.Popen[bytes], str]) -> None:
    proc, location = server
    ids = np.arange(ROWS, dtype=np.uint64)[::-1].copy()
    ticket = flight.Ticket(encode_ticket(TakeRequest("wide", indices=ids)))
    with flight.connect(location) as warm:
        assert warm.do_get(ticket).read_all().num_rows == ROWS  # code paths and metadata loaded
    before = _rss(proc.pid)
    attacker = flight.connect(location)
    readers, refusals = [], []
    for _ in range(UNREAD_TAKES):
        try:
            reader = attacker.do_get(ticket)
            reader.schema  # noqa: B018  # the stream started
            readers.append(reader)
        except flight.FlightUnavailableError as exc:
            refusals.append(error_code(exc))
    time.sleep(2.0)  # let every admitted take produce all it can
    grown = _rss(proc.pid) - before
    assert proc.poll() is None
    assert grown < 5 * BUDGET, f"{UNREAD_TAKES} unread takes grew the server by {grown >> 20} MiB"
    assert set(refusals) <= {"RESOURCE_EXHAUSTED"}
    assert refusals, "the budget admitted every take"
    with flight.connect(location) as victim:
        small = flight.Ticket(encode_ticket(TakeRequest("wide", indices=ids[:10])))
        assert victim.do_get(small).read_all().num_rows == 10
    for reader in readers:
        got = reader.read_all()
        assert got.num_rows == ROWS
        assert got.column("c0")[0].as_py() == ROWS - 1
    attacker.close()
