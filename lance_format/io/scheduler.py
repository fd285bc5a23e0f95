"""The I/O scheduler: a bound on requests in flight, priorities, and read-ahead budgets.

* An :class:`IOScheduler` (one per session; the process's is :func:`default_scheduler`, with
  :data:`MAX_PARALLEL_REQUESTS` permits) holds a :class:`PriorityGate` and the worker threads.
  Every request to a store passes the gate of the store's session, whether it runs on the
  caller's thread or on the scheduler's workers; object stores also pass it for the requests
  they issue outside the scheduler (metadata reads, listings, writes). Waiters are served lowest
  priority value first, so during scans earlier rows go first.
* :func:`run_requests` runs one read's requests, in parallel on the scheduler's workers when that
  pays, serially on the caller's thread otherwise.
* :class:`ReadAhead` runs a stream of tasks ahead of its consumer, in order, bounded by a byte
  budget (backpressure: a slow consumer stops the reading, it does not pile up memory).

The priority of the calling context is set with :func:`io_priority`. Which caches a read may
use is not context: it travels with the read (:class:`lance_format.io.cache.ReadPolicy`).
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import itertools
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Generic, TypeVar

from lance_format.core.concurrency import OuterTasks
from lance_format.core.config import env_setting
from lance_format.core.errors import SessionClosedError

__all__ = [
    "DEFAULT_READAHEAD_BYTES",
    "MAX_PARALLEL_REQUESTS",
    "IOScheduler",
    "PriorityGate",
    "ReadAhead",
    "current_priority",
    "default_scheduler",
    "io_gate",
    "io_priority",
    "run_requests",
]

T = TypeVar("T")
R = TypeVar("R")

#: Requests in flight across the process. Object stores are latency bound (~10-50 ms a GET), so
#: dozens in flight keep a link busy; Lance's default for cloud stores is 64, which also matches the
#: S3 client's connection pool. Local reads hold a permit for microseconds and never feel it.
#: Override: LANCE_FORMAT_IO_PARALLELISM.
MAX_PARALLEL_REQUESTS = env_setting("io_parallelism")

#: Bytes a scan may hold decoded ahead of its consumer. 64 MiB covers the latency-bandwidth product
#: of an object store (~50 ms x ~1 GB/s) with room for a few chunks, and bounds memory per scan.
#: Override: LANCE_FORMAT_READAHEAD_BYTES.
DEFAULT_READAHEAD_BYTES = env_setting("readahead_bytes")

#: Priority of reads that did not set one (takes, metadata): ahead of any scan chunk but the first.
DEFAULT_PRIORITY = 0

_priority: contextvars.ContextVar[int] = contextvars.ContextVar("lance_io_priority", default=DEFAULT_PRIORITY)


def current_priority() -> int:
    """The I/O priority of the calling context (lower is served first)."""
    return _priority.get()


@contextlib.contextmanager
def io_priority(priority: int) -> Iterator[None]:
    """Run the block's reads at ``priority`` (lower values are served first)."""
    token = _priority.set(int(priority))
    try:
        yield
    finally:
        _priority.reset(token)


