"""Issue 14: every request field is checked right after decoding, before any work is done."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

import flight_server.service as service_module
from flight_server._serde import encode_action_request, encode_command, encode_ticket
from flight_server.requests import ActionRequest, ScanRequest, TakeRequest, WriteRequest
from flight_server.settings import ServerSettings
from flight_server.validation import MAX_BATCH_SIZE, MAX_INT, RequestLimits, validate
from lance_format.core.errors import InvalidInputError
from tests.server.service_fixtures import Recorder, Served, seed, start, stop

LIMITS = RequestLimits.of(ServerSettings())


@pytest.mark.parametrize(
    "req",
    [
        ScanRequest("ds", fragment_ids=(0, 1, 0)),
        ScanRequest("ds", columns=("id", "id")),
        ScanRequest("ds", limit=MAX_INT + 1),
        ScanRequest("ds", offset=2**64 - 1),
        ScanRequest("ds", version=2**63),
        ScanRequest("ds", batch_size=MAX_BATCH_SIZE + 1),
        ScanRequest("ds", row_start=5, row_end=2),
        ScanRequest("ds", tag="t" * 5000),
        ScanRequest("ds", filter_sql="x" * (2 * 1024 * 1024)),
        TakeRequest("ds", row_ids=np.arange(11, dtype=np.uint64), columns=("a",)),
        TakeRequest("ds", indices=np.arange(3, dtype=np.uint64), columns=("a", "b", "a")),
        WriteRequest("ds", max_rows_per_file=2**40),
        ActionRequest("ds", older_than_seconds=float("inf")),
        ActionRequest("ds", older_than_seconds=-1.0),
        ActionRequest("ds", fragments=(b"{}", b"{}")),
        ActionRequest("ds", read_version=2**64 - 1),
    ],
    ids=lambda r: type(r).__name__,
)
def test_out_of_bounds_fields_are_refused(req: object) -> None:
    with pytest.raises(InvalidInputError):
        validate(req, replace(LIMITS, max_take_rows=10))  # type: ignore[arg-type]


def test_ordinary_requests_pass() -> None:
    for req in (
        ScanRequest("ds", columns=("a", "b"), limit=10, offset=5, batch_size=1024, fragment_ids=(3, 1)),
        ScanRequest("ds", fragment_ids=(0,), row_start=0, row_end=10, max_rows_per_endpoint=2**40),
        TakeRequest("ds", row_ids=np.array([3, 3, 1], np.uint64)),  # a row twice is a valid take
        WriteRequest("ds", max_rows_per_file=1000),
        ActionRequest("ds", older_than_seconds=0.0, columns=("a",)),
    ):
        validate(req, LIMITS)


def _get(served: Served, req: ScanRequest | TakeRequest) -> pa.Table:
    return served.raw.do_get(flight.Ticket(encode_ticket(req))).read_all()


def test_a_fragment_listed_twice_is_refused_not_streamed_twice(served: Served) -> None:
    seed(served, n=600, rows_per_file=300)
    assert _get(served, ScanRequest("ds", fragment_ids=(0, 1))).num_rows == 600
    with pytest.raises(pa.ArrowInvalid, match="fragment_ids names 0 twice"):
        _get(served, ScanRequest("ds", fragment_ids=(0,) * 1000))


def test_out_of_range_limit_is_bad_input(served: Served) -> None:
    seed(served, n=10)
    with pytest.raises(pa.ArrowInvalid, match="limit"):
        _get(served, ScanRequest("ds", limit=2**63))
    descriptor = flight.FlightDescriptor.for_command(encode_command(ScanRequest("ds", batch_size=2**31)))
    with pytest.raises(pa.ArrowInvalid, match="batch_size"):
        served.raw.get_flight_info(descriptor)


def test_endpoint_count_is_capped(tmp_path: Path, recorder: Recorder) -> None:
    s = start(tmp_path / "r", recorder, max_endpoints=10)
    try:
        seed(s, n=1000, rows_per_file=300)  # fragments of 300, 300, 300 and 100 rows
        tiny = flight.FlightDescriptor.for_command(encode_command(ScanRequest("ds", max_rows_per_endpoint=1)))
        with pytest.raises(pa.ArrowInvalid, match=r"1000 endpoints.*maxEndpoints.*>= 100"):
            s.raw.get_flight_info(tiny)
        fits = flight.FlightDescriptor.for_command(
            encode_command(ScanRequest("ds", max_rows_per_endpoint=100))
        )
        info = s.raw.get_flight_info(fits)
        assert len(info.endpoints) == 10
        assert sum(s.raw.do_get(e.ticket).read_all().num_rows for e in info.endpoints) == 1000
        # Without splitting, every fragment still gets its endpoint whatever the cap.
        assert len(s.raw.get_flight_info(flight.FlightDescriptor.for_path("ds")).endpoints) == 4
    finally:
        stop(s)


def test_oversized_requests_are_refused_before_parsing(
    tmp_path: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = start(tmp_path / "r", recorder, max_message_bytes=4096)
    try:
        seed(s, n=10)
        parsed: list[int] = []
        real = service_module.decode_ticket

        def counting(data: bytes) -> ScanRequest | TakeRequest:
            parsed.append(len(data))
            return real(data)

        real_take = service_module.decode_take_ticket

        def counting_take(data: bytes) -> TakeRequest | None:
            parsed.append(len(data))
            return real_take(data)

        monkeypatch.setattr(service_module, "decode_ticket", counting)
        monkeypatch.setattr(service_module, "decode_take_ticket", counting_take)
        big = TakeRequest("ds", row_ids=np.zeros(1000, np.uint64))  # 8,000 bytes of ids
        with pytest.raises(pa.ArrowInvalid, match=r"ticket of .* bytes exceeds limits\.maxMessageBytes"):
            _get(s, big)
        assert parsed == []
        assert _get(s, TakeRequest("ds", row_ids=np.zeros(3, np.uint64))).num_rows == 3
        assert len(parsed) == 1
        body = encode_action_request(ActionRequest("ds", filter_sql="id > " + "1" * 5000))
        with pytest.raises(pa.ArrowInvalid, match="action body"):
            list(s.raw.do_action(flight.Action("delete", body)))
        command = encode_command(ScanRequest("ds", columns=tuple(f"c{i}" for i in range(2000))))
        with pytest.raises(pa.ArrowInvalid, match="descriptor command"):
            s.raw.get_schema(flight.FlightDescriptor.for_command(command))
    finally:
        stop(s)
