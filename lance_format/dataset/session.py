"""``Session``: the runtime a set of datasets shares (caches, pools, I/O gate, object stores, config).

As in Lance's Rust crate (and pylance's ``lance.Session``), a session is passed to
:func:`lance_format.dataset` / :func:`lance_format.write_dataset` (``session=``); datasets opened
with it read and write through what it owns:

* the engine config (:class:`~lance_format.core.config.EngineConfig`, one ``LANCE_FORMAT_*`` table);
* the metadata cache (manifests, footers, deletion vectors, row-id indexes, index metadata), the
  decoded-block cache and the page cache of raw bytes;
* the I/O scheduler (the gate bounding object-store requests in flight, and its workers), the
  threads decoding columns and the dataset layer's threads (scan read-ahead, per-fragment takes),
  bundled below the dataset layer as an :class:`~lance_format.io.runtime.IORuntime`;
* the object-store registry (one store per root and storage options, each bound to the session's
  I/O runtime).

Two sessions share none of these, so one can be sized differently from another in the same
process. Calls without a session use :meth:`Session.default`, which owns the process-wide objects
(``lance_format.io.cache.PAGE_CACHE`` and the others that module-level helpers such as
``cache_stats()`` report): pylance-style code needs no session at all. A server builds its session
with :meth:`Session.for_process`, which sizes those process-wide objects from its config, and passes
it explicitly to every dataset it opens.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from lance_format.core.concurrency import LazyPool
from lance_format.core.config import EngineConfig, env_setting, resolve_config
from lance_format.core.errors import SessionClosedError
from lance_format.io.cache import DECODED_CACHE, METADATA_CACHE, ByteCache, CacheCounters, forget_dataset
from lance_format.io.descriptors import DESCRIPTORS
from lance_format.io.runtime import IORuntime, default_runtime
from lance_format.io.store import ObjectStore, store_for_uri

__all__ = ["DATASET_THREADS", "STORE_REGISTRY_ENTRIES", "Session"]

#: Worker threads of the dataset layer (scan read-ahead, parallel per-fragment takes). Separate from
#: the I/O layer's pool, whose fetches these tasks wait on. Setting ``dataset_threads``.
DATASET_THREADS = env_setting("dataset_threads")

#: Object stores a session's registry keeps (least recently used dropped first). Stores are keyed
#: by URI and a server opens one per dataset it stages into or discards from, so names a client
#: chooses would otherwise grow the registry without end; a store dropped here is simply opened
#: again (its reads stay cached: caches key on the store's URI, not the object).
STORE_REGISTRY_ENTRIES = 256

# The default session's dataset-layer pool (never used by the I/O layer, so waiting on it is safe).
_dataset_pool = LazyPool(DATASET_THREADS, "lance-dataset")


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
        self._init(
            resolved,
            ByteCache(resolved.metadata_cache_bytes, "metadata"),
            ByteCache(resolved.decoded_cache_bytes, "decoded"),
            IORuntime.build(resolved),
            LazyPool(resolved.dataset_threads, "lance-dataset"),
            registry=True,
        )

    def _init(
        self,
        config: EngineConfig,
        metadata: ByteCache,
        decoded: ByteCache,
        runtime: IORuntime,
        datasets: LazyPool,
        *,
        registry: bool,
    ) -> None:
        self.config = config
        self.metadata_cache = metadata
        self.decoded_cache = decoded
        #: Scheduler, page cache and decode threads: what the stores this session opens carry.
        self.runtime = runtime
        self._datasets = datasets
        # The default session opens a store per dataset, as plain calls always did (credentials
        # set in the environment later still apply); explicit sessions keep one per root.
        self._registry = registry
        self._stores: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], ObjectStore] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def _shared(cls, config: EngineConfig, *, registry: bool) -> Session:
        session = cls.__new__(cls)
        shared = (METADATA_CACHE, DECODED_CACHE, default_runtime(), _dataset_pool)
        session._init(config, *shared, registry=registry)
        return session

    @classmethod
    def default(cls) -> Session:
        """The process's default session: the process-wide caches, pools and I/O gate, configured
        by the environment.

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
        :class:`Session`), resizing the process-wide caches, I/O gate and thread pools to match;
        a server calls this once and passes the result to what it opens.
        """
        resolved = resolve_config(settings, config)
        METADATA_CACHE.resize(resolved.metadata_cache_bytes)
        DECODED_CACHE.resize(resolved.decoded_cache_bytes)
        default_runtime().resize(resolved)  # its config is what readers and writers of its stores read
        _dataset_pool.resize(resolved.dataset_threads)
        DESCRIPTORS.max_open = resolved.max_open_files  # local files open in the whole process
        session = cls._shared(resolved, registry=True)
        with cls._default_lock:
            cls._default = session
        return session

    def setting(self, name: str) -> int:
        """Setting ``name`` (a field of :class:`EngineConfig`) as this session resolved it when it
        was made (the default session: from the environment at its first use)."""
        return int(getattr(self.config, name))

    @classmethod
    def reset_default(cls) -> None:
        """Forget the default session (the next use builds one from the environment again); the
        process-wide caches keep their entries and sizes. For tests and embedding programs."""
        with cls._default_lock:
            cls._default = None

    # -- what the session owns ---------------------------------------------------------------------
    @property
    def page_cache(self) -> ByteCache:
        """Raw pages of random reads."""
        return self.runtime.page_cache

    @property
    def io_parallelism(self) -> int:
        """Object-store requests this session keeps in flight (its I/O gate's permits)."""
        return self.runtime.scheduler.parallelism

    def decode_pool(self) -> ThreadPoolExecutor:
        """Threads decoding the columns of large reads."""
        return self.runtime.decode_pool()

    def dataset_pool(self) -> ThreadPoolExecutor:
        """Threads of scan read-ahead and per-fragment takes (refused once closed)."""
        return self._datasets()

    def start_threads(self) -> None:
        """Start all of this session's threads now, from the calling thread.

        Pools otherwise start threads on first use, from the thread that submits, and a thread
        inherits that thread's scheduling attributes (on Linux its nice value). A server that runs
        bulk work on lower-priority threads calls this first, so no engine thread keeps a bulk
        thread's priority for the small calls it serves later.
        """
        self._check_open()
        self.runtime.start_threads()
        self._datasets.start()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called on this (explicit) session."""
        return self._datasets.closed

    def close(self) -> None:
        """Stop this session's threads (the I/O scheduler's workers, the decode, page-decode,
        encode, string-split and dataset pools), waiting for the tasks they run, and refuse later
        work: opening a dataset, reading or writing through it raises
        :class:`~lance_format.core.errors.SessionClosedError`. Idempotent; its caches are emptied.

        The default session (and the one :meth:`for_process` made) owns the process's objects:
        its threads are stopped too (this waits for them) but come back when used again, as plain
        library calls expect; its caches keep their entries.
        """
        if self._datasets is _dataset_pool:
            _dataset_pool.shutdown(wait=True)
            self.runtime.stop_threads()
            return
        self._datasets.close()
        self.runtime.close()
        with self._lock:
            self._stores.clear()
        for cache in (self.metadata_cache, self.page_cache, self.decoded_cache):
            cache.clear()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise SessionClosedError("this Session was closed; open datasets with a new one")

    # -- the object-store registry -----------------------------------------------------------------
    def store_for(self, uri: str, storage_options: Mapping[str, str] | None = None) -> ObjectStore:
        """The object store of ``uri`` with ``storage_options`` (one per root and options, reused:
        its connections, credentials and listings are shared by every dataset under it)."""
        self._check_open()
        options = dict(storage_options) if storage_options else None
        if not self._registry:
            return store_for_uri(uri, options, runtime=self.runtime)
        key = (uri, tuple(sorted((str(k), str(v)) for k, v in (storage_options or {}).items())))
        with self._lock:
            store = self._stores.get(key)
            if store is not None:
                self._stores.move_to_end(key)
        if store is None:
            store = store_for_uri(uri, options, runtime=self.runtime)
            with self._lock:
                store = self._stores.setdefault(key, store)
                while len(self._stores) > STORE_REGISTRY_ENTRIES:
                    self._stores.popitem(last=False)
        return store

    @property
    def store_count(self) -> int:
        """Object stores held by this session's registry (at most :data:`STORE_REGISTRY_ENTRIES`)."""
        with self._lock:
            return len(self._stores)

    def forget(self, uri: str) -> None:
        """Drop every cached entry of the dataset (or root) at ``uri`` from this session's caches,
        and its open local files (:func:`lance_format.io.forget_dataset`): a dataset deleted and
        created again under the same name starts at version 1, whose manifest must not be an old one.
        """
        forget_dataset(uri)
        for cache in (self.metadata_cache, self.page_cache, self.decoded_cache):
            cache.invalidate(uri)

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
            f"decoded_cache_bytes={self.decoded_cache.capacity}, "
            f"page_cache_bytes={self.page_cache.capacity}, io_parallelism={self.io_parallelism}, "
            f"stores={len(self._stores)})"
        )
