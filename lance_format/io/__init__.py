"""Object stores, the range planner, the I/O scheduler, retries and the process-wide caches."""

from lance_format.io.cache import CacheCounters, CacheStats, cache_stats, configure_caches, forget_dataset
from lance_format.io.reader import IOStats, io_stats
from lance_format.io.retry import RetryPolicy, retry_count
from lance_format.io.store import ObjectStore, store_for_uri

__all__ = [
    "CacheCounters",
    "CacheStats",
    "IOStats",
    "ObjectStore",
    "RetryPolicy",
    "cache_stats",
    "configure_caches",
    "forget_dataset",
    "io_stats",
    "retry_count",
    "store_for_uri",
]
