"""``IORuntime``: what the layers below the dataset run one session's reads and writes on.

A :class:`~lance_format.dataset.session.Session` owns one: the I/O scheduler (the gate bounding
requests in flight and the workers issuing them), the page cache of raw bytes, the pools of
threads decoding columns (and, one level down, the pages of one column) and encoding columns, and
the engine config readers and writers take their settings from.
A store opened by the session carries it (:attr:`~lance_format.io.store.ObjectStore.runtime`), so
every reader and writer of the store's files works through that session's resources without a
global lookup. Stores opened without a session use
:func:`default_runtime`, the process-wide objects that the default session owns.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from lance_format.core.concurrency import LazyPool
from lance_format.core.config import EngineConfig, resolve_config
from lance_format.io.cache import PAGE_CACHE, ByteCache
from lance_format.io.scheduler import IOScheduler, default_scheduler

__all__ = ["ClientRegistry", "IORuntime", "default_runtime"]


class ClientRegistry:
    """Object-store clients of one runtime (each owns a connection pool), one per key (settings
    and bucket): stores of one session share them, two sessions do not."""

    def __init__(self) -> None:
        self._clients: dict[Hashable, Any] = {}
        self._lock = threading.Lock()
        _REGISTRIES.add(self)

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The client of ``key``, made by ``make`` on first use."""
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = make()
            return client

    def __len__(self) -> int:
        return len(self._clients)

    def clear(self) -> None:
        """Forget every client (their connections close as they go)."""
        with self._lock:
            self._clients.clear()

    def _after_fork(self) -> None:
        # A forked child must not share the parent's pooled sockets: it builds its own clients.
        self._lock = threading.Lock()
        self._clients = {}


_REGISTRIES: weakref.WeakSet[ClientRegistry] = weakref.WeakSet()


def _reset_after_fork() -> None:
    for registry in list(_REGISTRIES):
        registry._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


@dataclass
class IORuntime:
    """The I/O scheduler, page cache, thread pools and config of one session.

    Parameters
    ----------
    scheduler:
        Gate and workers of the session's object-store requests.
    page_cache:
        Raw pages of the session's random reads.
    decode_pool:
        Threads decoding the columns of large reads (setting ``decode_threads``).
    page_pool:
        Threads decoding the pages of one column side by side (``decode_threads`` too). Field
        decoders running on ``decode_pool`` wait on it and it never waits on either pool, so the
        two levels cannot deadlock.
    encode_pool:
        Threads encoding the pages of a file's columns (setting ``encode_threads``).
    split_pool:
        Threads coding the row ranges of one large string page side by side (``encode_threads``
        too; :mod:`lance_format.encodings.v21.encode._split`). Page encodes on ``encode_pool``
        wait on it and its tasks never wait, so the two levels cannot deadlock.
    config:
        The session's settings; file writers read theirs here (page size, buffering, threads).
    clients:
        The object-store clients (S3 connection pools) the session's stores share.
    """

    scheduler: IOScheduler
    page_cache: ByteCache
    decode_pool: LazyPool
    page_pool: LazyPool
    encode_pool: LazyPool
    split_pool: LazyPool
    config: EngineConfig
    clients: ClientRegistry = field(default_factory=ClientRegistry)

    @classmethod
    def build(cls, config: EngineConfig, page_cache: ByteCache | None = None) -> IORuntime:
        """A runtime of its own sized by ``config`` (``page_cache``: one to share instead)."""
        return cls(
            IOScheduler(config.io_parallelism),
            ByteCache(config.page_cache_bytes, "page") if page_cache is None else page_cache,
            LazyPool(config.decode_threads, "lance-decode"),
            LazyPool(config.decode_threads, "lance-decode-page"),
            LazyPool(config.encode_threads, "lance-encode"),
            LazyPool(config.encode_threads, "lance-encode-split"),
            config,
        )

    @property
    def pools(self) -> tuple[LazyPool, ...]:
        """Every thread pool of this runtime."""
        return (self.decode_pool, self.page_pool, self.encode_pool, self.split_pool)

    def resize(self, config: EngineConfig) -> None:
        """Size the scheduler, page cache and pools by ``config`` and take its settings."""
        self.page_cache.resize(config.page_cache_bytes)
        self.scheduler.resize(config.io_parallelism)
        self.decode_pool.resize(config.decode_threads)
        self.page_pool.resize(config.decode_threads)
        self.encode_pool.resize(config.encode_threads)
        self.split_pool.resize(config.encode_threads)
        self.config = config

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self.scheduler.closed

    def close(self) -> None:
        """Stop every thread of this runtime (the scheduler's workers, the decode, page, encode and
        split pools), waiting for their tasks; later work raises
        :class:`~lance_format.core.errors.SessionClosedError`. Idempotent."""
        self.scheduler.close()
        for pool in self.pools:
            pool.close()
        self.clients.clear()

    def start_threads(self) -> None:
        """Start every thread of this runtime now, from the calling thread (see
        :meth:`~lance_format.core.concurrency.LazyPool.start`)."""
        self.scheduler.start_threads()
        for pool in self.pools:
            pool.start()

    def stop_threads(self) -> None:
        """Stop every thread of this runtime, waiting for their tasks, but keep it usable: the
        next use starts threads again (the process-wide runtime, when a server stops)."""
        self.scheduler.stop_threads()
        for pool in self.pools:
            pool.shutdown(wait=True)


def _process_runtime() -> IORuntime:
    config = resolve_config()  # the environment, as the process-wide caches are sized
    return IORuntime(
        default_scheduler(),
        PAGE_CACHE,
        LazyPool(config.decode_threads, "lance-decode"),
        LazyPool(config.decode_threads, "lance-decode-page"),
        LazyPool(config.encode_threads, "lance-encode"),
        LazyPool(config.encode_threads, "lance-encode-split"),
        config,
    )


_DEFAULT = _process_runtime()


def default_runtime() -> IORuntime:
    """The process-wide runtime (the default session's)."""
    return _DEFAULT
