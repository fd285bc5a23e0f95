"""Fair CPU turns between principals (flight_server.fairness): the order turns are granted in.

Deterministic: one turn at a time, waiters queued one by one (each test waits until the scheduler
counts the new waiter before starting the next), each granted waiter records itself and gives the
turn back at once. No timing is asserted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from flight_server.fairness import THREAD_NICE, FairScheduler, default_work_slots, scheduled, thread_nice
from flight_server.streams import CallCancelled

#: Seconds a test waits for a thread to reach the scheduler's queue before it fails (a sync, not a
#: timing assertion: on an idle machine this takes microseconds).
SYNC_TIMEOUT_S = 30.0


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, "a waiter never reached the scheduler"
        time.sleep(0.001)


def _grant_order(
    sched: FairScheduler,
    arrivals: list[tuple[str, str]],
    release: list[str],
    bulk: frozenset[str] = frozenset(),
) -> list[str]:
    """Queue ``arrivals`` (tag, principal) in order while every turn is held by ``release``'s
    principals; then give those turns back and return the tags in the order they were granted.
    Tags in ``bulk`` ask for bulk turns."""
    order: list[str] = []
    lock = threading.Lock()

    def worker(tag: str, principal: str) -> None:
        sched.acquire(principal, bulk=tag in bulk)
        with lock:
            order.append(tag)
        sched.release(principal, bulk=tag in bulk)

    threads = []
    for tag, principal in arrivals:
        t = threading.Thread(target=worker, args=(tag, principal), daemon=True)
        t.start()
        threads.append(t)
        queued = len(threads)
        _until(lambda queued=queued: sched.waiting() == queued)  # type: ignore[misc]
    for principal in release:
        sched.release(principal)
    for t in threads:
        t.join(SYNC_TIMEOUT_S)
    return order


def test_a_light_principal_goes_ahead_of_a_heavy_principals_queue() -> None:
    sched = FairScheduler(1)
    sched.acquire("heavy")  # a heavy client's batch is being produced
    order = _grant_order(
        sched,
        [("h1", "heavy"), ("h2", "heavy"), ("h3", "heavy"), ("light", "light")],
        release=["heavy"],
    )
    # Arrival order would give "light" the fourth turn; it gets the first.
    assert order == ["light", "h1", "h2", "h3"]
    assert sched.running() == 0
    assert sched.waiting() == 0


def test_principals_with_queued_work_take_turns() -> None:
    sched = FairScheduler(1)
    sched.acquire("a")
    order = _grant_order(sched, [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")], release=["a"])
    assert order == ["b1", "a1", "b2", "a2"]


def test_a_freed_turn_goes_to_the_principal_holding_fewest() -> None:
    sched = FairScheduler(2)
    sched.acquire("heavy")
    sched.acquire("heavy")  # the heavy client holds every turn
    # One turn comes back: the light client (holding none) gets it although the heavy one's
    # waiter came first; the heavy waiter runs when the light one is done.
    order = _grant_order(sched, [("h", "heavy"), ("light", "light")], release=["heavy"])
    assert order == ["light", "h"]
    sched.release("heavy")
    assert sched.running() == 0


def test_turns_are_granted_at_once_while_free() -> None:
    sched = FairScheduler(2)
    sched.acquire("a")
    sched.acquire("a")  # both slots, no wait, same principal
    assert sched.running() == 2
    sched.release("a")
    sched.release("a")
    assert sched.running() == 0


def test_a_cancelled_waiter_leaves_the_queue() -> None:
    sched = FairScheduler(1)
    sched.acquire("a")
    with pytest.raises(CallCancelled):
        sched.acquire("b", cancelled=lambda: True)
    assert sched.waiting() == 0
    sched.release("a")
    assert sched.running() == 0


def test_each_item_is_produced_in_a_turn_and_none_is_held_between_items() -> None:
    sched = FairScheduler(1)
    seen: list[int] = []

    def items() -> Iterator[int]:
        for i in range(3):
            seen.append(sched.running())
            yield i

    out = []
    for item in scheduled(sched, "a", items()):
        out.append((item, sched.running()))
    assert out == [(0, 0), (1, 0), (2, 0)]
    assert seen == [1, 1, 1]
    assert sched.running() == 0


def test_an_iterator_that_says_it_is_done_needs_no_turn_to_end() -> None:
    class Counting(FairScheduler):
        turns = 0

        def acquire(
            self, principal: str, cancelled: Callable[[], bool] | None = None, *, bulk: bool = False
        ) -> None:
            Counting.turns += 1
            super().acquire(principal, cancelled, bulk=bulk)

    sched = Counting(1)
    assert list(scheduled(sched, "a", iter([1, 2, 3]))) == [1, 2, 3]  # a list iterator's hint
    assert Counting.turns == 3
    Counting.turns = 0

    def gen() -> Iterator[int]:
        yield from (1, 2, 3)

    assert list(scheduled(sched, "a", gen())) == [1, 2, 3]
    assert Counting.turns == 4  # a generator does not know: a fourth turn finds its end


def test_zero_slots_means_one_per_core() -> None:
    assert FairScheduler(0).slots == default_work_slots() >= 1


def test_bulk_work_leaves_a_turn_for_calls_that_start() -> None:
    # Two slots: a heavy client's long stream produces a later batch (bulk) in one; its next bulk
    # piece waits although the second slot is free, and a light client's call takes that slot at
    # once (before the lanes, the heavy stream held both and the light call waited for a piece).
    sched = FairScheduler(2)
    sched.acquire("heavy", bulk=True)
    done = threading.Event()

    def heavy_next() -> None:
        sched.acquire("heavy", bulk=True)
        done.set()
        sched.release("heavy", bulk=True)

    t = threading.Thread(target=heavy_next, daemon=True)
    t.start()
    _until(lambda: sched.waiting() == 1)
    assert not done.is_set()
    sched.acquire("light")  # granted at once: the free slot was kept for it
    assert sched.running() == 2
    sched.release("light")
    assert not done.is_set()  # a free slot, but bulk work already holds its share
    sched.release("heavy", bulk=True)
    t.join(SYNC_TIMEOUT_S)
    assert done.is_set()
    assert sched.running() == 0
    assert sched.waiting() == 0


def test_calls_that_start_go_ahead_of_bulk_work_but_cannot_starve_it() -> None:
    from flight_server.fairness import BULK_PASSES

    sched = FairScheduler(1)
    sched.acquire("x")
    arrivals = [("bulk", "heavy")] + [(f"s{i}", f"light{i}") for i in range(BULK_PASSES + 2)]
    order = _grant_order(sched, arrivals, release=["x"], bulk=frozenset({"bulk"}))
    # The bulk piece came first but lets BULK_PASSES starting calls go ahead, then runs.
    assert order == [f"s{i}" for i in range(BULK_PASSES)] + ["bulk", f"s{BULK_PASSES}", f"s{BULK_PASSES + 1}"]
    assert sched.running() == 0


def test_a_streams_first_batch_is_interactive_and_later_ones_bulk() -> None:
    lanes: list[bool] = []

    class Recording(FairScheduler):
        def acquire(
            self, principal: str, cancelled: Callable[[], bool] | None = None, *, bulk: bool = False
        ) -> None:
            lanes.append(bulk)
            super().acquire(principal, cancelled, bulk=bulk)

    assert list(scheduled(Recording(2), "a", iter([1, 2, 3]))) == [1, 2, 3]
    assert lanes == [False, True, True]


@pytest.mark.skipif(not THREAD_NICE, reason="per-thread nice values are a Linux feature")
def test_bulk_work_runs_on_threads_of_lower_priority() -> None:
    # A stream's first batch is produced in the caller's thread at its priority; every later one
    # (bulk) on a thread whose nice value is bulk_nice higher, while the caller waits for it.
    base = thread_nice()
    where: list[tuple[str, int]] = []

    def items() -> Iterator[int]:
        for i in range(3):
            where.append((threading.current_thread().name, thread_nice()))
            yield i

    sched = FairScheduler(2, bulk_nice=5)
    try:
        assert list(scheduled(sched, "a", items())) == [0, 1, 2]
    finally:
        sched.close()
    me = threading.current_thread().name
    assert where[0] == (me, base)
    assert [nice for _, nice in where[1:]] == [min(19, base + 5)] * 2
    assert all(name.startswith("flight-bulk") for name, _ in where[1:])
    assert thread_nice() == base  # the caller's own priority never changed
    # bulk_nice=0: all in the caller's thread, as before.
    where.clear()
    assert list(scheduled(FairScheduler(2, bulk_nice=0), "a", items())) == [0, 1, 2]
    assert where == [(me, base)] * 3


def test_an_error_of_bulk_work_reaches_the_caller() -> None:
    def items() -> Iterator[int]:
        yield 1
        raise ValueError("boom")

    sched = FairScheduler(2, bulk_nice=5)
    try:
        with pytest.raises(ValueError, match="boom"):
            list(scheduled(sched, "a", items()))
        assert sched.running() == 0
    finally:
        sched.close()


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_principal_over_its_cpu_share_leaves_a_turn_to_the_others() -> None:
    from flight_server.fairness import CPU_HALF_LIFE_S

    clock = _Clock()
    sched = FairScheduler(2, bulk_nice=0, clock=clock)
    sched.charge("heavy", 0.8)  # the last second: a loop of plans, a big take's chunks
    assert not sched.heavy("heavy")  # alone, a principal may use every turn
    sched.acquire("heavy")
    sched.acquire("heavy")
    sched.release("heavy")
    sched.release("heavy")
    sched.charge("light", 0.05)  # another principal is active: the heavy one is above the mean
    assert sched.heavy("heavy")
    assert not sched.heavy("light")
    sched.acquire("heavy")
    done = threading.Event()

    def second() -> None:
        sched.acquire("heavy")  # waits: its other turn is the light principal's to take
        done.set()

    t = threading.Thread(target=second, daemon=True)
    t.start()
    _until(lambda: sched.waiting() == 1)
    assert sched.running() == 1
    assert not done.is_set()
    sched.acquire("light")  # at once, without waiting for the heavy principal's piece of work
    assert sched.running() == 2
    sched.release("light")
    assert not done.is_set()  # a free turn, but the heavy principal holds its share
    sched.release("heavy")
    t.join(SYNC_TIMEOUT_S)
    assert done.is_set()
    sched.release("heavy")
    # The light principal goes quiet: its use decays below activity, the heavy one is alone again.
    clock.now += 20 * CPU_HALF_LIFE_S
    assert sched.cpu_use("heavy") < 0.001
    sched.charge("heavy", 0.8)
    assert not sched.heavy("heavy")
    sched.acquire("heavy")
    sched.acquire("heavy")  # both turns at once
    assert sched.running() == 2
    sched.release("heavy")
    sched.release("heavy")


def test_turns_charge_the_cpu_they_used_to_their_principal() -> None:
    sched = FairScheduler(2, bulk_nice=0)
    with sched.turn("a"):
        start = time.thread_time()
        while time.thread_time() - start < 0.01:  # 10 ms of CPU inside the turn
            pass
    assert sched.cpu_use("a") >= 0.009
    assert sched.cpu_use("b") == 0.0


@pytest.mark.skipif(not THREAD_NICE, reason="per-thread nice values are a Linux feature")
def test_bulk_work_on_its_own_threads_is_charged_to_its_principal() -> None:
    def items() -> Iterator[int]:
        for i in range(2):
            start = time.thread_time()
            while time.thread_time() - start < 0.01:
                pass
            yield i

    sched = FairScheduler(2, bulk_nice=5)
    try:
        assert list(scheduled(sched, "a", items())) == [0, 1]
    finally:
        sched.close()
    assert sched.cpu_use("a") >= 0.018  # the first batch in the caller's turn, the second on a bulk thread


def test_a_grant_wakes_only_the_waiter_it_goes_to(monkeypatch: pytest.MonkeyPatch) -> None:
    # Dozens of streams waiting for bulk turns each woke (and took the GIL) at every grant when
    # all waited on one condition; now each grant wakes one thread.
    wakeups = [0]
    real = threading.Condition
    mine: list[object] = []  # conditions made by the scheduler (not by Thread.start's events)

    class Counting(real):  # type: ignore[valid-type,misc]
        def wait(self, timeout: float | None = None) -> bool:
            woken = super().wait(timeout)
            if woken and self in mine:
                wakeups[0] += 1
            return woken

    def make(lock: object = None) -> Counting:
        cond = Counting(lock)  # type: ignore[arg-type]
        if lock is not None and lock is getattr(sched, "_lock", None):
            mine.append(cond)
        return cond

    sched = FairScheduler(1, bulk_nice=0)
    monkeypatch.setattr(threading, "Condition", make)
    sched.acquire("x")
    arrivals = [(f"w{i}", f"p{i}") for i in range(10)]
    order = _grant_order(sched, arrivals, release=["x"])
    assert sorted(order) == sorted(tag for tag, _ in arrivals)
    assert wakeups[0] == len(arrivals)  # one per grant (one condition for all: 10 + 9 + ... + 1)
