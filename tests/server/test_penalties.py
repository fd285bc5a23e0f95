"""Back-off for principals that keep sending oversized requests (flight_server.penalties).

The server refuses a principal's do_get calls in its auth middleware, before pyarrow copies their
tickets, once it sent an oversized ticket; other principals are served as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server._serde import encode_ticket
from flight_server.client import LanceFlightClient
from flight_server.penalties import MIN_BYTES, OversizePenalties
from flight_server.requests import TakeRequest
from flight_server.settings import ServerSettings, Token
from flight_server.workers import build_server


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


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
