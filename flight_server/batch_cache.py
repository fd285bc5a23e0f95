"""Decoded Arrow batches of finished scans, so a repeated scan streams from memory.

A scan endpoint of the server reads one pinned dataset version: its batches never change, so a
second ``do_get`` of the same ticket can send the batches the first one decoded, with no I/O and
no decoding (C++ streams them; Python is not involved per batch). Keys name an immutable snapshot
(dataset URI, version, manifest timestamp, and every request field that shapes the batches), so
nothing is ever invalidated: a dropped and re-created dataset has a new manifest timestamp.

What is cached: scans of one fragment (or one row range of it), with or without a filter (the
filter is part of the key), never scans with ``limit``/``offset`` across fragments (they are cheap
and their results are prefixes of others). An entry is stored only when its scan ran to the end
and its batches fit in the cache; recording stops as soon as they cannot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from flight_server.requests import ScanRequest
from flight_server.settings import DEFAULT_BATCH_CACHE_BYTES
from lance_format.io.cache import ByteCache, CacheCounters

__all__ = ["DEFAULT_BATCH_CACHE_BYTES", "BatchCache", "ScanKey", "scan_key"]


@dataclass(frozen=True)
class ScanKey:
    """What names one endpoint's batches: the snapshot and the ticket's shape."""

    uri: str
    version: int
    timestamp_ns: int
    request: ScanRequest


def scan_key(uri: str, version: int, timestamp_ns: int, req: ScanRequest) -> ScanKey | None:
    """The cache key of a scan ticket, or ``None`` when its result is not worth caching.

    Parameters
    ----------
    uri:
        The dataset's URI (the catalog's, so two roots never share keys).
    version, timestamp_ns:
        The version the ticket resolved to and its manifest's timestamp.
    req:
        The ticket. Only one-fragment scans without ``limit``/``offset`` are cached.
    """
    if len(req.fragment_ids) != 1 or req.limit is not None or req.offset is not None:
        return None
    # The version number stands for the tag that named it; the planner field is not read by scans.
    shape = dataclasses.replace(req, version=version, tag=None, max_rows_per_endpoint=0)
    return ScanKey(uri, version, timestamp_ns, shape)


#: Bytes charged per cached result beyond its batches: the Table, its schema, the key and the
#: LRU's entry. Measured by resident size over 20,000 cached tables of a few rows: ~1-2 KiB each,
#: charged their 39 bytes of data before, so many small results (empty filters, tiny fragments;
#: every distinct ticket is a key) held ~50x the cache's budget.
ENTRY_OVERHEAD_BYTES = 1024
#: Bytes charged per column of each cached batch: its Array objects and C++ array data (measured
#: ~350-580 bytes per column chunk of 1 and 10 columns, 1 and 4 batches).
CHUNK_OVERHEAD_BYTES = 512


def _batch_bytes(batch: pa.RecordBatch) -> int:
    # nbytes, not the total buffer size: batches sliced from one decoded chunk share its buffers.
    return int(batch.nbytes) + CHUNK_OVERHEAD_BYTES * int(batch.num_columns)


class BatchCache:
    """A byte-bounded LRU of decoded scan results (:class:`pyarrow.Table` per :class:`ScanKey`).

    Parameters
    ----------
    capacity:
        Bytes of decoded Arrow data; 0 turns the cache off.
    """

    def __init__(self, capacity: int = DEFAULT_BATCH_CACHE_BYTES) -> None:
        self._cache = ByteCache(capacity, "batch")

    @property
    def enabled(self) -> bool:
        """Whether anything can be stored."""
        return self._cache.enabled

    def get(self, key: Hashable) -> pa.Table | None:
        """The cached batches of ``key`` as one table (chunks = the batches), or ``None``."""
        if not self._cache.enabled:
            return None
        found = self._cache.get(key)
        return found if isinstance(found, pa.Table) else None

    def recording(
        self, key: Hashable, schema: pa.Schema, batches: Iterator[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        """Yield ``batches``; when they all went through and fit, store them under ``key``.

        A consumer that stops early (a cancelled stream) stores nothing: a partial result must
        never be served as the whole.
        """
        if not self._cache.enabled:
            yield from batches
            return
        limit = self._cache.capacity
        kept: list[pa.RecordBatch] | None = []
        nbytes = ENTRY_OVERHEAD_BYTES
        for batch in batches:
            if kept is not None:
                nbytes += _batch_bytes(batch)
                if nbytes > limit:
                    kept = None  # too big to cache: stop holding batches alive
                else:
                    kept.append(batch)
            yield batch
        if kept is not None:
            table = pa.Table.from_batches(kept, schema)
            self._cache.put(key, table, nbytes)

    def counters(self) -> CacheCounters:
        """Hits, misses, evictions, entries and bytes."""
        return self._cache.counters()

    def clear(self) -> None:
        """Drop every entry (counters are kept)."""
        self._cache.clear()
