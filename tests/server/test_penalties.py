"""Back-off for clients that keep sending oversized requests (flight_server.penalties).

The server refuses a principal's calls of a method in its auth middleware, before pyarrow copies
their requests, once it sent an oversized request to that method (ticket, command, action body);
other principals are served as before. Anonymous callers, keyed by host, get their oversized
requests answered only after their back-off; their well-sized calls are served as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server._serde import encode_action_request, encode_command, encode_ticket
from flight_server.client import LanceFlightClient
from flight_server.config import load_settings
from flight_server.penalties import MIN_BYTES, OversizePenalties, peer_host
from flight_server.requests import ActionRequest, ScanRequest, TakeRequest
from flight_server.settings import ServerSettings, Token
from flight_server.workers import build_server


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


def test_back_off_starts_at_the_second_refusal_and_doubles() -> None:
    clock = _Clock()
    box = OversizePenalties(strikes=2, first_backoff_s=1.0, max_backoff_s=4.0, window_s=60.0, clock=clock)
    box.refused("a", "do_get", MIN_BYTES)
    assert box.remaining("a", "do_get") == 0.0  # one mistake is not punished
    box.refused("a", "do_get", MIN_BYTES)
    assert box.remaining("a", "do_get") == 1.0
    assert box.remaining("a", "do_put") == 0.0  # only the method it abused
    assert box.remaining("b", "do_get") == 0.0  # only the principal that abused it
    clock.now += 1.0
    assert box.remaining("a", "do_get") == 0.0
    box.refused("a", "do_get", MIN_BYTES)
    assert box.remaining("a", "do_get") == 2.0
    box.refused("a", "do_get", MIN_BYTES)
    box.refused("a", "do_get", MIN_BYTES)
    assert box.remaining("a", "do_get") == 4.0  # capped


def test_small_refusals_and_quiet_principals_do_not_count() -> None:
    clock = _Clock()
    box = OversizePenalties(strikes=2, window_s=60.0, clock=clock)
    box.refused("a", "do_get", MIN_BYTES - 1)
    box.refused("a", "do_get", MIN_BYTES - 1)
    assert box.remaining("a", "do_get") == 0.0
    box.refused("a", "do_get", MIN_BYTES)
    clock.now += 61.0  # quiet for the whole window: starts over
    box.refused("a", "do_get", MIN_BYTES)
    assert box.remaining("a", "do_get") == 0.0
    box.refused("", "do_get", MIN_BYTES)
    box.refused("", "do_get", MIN_BYTES)
    assert box.remaining("", "do_get") == 0.0  # anonymous callers are not known before the handler


@pytest.fixture
def location(tmp_path: Path) -> Iterator[str]:
    settings = replace(
        ServerSettings(root=str(tmp_path), port=0, metrics_port=-1),
        tokens=(Token("attacker"), Token("victim")),
        max_take_rows=1_000,
    )
    server = build_server(settings, 0, (), None)
    try:
        yield f"grpc://127.0.0.1:{server.port}"
    finally:
        server.shutdown()


def test_a_client_that_keeps_sending_oversized_tickets_is_refused_before_its_ticket_is_read(
    location: str,
) -> None:
    with LanceFlightClient(location, token="victim") as victim:
        victim.write("t", pa.table({"id": np.arange(10)}), mode="create")
        raw = flight.connect(location)
        options = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer attacker")])
        # A take of more rows than limits.maxTakeRows, its ticket MIN_BYTES long.
        ticket = flight.Ticket(encode_ticket(TakeRequest("t", indices=np.zeros(MIN_BYTES // 8, np.uint64))))
        with pytest.raises(pa.ArrowInvalid, match="maxTakeRows"):  # refused by the handler
            raw.do_get(ticket, options).read_all()
        # Now refused by the middleware, whatever the ticket (even a small, valid one).
        small = flight.Ticket(encode_ticket(TakeRequest("t", indices=np.arange(3, dtype=np.uint64))))
        with pytest.raises(flight.FlightUnavailableError, match="refused for their size"):
            raw.do_get(small, options).read_all()
        # Another principal is served as before.
        assert victim.take("t", indices=np.arange(3, dtype=np.uint64)).num_rows == 3
        raw.close()


def test_peer_host_drops_the_port() -> None:
    assert peer_host("ipv4:10.0.0.7:51234") == "host:10.0.0.7"
    assert peer_host("ipv6:[::1]:51234") == "host:[::1]"
    assert peer_host("ipv6:%5B::1%5D:51234") == "host:%5B::1%5D"
    assert peer_host("unix:/tmp/s") == "host:unix:/tmp/s"


def test_hold_waits_out_the_back_off_within_its_byte_budget() -> None:
    clock = _Clock()
    box = OversizePenalties(first_backoff_s=2.0, hold_bytes=3 * MIN_BYTES, clock=clock, sleep=clock.sleep)
    assert box.hold("h", "do_get", MIN_BYTES, lambda: False) == 0.0  # no back-off: nothing to wait
    assert box.refused("h", "do_get", MIN_BYTES)
    assert box.hold("h", "do_get", MIN_BYTES, lambda: False) == pytest.approx(2.0)
    assert box.remaining("h", "do_get") == 0.0
    # A request bigger than the budget is answered at once (held requests keep their bytes).
    box.refused("h", "do_get", MIN_BYTES)
    assert box.hold("h", "do_get", 4 * MIN_BYTES, lambda: False) == 0.0
    # A cancelled call stops waiting.
    assert box.hold("h", "do_get", MIN_BYTES, lambda: True) == 0.0
    assert not box.refused("h", "do_get", MIN_BYTES - 1)  # too small to count


def test_back_off_settings_come_from_flags_environment_and_config(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("limits:\n  oversizeMinBytes: 4Ki\n  oversizeStrikes: 5\n")
    settings = load_settings(
        ["--config", str(config), "--oversize-max-backoff", "7"],
        env={"LANCE_FLIGHT_OVERSIZE_FIRST_BACKOFF_SECONDS": "0.5", "LANCE_FLIGHT_OVERSIZE_STRIKES": "3"},
    )
    box = OversizePenalties.of(settings)
    assert (box.strikes, box.first_backoff_s, box.max_backoff_s, box.min_bytes) == (3, 0.5, 7.0, 4096)
    assert box.window_s == ServerSettings().oversize_window_seconds
    assert box.hold_bytes == ServerSettings().oversize_hold_bytes


@pytest.fixture
def anonymous(tmp_path: Path) -> Iterator[tuple[str, flight.FlightServerBase]]:
    settings = replace(
        ServerSettings(root=str(tmp_path), port=0, metrics_port=-1),
        max_take_rows=1_000,
        oversize_first_backoff_seconds=3600.0,  # longer than any call's deadline here
        oversize_max_backoff_seconds=3600.0,
    )
    server = build_server(settings, 0, (), None)
    try:
        yield f"grpc://127.0.0.1:{server.port}", server
    finally:
        server.shutdown()


def test_an_anonymous_client_in_a_back_off_waits_for_its_refusal_and_others_are_served(
    anonymous: tuple[str, flight.FlightServerBase],
) -> None:
    location, server = anonymous
    big = flight.Ticket(encode_ticket(TakeRequest("t", indices=np.zeros(MIN_BYTES // 8, np.uint64))))
    small = flight.Ticket(encode_ticket(TakeRequest("t", indices=np.arange(3, dtype=np.uint64))))
    with LanceFlightClient(location) as other:
        other.write("t", pa.table({"id": np.arange(10)}), mode="create")
        first, second = flight.connect(location), flight.connect(location)
        quick = flight.FlightCallOptions(timeout=1.0)
        # The first oversized ticket is refused at once; its host is now in a back-off.
        with pytest.raises(pa.ArrowInvalid, match="maxTakeRows"):
            first.do_get(big, quick).read_all()
        assert server.penalties.remaining("host:127.0.0.1", "do_get") > 0  # type: ignore[attr-defined]
        # The next one, on a new connection of the same host, is held past the caller's deadline.
        with pytest.raises(flight.FlightTimedOutError):
            second.do_get(big, quick).read_all()
        # Well-sized calls of that host (this connection, or another client's) are served.
        assert first.do_get(small, quick).read_all().num_rows == 3
        assert other.take("t", indices=np.arange(3, dtype=np.uint64)).num_rows == 3
        first.close()
        second.close()


@pytest.fixture
def small_messages(tmp_path: Path) -> Iterator[str]:
    settings = replace(
        ServerSettings(root=str(tmp_path), port=0, metrics_port=-1),
        tokens=(Token("attacker"), Token("victim")),
        max_message_bytes=64 * 1024,
        oversize_min_bytes=1024,
    )
    server = build_server(settings, 0, (), None)
    try:
        yield f"grpc://127.0.0.1:{server.port}"
    finally:
        server.shutdown()


def test_oversized_commands_and_action_bodies_start_a_back_off(small_messages: str) -> None:
    location = small_messages
    with LanceFlightClient(location, token="victim") as victim:
        victim.write("t", pa.table({"id": np.arange(10)}), mode="create")
        raw = flight.connect(location)
        options = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer attacker")])
        padding = "x" * (100 * 1024)
        huge_body = encode_action_request(ActionRequest("t", tag=padding))
        with pytest.raises(pa.ArrowInvalid, match="action body"):
            list(raw.do_action(flight.Action("stats", huge_body), options))
        with pytest.raises(flight.FlightUnavailableError, match="refused for their size"):
            list(raw.do_action(flight.Action("stats", encode_action_request(ActionRequest("t"))), options))
        huge_scan = encode_command(ScanRequest("t", filter_sql=padding))
        huge_command = flight.FlightDescriptor.for_command(huge_scan)
        with pytest.raises(pa.ArrowInvalid, match="descriptor command"):
            raw.get_flight_info(huge_command, options)
        with pytest.raises(flight.FlightUnavailableError, match="refused for their size"):
            raw.get_flight_info(flight.FlightDescriptor.for_path("t"), options)
        # Only the methods it abused, and only this principal.
        assert raw.get_schema(flight.FlightDescriptor.for_path("t"), options).schema.names == ["id"]
        assert victim.stats("t")  # a do_action of another principal
        assert len(victim.flight_info(ScanRequest("t")).endpoints) >= 1
        raw.close()