class PriorityGate:
    """A counting semaphore whose waiters are admitted lowest priority first (FIFO among equals).

    :meth:`hold` is reentrant per thread: a store method that holds a permit for its own request
    (metadata reads, listings, writes) does not take a second one when the scheduler already holds
    one for it, so every request passes the gate exactly once and nesting cannot deadlock.
    """

    def __init__(self, permits: int) -> None:
        if permits < 1:
            raise ValueError("a gate needs at least one permit")
        self.permits = permits
        self._free = permits
        self._held = _HeldDepth()
        self._lock = threading.Lock()
        self._waiters: list[tuple[int, int, threading.Event]] = []
        self._seq = itertools.count()
        self.max_in_flight = 0  # high-water mark, for tests and metrics

    @property
    def in_flight(self) -> int:
        return self.permits - self._free

    def resize(self, permits: int) -> None:
        """Admit ``permits`` requests at once from now on (requests in flight finish first)."""
        if permits < 1:
            raise ValueError("a gate needs at least one permit")
        with self._lock:
            self._free += permits - self.permits
            self.permits = permits
            while self._free > 0 and self._waiters:
                _, _, ev = heapq.heappop(self._waiters)
                self._free -= 1
                ev.set()

    def acquire(self, priority: int = DEFAULT_PRIORITY) -> None:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                self.max_in_flight = max(self.max_in_flight, self.permits - self._free)
                return
            ev = threading.Event()
            heapq.heappush(self._waiters, (priority, next(self._seq), ev))
        ev.wait()  # the releaser handed its permit to us

    def try_acquire(self, permits: int) -> int:
        """Take up to ``permits`` free permits without waiting (none while others wait: they go
        first); how many were taken. Each is given back with :meth:`release`.

        A caller holding a permit already takes more this way, never by waiting: two callers
        each holding some and waiting for more could wait on each other forever.
        """
        with self._lock:
            if self._waiters or permits <= 0:
                return 0
            taken = min(permits, self._free)
            self._free -= taken
            self.max_in_flight = max(self.max_in_flight, self.permits - self._free)
            return taken

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                _, _, ev = heapq.heappop(self._waiters)
                ev.set()  # permit passes straight to the best waiter
                return
            self._free += 1

    def hold(self, priority: int | None = None) -> _Hold:
        """A context manager holding one permit (none more when this thread holds one already)."""
        return _Hold(self, priority)


class _HeldDepth(threading.local):
    """Per thread: how deeply this thread holds a gate's permit (0: it holds none)."""

    #: A class default, so a thread that never held a permit reads 0 without an AttributeError
    #: (``getattr(local, "depth", 0)`` formats one on every first read of a thread).
    depth = 0


class _Hold:
    """:meth:`PriorityGate.hold`: a class, not a ``contextlib.contextmanager`` generator (a
    one-row take passes the gate three times; the generator machinery cost more than the gate)."""

    __slots__ = ("_depth", "_gate", "_priority")

    def __init__(self, gate: PriorityGate, priority: int | None) -> None:
        self._gate = gate
        self._priority = priority
        self._depth = 0

    def __enter__(self) -> None:
        gate = self._gate
        held = gate._held
        depth = held.depth
        self._depth = depth
        if depth:  # this thread holds a permit already (see PriorityGate's docstring)
            held.depth = depth + 1
            return
        priority = self._priority
        gate.acquire(current_priority() if priority is None else priority)
        held.depth = 1

    def __exit__(self, *exc: object) -> None:
        gate = self._gate
        gate._held.depth = self._depth
        if not self._depth:
            gate.release()


