"""Lazily created thread pools (tunables live in :mod:`lance_format.core.config`)."""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from lance_format.core.errors import SessionClosedError

__all__ = ["LazyPool", "OuterTasks", "nested_fanout_pays"]

T = TypeVar("T")

#: How long :meth:`LazyPool.start` waits for all of a pool's threads to be up. Starting a thread
#: takes well under a millisecond; the bound only keeps a starved machine from hanging start-up.
_START_TIMEOUT_S = 10.0


class LazyPool:
    """A :class:`ThreadPoolExecutor` created on first use (so importing starts no thread).

    ``executor`` makes the pool (``ThreadPoolExecutor(workers, thread_name_prefix=prefix)`` by
    default; tests pass one that counts its tasks).
    """

    def __init__(
        self,
        workers: int,
        prefix: str,
        executor: Callable[[int, str], ThreadPoolExecutor] | None = None,
    ) -> None:
        self.workers = workers
        self.prefix = prefix
        self._make = executor or _thread_pool
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (the pool then refuses work)."""
        return self._closed

    def __call__(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._closed:
                raise SessionClosedError(f"the {self.prefix} threads were closed with their session")
            if self._pool is None:
                self._pool = self._make(self.workers, self.prefix)
            return self._pool

    def start(self) -> None:
        """Start every thread of the pool now, from the calling thread.

        A thread inherits scheduling attributes (on Linux its nice value) from the thread that
        starts it, and a pool starts its threads on first use, from whichever thread submits: a
        server that runs some work at a lower priority starts the pools first, so no engine thread
        inherits that priority and keeps it for every later call.
        """
        pool = self()
        barrier = threading.Barrier(self.workers)

        def hold() -> None:
            # Held until all are in: a held thread is not idle, so each submit starts a new one.
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(_START_TIMEOUT_S)

        for future in [pool.submit(hold) for _ in range(self.workers)]:
            future.result()

    def resize(self, workers: int) -> None:
        """Use ``workers`` threads from now on (a running pool finishes its tasks and goes)."""
        with self._lock:
            if workers == self.workers:
                return
            self.workers = workers
            old, self._pool = self._pool, None
        if old is not None:
            old.shutdown(wait=False)

    def shutdown(self, wait: bool = False) -> None:
        """Let the threads go once their tasks finish (a later call makes a new pool); ``wait``:
        return once they have ended."""
        with self._lock:
            old, self._pool = self._pool, None
        if old is not None:
            old.shutdown(wait=wait)

    def close(self) -> None:
        """Stop the threads for good: wait for their tasks to finish and refuse any later use
        (:class:`~lance_format.core.errors.SessionClosedError`). Idempotent."""
        with self._lock:
            self._closed = True
            old, self._pool = self._pool, None
        if old is not None:
            old.shutdown(wait=True)


def _thread_pool(workers: int, prefix: str) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(workers, thread_name_prefix=prefix)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class OuterTasks:
    """The tasks of one parallel operation (a scan's chunks decoded ahead) running at once.

    Work inside such a task fans out to more threads (a read's requests, a chunk's columns) only
    while fewer of these tasks run than there are cores (:func:`nested_fanout_pays`): each
    hand-off costs CPU (a future, a condition, a wake-up; ~15% of a cold scan's CPU), and the
    outer tasks already keep every core busy. Near the end of the operation, when fewer tasks are
    left than cores, the inner fan-out returns and the last chunks still use every core.

    Parameters
    ----------
    cores:
        Cores the process may use (default: its CPU affinity).
    """

    __slots__ = ("_lock", "_running", "cores")

    def __init__(self, cores: int | None = None) -> None:
        self.cores = max(1, cores if cores is not None else _cores())
        self._running = 0
        self._lock = threading.Lock()

    @property
    def running(self) -> int:
        """Tasks running now."""
        return self._running

    def saturated(self) -> bool:
        """Whether the running tasks occupy every core."""
        return self._running >= self.cores

    def run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` as one of the tasks (counted while it runs; work inside sees this scope)."""
        with self._lock:
            self._running += 1
        token = _outer.set(self)
        try:
            return fn()
        finally:
            _outer.reset(token)
            with self._lock:
                self._running -= 1


_outer: contextvars.ContextVar[OuterTasks | None] = contextvars.ContextVar("lance_outer_tasks", default=None)


def nested_fanout_pays() -> bool:
    """Whether work on this thread should hand parts to other threads: not inside an
    :class:`OuterTasks` task while those tasks occupy every core."""
    outer = _outer.get()
    return outer is None or not outer.saturated()
