"""Pacing at the edge: a principal above its CPU share waits before its next call.

The fair scheduler (:mod:`flight_server.fairness`) decides whose piece of work runs when turns are
scarce, but a turn covers only part of a call's CPU. A cheap call spends most of it outside any
turn: gRPC, the middlewares, pyarrow converting the request and serializing the answer (a
2,000-column ``get_flight_info`` reused from the plan cache: ~0.9 ms of server CPU per call, ~30% in
its turn). A client that loops on such calls from a few threads keeps the GIL busy with work
no turn bounds, and every other client's small call waits for the GIL behind it, several times per
call.

:class:`CallPacer` weighs whole calls instead. The :class:`PaceMiddlewareFactory` (registered last,
so its call ends after the other middlewares' work) charges each call's thread CPU, from the start
of the call to its completion, to the call's principal; the use decays with the fair scheduler's
half-life. While other principals are active, one whose recent use is above :data:`HEAVY_RATIO`
times their mean is *heavy*: before each of its calls the handler waits, without the GIL, until
its use would have decayed to that line, at most :data:`MAX_DELAY_S` (``limits.paceMaxDelayMs``)
per call. A client that floods the server with cheap calls from a closed loop thus slows down to
about the CPU rate of the others; a long stream pays at most one such wait per call; a principal
alone is never delayed.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow.flight as flight

from flight_server.fairness import CPU_ACTIVE_S, CPU_HALF_LIFE_S
from flight_server.settings import DEFAULT_PACE_MAX_DELAY_MS

__all__ = ["HEAVY_RATIO", "MAX_DELAY_S", "CallPacer", "PaceMiddleware", "PaceMiddlewareFactory"]

#: The default longest wait before one call (``limits.paceMaxDelayMs``; why that value: the setting's).
MAX_DELAY_S = DEFAULT_PACE_MAX_DELAY_MS / 1000.0
#: How far above the other active principals' mean use a principal may go before its calls wait.
#: Above 1: a paced principal hovers at its line, and the others then stay clear below theirs (at 1,
#: two clients at the same rate would take turns waiting, the light one included).
HEAVY_RATIO = 1.5
_LN2 = math.log(2.0)
#: Principals whose use is remembered before the idle ones are forgotten.
_FORGET_ABOVE = 64


class CallPacer:
    """Recent CPU of each principal's calls, and how long a heavy principal's next call waits.

    Parameters
    ----------
    max_delay_s : float
        Longest wait before one call (0: calls are never delayed, use is still counted).
    half_life_s : float
        Seconds over which a principal's recorded use halves.
    active_s : float
        Recent CPU seconds below which a principal counts as idle.
    clock : Callable[[], float]
        Monotonic seconds (tests pass a fake clock).
    sleep : Callable[[float], None]
        Waits that many seconds without the GIL (tests pass one that advances their clock).
    """

    def __init__(
        self,
        max_delay_s: float = MAX_DELAY_S,
        half_life_s: float = CPU_HALF_LIFE_S,
        active_s: float = CPU_ACTIVE_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.max_delay_s = max(0.0, max_delay_s)
        self.half_life_s = half_life_s
        self.active_s = active_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._use: dict[str, tuple[float, float]] = {}  # principal -> (CPU seconds, when), decaying
        #: Calls delayed so far, and the seconds they waited (for tests and metrics).
        self.delayed = 0
        self.waited_s = 0.0

    def _decayed(self, principal: str, now: float) -> float:
        used, when = self._use.get(principal, (0.0, now))
        return used * math.exp(-_LN2 * max(0.0, now - when) / self.half_life_s)

    def charge(self, principal: str, seconds: float) -> None:
        """Add ``seconds`` of CPU to ``principal``'s recent use (the middleware charges each call)."""
        if seconds <= 0 or not principal:
            return
        with self._lock:
            now = self._clock()
            self._use[principal] = (self._decayed(principal, now) + seconds, now)
            if len(self._use) > _FORGET_ABOVE:
                for idle in [p for p in self._use if self._decayed(p, now) < self.active_s]:
                    del self._use[idle]

    def use(self, principal: str) -> float:
        """``principal``'s recent CPU seconds (decayed)."""
        with self._lock:
            return self._decayed(principal, self._clock())

    def principals(self) -> dict[str, float]:
        """Every principal remembered, with its recent CPU seconds (decayed)."""
        with self._lock:
            now = self._clock()
            return {p: self._decayed(p, now) for p in self._use}

    def delay(self, principal: str) -> float:
        """Seconds ``principal``'s next call should wait now (0 unless it is heavy).

        Heavy: its use is above :data:`HEAVY_RATIO` times the mean of the other active
        principals' (none active: never heavy). It waits until its use would have decayed to that
        line, at most ``max_delay_s``.
        """
        if self.max_delay_s <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            mine = self._decayed(principal, now)
            others = [self._decayed(p, now) for p in self._use if p != principal]
        others = [u for u in others if u >= self.active_s]
        if not others or mine < self.active_s:
            return 0.0
        line = HEAVY_RATIO * sum(others) / len(others)
        if mine <= line:
            return 0.0
        return min(self.max_delay_s, self.half_life_s * math.log2(mine / line))

    def pace(self, principal: str) -> float:
        """Wait as long as :meth:`delay` says before ``principal``'s call; returns the seconds."""
        wait = self.delay(principal)
        if wait > 0:
            self._sleep(wait)
            with self._lock:
                self.delayed += 1
                self.waited_s += wait
        return wait


class PaceMiddleware(flight.ServerMiddleware):  # type: ignore[misc]
    """One call's CPU clock; the handler names the call's principal (:meth:`bind`)."""

    def __init__(self, pacer: CallPacer) -> None:
        self.pacer = pacer
        self.principal = ""
        self._thread = threading.get_ident()
        self._start = time.thread_time()

    def bind(self, principal: str) -> None:
        """The principal the call's CPU is charged to (the middleware cannot see an anonymous
        caller's connection; the handler can)."""
        self.principal = principal

    def call_completed(self, exception: BaseException | None) -> None:
        # The thread clock means something only on the thread that started it (pyarrow runs a
        # call's callbacks on one gRPC thread; anything else is not charged).
        if self.principal and threading.get_ident() == self._thread:
            self.pacer.charge(self.principal, time.thread_time() - self._start)


class PaceMiddlewareFactory(flight.ServerMiddlewareFactory):  # type: ignore[misc]
    """Starts a :class:`PaceMiddleware` for every call; register it last under the key ``"pace"``."""

    def __init__(self, pacer: CallPacer) -> None:
        super().__init__()
        self.pacer = pacer

    def start_call(self, info: flight.CallInfo, headers: Mapping[str, Any]) -> PaceMiddleware:
        return PaceMiddleware(self.pacer)
