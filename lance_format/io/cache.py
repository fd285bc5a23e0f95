"""Process-wide byte-bounded caches: parsed metadata and data pages, with hit/miss/eviction counters.

Two caches live for the whole process and are shared by every dataset and file it opens:

* :data:`METADATA_CACHE`: parsed manifests, open file readers (footer and column metadata),
  deletion vectors, row-id sequences and indexes. Keys always name an immutable object (a data
  file, a manifest of a given size), so entries never go stale.
* :data:`PAGE_CACHE`: data bytes keyed by ``(store, object, block)``. Off (capacity 0) unless
  configured: a local process has the OS page cache, a server over object stores wants it on.
* :data:`DECODED_CACHE`: decoded Arrow arrays of hot row blocks (:mod:`lance_format.file.decoded`),
  so repeated takes skip decoding. Off unless configured; the server turns it on.

Capacities: argument to :func:`configure_caches` > environment variable > default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

from cachetools import LRUCache

from lance_format.core.config import env_setting
from lance_format.core.errors import InvalidInputError
from lance_format.io.descriptors import DESCRIPTORS

__all__ = [
    "DECODED_CACHE",
    "METADATA_CACHE",
    "PAGE_CACHE",
    "ByteCache",
    "CacheCounters",
    "CacheStats",
    "ReadPolicy",
    "cache_stats",
    "configure_caches",
    "forget_dataset",
]


class _CountingLRU(LRUCache[Hashable, tuple[Any, int]]):
    """cachetools' LRU, counting evictions (cachetools evicts through ``popitem``)."""

    evictions = 0

    def popitem(self) -> tuple[Hashable, tuple[Any, int]]:
        item = super().popitem()
        self.evictions += 1
        return item


def _size_of(entry: tuple[Any, int]) -> int:
    return entry[1]


