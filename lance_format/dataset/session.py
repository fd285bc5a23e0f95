"""``Session``: the runtime a set of datasets shares (caches, pools, I/O gate, object stores, config).

As in Lance's Rust crate (and pylance's ``lance.Session``), a session is passed to
:func:`lance_format.dataset` (``session=``); datasets opened with it share its caches and its
object-store registry. Calls without one use :meth:`Session.default`, which owns the process-wide
caches, so pylance-style code needs no session at all. The Flight server builds its session from
its settings (:meth:`Session.for_process`) and opens every dataset with it.

What a session owns and what the process shares:

* per session: the engine config (:class:`~lance_format.core.config.EngineConfig`), the metadata
  cache (manifests, footers, deletion vectors, row-id indexes, index metadata), the decoded-block
  cache, and the object-store registry (one store per root and storage options);
* per process, exposed here: the page cache, the I/O gate (requests in flight) and the decode and
  dataset thread pools. They bound the process's memory, connections and threads, which two
  sessions in one process must not each claim in full. :meth:`for_process` sizes them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from lance_format.core.concurrency import LazyPool
from lance_format.core.config import EngineConfig, env_setting, resolve_config
from lance_format.encodings.base import decode_pool
from lance_format.io.cache import DECODED_CACHE, METADATA_CACHE, PAGE_CACHE, ByteCache, CacheCounters
from lance_format.io.scheduler import MAX_PARALLEL_REQUESTS
from lance_format.io.store import ObjectStore, store_for_uri

__all__ = ["DATASET_THREADS", "Session", "dataset_pool"]

#: Worker threads of the dataset layer (scan read-ahead, parallel per-fragment takes). Separate from
#: the I/O layer's pool, whose fetches these tasks wait on. Setting ``dataset_threads``.
DATASET_THREADS = env_setting("dataset_threads")

_dataset_pool = LazyPool(DATASET_THREADS, "lance-dataset")


def dataset_pool() -> ThreadPoolExecutor:
    """The dataset layer's worker pool (never used by the I/O layer, so waiting on it is safe)."""
    return _dataset_pool()


class Session:
    """Caches, object stores and configuration shared by the datasets opened with it.

    Parameters
    ----------
    config:
        An :class:`EngineConfig` or a mapping of setting names (e.g. the server's YAML section);
        the environment (``LANCE_FORMAT_*``) overrides it.
    settings:
        Settings by name (``metadata_cache_bytes=...``, ``decoded_cache_bytes=...``): these win
        over the environment and ``config``. Unknown names raise ``InvalidInputError``.

    Examples
    --------
    >>> session = Session(metadata_cache_bytes=64 * 1024 * 1024)  # doctest: +SKIP
    >>> ds = lance_format.dataset("/data/t.lance", session=session)  # doctest: +SKIP
    """

    _default: ClassVar[Session | None] = None
    _default_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self, config: EngineConfig | Mapping[str, Any] | None = None, **settings: int | None
    ) -> None:
        resolved = resolve_config(settings, config)
        metadata = ByteCache(resolved.metadata_cache_bytes, "metadata")
        self._init(resolved, metadata, ByteCache(resolved.decoded_cache_bytes, "decoded"), registry=True)

    def _init(self, config: EngineConfig, metadata: ByteCache, decoded: ByteCache, *, registry: bool) -> None:
        self.config = config
        self.metadata_cache = metadata
        self.decoded_cache = decoded
        # The default session opens a store per dataset, as plain calls always did (credentials
        # set in the environment later still apply); explicit sessions keep one per root.
        self._registry = registry
        self._stores: dict[tuple[str, tuple[tuple[str, str], ...]], ObjectStore] = {}
        self._lock = threading.Lock()

    @classmethod
    def _shared(cls, config: EngineConfig, *, registry: bool) -> Session:
        session = cls.__new__(cls)
        session._init(config, METADATA_CACHE, DECODED_CACHE, registry=registry)
        return session

    @classmethod
    def default(cls) -> Session:
        """The process's default session: the process-wide caches, configured by the environment.

        Datasets opened without ``session=`` use it.
        """
        with cls._default_lock:
            if cls._default is None:
                cls._default = cls._shared(resolve_config(), registry=False)
            return cls._default

    @classmethod
    def for_process(
        cls, config: EngineConfig | Mapping[str, Any] | None = None, **settings: int | None
    ) -> Session:
        """Make the default session one built from ``config`` and ``settings`` (precedence as in
        :class:`Session`), resizing the process-wide caches to match; a server calls this once.
        """
        resolved = resolve_config(settings, config)
        METADATA_CACHE.resize(resolved.metadata_cache_bytes)
        PAGE_CACHE.resize(resolved.page_cache_bytes)
        DECODED_CACHE.resize(resolved.decoded_cache_bytes)
        session = cls._shared(resolved, registry=True)
        with cls._default_lock:
            cls._default = session
        return session

    def setting(self, name: str) -> int:
        """Setting ``name`` (a field of :class:`EngineConfig`) as this session resolves it: an
        explicit session's config; the default session reads the environment at each call, as
        plain library calls always did."""
        if self._registry:
            return int(getattr(self.config, name))
        return env_setting(name)

    @classmethod
    def reset_default(cls) -> None:
        """Forget the default session (the next use builds one from the environment again); the
        process-wide caches keep their entries and sizes. For tests and embedding programs."""
        with cls._default_lock:
            cls._default = None

    # -- what the process shares -------------------------------------------------------------------
    @property
    def page_cache(self) -> ByteCache:
        """Raw pages of random reads (process-wide)."""
        return PAGE_CACHE

    @property
    def io_parallelism(self) -> int:
        """Object-store requests the process keeps in flight (the I/O gate's permits)."""
        return MAX_PARALLEL_REQUESTS

    def decode_pool(self) -> ThreadPoolExecutor:
        """Threads decoding the columns of large reads (process-wide)."""
        return decode_pool()

    def dataset_pool(self) -> ThreadPoolExecutor:
        """Threads of scan read-ahead and per-fragment takes (process-wide)."""
        return dataset_pool()

    # -- the object-store registry -----------------------------------------------------------------
    def store_for(self, uri: str, storage_options: Mapping[str, str] | None = None) -> ObjectStore:
        """The object store of ``uri`` with ``storage_options`` (one per root and options, reused:
        its connections, credentials and listings are shared by every dataset under it)."""
        if not self._registry:
            return store_for_uri(uri, dict(storage_options) if storage_options else None)
        key = (uri, tuple(sorted((str(k), str(v)) for k, v in (storage_options or {}).items())))
        with self._lock:
            store = self._stores.get(key)
        if store is None:
            store = store_for_uri(uri, dict(storage_options) if storage_options else None)
            with self._lock:
                store = self._stores.setdefault(key, store)
        return store

    def cache_stats(self) -> dict[str, CacheCounters]:
        """Counters of the caches this session reads through."""
        return {
            "metadata": self.metadata_cache.counters(),
            "page": self.page_cache.counters(),
            "decoded": self.decoded_cache.counters(),
        }

    def __repr__(self) -> str:
        return (
            f"Session(metadata_cache_bytes={self.metadata_cache.capacity}, "
            f"decoded_cache_bytes={self.decoded_cache.capacity}, stores={len(self._stores)})"
        )
