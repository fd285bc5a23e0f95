"""Turns at the server's CPU work, shared fairly between principals.

The stream governor (:mod:`flight_server.streams`) bounds how many streams a principal holds and how
much memory they pin; it does not bound how much *CPU* they take. In one Python process the work
of a call (decoding a ticket, planning, reading and decoding a take's rows, building a FlightInfo)
mostly holds the GIL, so a heavy client's four threads of 100,000-row takes make a light client's
10-row take wait behind them, turn after turn of the GIL, for as long as they run.

:class:`FairScheduler` hands out ``limits.workSlots`` *turns*: a call runs a bounded piece of work
(one batch of a stream, one plan) inside a turn, and gives it back between pieces, while the client
reads. When turns are scarce, the next one goes to the waiting principal that holds the fewest turns,
then to the one served least recently: a light principal's request goes ahead of a heavy principal's
queued batches, and waits for at most one piece of the heavy principal's work.

Work comes in two lanes. *Interactive* work starts a call (decoding its ticket, planning, a stream's
first batch, a small take whole); *bulk* work is every later batch of a long stream (a big take's
further chunks, a scan's read-ahead, which an unread stream produces until gRPC's buffers are full).
Bulk work holds at most ``slots - 1`` turns at once (at least one), so one turn is always left for
a call that starts: a light client's take waits for no heavy client's piece of work, and runs
beside fewer of them (in one process they share the GIL). A freed turn goes to interactive work
first; a bulk waiter passed over :data:`BULK_PASSES` times goes ahead of it, so a stream of small
calls cannot starve long streams.

Turns are also weighed by CPU. The CPU time each turn used (``time.thread_time`` of the thread that
ran it) is charged to its principal and decays with a half-life of :data:`CPU_HALF_LIFE_S`. While
two or more principals are active, one whose recent CPU is above their mean is *heavy*: it holds
at most ``slots - 1`` turns of either lane, so the others always find a turn free, and never wait
for a heavy principal's piece of work (a big take's first chunk, a tight loop of plans). Alone, a
principal uses every turn.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import math
import operator
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar, cast

from flight_server.settings import DEFAULT_BULK_NICE, DEFAULT_WORK_SLOTS
from flight_server.streams import CallCancelled

__all__ = [
    "DEFAULT_BULK_NICE",
    "DEFAULT_WORK_SLOTS",
    "THREAD_NICE",
    "FairScheduler",
    "HeldTurn",
    "default_work_slots",
    "scheduled",
    "set_gil_switch",
    "thread_nice",
]

#: Seconds between two looks at the call's cancellation flag while waiting for a turn.
_WAIT_POLL_S = 0.05
#: Interactive grants a waiting piece of bulk work lets go ahead of it before it goes first: small
#: calls keep their priority, long streams still move (one piece per this many small calls at worst).
BULK_PASSES = 8
#: Seconds over which a principal's CPU use halves: long beside one call (milliseconds), short
#: enough that a client that stopped its heavy work is light again within a few seconds.
CPU_HALF_LIFE_S = 1.0
#: CPU seconds (decayed) below which a principal counts as idle (it no longer makes another heavy).
CPU_ACTIVE_S = 0.002
_LN2 = math.log(2.0)

_T = TypeVar("_T")
_END = object()


def default_work_slots() -> int:
    """The cores this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not every platform has affinity
        return max(1, os.cpu_count() or 1)


def set_gil_switch(ms: float) -> float:
    """Set this process's GIL switch interval to ``ms`` milliseconds (``limits.gilSwitchMs``; 0
    leaves it alone); returns the interval now in force, in milliseconds.

    Turns bound how many pieces of work run at once, not how long a thread that runs Python keeps
    the GIL from one that waits: that is the switch interval. A small call needs the GIL several
    times, so its latency behind a heavy client's Python work is a few intervals.
    """
    if ms > 0:
        sys.setswitchinterval(ms / 1000.0)
    return sys.getswitchinterval() * 1000.0


#: Whether a nice value can be given to one thread (Linux: ``setpriority`` on a thread id); elsewhere
#: it would lower the whole process, so bulk work then runs in the caller's thread.
THREAD_NICE = sys.platform.startswith("linux")


def thread_nice() -> int:
    """The nice value of the calling thread (Linux; the process's elsewhere)."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id() if THREAD_NICE else 0)


def _lower_priority(nice: int) -> None:
    """Raise the calling thread's nice value by ``nice`` (a thread initializer)."""
    tid = threading.get_native_id()
    # A sandbox may forbid it: the work still runs, at the usual priority.
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))


