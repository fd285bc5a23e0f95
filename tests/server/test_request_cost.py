"""Work the server does per request that a heavy client could multiply: plans reused per dataset
version (cache.planBytes), take tickets refused by size before their ids are decoded, takes
produced in bounded chunks."""

from __future__ import annotations

import operator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

import flight_server.catalog as catalog_module
import flight_server.service as service_module
from flight_server._serde import encode_ticket, peek_take_count
from flight_server.handlers.take import TAKE_CHUNK_ROWS, take_batches
from flight_server.plan_cache import PlanCache, entry_bytes
from flight_server.requests import ScanRequest, TakeRequest
from flight_server.streams import CancelCheck
from tests.server.service_fixtures import Served, start, stop


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _info(name: str) -> flight.FlightInfo:
    return flight.FlightInfo(
        pa.schema([("a", pa.int64())]), flight.FlightDescriptor.for_path(name), [], -1, -1
    )


# -- the cache alone -------------------------------------------------------------------------------


def test_plan_cache_reuses_young_answers_and_forgets_old_ones() -> None:
    clock = _Clock()
    cache = PlanCache(2, max_age=60.0, clock=clock, sizer=lambda _k, _i: 1)
    info = _info("a")
    cache.put("k", info)
    assert cache.get("k") is info
    clock.now = 61.0
    assert cache.get("k") is None  # too old: its tickets' expiration would drift
    assert len(cache) == 0
    assert (cache.hits, cache.misses) == (1, 1)


def test_plan_cache_is_bounded_lru() -> None:
    cache = PlanCache(2, sizer=lambda _k, _i: 1)  # two answers of one byte each
    cache.put("a", _info("a"))
    cache.put("b", _info("b"))
    assert cache.get("a") is not None  # "b" is now the least recently used
    cache.put("c", _info("c"))
    assert cache.get("b") is None
    assert cache.get("a") is not None
    assert cache.get("c") is not None


def test_plan_cache_of_zero_entries_keeps_nothing() -> None:
    cache = PlanCache(0)
    cache.put("a", _info("a"))
    assert not cache.enabled
    assert cache.get("a") is None


# -- the service -----------------------------------------------------------------------------------


@pytest.fixture
def wide(tmp_path: Path) -> Served:
    served = start(tmp_path / "root", max_take_rows=1000)
    try:
        columns = {f"c{i}": np.arange(4, dtype=np.int32) for i in range(500)}
        served.client.write("wide", pa.table(columns), mode="create")
        yield served  # type: ignore[misc]
    finally:
        stop(served)