@dataclass(frozen=True)
class CacheCounters:
    """A snapshot of one cache: lookups that hit or missed, entries evicted, bytes held."""

    hits: int
    misses: int
    evictions: int
    entries: int
    bytes: int
    capacity: int

    @property
    def hit_ratio(self) -> float:
        """Hits over lookups (0 when there was none)."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@dataclass(frozen=True)
class CacheStats:
    """Counters of the process-wide caches (what :func:`cache_stats` returns)."""

    metadata: CacheCounters
    page: CacheCounters
    decoded: CacheCounters


@dataclass(frozen=True)
class ReadPolicy:
    """Which caches one read may use and fill, passed down the read path with the read.

    Attributes
    ----------
    page_cache:
        Raw pages (:data:`PAGE_CACHE` or a session's). Scans leave it alone: they read each byte
        once and would evict the hot set of random takes the cache exists for.
    decoded_cache:
        Decoded blocks (:mod:`lance_format.file.decoded`).
    """

    page_cache: bool = True
    decoded_cache: bool = True

    #: Every cache (takes, metadata-driven reads).
    CACHED: ClassVar[ReadPolicy]
    #: Scans: the decoded-block cache (admitted only while it has room) but not the page cache.
    SCAN: ClassVar[ReadPolicy]
    #: Cold reads (benchmarks): no cached data of any kind, bytes or decoded.
    COLD: ClassVar[ReadPolicy]


ReadPolicy.CACHED = ReadPolicy()
ReadPolicy.SCAN = ReadPolicy(page_cache=False)
ReadPolicy.COLD = ReadPolicy(page_cache=False, decoded_cache=False)


class ByteCache:
    """A thread-safe LRU cache bounded by the summed byte charge of its entries.

    Parameters
    ----------
    capacity:
        Bytes; 0 disables the cache (every lookup misses, nothing is stored).
    name:
        For messages and metrics.
    """

    def __init__(self, capacity: int, name: str = "cache") -> None:
        self.name = name
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self._evicted_before = 0
        self._lru = self._new(capacity)
        self._capacity_zero = capacity == 0
        #: Bumped by :meth:`clear`: state kept beside the cache (the decoded-block cache's touch
        #: counts) is about entries that are gone once it changes.
        self.generation = 0

    @staticmethod
    def _new(capacity: int) -> _CountingLRU:
        if capacity < 0:
            raise InvalidInputError(f"cache capacity must be >= 0, got {capacity}")
        # cachetools needs maxsize > 0; a zero-capacity cache refuses every put below.
        return _CountingLRU(maxsize=max(1, capacity), getsizeof=_size_of)

    #: Capacity 0: cachetools cannot hold a zero-sized LRU, so "off" is this flag.
    _capacity_zero = False

    @property
    def capacity(self) -> int:
        """Bytes the cache may hold (0 when off)."""
        return 0 if self._capacity_zero else int(self._lru.maxsize)

    @property
    def enabled(self) -> bool:
        """Whether entries can be stored at all."""
        return not self._capacity_zero

    def get(self, key: Hashable) -> Any | None:
        """The cached value (now most recently used), or ``None``."""
        with self._lock:
            entry = self._lru.get(key)
            if entry is None:
                self.misses += 1
                return None
            self.hits += 1
            return entry[0]

    def get_many(self, keys: list[Hashable]) -> list[Any | None]:
        """Several lookups under one lock acquisition."""
        out: list[Any | None] = []
        with self._lock:
            for key in keys:
                entry = self._lru.get(key)
                out.append(None if entry is None else entry[0])
            hits = sum(v is not None for v in out)
            self.hits += hits
            self.misses += len(out) - hits
        return out

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        """Store ``value`` charged ``nbytes``; least recently used entries go when over capacity.

        A value larger than the whole cache is not stored.
        """
        nbytes = max(1, int(nbytes))
        if self._capacity_zero or nbytes > self._lru.maxsize:
            return
        with self._lock:
            self._lru[key] = (value, nbytes)

    def pop(self, key: Hashable) -> None:
        """Forget one entry (absent keys are ignored)."""
        with self._lock:
            self._lru.pop(key, None)

    def invalidate(self, uri: str) -> int:
        """Forget entries of the object store rooted at ``uri`` or below it; returns how many.

        Keys of entries that belong to a store start with its URI (see :mod:`lance_format.dataset.cache`).
        """
        uri = uri.rstrip("/")
        with self._lock:
            doomed = [
                k
                for k in self._lru
                if isinstance(k, tuple)
                and k
                and isinstance(k[0], str)
                and (k[0] == uri or k[0].startswith(uri + "/"))
            ]
            for k in doomed:
                del self._lru[k]
        return len(doomed)

    @property
    def nbytes(self) -> int:
        """Bytes currently charged."""
        return int(self._lru.currsize)

    def __len__(self) -> int:
        return len(self._lru)

    def clear(self) -> None:
        """Drop every entry (counters are kept; evictions are not counted)."""
        with self._lock:
            self._evicted_before += self._lru.evictions
            self._lru = self._new(int(self._lru.maxsize))
            self.generation += 1

    def resize(self, capacity: int) -> None:
        """Change the capacity; entries that no longer fit are evicted (oldest first)."""
        with self._lock:
            old = self._lru
            self._evicted_before += old.evictions
            self._capacity_zero = capacity == 0
            self._lru = self._new(capacity)
            if self._capacity_zero:
                return
            for key, entry in list(old.items()):
                if entry[1] <= self._lru.maxsize:
                    self._lru[key] = entry
            self._evicted_before += self._lru.evictions
            self._lru.evictions = 0

    def reset_stats(self) -> None:
        """Zero the counters (tests, benchmarks)."""
        with self._lock:
            self.hits = self.misses = self._evicted_before = 0
            self._lru.evictions = 0

    def counters(self) -> CacheCounters:
        """A consistent snapshot of the counters."""
        with self._lock:
            return CacheCounters(
                hits=self.hits,
                misses=self.misses,
                evictions=self._evicted_before + self._lru.evictions,
                entries=len(self._lru),
                bytes=int(self._lru.currsize),
                capacity=self.capacity,
            )


# The process-wide caches (the default session's; lance_format.dataset.session), sized by the
# settings of lance_format.core.config.
METADATA_CACHE = ByteCache(env_setting("metadata_cache_bytes"), "metadata")
PAGE_CACHE = ByteCache(env_setting("page_cache_bytes"), "page")
DECODED_CACHE = ByteCache(env_setting("decoded_cache_bytes"), "decoded")


def configure_caches(
    metadata_bytes: int | None = None, page_bytes: int | None = None, decoded_bytes: int | None = None
) -> None:
    """Set the capacities of the process-wide caches (``None`` leaves one unchanged).

    The server calls this with its ``cache.metadataBytes`` / ``cache.pageBytes`` /
    ``cache.decodedBytes`` settings.
    """
    for cache, value in (
        (METADATA_CACHE, metadata_bytes),
        (PAGE_CACHE, page_bytes),
        (DECODED_CACHE, decoded_bytes),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{cache.name} cache size must be a byte count >= 0, got {value!r}")
        cache.resize(value)


def cache_stats() -> CacheStats:
    """Hits, misses, evictions and bytes of the metadata, page and decoded-block caches.

    Examples
    --------
    >>> from lance_format.io import cache_stats
    >>> cache_stats().metadata.capacity > 0
    True
    """
    return CacheStats(
        metadata=METADATA_CACHE.counters(), page=PAGE_CACHE.counters(), decoded=DECODED_CACHE.counters()
    )


def forget_dataset(uri: str) -> None:
    """Drop every cached entry of the dataset (or root) at ``uri`` from the caches.

    Call it when a dataset is deleted: a dataset re-created under the same name starts again at
    version 1, and its manifests could otherwise match the old cache keys. Open descriptors of its
    local files close too, so a dropped dataset's disk space comes back at once.
    """
    if "://" not in uri or uri.startswith("file://"):
        DESCRIPTORS.forget_under(os.path.abspath(uri.removeprefix("file://")))
    METADATA_CACHE.invalidate(uri)
    PAGE_CACHE.invalidate(uri)
    DECODED_CACHE.invalidate(uri)
