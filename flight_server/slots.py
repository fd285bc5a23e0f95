"""Slots counted per process and per principal: how many calls of one kind may run at once.

One counter serves the stream governor (:mod:`flight_server.streams`, which adds idle reaping and a
memory budget on top) and the SQL query slots (:mod:`flight_server.flightsql.interrupt`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

from flight_server.errors import ResourceExhausted

__all__ = ["Slots"]


class Slots:
    """At most ``limit`` slots for the process, at most ``per_principal`` for one principal.

    Parameters
    ----------
    limit : int
        Slots of the process.
    per_principal : Callable[[], int]
        Slots one principal may hold (asked each time, as it may follow ``limit``).
    wait_seconds : float
        How long :meth:`wait_for` waits before refusing with :class:`ResourceExhausted`.
    full : str
        Refusal when the process has no slot left; ``{limit}`` is filled in.
    share : str
        Refusal when the principal holds its share; ``{held}`` and ``{share}`` are filled in.
    poll_seconds : float
        Seconds between two looks at the caller's ``check`` while waiting.
    clock : Callable[[], float]
        Monotonic seconds (tests pass a fake one).
    """

    def __init__(
        self,
        limit: int,
        per_principal: Callable[[], int],
        wait_seconds: float,
        full: str,
        share: str,
        poll_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self._per_principal = per_principal
        self.wait_seconds = wait_seconds
        self._full = full
        self._share = share
        self.poll_seconds = poll_seconds
        self.clock = clock
        self.open = 0
        self._of: Counter[str] = Counter()
        self.cond = threading.Condition()

    @property
    def per_principal(self) -> int:
        """Slots one principal may hold."""
        return self._per_principal()

    def principals(self) -> int:
        """Principals holding a slot now (lock held by the caller or not needed)."""
        return len(self._of)

    def refusal(self, principal: str) -> str | None:
        """Why ``principal`` may not take a slot now, or None (lock held)."""
        if self.open >= self.limit:
            return self._full.format(limit=self.limit)
        if self._of[principal] >= self.per_principal:
            return self._share.format(held=self._of[principal], share=self.per_principal)
        return None

    def take(self, principal: str) -> None:
        """Count a slot for ``principal`` (lock held, :meth:`refusal` was None)."""
        self.open += 1
        self._of[principal] += 1

    def give(self, principal: str) -> None:
        """Give back a slot :meth:`take` counted and wake the waiters (lock held)."""
        self.open -= 1
        self._of[principal] -= 1
        if self._of[principal] <= 0:
            del self._of[principal]
        self.cond.notify_all()

    def wait_for(
        self,
        refusal: Callable[[], str | None],
        check: Callable[[str], None] | None = None,
        before: Callable[[], None] | None = None,
    ) -> None:
        """Wait (bounded by ``wait_seconds``) until ``refusal()`` is None; return holding the lock.

        ``before`` runs ahead of each look (lock held); ``check`` gets the refusal and raises to
        stop waiting (the call was cancelled).

        Raises
        ------
        ResourceExhausted
            ``refusal()`` still had a reason when the wait was over.
        """
        deadline = self.clock() + self.wait_seconds
        self.cond.acquire()
        try:
            while True:
                if before is not None:
                    before()
                reason = refusal()
                if reason is None:
                    return
                remaining = deadline - self.clock()
                if remaining <= 0:
                    raise ResourceExhausted(f"{reason}; retry later")
                if check is not None:
                    check(reason)
                self.cond.wait(min(remaining, self.poll_seconds))
        except BaseException:
            self.cond.release()
            raise

    def acquire(self, principal: str, check: Callable[[], None]) -> None:
        """Take a slot for ``principal``, waiting up to ``wait_seconds``; ``check`` raises to stop.

        Raises
        ------
        ResourceExhausted
            No slot became free in time.
        """
        self.wait_for(lambda: self.refusal(principal), lambda _reason: check())
        self.take(principal)
        self.cond.release()

    def release(self, principal: str) -> None:
        """Give back a slot :meth:`acquire` took."""
        with self.cond:
            self.give(principal)
