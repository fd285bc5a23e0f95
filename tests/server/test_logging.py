"""Call logs: one structured line per call, with a request id the client sees too."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pyarrow.flight as flight
import pytest

from flight_server.client import LanceFlightClient
from flight_server.logging import CALL_LOGGER, JsonFormatter, KeyValueFormatter, configure_logging
from flight_server.metrics import Metrics
from flight_server.settings import ServerSettings, Token
from flight_server.workers import build_server
from tests.server.helpers import location, standin_server


def test_each_call_is_logged_with_its_request_id(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=CALL_LOGGER)
    with (
        standin_server(ServerSettings(tokens=(Token("t"),))) as server,
        flight.FlightClient(location(server)) as c,
    ):
        headers = [(b"authorization", b"Bearer t"), (b"x-request-id", b"abc-123")]
        given = flight.FlightCallOptions(headers=headers)
        (seen,) = list(c.do_action(flight.Action("request_id", b""), given))
        assert seen.body.to_pybytes() == b"abc-123"  # visible to the handler's thread
        with pytest.raises(flight.FlightServerError):
            list(c.do_action(flight.Action("nope", b""), flight.FlightCallOptions(headers=headers)))
        bad_id = flight.FlightCallOptions(
            headers=[(b"authorization", b"Bearer t"), (b"x-request-id", b"a b<c>")]
        )
        (fresh,) = list(c.do_action(flight.Action("request_id", b""), bad_id))
        assert len(fresh.body.to_pybytes()) == 16
        with pytest.raises(flight.FlightUnauthenticatedError):
            list(c.list_flights())
    calls = [r for r in caplog.records if r.name == CALL_LOGGER]
    first = calls[0]
    assert (first.request_id, first.method, first.status) == ("abc-123", "do_action", "OK")  # type: ignore[attr-defined]
    assert first.duration_ms >= 0  # type: ignore[attr-defined]
    failed = calls[1]
    assert failed.status == "UNKNOWN"
    assert failed.levelno == logging.WARNING
    assert "unknown action" in failed.error
    assert "Traceback" not in failed.error
    assert calls[-1].status == "UNAUTHENTICATED"  # type: ignore[attr-defined]


def test_formats() -> None:
    record = logging.LogRecord("lance_flight.calls", logging.INFO, "", 0, "call", None, None)
    record.request_id = "r1"
    record.method = "do_get"
    record.error = 'has "quotes" and spaces'
    text = KeyValueFormatter().format(record)
    assert "request_id=r1" in text
    assert "method=do_get" in text
    assert 'error="has \\"quotes\\" and spaces"' in text
    parsed = json.loads(JsonFormatter().format(record))
    assert parsed["request_id"] == "r1"
    assert parsed["msg"] == "call"
    assert parsed["level"] == "INFO"


def test_configure_logging_writes_json_lines() -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    try:
        configure_logging("WARNING", "json", stream)
        logging.getLogger("lance_flight.test").info("hidden")
        logging.getLogger("lance_flight.test").warning("shown", extra={"k": 1})
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    (line,) = stream.getvalue().splitlines()
    assert json.loads(line)["k"] == 1


def test_call_lines_name_dataset_principal_peer_rows_and_bytes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=CALL_LOGGER)
    settings = ServerSettings(root=str(tmp_path), tokens=(Token("t"),), metrics_port=-1)
    server = build_server(settings, 0, (), Metrics())
    try:
        client = LanceFlightClient(location(server), token="t")
        client.write("events", {"id": list(range(10))}, mode="create")
        assert client.take("events", indices=[1, 2]).num_rows == 2
        client.versions("events")
        client.close()
    finally:
        server.shutdown()
    calls = [r for r in caplog.records if r.name == CALL_LOGGER]
    put = next(r for r in calls if r.method == "do_put")  # type: ignore[attr-defined]
    take = next(r for r in calls if r.method == "do_get")  # type: ignore[attr-defined]
    action = next(r for r in calls if r.method == "do_action")  # type: ignore[attr-defined]
    for record in (put, take, action):
        assert record.dataset == "events"  # type: ignore[attr-defined]
        assert record.principal == "token"  # type: ignore[attr-defined]
        assert record.peer.startswith("ipv4:127.0.0.1:")  # type: ignore[attr-defined]
    assert (put.rows, take.rows) == (10, 2)  # type: ignore[attr-defined]
    assert put.bytes == 80  # type: ignore[attr-defined]
    assert take.bytes > 0  # type: ignore[attr-defined]
    assert "rows" not in vars(action)
    text = KeyValueFormatter().format(take)
    assert "dataset=events principal=token peer=ipv4:127.0.0.1:" in text
