"""Nested fan-out inside a parallel operation: work hands parts to other threads only while the
operation's own tasks leave cores idle."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from lance_format.core import concurrency
from lance_format.core.concurrency import OuterTasks, nested_fanout_pays
from lance_format.io.scheduler import ReadAhead


def test_fanout_pays_outside_any_task_and_while_cores_are_idle() -> None:
    assert nested_fanout_pays()
    outer = OuterTasks(cores=2)
    assert outer.run(nested_fanout_pays)  # one task running of two cores
    assert outer.run(lambda: outer.run(nested_fanout_pays)) is False  # two running: saturated
    assert outer.running == 0
    assert nested_fanout_pays()


def test_a_failing_task_is_no_longer_counted() -> None:
    outer = OuterTasks(cores=1)

    def boom() -> None:
        raise ValueError("x")

    with pytest.raises(ValueError, match="x"):
        outer.run(boom)
    assert outer.running == 0
    assert nested_fanout_pays()


def test_read_ahead_tasks_fan_out_only_while_fewer_run_than_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    # A scan's chunks run as read-ahead tasks: four at once on two cores keep both busy, so the
    # reads and decodes inside them stay on their threads (each hand-off costs CPU).
    monkeypatch.setattr(concurrency, "_cores", lambda: 2)
    together = threading.Barrier(4, timeout=30)
    answered = threading.Barrier(4, timeout=30)

    def task() -> bool:
        together.wait()  # all four running
        pays = nested_fanout_pays()
        answered.wait()  # none ends before every one has looked
        return pays

    with ThreadPoolExecutor(4) as pool:
        ahead = ReadAhead([task] * 4, lambda _: 1, pool.submit, max_tasks=4)
        assert list(ahead) == [False] * 4
        alone = ReadAhead([nested_fanout_pays] * 3, lambda _: 1, pool.submit, max_tasks=1)
        assert list(alone) == [True] * 3  # one at a time: the inner fan-out uses the other core
