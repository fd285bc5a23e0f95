"""Stream slots and result memory, per server and per principal: who may stream, and how much.

Every ``do_get``, ``do_put`` and ``do_exchange`` holds a :class:`Lease` of the server's
:class:`StreamGovernor` from its start until its last batch is sent (or received). A lease is

* a **slot**: at most ``limits.maxConcurrentStreams`` per process, at most
  ``limits.maxStreamsPerPrincipal`` of them for one principal, so a client that opens streams and
  never reads them cannot lock the others out;
* **memory**: the bytes of the batches the stream holds (the one being produced and the one gRPC is
  sending), reserved when the stream is admitted and then following the real sizes, against
  ``limits.callMemoryBytes`` for the call, the principal's share of ``limits.memoryBudgetBytes``
  and the whole budget.

A request that finds no room waits up to ``limits.streamWaitSeconds`` and is then refused with
UNAVAILABLE, code ``RESOURCE_EXHAUSTED`` (pyarrow's server cannot send gRPC's own RESOURCE_EXHAUSTED
status: an ``ArrowMemoryError`` reaches the client as UNKNOWN). A stream that waits on its client
(an unread ``do_get``, a ``do_put`` that stops sending) for more than ``limits.streamIdleSeconds``
loses its slot to whoever needs one; the batch gRPC still holds for it stays charged to its
principal until gRPC lets go of it, and the stream ends with an error as soon as it moves again.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.errors import ResourceExhausted, StreamFailed
from flight_server.slots import Slots

__all__ = [
    "CANCEL_CHECK_INTERVAL_S",
    "CallCancelled",
    "CancelCheck",
    "Lease",
    "StreamExpired",
    "StreamGovernor",
    "admission_bytes",
    "batch_bytes",
    "estimate_row_bytes",
    "governed",
    "principal_of",
]

#: Bytes a variable-width value (string, binary, list, ...) is assumed to take before the first
#: batch shows the real size: a short string plus its offset. Corrected after each batch.
VARIABLE_VALUE_BYTES = 32

#: Seconds between two looks at the call's cancellation flag while waiting for room.
_WAIT_POLL_S = 0.05


def estimate_row_bytes(schema: pa.Schema) -> int:
    """Bytes one row of ``schema`` takes in memory, estimated from the types (at least 1)."""
    total = 0
    for f in schema:
        try:
            total += max(1, f.type.bit_width // 8)
        except ValueError:  # no fixed width: strings, binaries, lists, structs
            total += VARIABLE_VALUE_BYTES
    return max(1, total)


def principal_of(context: flight.ServerCallContext) -> str:
    """Who a call runs as, for fairness: the authenticated principal, else the client connection.

    Without auth every caller is anonymous, so each connection (``peer``, address and port) is its
    own principal: a client that opens many connections gets many shares, as it would with many
    tokens; a plain client (one connection) cannot take more than its share.
    """
    middleware = context.get_middleware("auth")
    key = getattr(middleware, "principal_key", None)
    if key:
        return f"auth:{key}"
    peer = context.peer()
    return f"peer:{peer.decode('utf-8', 'replace') if isinstance(peer, bytes) else peer}"


class CallCancelled(flight.FlightCancelledError):  # type: ignore[misc]
    """The client's deadline passed or the client went away: the work stops (nobody reads it)."""

    def __init__(self) -> None:
        super().__init__("the call was cancelled (deadline passed or client gone)")


#: Seconds between two real looks at a call's cancellation flag. A look (pyarrow's
#: ``ServerCallContext.is_cancelled``) polls gRPC's completion queue holding the GIL and can wait
#: there on gRPC's own locks: looked at per batch and per wake-up it took a quarter of the GIL under
#: load. Noticing a client that left 50 ms later costs nothing.
CANCEL_CHECK_INTERVAL_S = 0.05


