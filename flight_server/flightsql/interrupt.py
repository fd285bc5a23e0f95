"""Running DataFusion queries: how many at once, and stopping them when their call ends.

DataFusion computes in its own Rust threads. Its blocking ``next`` waits there without the GIL and
cannot be interrupted from another thread (it only looks at signals, which Python delivers to the
main thread alone), so an aggregate over ``generate_series(1, 1e11)`` went on for minutes after
its client had gone. Its asynchronous ``__anext__`` can be: this module awaits each batch on one
event loop of the process, and the thread that wants the batch waits for it in short slices,
looking at the call and the deadline in between. To stop, it cancels the awaited step (DataFusion
drops the future it polls) and lets go of the stream, which drops the plan and ends its tasks.

Each running query may take ``limits.sqlMemoryBytes`` of working memory, so :class:`QuerySlots`
bounds how many run at once (``limits.maxConcurrentSqlQueries``, half of them for one principal):
their memory together stays bounded however many streams clients open.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from flight_server.errors import QueryTimedOut
from flight_server.slots import Slots
from flight_server.streams import CallCancelled

__all__ = ["POLL_SECONDS", "QueryRun", "QuerySlots"]

#: Seconds a waiting producer sleeps between two looks at its call and deadline: a stopped
#: query stops within this, and a look costs a few microseconds, not worth saving further.
POLL_SECONDS = 0.1

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0


def _event_loop() -> asyncio.AbstractEventLoop:
    """The process's loop for DataFusion's awaitables, started on first use (and again in a
    forked child, where the parent's loop thread does not exist)."""
    global _loop, _loop_pid
    with _lock:
        if _loop is None or _loop_pid != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="datafusion-await", daemon=True).start()
            _loop, _loop_pid = loop, os.getpid()
        return _loop


async def _next(stream: Any) -> Any:
    """The stream's next batch (``None`` at its end)."""
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return None


class QuerySlots(Slots):
    """The DataFusion queries of a process that may run at once: half of them for one principal
    (at least one), so one client running long queries never locks the others out.

    Parameters
    ----------
    limit:
        Queries of all principals (``limits.maxConcurrentSqlQueries``).
    wait_seconds:
        How long a query waits for a slot before it is refused (``limits.streamWaitSeconds``).
    """

    def __init__(self, limit: int, wait_seconds: float) -> None:
        super().__init__(
            limit,
            lambda: max(1, self.limit // 2),
            wait_seconds,
            full="too many SQL queries are running (limits.maxConcurrentSqlQueries = {limit})",
            share="this client runs {held} SQL queries, its share of limits.maxConcurrentSqlQueries",
            poll_seconds=POLL_SECONDS,
        )


class QueryRun:
    """One query's DataFusion streams, each batch awaited so that the query can be stopped.

    Parameters
    ----------
    timeout_seconds:
        ``limits.sqlTimeoutSeconds``: the query fails with :class:`QueryTimedOut` once it has run
        this long (``0``: no limit).
    slots:
        The process's :class:`QuerySlots`; each stream holds one while it runs (``None``: no limit).
    """

    def __init__(self, timeout_seconds: float, slots: QuerySlots | None = None) -> None:
        self.timeout_seconds = timeout_seconds
        self.deadline = time.monotonic() + timeout_seconds if timeout_seconds > 0 else None
        self.slots = slots
        self.principal = ""
        self._cancelled: Callable[[], bool] = lambda: False

    def watch(self, cancelled: Callable[[], bool], principal: str = "") -> None:
        """Stop the query once ``cancelled()`` is true (its client went away or its deadline passed);
        its slot counts towards ``principal``'s share."""
        self._cancelled = cancelled
        self.principal = principal

    def batches(self, dataframe: Any) -> Iterator[pa.RecordBatch]:
        """The batches of a DataFusion ``DataFrame``, stopped at the limit or when cancelled."""
        self._check()
        principal = self.principal
        if self.slots is not None:
            self.slots.acquire(principal, self._check)
        try:
            stream = dataframe.execute_stream()
            while True:
                batch = self._wait(_next(stream))
                if batch is None:
                    return
                yield batch.to_pyarrow()
        finally:
            if self.slots is not None:
                self.slots.release(principal)

    def _check(self) -> None:
        if self._cancelled():
            raise CallCancelled()
        if self.deadline is not None and time.monotonic() >= self.deadline:
            limit = f"limits.sqlTimeoutSeconds ({self.timeout_seconds:g} s)"
            raise QueryTimedOut(f"the query ran longer than {limit} and was stopped")

    def _wait(self, step: Any) -> Any:
        future = asyncio.run_coroutine_threadsafe(step, _event_loop())
        while True:
            try:
                return future.result(timeout=POLL_SECONDS)
            except concurrent.futures.TimeoutError:
                pass
            try:
                self._check()
            except BaseException:
                future.cancel()
                raise
