"""A process-wide, byte-bounded LRU cache for immutable metadata (open files, deletion vectors, row ids).

Entries are keyed by ``(store uri, object key, ...)``; the objects cached here are never rewritten
under the same key (data and deletion file names are random), so entries never go stale.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ["METADATA_CACHE", "ByteLRU"]

#: Default capacity of the metadata cache (pylance's metadata cache defaults to 1 GiB); override
#: with LANCE_FORMAT_METADATA_CACHE_BYTES.
DEFAULT_METADATA_CACHE_BYTES = 1 << 30


class ByteLRU:
    """Least-recently-used entries are evicted once their summed sizes exceed ``capacity`` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        """The cached value (marked most recently used), or ``None``."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        """Cache ``value``, charged ``nbytes``; evicts least recently used entries over capacity."""
        nbytes = max(1, int(nbytes))
        if nbytes > self.capacity:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, nbytes)
            self._bytes += nbytes
            while self._bytes > self.capacity and self._items:
                _, (_, size) = self._items.popitem(last=False)
                self._bytes -= size

    @property
    def nbytes(self) -> int:
        """Bytes currently charged."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._items.clear()
            self._bytes = 0


def _capacity() -> int:
    raw = os.environ.get("LANCE_FORMAT_METADATA_CACHE_BYTES")
    try:
        return int(raw) if raw else DEFAULT_METADATA_CACHE_BYTES
    except ValueError:
        return DEFAULT_METADATA_CACHE_BYTES


METADATA_CACHE = ByteLRU(_capacity())
