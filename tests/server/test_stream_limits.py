"""Issue 14: stream slots are shared fairly, unread streams lose them, takes hold them until sent,
and work stops when the client's deadline passes."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

import flight_server.handlers.scan as scan_module
from flight_server._serde import encode_command, encode_ticket
from flight_server.errors import ResourceExhausted, error_code
from flight_server.requests import ScanRequest, TakeRequest
from flight_server.streams import StreamExpired, StreamGovernor, governed
from lance_format import write_dataset
from tests.server.service_fixtures import Recorder, Served, seed, start, stop

#: Rows of the dataset the stream tests hold open: ~16 MB per full read, far more than gRPC
#: buffers for a stream nobody reads, so an unread stream really stays open.
BIG_ROWS = 1_000_000


def _big(served: Served) -> None:
    ids = np.arange(BIG_ROWS, dtype=np.int64)
    write_dataset(pa.table({"id": ids, "x": ids.astype(np.float64)}), str(served.root / "big"))


class _FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- the governor on its own -----------------------------------------------------------------------


def test_one_principal_gets_at_most_its_share_of_slots() -> None:
    gov = StreamGovernor(4, 2, 1 << 20, 1 << 20, wait_seconds=0.0, idle_seconds=60)
    held = [gov.acquire("a"), gov.acquire("a")]
    with pytest.raises(ResourceExhausted, match="maxStreamsPerPrincipal"):
        gov.acquire("a")
    others = [gov.acquire("b"), gov.acquire("c")]
    with pytest.raises(ResourceExhausted, match="maxConcurrentStreams"):
        gov.acquire("d")
    held[0].release()
    held[0].release()  # twice is harmless
    assert gov.open == 3
    gov.acquire("a")
    for lease in others:
        lease.release()
    assert gov.open == 2


def test_memory_is_charged_until_freed_and_bounded_per_call_and_principal() -> None:
    gov = StreamGovernor(4, 2, 1000, 400, wait_seconds=0.0, idle_seconds=60)
    a1, a2, b = gov.acquire("a"), gov.acquire("a"), gov.acquire("b")
    with pytest.raises(ResourceExhausted, match="callMemoryBytes"):
        a1.reserve(401)  # more than one call may hold
    a1.reserve(300)
    a2.reserve(200)
    with pytest.raises(ResourceExhausted, match="share of result memory"):
        a2.reserve(100)  # a's share is half of 1000
    b.reserve(400)  # others are not affected
    assert gov.memory_used == 900
    a1.free()
    a2.reserve(100)
    a2.release()
    b.release()
    assert gov.memory_used == 0


def test_a_waiting_call_gets_a_slot_another_call_releases() -> None:
    gov = StreamGovernor(1, 1, 1 << 20, 1 << 20, wait_seconds=10, idle_seconds=60)
    first = gov.acquire("a")
    threading.Timer(0.1, first.release).start()
    second = gov.acquire("b")  # waits instead of failing
    assert gov.open == 1
    second.release()


def test_an_idle_stream_loses_its_slot_and_ends_with_an_error() -> None:
    clock = _FakeClock()
    gov = StreamGovernor(1, 1, 1 << 20, 1 << 20, wait_seconds=0.0, idle_seconds=5, clock=clock)
    lease = gov.acquire("attacker")
    stream = governed(lease, iter([pa.record_batch({"a": [1, 2]})] * 3))
    next(stream)  # handed to gRPC; the client does not read it
    clock.now = 4.0
    with pytest.raises(ResourceExhausted):
        gov.acquire("victim")  # not idle long enough yet
    clock.now = 6.0
    victim = gov.acquire("victim")
    assert gov.open == 1
    assert gov.memory_used > 0  # gRPC still holds the attacker's batch: still charged
    with pytest.raises(StreamExpired) as info:  # no match=: pytest would read __notes__
        next(stream)
    assert "limits.streamIdleSeconds" in str(info.value)
    victim.release()
    assert (gov.open, gov.memory_used) == (0, 0)


# -- over the wire ---------------------------------------------------------------------------------


def _unread(client: flight.FlightClient, req: ScanRequest | TakeRequest) -> flight.FlightStreamReader:
    return client.do_get(flight.Ticket(encode_ticket(req)))


def _cancel(readers: list[flight.FlightStreamReader]) -> None:
    """End unread streams, so a failed test does not leave the server waiting on them."""
    for reader in readers:
        reader.cancel()


def _refused(call: object) -> BaseException:
    with pytest.raises(flight.FlightUnavailableError) as info:
        call()  # type: ignore[operator]
    assert error_code(info.value) == "RESOURCE_EXHAUSTED"
    return info.value


def test_unread_streams_of_one_client_do_not_lock_out_the_others(tmp_path: Path, recorder: Recorder) -> None:
    s = start(tmp_path / "r", recorder, max_concurrent_streams=8, stream_wait_seconds=0.2)
    attacker = flight.connect(s.location)
    streams: list[flight.FlightStreamReader] = []
    try:
        _big(s)
        seed(s, n=50)
        for _ in range(4):  # half of the slots: the attacker's share
            streams.append(_unread(attacker, ScanRequest("big")))
        _refused(lambda: _unread(attacker, ScanRequest("big")).read_all())
        # Everyone else is still served: scans, takes and writes.
        for _ in range(3):
            assert s.client.scan("ds").num_rows == 50
            assert s.client.take("ds", indices=[1, 2]).num_rows == 2
        s.client.write("w", pa.table({"id": pa.array([1, 2], pa.int64())}), mode="create")
        assert s.client.scan("w").num_rows == 2
        for reader in streams:
            assert reader.read_all().num_rows == BIG_ROWS  # the attacker's streams still work
    finally:
        _cancel(streams)
        attacker.close()
        stop(s)


def test_takes_hold_their_slot_until_sent(tmp_path: Path, recorder: Recorder) -> None:
    s = start(
        tmp_path / "r",
        recorder,
        max_concurrent_streams=2,
        max_streams_per_principal=2,
        stream_wait_seconds=0.2,
    )
    other = flight.connect(s.location)
    takes: list[flight.FlightStreamReader] = []
    try:
        _big(s)
        ids = np.arange(BIG_ROWS, dtype=np.uint64)[::-1].copy()
        takes += [_unread(s.raw, TakeRequest("big", indices=ids)) for _ in range(2)]
        deadline = time.monotonic() + 10
        while s.server._slots.open < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.server._slots.open == 2  # an unread take still holds its slot
        _refused(lambda: _unread(other, TakeRequest("big", indices=ids[:5])).read_all())
        got = takes[0].read_all()
        assert got.num_rows == BIG_ROWS
        assert got.column("id").to_numpy()[:3].tolist() == [BIG_ROWS - 1, BIG_ROWS - 2, BIG_ROWS - 3]
        takes[1].read_all()
        assert _unread(other, TakeRequest("big", indices=ids[:5])).read_all().num_rows == 5
        assert s.server._slots.open == 0
    finally:
        _cancel(takes)
        other.close()
        stop(s)


def test_an_unread_stream_loses_its_slot_after_the_idle_timeout(tmp_path: Path, recorder: Recorder) -> None:
    s = start(
        tmp_path / "r",
        recorder,
        max_concurrent_streams=1,
        stream_wait_seconds=60,  # the victim waits as long as it takes the attacker to go idle
        stream_idle_seconds=0.3,
    )
    attacker = flight.connect(s.location)
    held: list[flight.FlightStreamReader] = []
    try:
        _big(s)
        seed(s, n=10)
        held.append(_unread(attacker, ScanRequest("big")))
        deadline = time.monotonic() + 10
        while s.server._slots.open < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.client.scan("ds").num_rows == 10  # waits, then gets the idle stream's slot
        with pytest.raises(flight.FlightError, match="waited on the client"):
            held[0].read_all()
    finally:
        _cancel(held)
        attacker.close()
        stop(s)


def test_planning_stops_when_the_client_deadline_passes(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(served, n=2000, rows_per_file=2000)
    encoded: list[int] = []
    real = scan_module.encode_ticket

    def slow(req: ScanRequest | TakeRequest) -> bytes:
        encoded.append(1)
        time.sleep(0.005)
        return real(req)

    monkeypatch.setattr(scan_module, "encode_ticket", slow)
    descriptor = flight.FlightDescriptor.for_command(
        encode_command(ScanRequest("ds", max_rows_per_endpoint=1))
    )
    with pytest.raises(flight.FlightTimedOutError):
        served.raw.get_flight_info(descriptor, flight.FlightCallOptions(timeout=0.3))
    settled, deadline = -1, time.monotonic() + 60
    while settled != len(encoded) and time.monotonic() < deadline:
        settled = len(encoded)
        time.sleep(1.0)  # planning one endpoint takes 5 ms: one second without one means it stopped
    assert settled == len(encoded) < 1000, "planning went on after the deadline"


def test_streams_stop_between_batches_when_the_call_is_cancelled() -> None:
    gov = StreamGovernor(2, 2, 1 << 20, 1 << 20, wait_seconds=0.0, idle_seconds=60)
    cancelled = threading.Event()
    lease = gov.acquire("a", cancelled.is_set)
    produced: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        for i in range(100):
            produced.append(i)
            yield pa.record_batch({"a": [i]})

    stream = governed(lease, batches())
    next(stream)
    cancelled.set()
    with pytest.raises(flight.FlightCancelledError):
        next(stream)
    assert produced == [0]


def test_wide_rows_are_scanned_in_smaller_batches_not_refused(tmp_path: Path, recorder: Recorder) -> None:
    s = start(tmp_path / "r", recorder, max_message_bytes=256 * 1024, call_memory_bytes=1024 * 1024)
    try:
        values = np.arange(10_000, dtype=np.float64)
        write_dataset(pa.table({f"c{i}": values for i in range(200)}), str(s.root / "wide"))
        # 8,192 rows of 1,600 bytes would be 13 MB a batch: more than one call may hold.
        table = s.client.scan("wide")
        assert table.num_rows == 10_000
        assert table.column("c7").to_numpy().tolist() == values.tolist()
        too_big = ScanRequest("wide", batch_size=8192)
        _refused(lambda: _unread(s.raw, too_big).read_all())
    finally:
        stop(s)


def test_a_silent_put_loses_its_slot_after_the_idle_timeout(tmp_path: Path, recorder: Recorder) -> None:
    s = start(
        tmp_path / "r", recorder, max_concurrent_streams=1, stream_wait_seconds=60, stream_idle_seconds=0.3
    )
    writer_client = flight.connect(s.location)
    seed(s, n=10)
    schema = pa.schema([pa.field("id", pa.int64())])
    writer, _ = writer_client.do_put(flight.FlightDescriptor.for_path("silent"), schema)
    try:
        deadline = time.monotonic() + 10
        while s.server._slots.open < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.server._slots.open == 1  # the put holds the only slot and sends nothing
        assert s.client.scan("ds").num_rows == 10  # waits, then gets the silent put's slot

        def finish() -> None:
            writer.write_table(pa.table({"id": pa.array([1], pa.int64())}))
            writer.close()

        with pytest.raises(flight.FlightError, match="waited on the client"):
            finish()
        assert "silent" not in s.client.list_datasets()
    finally:
        with contextlib.suppress(flight.FlightError, pa.ArrowException):
            writer.close()  # a failed test must not leave the server waiting on the put
        writer_client.close()
        stop(s)


def test_an_exchange_batch_larger_than_a_call_may_hold_is_refused(tmp_path: Path, recorder: Recorder) -> None:
    s = start(tmp_path / "r", recorder, call_memory_bytes=1024 * 1024)
    try:
        _big(s)
        small = np.arange(1000, dtype=np.uint64)
        large = np.arange(200_000, dtype=np.uint64)  # 16 bytes a row: 3.2 MB in one answer batch
        answers = s.client.take_stream("big", [small, small[::-1]], by="index")
        assert [t.num_rows for t in answers] == [1000, 1000]
        with pytest.raises(flight.FlightUnavailableError) as info:
            list(s.client.take_stream("big", [small, large], by="index"))
        assert error_code(info.value) == "RESOURCE_EXHAUSTED"
        assert "limits.callMemoryBytes" in str(info.value)
    finally:
        stop(s)


def test_a_scan_measures_each_batch_it_sends_once(
    tmp_path: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # RecordBatch.nbytes walks every column (~1 ns a row of the Spark benchmark's table); the
    # stream used to ask for it three times a batch (the lease, the message limit, the counters).
    import flight_server.streams as streams_module

    measured: list[int] = []

    def counting(batch: pa.RecordBatch) -> int:
        measured.append(batch.num_rows)
        return int(batch.nbytes)

    monkeypatch.setattr(streams_module, "batch_bytes", counting)
    s = start(tmp_path / "r", recorder, batch_cache_bytes=0)
    try:
        _big(s)
        reader = s.raw.do_get(flight.Ticket(encode_ticket(ScanRequest("big", batch_size=100_000))))
        sent = [chunk.data.num_rows for chunk in reader]
        assert sum(sent) == BIG_ROWS
        assert measured == sent  # one measurement per batch sent, none more
        assert recorder.served[-1][1:] == (BIG_ROWS, 16 * BIG_ROWS)  # rows and bytes still counted
    finally:
        stop(s)
