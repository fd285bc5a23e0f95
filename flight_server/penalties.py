"""Back-off for principals that keep sending oversized requests, enforced before their next call.

A request refused for its size (a take ticket listing more rows than ``limits.maxTakeRows``, a
ticket above ``limits.maxMessageBytes``) has already cost the server by the time the handler can
refuse it: pyarrow hands the handler its ticket only after copying all of it, several times, while
holding the GIL (a 32 MB ticket: three copies into fresh memory, tens to hundreds of milliseconds in
which no other call of the process runs Python). The handler's refusal cannot take that back, so a
client that keeps sending such tickets slows every other client down.

:class:`OversizePenalties` remembers who did: after :data:`STRIKES` refusal(s) of big requests within
:data:`WINDOW_S`, that principal's calls of the same method are refused with RESOURCE_EXHAUSTED for a
back-off (:data:`FIRST_BACKOFF_S`, doubling at each further refusal up to :data:`MAX_BACKOFF_S`) by
the auth middleware, which runs before pyarrow converts the request. Only authenticated principals
are known that early: anonymous callers are told apart by their connection, which middleware does
not see.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["FIRST_BACKOFF_S", "MAX_BACKOFF_S", "MIN_BYTES", "STRIKES", "WINDOW_S", "OversizePenalties"]

#: Refusals within the window before a back-off starts. One: each oversized ticket that reaches the
#: handler has already stalled every other call of the process (the back-off is short at first).
STRIKES = 1
#: Seconds a refusal counts for; a principal quiet for this long starts over.
WINDOW_S = 60.0
#: First back-off (seconds), doubled at each further refusal: a client that retries in a loop
#: sends ever fewer oversized requests, one that stops is served again within seconds.
FIRST_BACKOFF_S = 2.0
#: Longest back-off (seconds): a principal that fixed its requests waits at most this long.
MAX_BACKOFF_S = 60.0
#: Requests smaller than this (bytes) cost little to receive, and do not count.
MIN_BYTES = 1 << 20
#: Principals remembered at most (the least recently refused are forgotten first).
MAX_TRACKED = 10_000


@dataclass
class _Record:
    strikes: int = 0
    last: float = 0.0
    backoff: float = 0.0
    until: float = 0.0


class OversizePenalties:
    """Who sent refused oversized requests lately, and until when their calls are refused.

    Parameters
    ----------
    strikes, window_s, first_backoff_s, max_backoff_s, min_bytes :
        See the module's constants of the same names.
    clock : Callable[[], float]
        Monotonic seconds (tests pass a fake clock).
    """

    def __init__(
        self,
        strikes: int = STRIKES,
        window_s: float = WINDOW_S,
        first_backoff_s: float = FIRST_BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
        min_bytes: int = MIN_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.strikes = strikes
        self.window_s = window_s
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self.min_bytes = min_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._records: OrderedDict[tuple[str, str], _Record] = OrderedDict()

    def refused(self, principal: str, method: str, nbytes: int) -> None:
        """Count a refusal, for its size, of a ``nbytes`` request of ``principal`` to ``method``."""
        if nbytes < self.min_bytes or not principal:
            return
        now = self._clock()
        key = (principal, method)
        with self._lock:
            record = self._records.pop(key, None) or _Record()
            if now - record.last > self.window_s:
                record = _Record()
            record.strikes += 1
            record.last = now
            if record.strikes >= self.strikes:
                record.backoff = min(self.max_backoff_s, record.backoff * 2 or self.first_backoff_s)
                record.until = now + record.backoff
            self._records[key] = record  # most recently refused last
            while len(self._records) > MAX_TRACKED:
                self._records.popitem(last=False)

    def remaining(self, principal: str, method: str) -> float:
        """Seconds ``principal``'s calls to ``method`` are still refused for (0: not refused)."""
        with self._lock:
            record = self._records.get((principal, method))
            if record is None:
                return 0.0
            return max(0.0, record.until - self._clock())
