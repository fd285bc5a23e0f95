"""LanceFlightClient: retries on UNAVAILABLE for reads only, timeouts, and its API round trip."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server import client as client_module
from flight_server._serde import encode_action_result
from flight_server.client import LanceFlightClient
from flight_server.requests import ActionResult
from tests.server.service_fixtures import Served, seed, table


class Flaky(flight.FlightServerBase):  # type: ignore[misc]
    """Answers UNAVAILABLE to the first ``failures`` calls of each action, then succeeds."""

    def __init__(self, failures: int) -> None:
        super().__init__("grpc://127.0.0.1:0")
        self.failures = failures
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def do_action(self, context: Any, action: flight.Action) -> Iterator[bytes]:
        with self._lock:
            n = self.calls[action.type] = self.calls.get(action.type, 0) + 1
        if action.type == "sleep":
            time.sleep(2)
        if n <= self.failures:
            raise flight.FlightUnavailableError("restarting")
        return iter([encode_action_result(ActionResult(status="ok", version=7))])

    def do_put(self, context: Any, descriptor: Any, reader: Any, writer: Any) -> None:
        with self._lock:
            self.calls["put"] = self.calls.get("put", 0) + 1
        raise flight.FlightUnavailableError("restarting")


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "RETRY_BACKOFF_S", 0.01)


@pytest.mark.usefixtures("fast_retries")
def test_reads_retry_on_unavailable() -> None:
    server = Flaky(failures=2)
    try:
        c = LanceFlightClient(f"grpc://127.0.0.1:{server.port}")
        assert c.health() == "ok"
        assert server.calls["health"] == 3
        c.close()
    finally:
        server.shutdown()


@pytest.mark.usefixtures("fast_retries")
def test_reads_give_up_after_the_last_attempt() -> None:
    server = Flaky(failures=100)
    try:
        c = LanceFlightClient(f"grpc://127.0.0.1:{server.port}")
        with pytest.raises(flight.FlightUnavailableError):
            c.stats("ds")
        assert server.calls["stats"] == client_module.READ_ATTEMPTS
    finally:
        server.shutdown()


@pytest.mark.usefixtures("fast_retries")
def test_writes_are_never_retried() -> None:
    server = Flaky(failures=1)
    try:
        c = LanceFlightClient(f"grpc://127.0.0.1:{server.port}")
        with pytest.raises(flight.FlightUnavailableError):
            c.delete("ds", "id = 1")
        assert server.calls["delete"] == 1
        with pytest.raises(flight.FlightUnavailableError):
            c.write("ds", table(3))
        assert server.calls["put"] == 1
    finally:
        server.shutdown()


def test_calls_time_out() -> None:
    server = Flaky(failures=0)
    try:
        c = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", timeout=0.2)
        started = time.monotonic()
        with pytest.raises(flight.FlightTimedOutError):
            c.action("sleep")
        assert time.monotonic() - started < 1.5
    finally:
        server.shutdown()


def test_unreachable_server_fails_fast(fast_retries: None) -> None:
    c = LanceFlightClient("grpc://127.0.0.1:1", timeout=2)
    with pytest.raises(flight.FlightUnavailableError):
        c.list_datasets()


def test_client_round_trip(served: Served) -> None:
    c = served.client
    data = seed(served, n=500, rows_per_file=200)
    assert c.list_datasets() == ["ds"]
    assert c.schema("ds") == data.schema
    assert c.scan("ds").equals(data)
    batches = list(c.scan_batches("ds", columns=["id"], filter="id < 250", batch_size=100))
    assert sum(b.num_rows for b in batches) == 250
    assert max(b.num_rows for b in batches) <= 100
    assert c.scan("ds", limit=3).column("id").to_pylist() == [0, 1, 2]
    assert c.take("ds", indices=[4, 2]).column("id").to_pylist() == [4, 2]
    with pytest.raises(ValueError, match="exactly one"):
        c.take("ds")
    with pytest.raises(ValueError, match="non-negative"):
        c.take("ds", indices=[-1])
    with pytest.raises(ValueError, match="mode"):
        c.write("ds", data, mode="upsert")
    v = c.write("ds", data.to_batches()[0], mode="overwrite")
    assert v == 2
    assert c.write("ds", iter(table(3, 9000).to_batches())) == 3
    c.create_tag("ds", "t", 2)
    assert c.checkout("ds", "t") == 2
    assert [e.version for e in c.versions("ds")] == [1, 2, 3]
    c.drop("ds")
    assert c.list_datasets() == []


def test_client_with_token_and_context_manager(tmp_path: Any) -> None:
    from dataclasses import replace

    from flight_server.settings import ServerSettings, Token
    from flight_server.workers import build_server

    settings = replace(ServerSettings(root=str(tmp_path), port=0, metrics_port=-1), tokens=(Token("sesame"),))
    server = build_server(settings, 0, (), None)
    try:
        location = f"grpc://127.0.0.1:{server.port}"
        with LanceFlightClient(location, token="sesame") as c:
            c.write("ds", pa.table({"a": [1, 2]}), mode="create")
            assert c.scan("ds").num_rows == 2
        with pytest.raises(flight.FlightUnauthenticatedError):
            LanceFlightClient(location, token="wrong").list_datasets()
    finally:
        server.shutdown()
