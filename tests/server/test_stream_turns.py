"""Client-streamed calls (do_put, do_exchange) take turns of the fair work scheduler like reads.

The server runs with ``limits.workSlots = 1``; the test holds that one turn, so work that needs a
turn queues in the scheduler, where the test sees it (``waiting()``). Deterministic: the test only
waits for states (a waiter queued, a thread done), with a generous sync timeout; no timing is
asserted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server._serde import encode_ticket
from flight_server.client import LanceFlightClient
from flight_server.requests import TakeRequest
from tests.server.service_fixtures import Served, start, stop, table

#: Seconds a test waits for a state before it fails (a sync, not a timing assertion).
SYNC_TIMEOUT_S = 30.0
BLOCKER = "test:blocker"


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


@pytest.fixture
def one_slot(tmp_path: Path) -> Iterator[Served]:
    s = start(tmp_path / "root", work_slots=1)
    try:
        s.client.write("t", table(50), mode="create")
        yield s
    finally:
        stop(s)


def _victim_take(location: str, done: list[int]) -> threading.Thread:
    """A take by another client (its own connection: another principal), run in a thread."""

    def run() -> None:
        with LanceFlightClient(location, timeout=SYNC_TIMEOUT_S) as client:
            done.append(client.take("t", indices=np.array([1, 2, 3], dtype=np.uint64)).num_rows)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_put_batches_wait_for_a_turn_and_hold_none_while_waiting_on_the_client(one_slot: Served) -> None:
    sched = one_slot.server.work_scheduler
    batch = table(20, start=50)
    sched.acquire(BLOCKER)  # every turn is taken
    released = False
    writer, result = one_slot.raw.do_put(flight.FlightDescriptor.for_path("t"), batch.schema)
    try:
        writer.write_table(batch)
        # The writer's batch is worked on only in a turn: it queues behind the held one.
        _until(lambda: sched.waiting() == 1, "the put's batch never asked for a turn")
        done: list[int] = []
        victim = _victim_take(one_slot.location, done)
        _until(lambda: sched.waiting() == 2, "the victim's take never asked for a turn")
        sched.release(BLOCKER)
        released = True
        # The writer's stream is still open (no more batches, not finished): its turn was given
        # back while it waits on its client, so the other client's take completes meanwhile.
        victim.join(SYNC_TIMEOUT_S)
        assert done == [3]
        writer.done_writing()
        result.read()
    finally:
        if not released:
            sched.release(BLOCKER)
        writer.close()  # ends the call either way, so the server can shut down
    assert sched.running() == 0
    assert sched.waiting() == 0
    assert one_slot.client.take("t", indices=np.arange(70, dtype=np.uint64)).num_rows == 70


def test_exchange_batches_wait_for_a_turn(one_slot: Served) -> None:
    sched = one_slot.server.work_scheduler
    req = TakeRequest("t", indices=np.zeros(0, dtype=np.uint64), columns=("id",))
    descriptor = flight.FlightDescriptor.for_command(encode_ticket(req))
    ids = pa.record_batch({"index": pa.array([5, 7, 9], pa.uint64())})
    sched.acquire(BLOCKER)
    released = False
    writer, reader = one_slot.raw.do_exchange(descriptor)
    try:
        writer.begin(ids.schema)
        writer.write_batch(ids)
        _until(lambda: sched.waiting() == 1, "the exchange's batch never asked for a turn")
        sched.release(BLOCKER)
        released = True
        answer = reader.read_chunk().data
        assert answer.column("id").to_pylist() == [5, 7, 9]
    finally:
        if not released:
            sched.release(BLOCKER)
        writer.done_writing()
        writer.close()  # ends the call either way, so the server can shut down
    _until(lambda: sched.running() == 0, "the exchange kept its turn after it ended")
