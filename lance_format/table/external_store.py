"""External manifest stores: a SQLite implementation, a registry by URI prefix, and reader repair.

Object stores without an atomic create-if-absent commit through an :class:`ExternalManifestStore`
(see :mod:`lance_format.table.committers`): the writer stages ``{final}-{uuid}``, claims the version
in the external store, copies the staged manifest to its final name and records that name. A writer
that dies between the claim and the copy leaves a version that exists only in the external store;
the next reader or writer finishes the copy (:func:`finalize_pending`), as the Lance spec asks.

Which datasets use an external store is decided by URI prefix (:func:`register_manifest_store`), so
every entry point (open, write, commit, the server) picks it up without extra arguments, the way Lance
chooses its DynamoDB store by URI scheme.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from typing import Any

from lance_format.core.errors import CorruptFileError, InvalidInputError, NotSupportedError, StorageError
from lance_format.io.store import ObjectStore
from lance_format.table.committers import ExternalManifestStore

__all__ = [
    "SqliteManifestStore",
    "finalize_pending",
    "manifest_store_for",
    "register_manifest_store",
    "staged_to_final",
    "unregister_manifest_store",
]

#: Seconds a connection waits for another process's write lock; commits are tiny, so a long wait
#: means a stuck writer rather than contention.
SQLITE_BUSY_TIMEOUT_S = 30.0

_MANIFEST_SUFFIX = ".manifest"


class SqliteManifestStore(ExternalManifestStore):
    """An :class:`ExternalManifestStore` in a SQLite database file.

    Safe across threads and processes on one machine: claims are ``INSERT``s into a table whose
    primary key is ``(uri, version)``, so exactly one writer wins each version.

    Parameters
    ----------
    path:
        The database file; created with its table when missing.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._local = threading.local()
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS manifests ("
                " uri TEXT NOT NULL, version INTEGER NOT NULL, path TEXT NOT NULL,"
                " PRIMARY KEY (uri, version))"
            )

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None)
            except sqlite3.Error as e:
                raise StorageError(f"{self.path}: cannot open manifest store: {e}") from e
            self._local.conn = conn
        return conn

    def put_if_not_exists(self, uri: str, version: int, path: str) -> bool:
        try:
            self._connect().execute(
                "INSERT INTO manifests (uri, version, path) VALUES (?, ?, ?)", (uri, version, path)
            )
        except sqlite3.IntegrityError:
            return False
        except sqlite3.Error as e:
            raise StorageError(f"{self.path}: claiming {uri} version {version} failed: {e}") from e
        return True

    def put_if_exists(self, uri: str, version: int, path: str) -> None:
        try:
            cur = self._connect().execute(
                "UPDATE manifests SET path = ? WHERE uri = ? AND version = ?", (path, uri, version)
            )
        except sqlite3.Error as e:
            raise StorageError(f"{self.path}: updating {uri} version {version} failed: {e}") from e
        if cur.rowcount == 0:
            raise InvalidInputError(f"{uri} version {version} was never claimed")

    def get(self, uri: str, version: int) -> str | None:
        row = self._query("SELECT path FROM manifests WHERE uri = ? AND version = ?", (uri, version))
        return None if row is None else str(row[0])

    def latest(self, uri: str) -> tuple[int, str] | None:
        row = self._query(
            "SELECT version, path FROM manifests WHERE uri = ? ORDER BY version DESC LIMIT 1", (uri,)
        )
        return None if row is None else (int(row[0]), str(row[1]))

    def _query(self, sql: str, args: tuple[object, ...]) -> tuple[Any, ...] | None:
        try:
            row: tuple[Any, ...] | None = self._connect().execute(sql, args).fetchone()
        except sqlite3.Error as e:
            raise StorageError(f"{self.path}: reading manifest store failed: {e}") from e
        return row

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


_REGISTRY: dict[str, ExternalManifestStore] = {}
_REGISTRY_LOCK = threading.Lock()


def _norm(uri: str) -> str:
    return uri.rstrip("/")


def register_manifest_store(prefix: str, store: ExternalManifestStore) -> None:
    """Commit and resolve versions of every dataset whose URI starts with ``prefix`` through ``store``."""
    if not prefix:
        raise InvalidInputError("a manifest store needs a non-empty URI prefix")
    with _REGISTRY_LOCK:
        _REGISTRY[_norm(prefix)] = store


def unregister_manifest_store(prefix: str) -> None:
    """Undo :func:`register_manifest_store` (no error when nothing is registered)."""
    with _REGISTRY_LOCK:
        _REGISTRY.pop(_norm(prefix), None)


def manifest_store_for(uri: str) -> ExternalManifestStore | None:
    """The store registered for the longest prefix of ``uri`` (whole path segments), if any."""
    uri = _norm(uri)
    with _REGISTRY_LOCK:
        best: tuple[int, ExternalManifestStore] | None = None
        for prefix, store in _REGISTRY.items():
            if (uri == prefix or uri.startswith(prefix + "/")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), store)
    return None if best is None else best[1]


def staged_to_final(path: str) -> str:
    """The final manifest key of a staged ``{final}-{uuid}`` key (final keys map to themselves)."""
    at = path.rfind(_MANIFEST_SUFFIX)
    if at < 0:
        raise CorruptFileError(path, "external manifest store points at a non-manifest path")
    return path[: at + len(_MANIFEST_SUFFIX)]


def finalize_pending(store: ObjectStore, external: ExternalManifestStore) -> None:
    """Finish a commit whose writer claimed the newest version but died before publishing it."""
    latest = external.latest(store.uri)
    if latest is None:
        return
    version, path = latest
    final = staged_to_final(path)
    if path == final:
        return
    if not store.exists(final):
        try:
            data = store.read_all(path)
        except FileNotFoundError:
            raise CorruptFileError(
                f"{store.uri}/{path}",
                f"version {version} is claimed but neither its staged nor its final manifest exists",
            ) from None
        try:
            store.put_if_not_exists(final, data)
        except NotSupportedError:
            # Stores without create-if-absent: the external claim serialized the writers, and
            # every copy of this version (ours, the writer's) holds the same staged bytes.
            if not store.exists(final):
                store.write(final, data)
    external.put_if_exists(store.uri, version, final)
    with contextlib.suppress(OSError):  # a leftover staged file is harmless: listings ignore it
        store.delete(path)
