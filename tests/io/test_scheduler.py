"""The I/O scheduler: bounded requests in flight, priority order, read-ahead byte budget."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

import pytest

from lance_format.io.scheduler import (
    MAX_PARALLEL_REQUESTS,
    IOScheduler,
    PriorityGate,
    ReadAhead,
    current_priority,
    io_gate,
    io_priority,
    run_requests,
)


def test_gate_admits_waiters_lowest_priority_first() -> None:
    gate = PriorityGate(1)
    gate.acquire(0)  # hold the only permit
    order: list[int] = []
    started = threading.Barrier(6)

    def waiter(p: int) -> None:
        started.wait()
        gate.acquire(p)
        order.append(p)
        gate.release()

    threads = [threading.Thread(target=waiter, args=(p,)) for p in (5, 3, 9, 1, 7)]
    for t in threads:
        t.start()
    started.wait()
    deadline = time.monotonic() + 5
    while len(gate._waiters) < 5 and time.monotonic() < deadline:
        time.sleep(0.005)
    gate.release()
    for t in threads:
        t.join(5)
    assert order == [1, 3, 5, 7, 9]


def test_try_acquire_takes_only_free_permits_and_never_jumps_waiters() -> None:
    # A reader holding one permit takes more for its waves only when free at once; with others
    # waiting it takes none (they go first), so holders never wait on each other.
    gate = PriorityGate(4)
    gate.acquire()
    assert gate.try_acquire(5) == 3
    assert (gate.in_flight, gate.max_in_flight) == (4, 4)
    assert gate.try_acquire(1) == 0
    for _ in range(3):
        gate.release()
    waiting = threading.Thread(target=gate.acquire)
    gate.acquire()
    gate.acquire()
    gate.acquire()  # all four held
    waiting.start()
    deadline = time.monotonic() + 5
    while not gate._waiters and time.monotonic() < deadline:
        time.sleep(0.005)
    gate.release()  # the permit passes to the waiter
    waiting.join(5)
    gate.release()  # one free permit, no waiter left
    assert gate.try_acquire(2) == 1
    assert gate.try_acquire(0) == 0


def test_run_requests_bounds_requests_in_flight() -> None:
    gate = PriorityGate(3)
    live = [0]
    peak = [0]
    lock = threading.Lock()

    def fetch(i: int) -> int:
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        time.sleep(0.01)
        with lock:
            live[0] -= 1
        return i * 2

    # Several readers at once: the bound is across all of them, not per call.
    with ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(lambda _: run_requests(fetch, list(range(10)), parallel=True, gate=gate), range(4))
        )
    assert all(r == [i * 2 for i in range(10)] for r in results)
    assert peak[0] <= 3
    assert gate.max_in_flight <= 3
    assert gate.in_flight == 0


def test_run_requests_respects_per_call_parallelism_and_propagates_errors() -> None:
    gate = PriorityGate(64)

    def fetch(i: int) -> int:
        if i == 3:
            raise OSError("boom")
        return i

    with pytest.raises(OSError, match="boom"):
        run_requests(fetch, list(range(6)), parallel=True, max_parallel=2, gate=gate)
    assert gate.in_flight == 0
    assert run_requests(lambda i: i + 1, [1, 2], parallel=False, gate=gate) == [2, 3]


def test_process_gate_has_the_documented_bound() -> None:
    assert io_gate().permits == MAX_PARALLEL_REQUESTS


def test_priority_context() -> None:
    assert current_priority() == 0
    with io_priority(7):
        assert current_priority() == 7
    assert current_priority() == 0


def test_read_ahead_keeps_order_and_bytes_budget() -> None:
    consumed: list[int] = []
    started: list[int] = []
    priorities: list[int] = []
    lock = threading.Lock()

    def make(i: int):  # type: ignore[no-untyped-def]
        def task() -> bytes:
            with lock:
                started.append(i)
                priorities.append(current_priority())
            return bytes(100)

        return task

    with ThreadPoolExecutor(4) as pool:
        ahead = ReadAhead((make(i) for i in range(20)), len, pool.submit, max_bytes=250, max_tasks=8)
        for i, item in enumerate(ahead):
            assert len(item) == 100
            consumed.append(i)
            time.sleep(0.002)  # a slow consumer
            # Backpressure: never more than the budget plus one result ahead of the consumer.
            with lock:
                assert len(started) - len(consumed) <= 3 + 1
    assert consumed == list(range(20))
    assert ahead.peak_buffered <= 250 + 100
    assert sorted(priorities) == list(range(20))


def test_read_ahead_propagates_errors() -> None:
    def ok() -> bytes:
        return b"x"

    def bad() -> bytes:
        raise ValueError("decode failed")

    with ThreadPoolExecutor(2) as pool:
        ahead = ReadAhead([ok, bad, ok], len, pool.submit)
        it = iter(ahead)
        assert next(it) == b"x"
        with pytest.raises(ValueError, match="decode failed"):
            next(it)


def test_hold_is_reentrant_per_thread_and_exclusive_across_threads() -> None:
    gate = PriorityGate(1)
    with gate.hold(), gate.hold():  # a store request inside a scheduler read: one permit
        assert gate.in_flight == 1
        other = threading.Thread(target=lambda: gate.hold().__enter__())
        other.start()
        other.join(0.2)
        assert other.is_alive()  # another thread still waits for the one permit
    other.join(5)
    assert not other.is_alive()
    assert gate.max_in_flight == 1


def test_the_caller_issues_requests_too() -> None:
    # A parallel read hands all but one of its requests to workers: the calling thread issues
    # the rest itself instead of idling (fewer thread wake-ups per take), within max_parallel.
    sched = IOScheduler(8)
    seen: list[int] = []
    lock = threading.Lock()
    # All four requests are in flight at once (none returns before the others start), so the
    # fourth hand is the caller's: three workers are busy when it looks for work.
    together = threading.Barrier(4, timeout=30)

    def fetch(x: int) -> int:
        with lock:
            seen.append(threading.get_ident())
        together.wait()
        return x * 2

    assert sched.run(fetch, [1, 2, 3, 4], parallel=True) == [2, 4, 6, 8]
    assert threading.get_ident() in seen
    assert len(seen) == 4
    seen.clear()
    together = threading.Barrier(1)
    # max_parallel=1: only the caller's hand, no worker at all.
    assert sched.run(fetch, [1, 2, 3], parallel=True, max_parallel=1) == [2, 4, 6]
    assert set(seen) == {threading.get_ident()}


def test_read_ahead_measures_each_result_once() -> None:
    # Measuring a result may walk all of it (a decoded table's nbytes): it is done once per
    # result, not at every look at the byte budget.
    measured: list[int] = []
    lock = threading.Lock()

    def size_of(item: bytes) -> int:
        with lock:
            measured.append(id(item))
        return len(item)

    def make(i: int):  # type: ignore[no-untyped-def]
        return lambda: bytes(100 + i)

    with ThreadPoolExecutor(4) as pool:
        ahead = ReadAhead((make(i) for i in range(30)), size_of, pool.submit, max_bytes=10_000, max_tasks=4)
        out = []
        for item in ahead:
            time.sleep(0.001)  # results finish while the consumer works: many looks at the budget
            out.append(len(item))
    assert out == [100 + i for i in range(30)]
    assert len(measured) == 30


class _Buffer:
    """A fetched result that can be watched with a weak reference."""


def test_parallel_run_frees_what_it_fetched_without_the_cycle_collector() -> None:
    # The fetched buffers belong to the caller alone: once it drops them they are freed by
    # reference counting. The parallel path's closures once formed a cycle holding every result
    # (megabytes per scan chunk) until the collector ran, and each worker kept its last task.
    sched = IOScheduler(4)
    together = threading.Barrier(3, timeout=30)

    def fetch(_: int) -> _Buffer:
        together.wait()  # all three in flight at once: two run on workers
        return _Buffer()

    was = gc.isenabled()
    gc.disable()
    try:
        got = sched.run(fetch, [0, 1, 2], parallel=True)
        refs = [weakref.ref(b) for b in got]
        del got
        alive = sum(r() is not None for r in refs)
    finally:
        if was:
            gc.enable()
        sched.close()
    assert alive == 0