class _Workers:
    """Worker threads taking tasks from a priority heap (created lazily, recreated after fork)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._started = 0
        self._idle = 0
        self._threads: list[threading.Thread] = []
        self.closed = False
        # Bumped by stop_threads: idle threads of an older generation end.
        self._generation = 0

    def _reset(self) -> None:  # in a forked child the threads are gone
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._heap = []
        self._started = 0
        self._idle = 0
        self._threads = []

    def submit(self, priority: int, fn: Callable[[], None]) -> None:
        with self._cv:
            if self.closed:
                raise SessionClosedError("the I/O scheduler was closed with its session")
            heapq.heappush(self._heap, (priority, next(self._seq), fn))
            if self._idle == 0 and self._started < self.threads:
                self._start_one()
            else:
                self._cv.notify()

    def start_all(self) -> None:
        """Start every worker thread now, from the calling thread (see :meth:`IOScheduler.start_threads`)."""
        with self._cv:
            if self.closed:
                raise SessionClosedError("the I/O scheduler was closed with its session")
            while self._started < self.threads:
                self._start_one()

    def _start_one(self) -> None:  # lock held
        self._started += 1
        thread = threading.Thread(
            target=self._run, args=(self._generation,), name=f"lance-io-{self._started}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _run(self, generation: int) -> None:
        while True:
            with self._cv:
                self._idle += 1
                while not self._heap:
                    if self.closed or generation != self._generation:
                        self._idle -= 1
                        return
                    self._cv.wait()
                self._idle -= 1
                _, _, fn = heapq.heappop(self._heap)
            fn()
            # Not kept while idle: the task holds what it fetched (a scan's buffers) until the
            # thread's next task otherwise.
            del fn

    def close(self) -> None:
        """Refuse new tasks, let the threads finish the queued ones and wait for them to end."""
        with self._cv:
            self.closed = True
            threads, self._threads = self._threads, []
            self._cv.notify_all()
        me = threading.current_thread()
        for thread in threads:
            if thread is not me:
                thread.join()

    def stop_threads(self) -> None:
        """Let the threads finish the queued tasks and wait for them to end, still taking tasks
        (a later task starts threads again)."""
        with self._cv:
            self._generation += 1
            threads, self._threads = self._threads, []
            self._started = 0
            self._cv.notify_all()
        me = threading.current_thread()
        for thread in threads:
            if thread is not me:
                thread.join()


_ALL_WORKERS: weakref.WeakSet[_Workers] = weakref.WeakSet()


def _reset_after_fork() -> None:  # in a forked child every scheduler's threads are gone
    for workers in list(_ALL_WORKERS):
        workers._reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


class IOScheduler:
    """A request gate and the worker threads issuing requests through it.

    Each :class:`~lance_format.dataset.session.Session` owns one (so two sessions keep separate
    bounds on requests in flight); stores opened by a session pass their requests through it.
    The default session's is the process-wide :func:`default_scheduler`.

    Parameters
    ----------
    parallelism:
        Requests in flight at once (the gate's permits and the most worker threads).
    """

    def __init__(self, parallelism: int) -> None:
        self.gate = PriorityGate(parallelism)
        self._workers = _Workers(parallelism)
        _ALL_WORKERS.add(self._workers)

    @property
    def parallelism(self) -> int:
        """Requests this scheduler keeps in flight at most."""
        return self.gate.permits

    def resize(self, parallelism: int) -> None:
        """Keep ``parallelism`` requests in flight from now on."""
        self.gate.resize(parallelism)
        self._workers.threads = parallelism

    def start_threads(self) -> None:
        """Start all worker threads now, from the calling thread: they inherit its scheduling
        attributes (the Linux nice value), not those of whichever thread sends the first requests."""
        self._workers.start_all()

    def stop_threads(self) -> None:
        """Stop the worker threads (after the requests queued) but keep serving: the next request
        starts them again (the process-wide scheduler, when a server stops)."""
        self._workers.stop_threads()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._workers.closed

    def close(self) -> None:
        """Stop the worker threads (after the requests queued) and refuse later requests with
        :class:`~lance_format.core.errors.SessionClosedError`. Idempotent."""
        self._workers.close()

    def submit(self, fn: Callable[[], R], priority: int | None = None) -> Future[R]:
        """Run ``fn`` (one request) on a worker thread through the gate; its future.

        ``priority``: the gate's and the workers' order (default: the caller's
        :func:`current_priority`). Scans use it to fetch ahead of their decoding
        (:mod:`lance_format.io.prefetch`).
        """
        if self._workers.closed:
            raise SessionClosedError("the I/O scheduler was closed with its session")
        prio = current_priority() if priority is None else priority
        fut: Future[R] = Future()
        gate = self.gate

        def run() -> None:
            if fut.set_running_or_notify_cancel():
                try:
                    with gate.hold(prio):
                        fut.set_result(fn())
                except BaseException as e:
                    fut.set_exception(e)

        self._workers.submit(prio, run)
        return fut

    def run(
        self,
        fetch: Callable[[T], R],
        requests: Sequence[T],
        *,
        parallel: bool,
        max_parallel: int | None = None,
        fetch_many: Callable[[Sequence[T]], list[R]] | None = None,
    ) -> list[R]:
        """:func:`run_requests` through this scheduler's gate and workers."""
        if self._workers.closed:
            raise SessionClosedError("the I/O scheduler was closed with its session")
        return _run(fetch, requests, parallel, max_parallel, self.gate, self._workers, fetch_many)


_DEFAULT = IOScheduler(MAX_PARALLEL_REQUESTS)


def default_scheduler() -> IOScheduler:
    """The process-wide scheduler (the default session's; sized by ``io_parallelism``)."""
    return _DEFAULT


def io_gate() -> PriorityGate:
    """The process-wide request gate (the default scheduler's)."""
    return _DEFAULT.gate


def run_requests(
    fetch: Callable[[T], R],
    requests: Sequence[T],
    *,
    parallel: bool,
    max_parallel: int | None = None,
    gate: PriorityGate | None = None,
    fetch_many: Callable[[Sequence[T]], list[R]] | None = None,
) -> list[R]:
    """Run ``fetch`` over ``requests`` through the gate; results in request order.

    Parameters
    ----------
    fetch:
        Issues one request.
    requests:
        What to fetch.
    parallel:
        Use the scheduler's workers (several requests, enough bytes to pay the hand-off).
    max_parallel:
        At most this many of these requests in flight at once (the store's own bound).
    gate:
        The gate to pass (default: the process-wide one).
    fetch_many:
        Issues several requests one after another; the serial path hands it the whole batch under
        one permit (they run one at a time anyway), saving a gate round trip per request.
    """
    return _run(fetch, requests, parallel, max_parallel, gate or _DEFAULT.gate, _DEFAULT._workers, fetch_many)


def _run(
    fetch: Callable[[T], R],
    requests: Sequence[T],
    parallel: bool,
    max_parallel: int | None,
    gate: PriorityGate,
    workers: _Workers,
    fetch_many: Callable[[Sequence[T]], list[R]] | None,
) -> list[R]:
    priority = current_priority()
    if not parallel or len(requests) <= 1:
        if fetch_many is not None:
            with gate.hold(priority):
                return fetch_many(requests)
        out = []
        for r in requests:
            with gate.hold(priority):
                out.append(fetch(r))
        return out
    limit = max(1, min(max_parallel or len(requests), len(requests)))
    batch = _Batch(fetch, requests, priority, gate, workers)
    # The caller is one of the ``limit`` hands: it issues requests too instead of idling until
    # the workers finish. A take of one row over four columns hands three requests to workers,
    # not four, and on a busy machine a woken worker can wait milliseconds for a core.
    for _ in range(limit - 1):
        batch.start_next()
    while (i := batch.take()) is not None:
        batch.execute(i)
    return [f.result() for f in batch.futures]


class _Batch(Generic[T, R]):
    """The requests of one parallel :func:`_run`: each hand (the caller or a worker) takes the next
    one until none is left.

    An object, not closures: ``run`` and ``start_next`` as closures named each other, a reference
    cycle that held every fetched buffer (megabytes per scan chunk) until the cycle collector ran,
    so the allocator could not reuse them and the collector ran every few scans.
    """

    __slots__ = ("_fetch", "_gate", "_lock", "_pending", "_priority", "_requests", "_workers", "futures")

    def __init__(
        self,
        fetch: Callable[[T], R],
        requests: Sequence[T],
        priority: int,
        gate: PriorityGate,
        workers: _Workers,
    ) -> None:
        self._fetch = fetch
        self._requests = requests
        self._priority = priority
        self._gate = gate
        self._workers = workers
        self.futures: list[Future[R]] = [Future() for _ in requests]
        self._pending = deque(range(len(requests)))
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            return self._pending.popleft() if self._pending else None

    def start_next(self) -> None:
        i = self.take()
        if i is not None:
            self._workers.submit(self._priority, partial(self.run, i))

    def execute(self, i: int) -> None:
        fut = self.futures[i]
        if fut.set_running_or_notify_cancel():
            try:
                with self._gate.hold(self._priority):
                    fut.set_result(self._fetch(self._requests[i]))
            except BaseException as e:
                fut.set_exception(e)

    def run(self, i: int) -> None:
        self.execute(i)
        self.start_next()


class ReadAhead(Generic[R]):
    """Yields the results of ``tasks`` in order, running them ahead on ``submit``'s threads.

    At most ``max_tasks`` run or wait at once, and no new task starts while the bytes of finished,
    not yet consumed results plus the expected bytes of running ones reach ``max_bytes`` (at least
    one task always runs, so progress never stops). Task ``i`` reads at priority
    ``base_priority + i``: earlier chunks of a scan are fetched first.

    Parameters
    ----------
    tasks:
        Zero-argument callables, in output order.
    size_of:
        Bytes a result holds.
    submit:
        Runs a callable on a worker thread (e.g. ``ThreadPoolExecutor.submit``).
    max_bytes, max_tasks:
        The budgets.
    priority_of:
        Priority of task ``i`` (default ``i``).
    """

    def __init__(
        self,
        tasks: Iterable[Callable[[], R]],
        size_of: Callable[[R], int],
        submit: Callable[[Callable[[], R]], Future[R]],
        *,
        max_bytes: int = DEFAULT_READAHEAD_BYTES,
        max_tasks: int = 4,
        priority_of: Callable[[int], int] | None = None,
    ) -> None:
        self._tasks = iter(tasks)
        self._size_of = size_of
        self._submit = submit
        self.max_bytes = max_bytes
        self.max_tasks = max(1, max_tasks)
        self._priority_of = priority_of or (lambda i: i)
        self._window: deque[Future[R]] = deque()
        self._index = 0
        self._done_sizes: list[int] = []
        # Bytes of each finished result, measured once: ``size_of`` may walk the whole result
        # (Table.nbytes: ~5% of a scan's CPU when re-measured at every look at the budget).
        self._sizes: dict[Future[R], int] = {}
        self.peak_buffered = 0  # high-water mark of finished-but-unconsumed bytes (tests)
        # The tasks running at once: reads inside them fan out to more threads only while they
        # leave cores idle (see OuterTasks).
        self._outer = OuterTasks()

    def _expected(self) -> int:
        # A running task is expected to hold about what finished ones did.
        return sum(self._done_sizes[-8:]) // len(self._done_sizes[-8:]) if self._done_sizes else 0

    def _size(self, f: Future[R]) -> int:
        size = self._sizes.get(f)
        if size is None:
            size = self._sizes[f] = self._size_of(f.result())
        return size

    def _buffered(self) -> int:
        total = 0
        for f in self._window:
            if f.done() and not f.cancelled() and f.exception() is None:
                total += self._size(f)
            else:
                total += self._expected()
        return total

    def _fill(self) -> None:
        while len(self._window) < self.max_tasks:
            if self._window and self._buffered() >= self.max_bytes:
                return
            task = next(self._tasks, None)
            if task is None:
                return
            prio = self._priority_of(self._index)
            self._index += 1
            ctx = contextvars.copy_context()

            def run(
                task: Callable[[], R] = task,
                prio: int = prio,
                ctx: contextvars.Context = ctx,
                outer: OuterTasks = self._outer,
            ) -> R:
                def inner() -> R:
                    with io_priority(prio):
                        return outer.run(task)

                return ctx.run(inner)

            self._window.append(self._submit(run))

    def __iter__(self) -> Iterator[R]:
        try:
            while True:
                self._fill()
                if not self._window:
                    return
                self.peak_buffered = max(self.peak_buffered, self._buffered())
                future = self._window.popleft()
                result = future.result()
                self._done_sizes.append(self._size(future))
                self._sizes.pop(future, None)
                yield result
        finally:
            for f in self._window:
                f.cancel()