def test_a_repeated_plan_is_reused_until_the_dataset_changes(
    wide: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = service_module.plan_scan

    def counting(*args: object, **kwargs: object) -> flight.FlightInfo:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(service_module, "plan_scan", counting)
    opened = []
    real_open = catalog_module.open_dataset

    def opening(*args: object, **kwargs: object) -> object:
        opened.append(1)
        return real_open(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(catalog_module, "open_dataset", opening)
    descriptor = flight.FlightDescriptor.for_path("wide")
    first = wide.raw.get_flight_info(descriptor)
    opened.clear()
    second = wide.raw.get_flight_info(descriptor)
    assert len(calls) == 1  # planned once, answered twice
    assert opened == []  # "latest" resolved by one listing to the handle already open
    assert first.schema == second.schema
    assert len(first.schema) == 500
    assert [e.ticket for e in first.endpoints] == [e.ticket for e in second.endpoints]
    # Another projection is another plan.
    wide.client.flight_info(ScanRequest("wide", columns=["c1"]))
    assert len(calls) == 2
    # A write makes a new version: the next plan is fresh and reads it.
    wide.client.write("wide", pa.table({f"c{i}": np.arange(2, dtype=np.int32) for i in range(500)}))
    third = wide.raw.get_flight_info(descriptor)
    assert len(calls) == 3
    assert third.total_records == 6
    assert first.total_records == 4


def test_an_oversized_take_is_refused_before_its_ids_are_decoded(
    wide: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: object, **kwargs: object) -> object:
        raise AssertionError("the ticket was decoded")

    monkeypatch.setattr(service_module, "decode_ticket", never)
    ticket = encode_ticket(TakeRequest("wide", indices=np.arange(1001, dtype=np.uint64) % 4))
    with pytest.raises(pa.ArrowInvalid, match="maxTakeRows"):  # INVALID_ARGUMENT
        wide.raw.do_get(flight.Ticket(ticket)).read_all()


def test_peek_take_count_reads_the_id_count_or_gives_up() -> None:
    take = TakeRequest("d", version=3, tag="t", columns=("a",), indices=np.arange(7, dtype=np.uint64))
    assert peek_take_count(encode_ticket(take)) == 7
    assert peek_take_count(encode_ticket(TakeRequest("d", row_ids=np.arange(3, dtype=np.uint64)))) == 3
    assert peek_take_count(encode_ticket(ScanRequest("d"))) is None
    assert peek_take_count(b"") is None
    assert peek_take_count(b"\x12\x05ab") is None  # cut short
    assert peek_take_count(b"\x12\xff") is None  # a varint that never ends
    # Two take fields merge in protobuf: left to the real decoder.
    once = encode_ticket(take)
    assert peek_take_count(once + once) is None


def test_a_big_take_is_produced_in_bounded_chunks(tmp_path: Path) -> None:
    served = start(tmp_path / "root")
    try:
        rows = TAKE_CHUNK_ROWS * 2 + 5
        served.client.write("t", pa.table({"id": np.arange(rows, dtype=np.int64)}), mode="create")
        order = np.arange(rows, dtype=np.uint64)[::-1].copy()
        ticket = encode_ticket(TakeRequest("t", indices=order))
        reader = served.raw.do_get(flight.Ticket(ticket))
        chunks = [chunk.data.num_rows for chunk in reader]
        assert chunks == [TAKE_CHUNK_ROWS, TAKE_CHUNK_ROWS, 5]
        table = served.client.take("t", indices=order)
        assert table.column("id").to_numpy().tolist() == order.astype(np.int64).tolist()
        # The chunks say how many are left: the fair scheduler needs no turn to find the end.
        _, _, batches = take_batches(served.server.catalog, TakeRequest("t", indices=order), rows)
        left = []
        for _ in batches:
            left.append(operator.length_hint(batches))
        assert left == [2, 1, 0]
    finally:
        stop(served)


def test_a_calls_cancellation_flag_is_asked_at_most_once_per_interval() -> None:
    clock = _Clock()
    asked: list[bool] = []
    answer = [False]

    def probe() -> bool:
        asked.append(answer[0])
        return answer[0]

    check = CancelCheck(probe, interval=0.05, clock=clock)
    assert not check()
    assert asked == []  # a short call never pays for a look (a gRPC queue poll holding the GIL)
    clock.now = 0.06
    assert not check()
    assert not check()
    assert len(asked) == 1
    answer[0] = True
    clock.now = 0.12
    assert check()
    clock.now = 0.13
    assert check()  # once cancelled, always cancelled, without asking again
    assert len(asked) == 2


def test_plan_cache_counts_bytes_and_skips_answers_larger_than_itself() -> None:
    info = _info("a")
    size = entry_bytes("a", info)  # answer, one-byte key and the entry's overhead
    cache = PlanCache(size * 2)
    cache.put("a", info)
    cache.put("b", _info("a"))
    assert cache.nbytes == 2 * size
    cache.put("c", _info("a"))  # a third answer pushes out the least recently used
    assert cache.get("a") is None
    assert cache.nbytes == 2 * size
    small = PlanCache(size - 1)
    small.put("a", info)
    assert len(small) == 0


def test_plans_are_reused_for_a_quarter_of_a_short_ticket_lifetime(tmp_path: Path) -> None:
    """With tickets promised for 20 s, an answer is reused for 5 s at most, never up to the 60 s
    default, which would hand out tickets already expired."""
    from flight_server.plan_cache import PLAN_MAX_AGE_SECONDS
    from tests.server.service_fixtures import start, stop

    served = start(tmp_path / "root", ticket_lifetime_seconds=20)
    try:
        assert served.server.plan_cache.max_age == 5.0
    finally:
        stop(served)
    served = start(tmp_path / "root2")
    try:
        assert served.server.plan_cache.max_age == PLAN_MAX_AGE_SECONDS
    finally:
        stop(served)


def _counted_turns(served: Served, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    scheduler = served.server.work_scheduler
    turns: list[str] = []
    acquire = scheduler.acquire

    def counting(principal: str, cancelled: object = None, *, bulk: bool = False) -> None:
        turns.append(principal)
        acquire(principal, cancelled, bulk=bulk)  # type: ignore[arg-type]

    monkeypatch.setattr(scheduler, "acquire", counting)
    return turns


def test_a_small_take_costs_one_turn_of_the_fair_scheduler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each turn may wait behind one piece of a heavy principal's work: a small take decodes its
    # ticket, opens its read and reads its one chunk in one turn (a stream slot was free), and C++
    # sends the result without calling back into Python (two turns before session 9).
    served = start(tmp_path / "root")
    try:
        served.client.write("t", pa.table({"id": np.arange(100, dtype=np.int64)}), mode="create")
        turns = _counted_turns(served, monkeypatch)
        ticket = flight.Ticket(encode_ticket(TakeRequest("t", indices=np.arange(3, dtype=np.uint64))))
        assert served.raw.do_get(ticket).read_all().column("id").to_pylist() == [0, 1, 2]
        assert len(turns) == 1, turns
    finally:
        stop(served)


def test_a_small_take_bigger_than_estimated_is_streamed_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Strings far longer than the estimate: the chunk read in the decoding turn is over the small
    # result bound and goes back in front of the stream, which sends it in a turn of its own.
    from flight_server.service import SMALL_RESULT_BYTES

    served = start(tmp_path / "root")
    try:
        long = ["x" * SMALL_RESULT_BYTES] * 4
        served.client.write("t", pa.table({"s": long}), mode="create")
        turns = _counted_turns(served, monkeypatch)
        ticket = flight.Ticket(encode_ticket(TakeRequest("t", indices=np.array([3, 1], dtype=np.uint64))))
        assert served.raw.do_get(ticket).read_all().column("s").to_pylist() == long[:2]
        assert len(turns) == 2, turns
    finally:
        stop(served)
