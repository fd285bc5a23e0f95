"""Object stores: the only place the engine touches bytes at rest.

An :class:`ObjectStore` addresses objects by ``/``-separated keys relative to its root. Backends:
:class:`LocalStore` (a directory, positional reads on cached descriptors) and :class:`MemoryStore`
(``memory://``, process-wide, for tests), :class:`~lance_format.io.s3.S3Store` (``s3://`` through
obstore, in :mod:`lance_format.io.s3`) and :class:`~lance_format.io.fsspec_store.FsspecStore` (any other
scheme fsspec knows, e.g. ``gs://``, ``az://``, ``hf://``, through its installed implementation, in
:mod:`lance_format.io.fsspec_store`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator, Sequence
from typing import ClassVar
from urllib.parse import urlparse

from lance_format.core.buffers import POOL_MIN_BYTES, empty_bytes
from lance_format.core.errors import NotFoundError, NotSupportedError, StorageError
from lance_format.io.descriptors import DESCRIPTORS, DescriptorCache
from lance_format.io.planner import LOCAL_PLAN, PlanLimits, object_store_limits
from lance_format.io.runtime import IORuntime, default_runtime

__all__ = ["LevelListingStore", "LocalStore", "MemoryStore", "ObjectStore", "split_uri", "store_for_uri"]


class ObjectStore(ABC):
    """Typed storage interface: keyed objects, ranged reads, atomic writes."""

    #: Requests of one read in flight at once. Local: 8 threads overlap page-cache copies without
    #: thrashing a small box (Lance's local default). Object stores raise it (latency bound).
    io_parallelism: int = 8
    #: Whether reads pay network latency (object stores): then even small reads go parallel and the
    #: page cache is worth its copy.
    remote: bool = False
    #: The session resources (scheduler, page cache, decode threads) this store's requests use;
    #: ``None``: the process's. Set when a session opens the store (:func:`store_for_uri`).
    _runtime: IORuntime | None = None

    @property
    def runtime(self) -> IORuntime:
        """The :class:`~lance_format.io.runtime.IORuntime` this store's reads and requests use."""
        return self._runtime or default_runtime()

    @property
    def plan_limits(self) -> PlanLimits:
        """How to coalesce reads against this store: local disk's limits, or for object stores the
        merge gap of their session's ``object_store_latency_us`` with :attr:`requests_in_flight`
        (:func:`~lance_format.io.planner.object_store_limits`)."""
        if not self.remote:
            return LOCAL_PLAN
        return object_store_limits(self.runtime.config.object_store_latency_us, self.requests_in_flight)

    @property
    def requests_in_flight(self) -> int:
        """Requests of one read this store keeps in flight at most: its own bound and its
        session's (``io_parallelism``), whichever is lower."""
        return min(self.io_parallelism, self.runtime.scheduler.parallelism)

    @property
    @abstractmethod
    def uri(self) -> str:
        """The URI of the store's root."""

    @abstractmethod
    def size(self, key: str) -> int:
        """Size of the object in bytes; :class:`NotFoundError` when absent."""

    @abstractmethod
    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object (shorter only if the object is shorter)."""

    def read_range_view(self, key: str, start: int, end: int) -> memoryview:
        """:meth:`read_range` as a read-only buffer; stores whose client hands back its own
        response buffer override it to skip the copy into ``bytes`` (scans move megabytes)."""
        return memoryview(self.read_range(key, start, end))

    def read_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Several ``(start, end)`` ranges of one object, in order."""
        return [self.read_range(key, s, e) for s, e in ranges]

    def read_ranges_view(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """:meth:`read_ranges` as read-only buffers; stores override it to read large ranges into
        pooled buffers (:mod:`lance_format.core.buffers`) rather than fresh ``bytes``."""
        return [memoryview(d) for d in self.read_ranges(key, ranges)]

    def read_spans_together(self, key: str, spans: Sequence[tuple[int, int]]) -> list[memoryview] | None:
        """Disjoint ``(start, end)`` spans of one object, fetched by the client concurrently in one
        call (one request each, none merged), in order; ``None`` when this store has no such call
        (the caller then issues them on its own threads)."""
        return None

    def read_span_waves(
        self, key: str, waves: Sequence[Sequence[tuple[int, int]]], in_flight: int
    ) -> list[list[memoryview] | None] | None:
        """Waves of disjoint ``(start, end)`` spans of one object, each wave fetched as
        :meth:`read_spans_together` fetches it, at most ``in_flight`` waves at once, all driven
        from the calling thread (no hand-offs to other Python threads); per wave its buffers in
        order, or ``None`` when one of its spans lies past the end of the object. ``None`` when
        this store cannot (the caller then issues the waves on its own threads)."""
        return None

    def read_range_into(self, key: str, start: int, out: memoryview) -> int:
        """Fill ``out`` with the bytes at ``start``; returns how many were read (fewer only at
        the end of the object). Stores override it to read straight into ``out`` (no copy)."""
        data = self.read_range(key, start, start + len(out))
        out[: len(data)] = data
        return len(data)

    @abstractmethod
    def read_all(self, key: str) -> bytes:
        """The whole object."""

    def read_tail(self, key: str, nbytes: int) -> tuple[int, bytes]:
        """``(object size, last nbytes bytes)`` in one request where the backend allows it.

        Object stores answer a suffix-range GET with the total size, so no HEAD is needed.
        """
        size = self.size(key)
        return size, self.read_range(key, max(0, size - nbytes), size)

    @abstractmethod
    def write(self, key: str, data: bytes) -> None:
        """Create or replace the object atomically (readers see old or new bytes, never a mix)."""

    def write_parts(self, key: str, parts: Sequence[bytes | memoryview]) -> None:
        """:meth:`write` of the parts' bytes one after another (a store that can send them
        without joining them first, as the local one does, saves a copy of the whole object)."""
        self.write(key, b"".join(parts))

    @abstractmethod
    def put_if_not_exists(self, key: str, data: bytes) -> bool:
        """Create the object only if absent; ``False`` (nothing written) if it already exists."""

    def exists(self, key: str) -> bool:
        """Whether the object exists.

        By default a :meth:`size` request: unlike "any error means absent", an outage surfaces.
        """
        try:
            self.size(key)
        except NotFoundError:
            return False
        return True

    def modified(self, key: str) -> float | None:
        """When ``key`` was last written (seconds since the epoch); ``None`` when unknown or absent.

        Cleanup removes a file no version references only when it is old enough to be no
        in-flight write's; stores that cannot tell keep such files.
        """
        return None

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """``(key, size)`` of objects directly under the folder ``prefix`` (no recursion)."""

    def list_tagged(self, prefix: str = "") -> Iterator[tuple[str, int, Hashable]]:
        """``(key, size, tag)`` of objects directly under the folder ``prefix``.

        ``tag`` tells two objects written under one key apart (an ETag, or inode and mtime):
        caches of objects whose names are reused, such as a version's manifest after a dataset was
        dropped and written again at the same URI, key on it. ``None`` when the store cannot tell;
        the default comes from :meth:`list` at no extra cost.
        """
        for key, size in self.list(prefix):
            yield key, size, None

    @abstractmethod
    def list_dirs(self, prefix: str = "") -> Iterator[str]:
        """Names (not keys) of the folders directly under the folder ``prefix``: on object stores,
        the common prefixes of the keys below it."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object; absent objects are ignored."""

    def walk(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """``(key, size)`` of every object under the folder ``prefix``, recursively (folders
        before their subfolders, each folder's objects in listing order)."""
        folders = [prefix.strip("/")]
        while folders:
            folder = folders.pop()
            yield from self.list(folder)
            under = f"{folder}/" if folder else ""
            folders += [f"{under}{name}" for name in sorted(self.list_dirs(folder), reverse=True)]

    def delete_all(self) -> int:
        """Remove every object under this store's root (recursively); how many there were."""
        keys = [key for key, _ in self.walk()]
        for key in keys:
            self.delete(key)
        return len(keys)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release cached handles."""


class LevelListingStore(ObjectStore):
    """A store whose one listing request answers both :meth:`list` and :meth:`list_dirs` (object
    stores: a delimited listing returns objects and common prefixes together)."""

    @abstractmethod
    def _list_level(self, prefix: str) -> tuple[str, list[tuple[str, int, Hashable]], list[str]]:
        """``(base, objects, folders)`` one level under the folder ``prefix``: the normalized
        prefix, ``(name, size, tag)`` of its objects and the names of its sub-folders."""

    def list(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        for key, size, _ in self.list_tagged(prefix):
            yield key, size

    def list_tagged(self, prefix: str = "") -> Iterator[tuple[str, int, Hashable]]:
        base, objects, _ = self._list_level(prefix)
        for name, size, tag in objects:
            yield (f"{base}/{name}" if base else name), size, tag

    def list_dirs(self, prefix: str = "") -> Iterator[str]:
        yield from self._list_level(prefix)[2]


#: Key -> path entries a local store remembers (a bound for processes reading endless files).
_MAX_REMEMBERED_PATHS = 4096


def _join(root: str, key: str) -> str:
    return os.path.join(root, *key.split("/")) if key else root


class LocalStore(ObjectStore):
    """A directory on the local file system.

    Reads use ``os.pread`` on descriptors cached process-wide
    (:mod:`lance_format.io.descriptors`), so a random read costs one syscall and no open. Writes go
    to a temporary file and are renamed into place; :meth:`put_if_not_exists` uses ``link``, which
    fails atomically when the target exists.
    """

    #: Where read descriptors are cached: one bound for the whole process (tests give a store
    #: class a small cache of its own).
    descriptors: ClassVar[DescriptorCache] = DESCRIPTORS

    def __init__(self, root: str) -> None:
        self._root = os.path.abspath(root)
        # Paths of keys already read: a take reads the same few files again and again, and
        # os.path.join of the split key cost more than the pread of a small range.
        self._paths: dict[str, str] = {}

    @property
    def uri(self) -> str:
        return self._root

    def _path(self, key: str) -> str:
        path = self._paths.get(key)
        if path is None:
            path = _join(self._root, key)
            if len(self._paths) >= _MAX_REMEMBERED_PATHS:
                self._paths.clear()
            self._paths[key] = path  # one dict store: thread-safe
        return path

    def _forget(self, key: str) -> None:
        self.descriptors.forget(self._path(key))

    def open_descriptors(self) -> int:
        """Descriptors cached for files under this store's root."""
        return self.descriptors.count_under(self._root)

    def size(self, key: str) -> int:
        held = self.descriptors.acquire(self._path(key))
        try:
            return os.fstat(held.fd).st_size
        except OSError as e:
            raise StorageError(f"{self._path(key)}: {e}") from e
        finally:
            self.descriptors.release(held)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        held = self.descriptors.acquire(self._path(key))
        try:
            return _pread_full(held.fd, start, end)
        except OSError as e:
            raise StorageError(f"{self._path(key)}: read failed: {e.strerror}") from e
        finally:
            self.descriptors.release(held)

    def read_range_view(self, key: str, start: int, end: int) -> memoryview:
        return self.read_ranges_view(key, [(start, end)])[0]

    def read_ranges_view(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        # Large ranges (scans) are read straight into pooled buffers: a fresh ``bytes`` of a
        # megabyte faults in every one of its pages on each read (see core.buffers).
        if all(end - start < POOL_MIN_BYTES for start, end in ranges):
            return [memoryview(d) for d in self.read_ranges(key, ranges)]
        held = self.descriptors.acquire(self._path(key))
        try:
            out = []
            for start, end in ranges:
                if end - start < POOL_MIN_BYTES:
                    out.append(memoryview(_pread_full(held.fd, start, end) if end > start else b""))
                    continue
                buf = empty_bytes(end - start)
                got = _preadv_full(held.fd, start, buf.data)
                out.append(buf.data[:got].toreadonly())
            return out
        except OSError as e:
            raise StorageError(f"{self._path(key)}: read failed: {e.strerror}") from e
        finally:
            self.descriptors.release(held)

    def read_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        # One descriptor lookup for the batch: takes issue hundreds of small preads per call.
        held = self.descriptors.acquire(self._path(key))
        try:
            fd = held.fd
            out = [os.pread(fd, end - start, start) if end > start else b"" for start, end in ranges]
            for i, (start, end) in enumerate(ranges):
                if len(out[i]) < end - start:  # rare short read: loop until EOF or done
                    out[i] = _pread_full(fd, start, end)
        except OSError as e:
            raise StorageError(f"{self._path(key)}: read failed: {e.strerror}") from e
        finally:
            self.descriptors.release(held)
        return out

    def read_range_into(self, key: str, start: int, out: memoryview) -> int:
        held = self.descriptors.acquire(self._path(key))
        try:
            return _preadv_full(held.fd, start, out)
        except OSError as e:
            raise StorageError(f"{self._path(key)}: read failed: {e.strerror}") from e
        finally:
            self.descriptors.release(held)

    def read_all(self, key: str) -> bytes:
        return self.read_range(key, 0, self.size(key))

    def write(self, key: str, data: bytes) -> None:
        self.write_parts(key, (data,))

    def write_parts(self, key: str, parts: Sequence[bytes | memoryview]) -> None:
        path = self._path(key)
        folder = os.path.dirname(path)
        # 128 random bits as uuid4 has, without building a UUID object (7x cheaper: small files).
        tmp = os.path.join(folder, f".tmp-{os.urandom(16).hex()}")
        try:
            fd = os.open(tmp, _NEW_FILE, 0o666)
        except FileNotFoundError:
            # The folder is missing: create it only then (a write into an existing folder, the
            # usual case, costs no extra system calls).
            os.makedirs(folder, exist_ok=True)
            fd = os.open(tmp, _NEW_FILE, 0o666)
        try:
            _write_all(fd, [p for p in parts if len(p)])
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)
        os.replace(tmp, path)
        self._forget(key)

    def put_if_not_exists(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = os.path.join(os.path.dirname(path), f".tmp-{uuid.uuid4().hex}")
        with open(tmp, "wb") as f:
            f.write(data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        return True

    def exists(self, key: str) -> bool:
        return os.path.isfile(self._path(key))

    def modified(self, key: str) -> float | None:
        try:
            return os.stat(self._path(key)).st_mtime
        except OSError:
            return None

    def list(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        for key, size, _ in self.list_tagged(prefix):
            yield key, size

    def list_tagged(self, prefix: str = "") -> Iterator[tuple[str, int, Hashable]]:
        folder = self._path(prefix.rstrip("/"))
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return
        base = prefix.rstrip("/")
        for entry in entries:
            if entry.is_file():
                key = f"{base}/{entry.name}" if base else entry.name
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    # Renamed or deleted since the directory was read (another writer's temporary
                    # file, another cleanup): not there, so not listed.
                    continue
                # The inode tells a file replaced under its name apart even within one mtime tick.
                yield key, st.st_size, (st.st_ino, st.st_mtime_ns)

    def list_dirs(self, prefix: str = "") -> Iterator[str]:
        try:
            entries = list(os.scandir(self._path(prefix.rstrip("/"))))
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            if entry.is_dir():
                yield entry.name

    def delete(self, key: str) -> None:
        self._forget(key)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(key))

    def delete_all(self) -> int:
        count = super().delete_all()
        # The folders go too, the root's included, as a recursive delete on an object store
        # leaves nothing behind (empty folders there do not exist).
        shutil.rmtree(self._root, ignore_errors=True)
        return count

    def close(self) -> None:
        self.descriptors.forget_under(self._root)


#: Flags of a temporary file a write creates (exclusive: never another writer's file).
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
#: Most buffers one ``writev`` takes (IOV_MAX is 1024 on Linux and macOS).
_IOV_MAX = 1024


def _write_all(fd: int, parts: list[bytes | memoryview]) -> None:
    """Write ``parts`` back to back with as few system calls as they allow (``writev``; a short
    write continues where it stopped)."""
    views = [memoryview(p).cast("B") for p in parts]
    writev = getattr(os, "writev", None)
    while views:
        batch = views[:_IOV_MAX]
        done = writev(fd, batch) if writev is not None else os.write(fd, batch[0])
        if done <= 0:
            raise OSError(f"write made no progress ({done})")
        # Drop the buffers written whole, and the written head of a buffer written in part.
        i = 0
        while i < len(batch) and done >= len(batch[i]):
            done -= len(batch[i])
            i += 1
        views = views[i:]
        if done:
            views[0] = views[0][done:]


def _preadv_full(fd: int, start: int, out: memoryview) -> int:
    """Fill ``out`` from ``start``; the bytes read (fewer only at end of file)."""
    done = 0
    while done < len(out):
        got = os.preadv(fd, [out[done:]], start + done)
        if got <= 0:
            break
        done += got
    return done


def _pread_full(fd: int, start: int, end: int) -> bytes:
    """``end - start`` bytes at ``start``, fewer only at end of file (pread may return short)."""
    data = os.pread(fd, end - start, start)
    while len(data) < end - start:
        more = os.pread(fd, end - start - len(data), start + len(data))
        if not more:
            break
        data += more
    return data


class MemoryStore(ObjectStore):
    """Objects in process memory, shared by every store opened on the same ``memory://`` root."""

    _buckets: ClassVar[dict[str, dict[str, bytes]]] = {}
    _times: ClassVar[dict[str, dict[str, float]]] = {}
    _global_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, root: str) -> None:
        self._root = root.rstrip("/")
        with self._global_lock:
            self._objects = self._buckets.setdefault(self._root, {})
            self._written = self._times.setdefault(self._root, {})

    @property
    def uri(self) -> str:
        return f"memory://{self._root}"

    def _get(self, key: str) -> bytes:
        try:
            return self._objects[key]
        except KeyError:
            raise NotFoundError(f"{self.uri}/{key}: no such object") from None

    def size(self, key: str) -> int:
        return len(self._get(key))

    def read_range(self, key: str, start: int, end: int) -> bytes:
        return self._get(key)[start:end]

    def read_all(self, key: str) -> bytes:
        return self._get(key)

    def write(self, key: str, data: bytes) -> None:
        self._objects[key] = bytes(data)
        self._written[key] = time.time()

    def put_if_not_exists(self, key: str, data: bytes) -> bool:
        with self._global_lock:
            if key in self._objects:
                return False
            self._objects[key] = bytes(data)
            self._written[key] = time.time()
            return True

    def exists(self, key: str) -> bool:
        return key in self._objects

    def modified(self, key: str) -> float | None:
        return self._written.get(key) if key in self._objects else None

    def list(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        for key, size, _ in self.list_tagged(prefix):
            yield key, size

    def list_tagged(self, prefix: str = "") -> Iterator[tuple[str, int, Hashable]]:
        base = prefix.rstrip("/")
        base = f"{base}/" if base else ""
        for key, data in list(self._objects.items()):
            if key.startswith(base) and "/" not in key[len(base) :]:
                yield key, len(data), self._written.get(key)

    def list_dirs(self, prefix: str = "") -> Iterator[str]:
        base = prefix.rstrip("/")
        base = f"{base}/" if base else ""
        seen = set()
        for key in list(self._objects):
            rest = key[len(base) :] if key.startswith(base) else ""
            if "/" in rest:
                seen.add(rest.split("/", 1)[0])
        yield from sorted(seen)

    def delete(self, key: str) -> None:
        self._objects.pop(key, None)
        self._written.pop(key, None)

    @classmethod
    def reset(cls) -> None:
        """Drop every in-memory bucket (tests)."""
        with cls._global_lock:
            for objects in cls._buckets.values():
                objects.clear()
            for times in cls._times.values():
                times.clear()


def split_uri(uri: str) -> tuple[str, str]:
    """Split a file URI into ``(parent folder URI, object name)``."""
    uri = os.fspath(uri)
    head, _, name = uri.rstrip("/").rpartition("/")
    if not name:
        raise ValueError(f"not a file URI: {uri!r}")
    return head or "/", name


def store_for_uri(
    uri: str, storage_options: dict[str, str] | None = None, *, runtime: IORuntime | None = None
) -> ObjectStore:
    """Open the store rooted at ``uri``: a local path, ``file://``, ``memory://``, ``s3://`` or any
    other scheme fsspec knows (``gs://``, ``az://``, ``hf://``, ...; needs its implementation package).

    ``storage_options`` configure object-store clients (see :mod:`lance_format.io.s3` and
    :mod:`lance_format.io.fsspec_store`). ``runtime``: the session resources its requests go
    through (the process's when omitted).
    """
    store = _open_store(os.fspath(uri), storage_options)
    store._runtime = runtime
    return store


def _open_store(uri: str, storage_options: dict[str, str] | None) -> ObjectStore:
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
        # A leading ``~`` names the home directory, as in pylance (never a literal ``./~`` folder).
        return LocalStore(os.path.expanduser(parsed.path if scheme == "file" else uri))
    if scheme == "memory":
        return MemoryStore(uri[len("memory://") :])
    if scheme in ("s3", "s3a"):
        from lance_format.io.s3 import S3Store

        return S3Store(uri, storage_options)
    if scheme:
        # Imported lazily: fsspec's registry is only consulted for schemes we do not serve natively.
        from lance_format.io.fsspec_store import FsspecStore, is_fsspec_protocol

        if is_fsspec_protocol(scheme):
            return FsspecStore(uri, storage_options)
    raise NotSupportedError(f"no object store for scheme {scheme!r} in {uri!r}")