class CancelCheck:
    """A call's ``is_cancelled``, really asked at most once per ``interval`` seconds.

    The first look happens ``interval`` after the check is made, so a short call never pays for
    one; once the call is seen cancelled the answer stays true.
    """

    def __init__(
        self,
        probe: Callable[[], bool],
        interval: float = CANCEL_CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._probe = probe
        self._interval = interval
        self._clock = clock
        self._next = clock() + interval
        self._cancelled = False

    def __call__(self) -> bool:
        if self._cancelled:
            return True
        now = self._clock()
        if now < self._next:
            return False
        self._next = now + self._interval
        self._cancelled = bool(self._probe())
        return self._cancelled


class StreamExpired(StreamFailed):
    """The stream waited on its client longer than ``limits.streamIdleSeconds`` and lost its slot."""


class Lease:
    """One stream's slot and the result bytes it holds; see :class:`StreamGovernor`."""

    def __init__(
        self, governor: StreamGovernor, principal: str, cancelled: Callable[[], bool] | None
    ) -> None:
        self._gov = governor
        self.principal = principal
        self._cancelled = cancelled
        self.held = 0  # bytes charged to this stream
        self.slot = True  # False once released or reaped
        self.expired = False
        self.waiting_since: float | None = None  # set while the stream waits on its client

    def reserve(self, nbytes: int) -> None:
        """Charge ``nbytes`` more (waiting, bounded, for room); refuse with RESOURCE_EXHAUSTED."""
        self._gov._reserve(self, max(0, int(nbytes)))

    def resize(self, nbytes: int) -> None:
        """Set the charge to what the stream really holds now (never waits; corrects estimates)."""
        self._gov._resize(self, max(0, int(nbytes)))

    def free(self) -> None:
        """Drop the charge (the batches it covered are gone)."""
        self._gov._resize(self, 0)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Mark the stream as waiting on its client (reading or sending) for the idle timeout.

        Raises
        ------
        StreamExpired
            On return, when the wait outlasted ``limits.streamIdleSeconds`` and the slot is gone.
        """
        self.waiting_since = self._gov.clock()
        try:
            yield
        finally:
            self.waiting_since = None
        if self.expired:
            self.release()
            raise StreamExpired(
                f"the stream waited on the client for more than {self._gov.idle_seconds:g} s "
                "(limits.streamIdleSeconds); its slot was given to another call"
            )

    def check(self) -> None:
        """Refuse to go on once the call is cancelled (deadline passed, client gone)."""
        if self._cancelled is not None and self._cancelled():
            raise CallCancelled()

    def release(self) -> None:
        """Give back the slot and the memory; releasing twice is harmless."""
        self._gov._release(self)


class StreamGovernor:
    """Slots and a memory budget shared by the streams of one server process.

    Parameters
    ----------
    max_streams : int
        Slots of the process (``limits.maxConcurrentStreams``).
    per_principal : int
        Slots one principal may hold (``limits.maxStreamsPerPrincipal``); its share of the memory
        budget is the same fraction of ``memory_bytes``.
    memory_bytes : int
        Bytes all streams may hold together (``limits.memoryBudgetBytes``).
    call_bytes : int
        Bytes one call may hold (``limits.callMemoryBytes``).
    wait_seconds : float
        How long a call waits for a slot or memory before it is refused.
    idle_seconds : float
        How long a stream may wait on its client before its slot goes to another call.
    clock : Callable[[], float]
        Monotonic seconds (tests pass a fake one).
    """

    def __init__(
        self,
        max_streams: int,
        per_principal: int,
        memory_bytes: int,
        call_bytes: int,
        wait_seconds: float,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._per_principal = per_principal
        self._slots = Slots(
            max_streams,
            lambda: self.per_principal,
            wait_seconds,
            full="too many concurrent streams (limit {limit}, limits.maxConcurrentStreams)",
            share="this client holds {held} streams, its share (limits.maxStreamsPerPrincipal = {share})",
            poll_seconds=_WAIT_POLL_S,
            clock=clock,
        )
        self.memory_bytes = memory_bytes
        self.call_bytes = call_bytes
        self.wait_seconds = wait_seconds
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.memory_used = 0
        self._memory_of: Counter[str] = Counter()
        self._leases: set[Lease] = set()
        self._cond = self._slots.cond  # one lock for slots and memory

    @property
    def limit(self) -> int:
        """Slots of the process (``limits.maxConcurrentStreams``)."""
        return self._slots.limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._slots.limit = value

    @property
    def open(self) -> int:
        """Slots held now."""
        return self._slots.open

    # -- limits ----------------------------------------------------------------------------------
    @property
    def per_principal(self) -> int:
        """Slots one principal may hold (never more than the process has)."""
        return max(1, min(self._per_principal, self.limit)) if self.limit > 0 else 0

    @property
    def principal_bytes(self) -> int:
        """One principal's share of the memory budget."""
        if self.limit <= 0:
            return 0
        return self.memory_bytes * self.per_principal // self.limit

    def stats(self) -> dict[str, int]:
        """Open slots, principals holding them and bytes held (for ``cache_stats``)."""
        with self._cond:
            return {
                "streams_open": self.open,
                "stream_principals": self._slots.principals(),
                "stream_memory_bytes": self.memory_used,
            }

    # -- acquiring -------------------------------------------------------------------------------
    def acquire(self, principal: str, cancelled: Callable[[], bool] | None = None) -> Lease:
        """A slot for ``principal``, waiting up to ``wait_seconds`` for one.

        Raises
        ------
        ResourceExhausted
            No slot became free in time (or the call was cancelled while waiting).
        """
        lease = Lease(self, principal, cancelled)
        self._wait_for(lambda: self._slots.refusal(principal), cancelled)
        self._slots.take(principal)
        self._leases.add(lease)
        self._cond.release()
        return lease

    def try_acquire(self, principal: str, cancelled: Callable[[], bool] | None = None) -> Lease | None:
        """A slot for ``principal`` if one is free now, else None (never waits)."""
        with self._cond:
            self._reap_idle()
            if self._slots.refusal(principal) is not None:
                return None
            lease = Lease(self, principal, cancelled)
            self._slots.take(principal)
            self._leases.add(lease)
            return lease

    def _memory_refusal(self, lease: Lease, nbytes: int) -> str | None:
        if self.memory_used + nbytes > self.memory_bytes:
            return f"the server's result memory is in use (limits.memoryBudgetBytes = {self.memory_bytes})"
        if self._memory_of[lease.principal] + nbytes > self.principal_bytes:
            return f"this client holds its share of result memory ({self.principal_bytes} bytes)"
        return None

    def _wait_for(self, refusal: Callable[[], str | None], cancelled: Callable[[], bool] | None) -> None:
        """Wait (bounded) until ``refusal()`` is None, reaping idle slots; return holding the lock."""

        def check(reason: str) -> None:
            if cancelled is not None and cancelled():
                raise ResourceExhausted(f"{reason}; retry later")

        self._slots.wait_for(refusal, check, before=self._reap_idle)

    def _reap_idle(self) -> None:
        """Take the slots of streams that waited on their clients too long (lock held)."""
        now = self.clock()
        for lease in list(self._leases):
            since = lease.waiting_since
            if lease.slot and since is not None and now - since > self.idle_seconds:
                lease.expired = True
                self._drop_slot(lease)

    def _drop_slot(self, lease: Lease) -> None:
        if lease.slot:
            lease.slot = False
            self._slots.give(lease.principal)

    # -- memory ----------------------------------------------------------------------------------
    def _reserve(self, lease: Lease, nbytes: int) -> None:
        if nbytes == 0:
            return
        if lease.held + nbytes > min(self.call_bytes, self.principal_bytes):
            raise ResourceExhausted(
                f"the call would hold {lease.held + nbytes} bytes of results, more than "
                f"limits.callMemoryBytes ({self.call_bytes}) or its share of limits.memoryBudgetBytes "
                f"({self.principal_bytes}); ask for fewer rows or columns at once"
            )
        self._wait_for(lambda: self._memory_refusal(lease, nbytes), lease._cancelled)
        self._add(lease, nbytes)
        self._cond.release()

    def _resize(self, lease: Lease, nbytes: int) -> None:
        with self._cond:
            self._add(lease, nbytes - lease.held)

    def _add(self, lease: Lease, delta: int) -> None:
        lease.held += delta
        self.memory_used += delta
        self._memory_of[lease.principal] += delta
        if self._memory_of[lease.principal] <= 0:
            del self._memory_of[lease.principal]
        if delta < 0:
            self._cond.notify_all()

    def _release(self, lease: Lease) -> None:
        with self._cond:
            self._drop_slot(lease)
            self._add(lease, -lease.held)
            self._leases.discard(lease)


def batch_bytes(batch: pa.RecordBatch) -> int:
    """The bytes of ``batch``'s rows (``RecordBatch.nbytes``: the byte ranges its columns reference).

    ``nbytes`` walks every column's buffers and costs 35-60 us on a 65,536-row batch of the Spark
    benchmark's table (four columns, a slice of a decoded chunk), about 1 ns a row: a stream asks
    for it once per batch (see :func:`governed`), not once per use.
    """
    return int(batch.nbytes)


def governed(lease: Lease, batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[pa.RecordBatch, int]]:
    """``batches`` with ``lease`` charged for what the stream holds until the client took it; each
    with its :func:`batch_bytes` (measured once here, for the caller's limits and counters too).

    The caller reserves :func:`admission_bytes` of the first batch's estimate when it admits the
    stream (so a stream that finds no room is refused before it starts, never halfway); from then
    on the charge follows the real sizes of the last two batches: pyarrow asks for the next batch
    once gRPC accepted the last, which gRPC may still hold in its send buffer while the next is
    produced (and blocks on). The call's cancellation is checked between batches.
    """
    previous = 0
    while True:
        lease.check()
        batch = next(batches, None)
        if batch is None:
            lease.free()
            return
        size = batch_bytes(batch)
        lease.resize(previous + size)
        previous = size
        with lease.waiting():
            yield batch, size


def admission_bytes(first_batch_bytes: int) -> int:
    """Bytes to reserve when admitting a stream whose first batch is estimated at this size: the
    batch gRPC holds and the one being produced (see :func:`governed`)."""
    return 2 * first_batch_bytes
