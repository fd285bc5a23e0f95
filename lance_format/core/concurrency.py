"""Lazily created thread pools (tunables live in :mod:`lance_format.core.config`)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["LazyPool"]


class LazyPool:
    """A process-wide :class:`ThreadPoolExecutor` created on first use (after fork-safe import)."""

    def __init__(self, workers: int, prefix: str) -> None:
        self.workers = workers
        self.prefix = prefix
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def __call__(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=self.prefix)
            return self._pool
