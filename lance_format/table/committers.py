"""How the next manifest is made visible exactly once.

:class:`PutIfNotExistsCommitter` (the default) relies on the store's atomic create-if-absent (local
``link``, S3 conditional PUT). Stores without it use :class:`ExternalManifestCommitter`: the manifest
is staged as ``{N}.manifest-{uuid}``, the version is claimed in an :class:`ExternalManifestStore`
(a key-value store with conditional writes, e.g. DynamoDB), then copied into its final name.
"""

from __future__ import annotations

import threading
import uuid
from abc import ABC, abstractmethod

from lance_format.core.errors import InvalidInputError, NotSupportedError
from lance_format.io.store import ObjectStore

__all__ = [
    "ExternalManifestCommitter",
    "ExternalManifestStore",
    "ManifestCommitter",
    "MemoryManifestStore",
    "PutIfNotExistsCommitter",
]


class ManifestCommitter(ABC):
    """Publishes a manifest under its final key unless that version already exists."""

    @abstractmethod
    def commit(self, store: ObjectStore, version: int, key: str, data: bytes) -> bool:
        """``True`` if this call created version ``version``; ``False`` if another writer did."""


class PutIfNotExistsCommitter(ManifestCommitter):
    """Atomic create-if-absent on the object store itself."""

    def commit(self, store: ObjectStore, version: int, key: str, data: bytes) -> bool:
        return store.put_if_not_exists(key, data)


class ExternalManifestStore(ABC):
    """A key-value store mapping ``(dataset uri, version)`` to a manifest path, with conditional writes."""

    @abstractmethod
    def put_if_not_exists(self, uri: str, version: int, path: str) -> bool:
        """Claim ``version``; ``False`` when it is already claimed."""

    @abstractmethod
    def put_if_exists(self, uri: str, version: int, path: str) -> None:
        """Update the path of a claimed version (after the manifest reached its final name)."""

    @abstractmethod
    def get(self, uri: str, version: int) -> str | None:
        """The manifest path recorded for ``version``."""

    @abstractmethod
    def latest(self, uri: str) -> tuple[int, str] | None:
        """``(version, path)`` of the newest claimed version."""


class MemoryManifestStore(ExternalManifestStore):
    """An in-process :class:`ExternalManifestStore` (tests, single-process deployments)."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()

    def put_if_not_exists(self, uri: str, version: int, path: str) -> bool:
        with self._lock:
            if (uri, version) in self._rows:
                return False
            self._rows[(uri, version)] = path
            return True

    def put_if_exists(self, uri: str, version: int, path: str) -> None:
        with self._lock:
            if (uri, version) not in self._rows:
                raise InvalidInputError(f"{uri} version {version} was never claimed")
            self._rows[(uri, version)] = path

    def get(self, uri: str, version: int) -> str | None:
        with self._lock:
            return self._rows.get((uri, version))

    def latest(self, uri: str) -> tuple[int, str] | None:
        with self._lock:
            versions = [(v, p) for (u, v), p in self._rows.items() if u == uri]
        return max(versions) if versions else None


class ExternalManifestCommitter(ManifestCommitter):
    """Stage, claim in the external store, then copy into the final name."""

    def __init__(self, external: ExternalManifestStore) -> None:
        self.external = external

    def commit(self, store: ObjectStore, version: int, key: str, data: bytes) -> bool:
        staged = f"{key}-{uuid.uuid4()}"
        store.write(staged, data)
        if not self.external.put_if_not_exists(store.uri, version, staged):
            store.delete(staged)
            return False
        # A reader may already have published the staged copy (repair); the bytes are the same.
        try:
            store.put_if_not_exists(key, data)
        except NotSupportedError:
            # Stores without create-if-absent: the claim above already made us the only writer of
            # this version, and any copy a repairing reader made holds the same bytes.
            if not store.exists(key):
                store.write(key, data)
        self.external.put_if_exists(store.uri, version, key)
        store.delete(staged)
        return True
