"""Any URI scheme fsspec knows (``gs://``, ``az://``, ``abfs://``, ``hf://``, ...) as an object store.

:class:`FsspecStore` drives whatever :class:`fsspec.AbstractFileSystem` implementation is installed
for the scheme (gcsfs, adlfs, huggingface_hub, ...). ``storage_options`` go to that implementation's
constructor unchanged (``None`` values dropped), except the two retry settings shared with
:mod:`lance_format.io.s3`: ``client_max_retries`` and ``client_retry_timeout``.

Reads, writes and listings go through :func:`~lance_format.io.retry.call_with_retries`, so transient
failures are retried and permanent ones surface as :mod:`lance_format.core.errors` types naming the
object's full URI. Implementations may retry on their own as well; ours are the ones that are counted
and bounded by a deadline.

Commits need an atomic create-if-absent. :meth:`FsspecStore.put_if_not_exists` uses exclusive-create
mode (``open(path, "xb")``); whether that is atomic across processes is up to the implementation. A
filesystem that refuses the mode makes it raise :class:`~lance_format.core.errors.NotSupportedError`:
such datasets commit through an external manifest store instead
(:func:`lance_format.table.external_store.register_manifest_store`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

import fsspec
from fsspec.registry import known_implementations

from lance_format.core.errors import (
    InvalidInputError,
    NotFoundError,
    NotSupportedError,
    StorageError,
)
from lance_format.io.retry import (
    RetryPolicy,
    TransientStorageError,
    call_with_retries,
    retry_policy,
)
from lance_format.io.store import LevelListingStore

__all__ = ["FSSPEC_IO_PARALLELISM", "FsspecStore", "is_fsspec_protocol"]

T = TypeVar("T")

#: Requests of one read in flight at once: the same bound as S3Store. Object stores are latency
#: bound, and fsspec's async implementations (gcsfs, adlfs) multiplex these over one event loop and
#: an aiohttp pool of 100 connections, so 64 keeps the pool rather than the store the limit.
FSSPEC_IO_PARALLELISM = 64
#: Locks that serialize this process's exclusive creates, picked by path hash. fsspec's in-memory
#: filesystem checks-then-creates, which two threads can interleave; a lock makes that atomic, and
#: for remote stores it only orders our own threads. 64 stripes keep unrelated commits (other
#: datasets) from waiting on each other's round trips.
CREATE_LOCK_STRIPES = 64

# Storage options that configure our retries, not the fsspec implementation (names as in s3.py).
_RETRY_ATTEMPTS_OPTION = "client_max_retries"
_RETRY_TIMEOUT_OPTION = "client_retry_timeout"

_create_locks = tuple(threading.Lock() for _ in range(CREATE_LOCK_STRIPES))


def _reset_locks() -> None:
    # A forked child may inherit a stripe held by a parent thread that no longer exists there.
    global _create_locks
    _create_locks = tuple(threading.Lock() for _ in range(CREATE_LOCK_STRIPES))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_locks)


def is_fsspec_protocol(scheme: str) -> bool:
    """Whether fsspec knows ``scheme`` (registered or importable on demand; maybe not installed)."""
    scheme = scheme.lower()
    return scheme in fsspec.registry or scheme in fsspec.available_protocols()


def _split_options(
    storage_options: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], RetryPolicy]:
    """``(fsspec constructor kwargs, retry policy)`` from user ``storage_options``."""
    options = {str(k): v for k, v in (storage_options or {}).items() if v is not None}
    retry = retry_policy(options.pop(_RETRY_ATTEMPTS_OPTION, None), options.pop(_RETRY_TIMEOUT_OPTION, None))
    return options, retry


def _missing_package(scheme: str) -> str:
    """The install hint for a known scheme whose implementation package is absent."""
    spec = known_implementations.get(scheme) or {}
    package = str(spec.get("class", "")).split(".", 1)[0]
    hint = str(spec.get("err", "")).strip()
    if package and package != "fsspec":
        return f"install the {package!r} package" + (f" ({hint})" if hint else "")
    # Built-in implementations with missing third-party dependencies: fsspec's text names them.
    return hint or "install the package that implements it"


def _filesystem(scheme: str, options: dict[str, Any], uri: str) -> Any:
    """The fsspec filesystem for ``scheme``; fsspec caches instances per arguments, so stores opened
    with the same settings share one client (and its connection pool)."""
    try:
        cls = fsspec.get_filesystem_class(scheme)
    except ImportError as e:
        raise NotSupportedError(
            f"{uri}: the {scheme}:// scheme needs an fsspec implementation that is not installed: "
            f"{_missing_package(scheme)}"
        ) from e
    except ValueError as e:
        raise NotSupportedError(f"no object store for scheme {scheme!r} in {uri!r}: {e}") from e
    try:
        return cls(**options)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"{uri}: bad storage_options for {cls.__name__}: {e}") from e
    except Exception as e:  # credentials, unreachable metadata servers, ...
        raise StorageError(f"{uri}: cannot create {cls.__name__}: {type(e).__name__}: {e}") from e


class _Exists(Exception):
    """Internal: an exclusive create found the object present."""


class FsspecStore(LevelListingStore):
    """Objects under ``scheme://bucket/prefix`` through an fsspec filesystem.

    Parameters
    ----------
    uri:
        ``scheme://bucket[/prefix]`` for any scheme fsspec knows.
    storage_options:
        Keyword arguments of the fsspec implementation (``None`` values dropped), plus
        ``client_max_retries`` / ``client_retry_timeout`` for our retries.
    fs:
        A ready filesystem to use instead of building one (tests, custom clients). When its protocol
        differs from the URI's scheme, the part after ``://`` is used as the root path as is.

    Raises
    ------
    NotSupportedError
        fsspec does not know the scheme, or its implementation package is not installed.
    InvalidInputError
        The URI has no bucket, or the implementation rejects ``storage_options``.
    """

    io_parallelism = FSSPEC_IO_PARALLELISM
    remote = True

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, Any] | None = None,
        *,
        fs: Any | None = None,
    ) -> None:
        uri = os.fspath(uri)
        scheme, sep, rest = uri.partition("://")
        rest = rest.strip("/")
        if not sep or not scheme or not rest:
            raise InvalidInputError(f"expected scheme://bucket[/prefix], got {uri!r}")
        self.scheme = scheme.lower()
        self._uri = f"{self.scheme}://{rest}"
        options, self.retry = _split_options(storage_options)
        self.fs: Any = fs if fs is not None else _filesystem(self.scheme, options, self._uri)
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple | list) else (self.fs.protocol,)
        if self.scheme in protocols:
            # The implementation's own parsing knows its URL forms (e.g. abfs://container@account...).
            self._root = self._fs_path(self._uri)
        else:
            self._root = rest

    def _fs_path(self, url: str) -> str:
        """``url`` as the filesystem's own paths name it (no scheme, no trailing slash).

        fsspec keeps each implementation's URL parsing in ``_strip_protocol`` (its public
        ``fsspec.core.strip_protocol`` picks the class by the URL's scheme, wrong for a folder
        without one or an instance passed in): this is the one place that calls it.
        """
        return str(self.fs._strip_protocol(url)).rstrip("/")

    @property
    def uri(self) -> str:
        return self._uri

    def _path(self, key: str) -> str:
        """The filesystem path of ``key``."""
        key = key.strip("/")
        return f"{self._root}/{key}" if key else self._root

    def _display(self, key: str) -> str:
        """The full URI of ``key``, for error messages."""
        key = key.strip("/")
        return f"{self._uri}/{key}" if key else self._uri

    def _retry(self, key: str, fn: Callable[[], T], passthrough: tuple[type[BaseException], ...] = ()) -> T:
        # Every request holds a permit of its session's gate (reentrant: reads the scheduler
        # issues hold one already), as for S3.
        with self.runtime.scheduler.gate.hold():
            return call_with_retries(fn, self._display(key), self.retry, passthrough=passthrough)

    # -- reads ---------------------------------------------------------------------------------
    def size(self, key: str) -> int:
        path = self._path(key)

        def info() -> int:
            # Listing caches would answer for objects another process has since written or removed.
            self.fs.invalidate_cache(path)
            details = self.fs.info(path)
            if details.get("type") == "directory":
                raise FileNotFoundError(path)  # a folder is not an object
            return int(details["size"])

        return self._retry(key, info)

    def modified(self, key: str) -> float | None:
        path = self._path(key)

        def info() -> float | None:
            self.fs.invalidate_cache(path)
            details = self.fs.info(path)
            # Each fsspec backend names it its own way, in epoch seconds or a datetime ("created"
            # last: backends that replace an object on write, such as fsspec's memory one).
            for name in ("mtime", "LastModified", "last_modified", "updated", "modified", "created"):
                value = details.get(name)
                if isinstance(value, int | float):
                    return float(value)
                if hasattr(value, "timestamp"):
                    return float(value.timestamp())
            return None

        try:
            value = self._retry(key, info)
        except FileNotFoundError:
            return None
        return None if value is None else float(value)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        path = self._path(key)
        try:
            return bytes(self._retry(key, lambda: self.fs.cat_file(path, start=start, end=end)))
        except StorageError as e:
            # Some backends refuse a range that starts at or past the end (HTTP 416) rather than
            # answering with no bytes; the contract says "shorter only if the object is shorter".
            if isinstance(e, TransientStorageError) or self.size(key) > start:
                raise
            return b""

    def read_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        out = [b""] * len(ranges)
        wanted = [(i, s, e) for i, (s, e) in enumerate(ranges) if e > s]
        cat_ranges = getattr(self.fs, "cat_ranges", None)
        if len(wanted) <= 1 or cat_ranges is None:
            for i, s, e in wanted:
                out[i] = self.read_range(key, s, e)
            return out
        path = self._path(key)

        def fetch() -> list[bytes]:
            # Async implementations issue these concurrently on their event loop: one call, one
            # round trip of latency for the batch.
            got = cat_ranges([path] * len(wanted), [s for _, s, _ in wanted], [e for _, _, e in wanted])
            for part in got:
                if isinstance(part, BaseException):  # on_error="return" hands errors back inline
                    raise part
            return [bytes(part) for part in got]

        try:
            parts = self._retry(key, fetch)
        except StorageError as e:
            if isinstance(e, TransientStorageError):
                raise
            # One bad range (e.g. past the end) fails the batch: let read_range sort each one out.
            parts = [self.read_range(key, s, e) for _, s, e in wanted]
        for (i, _, _), part in zip(wanted, parts, strict=True):
            out[i] = part
        return out

    def read_all(self, key: str) -> bytes:
        path = self._path(key)
        return bytes(self._retry(key, lambda: self.fs.cat_file(path)))

    # exists: the base class's size() probe. Not fs.exists, which answers False for any error and
    # would hide an outage as "absent".

    def _list_level(self, prefix: str) -> tuple[str, list[tuple[str, int, Hashable]], list[str]]:
        """``(base, objects, folders)`` one level under the folder ``prefix``, from one listing."""
        base = prefix.strip("/")
        folder = self._path(base)
        folder_name = self._fs_path(folder)

        def listing() -> tuple[list[tuple[str, int, Hashable]], list[str]]:
            self.fs.invalidate_cache(folder)  # new versions must show up: no cached listings
            try:
                entries = self.fs.ls(folder, detail=True)
            except FileNotFoundError:
                return [], []  # a missing folder lists nothing, as on an object store
            objects: list[tuple[str, int, Hashable]] = []
            folders: list[str] = []
            for entry in entries:
                full = str(entry.get("name", "")).rstrip("/")
                name = full.rsplit("/", 1)[-1]
                if entry.get("type") == "directory":
                    folders.append(name)
                elif entry.get("type") == "file" and full != folder_name:
                    # (the object itself is skipped when `prefix` names a file)
                    objects.append((name, int(entry.get("size") or 0), _entry_tag(entry)))
            return objects, folders

        objects, folders = self._retry(base, listing)
        return base, objects, folders

    # -- writes --------------------------------------------------------------------------------
    def write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        payload = bytes(data)
        self._retry(key, lambda: self.fs.pipe_file(path, payload))

    def put_if_not_exists(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        payload = bytes(data)
        attempts = 0

        def create() -> None:
            nonlocal attempts
            attempts += 1
            try:
                f = self.fs.open(path, "xb")
            except FileExistsError:
                raise _Exists() from None
            except (ValueError, NotImplementedError, TypeError) as e:
                raise NotSupportedError(
                    f"{self._display(key)}: {type(self.fs).__name__} has no atomic create-if-absent "
                    f"(exclusive-create mode failed: {e}); register an external manifest store for "
                    "this prefix with lance_format.table.external_store.register_manifest_store"
                ) from e
            try:
                with f:
                    f.write(payload)
            except FileExistsError:  # implementations that check on commit rather than on open
                raise _Exists() from None

        try:
            with _create_locks[hash(path) % CREATE_LOCK_STRIPES]:
                self._retry(key, create, passthrough=(_Exists, NotSupportedError))
        except _Exists:
            if attempts == 1:
                return False
            # A retried create whose first attempt landed before the connection broke finds its
            # own object. Equal bytes mean it was ours: manifests and transactions carry a fresh
            # uuid and timestamp, so two writers never produce the same bytes for one key.
            try:
                return self.read_all(key) == payload
            except NotFoundError:
                return False
        return True

    def delete(self, key: str) -> None:
        path = self._path(key)

        def rm() -> None:
            with contextlib.suppress(FileNotFoundError):  # absent objects are ignored
                self.fs.rm_file(path)

        self._retry(key, rm)


#: Listing fields that change when an object is written again under its name, by backend.
_TAG_FIELDS = (
    "ETag",
    "etag",
    "md5Hash",
    "generation",
    "version_id",
    "mtime",
    "LastModified",
    "last_modified",
    "updated",
    "created",
)


def _entry_tag(entry: Mapping[str, Any]) -> Hashable:
    """What tells this listed object apart from an earlier one under the same name, if anything."""
    values = tuple(str(entry[name]) for name in _TAG_FIELDS if entry.get(name) is not None)
    return values or None