class _Waiter:
    __slots__ = ("bulk", "granted", "principal", "wake")

    def __init__(self, principal: str, bulk: bool, lock: threading.Lock) -> None:
        self.principal = principal
        self.bulk = bulk
        self.granted = False
        # Its own condition on the scheduler's lock: a grant wakes the one waiter it goes to, not
        # every waiter (dozens of streams waiting for bulk turns woke at each grant).
        self.wake = threading.Condition(lock)


class FairScheduler:
    """``slots`` concurrent turns, granted fairly between principals.

    Parameters
    ----------
    slots : int
        Turns that may run at once (``limits.workSlots``; 0 means one per core).
    bulk_nice : int
        Added to the nice value of the threads that run bulk work (``limits.bulkNice``; 0: bulk
        work runs in the caller's thread, as interactive work does). See :meth:`run_bulk`.
    clock : Callable[[], float]
        Monotonic seconds, for the decay of CPU use (tests pass a fake one).

    Notes
    -----
    Within one principal, turns are granted in arrival order. Between principals, a freed turn goes
    to the waiting principal holding the fewest turns, ties broken by who was granted one least
    recently (round robin). Nothing is ever refused: a caller waits until its turn, or until its
    call is cancelled.
    """

    def __init__(
        self,
        slots: int = DEFAULT_WORK_SLOTS,
        bulk_nice: int = DEFAULT_BULK_NICE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.slots = slots if slots > 0 else default_work_slots()
        self._clock = clock
        self._cpu: dict[str, tuple[float, float]] = {}  # principal -> (CPU seconds, when), decaying
        self._started = threading.local()  # thread CPU clock at each turn this thread holds
        self.bulk_nice = max(0, bulk_nice) if THREAD_NICE else 0
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._running = 0
        self._held: dict[str, int] = {}  # turns each principal holds now
        self._queues: dict[str, deque[_Waiter]] = {}  # interactive waiters per principal, in order
        self._bulk: dict[str, deque[_Waiter]] = {}  # bulk waiters per principal, arrival order
        self._last: dict[str, int] = {}  # sequence number of each principal's last grant
        self._seq = itertools.count(1)
        # Bulk work holds at most this many turns: one is left for calls that start.
        self.bulk_slots = max(1, self.slots - 1)
        self._bulk_running = 0
        self._passes = 0  # interactive grants made while bulk work waited

    # -- state (for tests and cache_stats) ---------------------------------------------------------
    def waiting(self) -> int:
        """Callers waiting for a turn now."""
        with self._lock:
            return sum(len(q) for q in self._queues.values()) + sum(len(q) for q in self._bulk.values())

    def running(self) -> int:
        """Turns held now."""
        with self._lock:
            return self._running

    def cpu_use(self, principal: str) -> float:
        """``principal``'s recent CPU seconds (decayed, see :data:`CPU_HALF_LIFE_S`)."""
        with self._lock:
            return self._use(principal, self._clock())

    def heavy(self, principal: str) -> bool:
        """Whether ``principal`` is heavy now: others are active and its CPU is above their mean."""
        with self._lock:
            return self._cap(principal) < self.slots

    def charge(self, principal: str, seconds: float) -> None:
        """Add ``seconds`` of CPU to ``principal``'s recent use (turns charge themselves)."""
        if seconds <= 0:
            return
        with self._lock:
            now = self._clock()
            self._cpu[principal] = (self._use(principal, now) + seconds, now)
            if len(self._cpu) > 64:  # forget the idle: the table stays as small as the active set
                for p in [p for p in self._cpu if self._use(p, now) < CPU_ACTIVE_S]:
                    del self._cpu[p]

    # -- turns -------------------------------------------------------------------------------------
    def acquire(
        self, principal: str, cancelled: Callable[[], bool] | None = None, *, bulk: bool = False
    ) -> None:
        """Wait for a turn for ``principal``; give it back with :meth:`release` (same ``bulk``).

        ``bulk`` marks a later piece of a long stream (see the module's notes on lanes).

        Raises
        ------
        CallCancelled
            The call was cancelled while it waited (it never got the turn).
        """
        with self._lock:
            free = self._running < self.slots and (not bulk or self._bulk_running < self.bulk_slots)
            if (
                free
                and not self._queues
                and not self._bulk
                and self._held.get(principal, 0) < self._cap(principal)
            ):
                self._grant(principal, bulk)
                self._start_clock()
                return
            waiter = _Waiter(principal, bulk, self._lock)
            (self._bulk if bulk else self._queues).setdefault(principal, deque()).append(waiter)
            self._dispatch()
            while not waiter.granted:
                if waiter.wake.wait(_WAIT_POLL_S if cancelled is not None else None) or waiter.granted:
                    continue
                # Timed out: look at the call's flag without the lock (the look may wait on
                # gRPC's locks; releases must not wait for it).
                assert cancelled is not None
                self._lock.release()
                try:
                    gone = cancelled()
                finally:
                    self._lock.acquire()
                if gone and not waiter.granted:
                    self._withdraw(waiter)
                    raise CallCancelled()
        self._start_clock()

    def release(self, principal: str, *, bulk: bool = False) -> None:
        """Give back a turn of ``principal``; the next one goes to whoever is owed it."""
        started = getattr(self._started, "stack", None)
        used = time.thread_time() - started.pop() if started else 0.0
        if used > 0:
            self.charge(principal, used)
        with self._lock:
            self._running -= 1
            if bulk:
                self._bulk_running -= 1
            left = self._held.get(principal, 0) - 1
            if left > 0:
                self._held[principal] = left
            else:
                self._held.pop(principal, None)
                self._forget(principal)
            self._dispatch()

    @contextmanager
    def turn(
        self, principal: str, cancelled: Callable[[], bool] | None = None, *, bulk: bool = False
    ) -> Iterator[None]:
        """Run the body inside one turn of ``principal`` (``bulk``: a later piece of a long stream)."""
        self.acquire(principal, cancelled, bulk=bulk)
        try:
            yield
        finally:
            self.release(principal, bulk=bulk)

    def run_bulk(self, principal: str, fn: Callable[[], _T]) -> _T:
        """``fn()``, a piece of bulk work whose turn the caller holds, run on a thread of lower CPU
        priority (``bulk_nice``) while the caller waits for it without the GIL.

        Turns decide whose work runs in this process; the operating system decides which runnable
        thread gets a core. A heavy client's batches (decoding, the compiled kernels that run
        without the GIL) then compete for the cores with the threads that serve small calls, and
        with their clients on the same host. At a higher nice value they take what the others
        leave: a small call gets a core at once, bulk work still gets every idle cycle.
        """
        if self.bulk_nice <= 0:
            return fn()

        def timed() -> _T:
            start = time.thread_time()
            try:
                return fn()
            finally:
                self.charge(principal, time.thread_time() - start)

        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    self.bulk_slots,
                    thread_name_prefix="flight-bulk",
                    initializer=_lower_priority,
                    initargs=(self.bulk_nice,),
                )
            pool = self._pool
        # The caller's context (its call's log fields) goes with the work.
        return pool.submit(contextvars.copy_context().run, timed).result()

    def close(self) -> None:
        """Stop the bulk threads (after their work); a later :meth:`run_bulk` starts new ones."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    # -- internals (lock held) ---------------------------------------------------------------------
    def _grant(self, principal: str, bulk: bool) -> None:
        self._running += 1
        if bulk:
            self._bulk_running += 1
        self._held[principal] = self._held.get(principal, 0) + 1
        self._last[principal] = next(self._seq)

    def _start_clock(self) -> None:
        """Note the thread CPU clock at the start of a turn this thread now holds."""
        stack = getattr(self._started, "stack", None)
        if stack is None:
            stack = self._started.stack = []
        stack.append(time.thread_time())

    def _use(self, principal: str, now: float) -> float:
        used, when = self._cpu.get(principal, (0.0, now))
        return used * math.exp(-_LN2 * max(0.0, now - when) / CPU_HALF_LIFE_S)

    def _heavy_above(self, now: float) -> float | None:
        """The recent CPU above which a principal is heavy (the active principals' mean), or None
        while fewer than two are active."""
        if self.slots < 2 or len(self._cpu) < 2:
            return None
        uses = [u for u in (self._use(p, now) for p in self._cpu) if u >= CPU_ACTIVE_S]
        return sum(uses) / len(uses) if len(uses) >= 2 else None

    def _cap(self, principal: str, line: float | None = None, now: float | None = None) -> int:
        """Turns ``principal`` may hold now: ``slots - 1`` (at least one) when it is heavy."""
        if now is None:
            now = self._clock()
            line = self._heavy_above(now)
        if line is None or self._use(principal, now) <= line:
            return self.slots
        return self.slots - 1

    def _next_principal(self, queues: dict[str, deque[_Waiter]]) -> str | None:
        """The waiting principal owed the next turn: fewest turns held, then served least
        recently; None when every waiter holds all the turns it may."""
        now = self._clock()
        line = self._heavy_above(now)
        eligible = [p for p in queues if self._held.get(p, 0) < self._cap(p, line, now)]
        if not eligible:
            return None
        return min(eligible, key=lambda p: (self._held.get(p, 0), self._last.get(p, 0)))

    def _next_lane(self) -> dict[str, deque[_Waiter]] | None:
        """The queues the next free turn is granted from (None: nobody may have it now)."""
        bulk_may = bool(self._bulk) and self._bulk_running < self.bulk_slots
        if self._queues and not (bulk_may and self._passes >= BULK_PASSES):
            if self._bulk:
                self._passes += 1
            return self._queues
        if bulk_may:
            self._passes = 0
            return self._bulk
        return None

    def _dispatch(self) -> None:
        while self._running < self.slots:
            queues = self._next_lane()
            principal = self._next_principal(queues) if queues is not None else None
            if principal is None and queues is self._queues and self._bulk_running < self.bulk_slots:
                queues = self._bulk  # the starting calls all wait on their caps: bulk work may go
                principal = self._next_principal(queues)
            if queues is None or principal is None:
                break
            queue = queues[principal]
            waiter = queue.popleft()
            if not queue:
                del queues[principal]
            waiter.granted = True
            self._grant(principal, waiter.bulk)
            waiter.wake.notify()

    def _withdraw(self, waiter: _Waiter) -> None:
        queues = self._bulk if waiter.bulk else self._queues
        queue = queues.get(waiter.principal)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del queues[waiter.principal]
                self._forget(waiter.principal)

    def _forget(self, principal: str) -> None:
        # A principal with no turn and no waiter is forgotten: the tables stay as small as the set
        # of principals with work, and one that comes back starts as a newcomer.
        if principal not in self._held and principal not in self._queues and principal not in self._bulk:
            self._last.pop(principal, None)


def scheduled(
    scheduler: FairScheduler,
    principal: str,
    items: Iterator[_T],
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[_T]:
    """``items``, each produced inside its own turn of ``principal`` (none held between items).

    The first item is interactive work, every later one bulk work (see the module's notes on
    lanes): a long stream's further batches leave one turn free for calls that start.
    An iterator that knows how many items it has left (``__length_hint__``, as a take's chunks do)
    ends without a turn once it says none are: a small take waits for one turn fewer behind a
    heavy principal's work just to learn that it is over.
    """
    bulk = False
    while True:
        if operator.length_hint(items, -1) == 0:
            return
        with scheduler.turn(principal, cancelled, bulk=bulk):
            item = scheduler.run_bulk(principal, lambda: next(items, _END)) if bulk else next(items, _END)
        if item is _END:
            return
        bulk = True
        yield cast(_T, item)


class HeldTurn:
    """One call's turn, held while the call works and given back while it waits on its client.

    For calls whose client streams (``do_put``, ``do_exchange``): each incoming batch is worked on
    (encoded and written, or its rows taken) inside a turn of the caller, and no turn is held
    while the server waits for the client's next message or while it sends. A writer streaming a
    big write thus takes turns like a reader's batches do, and a light principal's read waits for
    at most one batch of it.

    Parameters
    ----------
    scheduler : FairScheduler
        The server's work scheduler.
    principal : str
        Who the call runs as.
    cancelled : Callable[[], bool] | None
        The call's cancellation flag, looked at while waiting for a turn.
    """

    def __init__(
        self, scheduler: FairScheduler, principal: str, cancelled: Callable[[], bool] | None = None
    ) -> None:
        self.scheduler = scheduler
        self.principal = principal
        self.cancelled = cancelled
        self.held = False

    def take(self) -> None:
        """Hold a turn (waits for one; nothing happens when one is held already)."""
        if not self.held:
            self.scheduler.acquire(self.principal, self.cancelled)
            self.held = True

    def give_back(self) -> None:
        """Give the turn back (nothing happens when none is held)."""
        if self.held:
            self.held = False
            self.scheduler.release(self.principal)

    @contextmanager
    def inside(self) -> Iterator[None]:
        """Run the body inside a turn, given back after it."""
        self.take()
        try:
            yield
        finally:
            self.give_back()
