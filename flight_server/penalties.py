"""Back-off for clients that keep sending oversized requests.

A request refused for its size (a take ticket listing more rows than ``limits.maxTakeRows``, a
ticket, descriptor command or action body above ``limits.maxMessageBytes``) has already cost the
server by the time the handler can refuse it: pyarrow hands the handler its request only after
copying all of it, several times, while holding the GIL (a 32 MB ticket: three copies into fresh
memory, tens to hundreds of milliseconds in which no other call of the process runs Python). The
handler's refusal cannot take that back, so a client that keeps sending such requests slows every
other client down.

:class:`OversizePenalties` remembers who did: after ``limits.oversizeStrikes`` refusal(s) of big
requests (at least ``limits.oversizeMinBytes``) within ``limits.oversizeWindowSeconds``, that
client is in a back-off for the same method (``limits.oversizeFirstBackoffSeconds``, doubling at
each further refusal up to ``limits.oversizeMaxBackoffSeconds``):

- an authenticated principal's calls of that method are refused with RESOURCE_EXHAUSTED by the auth
  middleware, which runs before pyarrow converts the request;
- an anonymous caller is known only by its connection, which middleware does not see: the handler
  keys it by the connection's host (:func:`peer_host`; a new connection does not start over), and
  answers its oversized requests that arrive during a back-off only once the back-off is over
  (:meth:`OversizePenalties.hold`). Its well-sized calls are served as usual (other clients on the
  same host are not punished); a client that loops on oversized requests sends one per back-off.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flight_server.settings import (
    DEFAULT_OVERSIZE_FIRST_BACKOFF_SECONDS,
    DEFAULT_OVERSIZE_HOLD_BYTES,
    DEFAULT_OVERSIZE_MAX_BACKOFF_SECONDS,
    DEFAULT_OVERSIZE_MIN_BYTES,
    DEFAULT_OVERSIZE_STRIKES,
    DEFAULT_OVERSIZE_WINDOW_SECONDS,
)

if TYPE_CHECKING:
    from flight_server.settings import ServerSettings

__all__ = [
    "FIRST_BACKOFF_S",
    "HOLD_BYTES",
    "MAX_BACKOFF_S",
    "MIN_BYTES",
    "STRIKES",
    "WINDOW_S",
    "OversizePenalties",
    "peer_host",
]

# The defaults, and why those values, are the settings' (flight_server.settings, limits.oversize*).
STRIKES = DEFAULT_OVERSIZE_STRIKES
WINDOW_S = DEFAULT_OVERSIZE_WINDOW_SECONDS
FIRST_BACKOFF_S = DEFAULT_OVERSIZE_FIRST_BACKOFF_SECONDS
MAX_BACKOFF_S = DEFAULT_OVERSIZE_MAX_BACKOFF_SECONDS
MIN_BYTES = DEFAULT_OVERSIZE_MIN_BYTES
HOLD_BYTES = DEFAULT_OVERSIZE_HOLD_BYTES
#: Principals remembered at most (the least recently refused are forgotten first).
MAX_TRACKED = 10_000
#: Seconds between two looks at a held call's cancellation flag.
_HOLD_POLL_S = 0.1


def peer_host(peer: str) -> str:
    """The host part of a gRPC peer (``ipv4:10.0.0.7:51234`` -> ``host:10.0.0.7``).

    An anonymous client's connections differ by port; its host does not. Back-offs of anonymous
    callers are keyed by host, so a client cannot escape its back-off by opening a new connection.
    """
    scheme, sep, rest = peer.partition(":")
    if sep and scheme in ("ipv4", "ipv6"):
        return "host:" + rest.rsplit(":", 1)[0]
    return "host:" + peer


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
    strikes, window_s, first_backoff_s, max_backoff_s, min_bytes, hold_bytes :
        See the module's constants of the same names (``limits.oversize*`` settings).
    clock : Callable[[], float]
        Monotonic seconds (tests pass a fake clock).
    sleep : Callable[[float], None]
        Waits that many seconds (tests pass one that advances their fake clock).
    """

    def __init__(
        self,
        strikes: int = STRIKES,
        window_s: float = WINDOW_S,
        first_backoff_s: float = FIRST_BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
        min_bytes: int = MIN_BYTES,
        hold_bytes: int = HOLD_BYTES,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.strikes = strikes
        self.window_s = window_s
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self.min_bytes = min_bytes
        self.hold_bytes = hold_bytes
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._records: OrderedDict[tuple[str, str], _Record] = OrderedDict()
        self._held_bytes = 0

    @classmethod
    def of(cls, settings: ServerSettings) -> OversizePenalties:
        """The back-off the server's ``limits.oversize*`` settings describe."""
        return cls(
            strikes=settings.oversize_strikes,
            window_s=settings.oversize_window_seconds,
            first_backoff_s=settings.oversize_first_backoff_seconds,
            max_backoff_s=settings.oversize_max_backoff_seconds,
            min_bytes=settings.oversize_min_bytes,
            hold_bytes=settings.oversize_hold_bytes,
        )

    def refused(self, principal: str, method: str, nbytes: int) -> bool:
        """Count a refusal, for its size, of a ``nbytes`` request of ``principal`` to ``method``.

        Returns whether it counted (a request under ``min_bytes``, or of nobody, does not).
        """
        if nbytes < self.min_bytes or not principal:
            return False
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
        return True

    def remaining(self, principal: str, method: str) -> float:
        """Seconds ``principal``'s calls to ``method`` are still refused for (0: not refused)."""
        with self._lock:
            record = self._records.get((principal, method))
            if record is None:
                return 0.0
            return max(0.0, record.until - self._clock())

    def hold(self, principal: str, method: str, nbytes: int, cancelled: Callable[[], bool]) -> float:
        """Wait until ``principal``'s back-off for ``method`` ends, before a refusal is answered.

        For callers the auth middleware cannot refuse early (anonymous ones: it does not see the
        connection): a client that loops on oversized requests then sends one per back-off instead
        of one per round trip. Nothing is held when held requests already total ``hold_bytes``
        (each keeps its bytes until answered), and the wait ends when the call is cancelled.

        Returns
        -------
        float
            Seconds waited.
        """
        with self._lock:
            if self._held_bytes + nbytes > self.hold_bytes:
                return 0.0
            self._held_bytes += nbytes
        start = self._clock()
        try:
            while True:
                left = self.remaining(principal, method)
                if left <= 0 or cancelled():
                    break
                self._sleep(min(left, _HOLD_POLL_S))
        finally:
            with self._lock:
                self._held_bytes -= nbytes
        return self._clock() - start
