"""Shared helpers for tunables read from the environment and lazily created thread pools."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from lance_format.core.errors import InvalidInputError

__all__ = ["LazyPool", "env_positive_int"]


def env_positive_int(name: str, default: int, minimum: int = 1) -> int:
    """The integer (at least ``minimum``) in environment variable ``name``; ``default`` when unset.

    Raises
    ------
    InvalidInputError
        The variable is set but is not an integer of at least ``minimum``.
    """
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise InvalidInputError(f"{name} must be an integer >= {minimum}, got {raw!r}")
    return value


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
