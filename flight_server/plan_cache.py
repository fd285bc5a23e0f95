"""Recent ``get_flight_info`` answers, reused while their dataset version is unchanged.

Planning a scan is linear in columns and fragments, but linear in 10,000 columns is still tens of
milliseconds of Python and schema serialization per call, and clients plan the same scans over and
over (every Spark job plans its tables; dashboards poll). A plan depends only on the descriptor and
the dataset version it resolved to, so an answer is reused for the same (descriptor, dataset
version). Only the endpoints' ``expiration_time`` depends on when the plan was made: an answer is
reused for at most :data:`PLAN_MAX_AGE_SECONDS`, so a reused ticket's promise is at most that much
shorter than a fresh one's (never longer).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

import pyarrow.flight as flight

__all__ = [
    "ENTRY_OVERHEAD_BYTES",
    "MAX_KEY_BYTES",
    "PLAN_MAX_AGE_SECONDS",
    "PlanCache",
    "entry_bytes",
    "info_bytes",
    "key_bytes",
]

#: Seconds an answer is reused: short beside the ticket lifetime (an hour by default), long beside
#: the interval at which clients that plan in a loop ask again.
PLAN_MAX_AGE_SECONDS = 60.0
#: Descriptors longer than this (big Substrait filters) are planned every time rather than kept as
#: keys: the cache is for the common, small descriptors.
MAX_KEY_BYTES = 64 * 1024


#: Bytes counted per entry beside its answer and key: the FlightInfo object, the key tuple and the
#: LRU's node (a few hundred bytes of Python objects).
ENTRY_OVERHEAD_BYTES = 512


def key_bytes(key: Hashable) -> int:
    """Bytes the bytes and strings of ``key`` (a tuple of them, or one) take: counted with the
    answer, as a descriptor up to :data:`MAX_KEY_BYTES` can be far larger than a small answer."""
    parts = key if isinstance(key, tuple) else (key,)
    return sum(len(p) for p in parts if isinstance(p, (bytes, str)))


def info_bytes(info: flight.FlightInfo) -> int:
    """Bytes a FlightInfo takes (its serialized size: schema, tickets, locations)."""
    return len(info.serialize())


def entry_bytes(key: Hashable, info: flight.FlightInfo) -> int:
    """Bytes an entry counts for: its answer, its key and :data:`ENTRY_OVERHEAD_BYTES`."""
    return info_bytes(info) + key_bytes(key) + ENTRY_OVERHEAD_BYTES


class PlanCache:
    """A byte-bounded LRU of FlightInfos by (descriptor, resolved dataset version).

    Parameters
    ----------
    max_bytes : int
        Bytes of answers kept (``cache.planBytes``, counted as their serialized size plus their
        key's bytes and :data:`ENTRY_OVERHEAD_BYTES`); 0 keeps none.
    max_age : float
        Seconds an answer is reused.
    clock : Callable[[], float]
        Monotonic seconds (tests pass a fake one).
    sizer : Callable[[Hashable, flight.FlightInfo], int]
        Bytes an entry (key and answer) counts for (:func:`entry_bytes`; tests pass a fixed size).
    """

    def __init__(
        self,
        max_bytes: int,
        max_age: float = PLAN_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sizer: Callable[[Hashable, flight.FlightInfo], int] = entry_bytes,
    ) -> None:
        self.max_bytes = max(0, max_bytes)
        self.nbytes = 0
        self._sizer = sizer
        self.max_age = max_age
        self.clock = clock
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[Hashable, tuple[float, flight.FlightInfo, int]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether answers are kept at all."""
        return self.max_bytes > 0

    def get(self, key: Hashable) -> flight.FlightInfo | None:
        """The answer kept for ``key`` if it is young enough, else ``None``."""
        with self._lock:
            item = self._items.get(key)
            if item is None or self.clock() - item[0] > self.max_age:
                if item is not None:
                    del self._items[key]
                    self.nbytes -= item[2]
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[1]

    def put(self, key: Hashable, info: flight.FlightInfo) -> None:
        """Keep ``info`` for ``key`` (the least recently used answers go when full)."""
        if not self.enabled:
            return
        size = self._sizer(key, info)
        if size > self.max_bytes:
            return  # larger than the whole cache: planned again each time
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.nbytes -= old[2]
            self._items[key] = (self.clock(), info, size)
            self.nbytes += size
            while self.nbytes > self.max_bytes:
                _, (_, _, dropped) = self._items.popitem(last=False)
                self.nbytes -= dropped

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
