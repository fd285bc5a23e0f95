"""Generic Flight clients, with no lance_flight protos: JSON actions, ordered and sized flights."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.client import ScanRequest
from flight_server.handlers.scan import TICKET_LIFETIME_SECONDS
from tests.server.service_fixtures import Served, seed, start, stop


def _action(served: Served, name: str, body: object) -> dict[str, object]:
    results = list(served.raw.do_action(flight.Action(name, json.dumps(body).encode())))
    assert len(results) == 1
    return json.loads(results[0].body.to_pybytes())  # type: ignore[no-any-return]


def test_json_action_bodies_get_json_answers(served: Served) -> None:
    seed(served, n=100)
    versions = _action(served, "versions", {"dataset": "ds"})
    assert [v["version"] for v in versions["versions"]] == [1]  # type: ignore[index]
    deleted = _action(served, "delete", {"dataset": "ds", "filter": "id < 10"})
    assert deleted["version"] == 2
    assert served.client.scan("ds").num_rows == 90
    _action(served, "create_tag", {"dataset": "ds", "tag": "first", "version": 1})
    tags = _action(served, "tags", {"dataset": "ds"})
    assert tags["tags"] == [{"name": "first", "version": 1}]
    stats = _action(served, "stats", {"dataset": "ds"})
    assert isinstance(stats["counters"], dict)
    assert stats["counters"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"dataset": "ds", "nope": 1}', "unknown action field 'nope'"),
        (b'{"dataset": "ds", "version": "one"}', "version: an integer"),
        (b'{"dataset": ', "not valid JSON"),
        (b"[1]", None),
    ],
)
def test_bad_json_bodies_are_invalid_argument(served: Served, body: bytes, message: str | None) -> None:
    seed(served, n=10)
    with pytest.raises(pa.ArrowInvalid) as info:
        list(served.raw.do_action(flight.Action("versions", body)))
    if message is not None:
        assert message in str(info.value)


def test_flights_are_ordered_sized_by_projection_and_expire(served: Served) -> None:
    seed(served, n=3000, rows_per_file=500)
    full = served.raw.get_flight_info(flight.FlightDescriptor.for_path("ds"))
    assert full.ordered
    narrow = served.client.flight_info(ScanRequest("ds", columns=("id",)))
    assert narrow.ordered
    assert 0 < narrow.total_bytes < full.total_bytes / 2
    now = datetime.now(UTC)
    for endpoint in full.endpoints:
        expires = endpoint.expiration_time.as_py()
        assert now < expires <= now + timedelta(seconds=TICKET_LIFETIME_SECONDS + 60)
    # Endpoint order is row order.
    ids = pa.concat_tables(served.raw.do_get(e.ticket).read_all() for e in full.endpoints).column("id")
    assert ids.to_pylist() == list(range(3000))


def test_no_expiration_time_when_the_lifetime_is_zero(tmp_path: Path) -> None:
    s = start(tmp_path / "root", ticket_lifetime_seconds=0)
    try:
        seed(s, n=100)
        info = s.raw.get_flight_info(flight.FlightDescriptor.for_path("ds"))
        assert all(e.expiration_time is None for e in info.endpoints)
    finally:
        stop(s)
