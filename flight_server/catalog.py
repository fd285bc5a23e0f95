"""Dataset names -> dataset URIs under the server's root, and open datasets for handlers.

Names are one path segment of safe characters: no separators, no ``..``, nothing absolute, so a
request can never reach outside the root. Open datasets are kept per ``(name, version)``: a pinned
version never changes, so endpoint tickets of one flight reuse one handle and its caches.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from urllib.parse import urlparse

from flight_server.settings import DEFAULT_LATEST_VERSION_SECONDS, DEFAULT_ORPHAN_MIN_AGE_SECONDS
from lance_format import LanceDataset
from lance_format import dataset as open_dataset
from lance_format.core.errors import InvalidInputError, NotFoundError
from lance_format.dataset.session import Session
from lance_format.io.store import ObjectStore
from lance_format.table.versions import VersionInfo

__all__ = ["Catalog", "validate_name"]

#: Letters, digits, ``_ . -``; must start with a letter or digit (no hidden or ``..`` names).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
#: Long enough for any sensible name, short enough to stay under every file system's limit (255).
MAX_NAME_LENGTH = 200
#: Open dataset handles kept (each holds only metadata; the byte caches are process-wide).
DATASET_HANDLES = 256
_VERSIONS_DIR = "_versions"
#: A local ``_versions/`` folder's stat (device, inode, mtime, ctime) says whether a commit, a
#: cleanup or a re-creation happened since "latest" was listed: a stat costs a few microseconds, a
#: listing parses every manifest name (a tenth of a wide-schema plan's CPU). A stamp is trusted only
#: when its mtime is this much older than the moment it was taken, so a commit within the same
#: timestamp tick (1-2 s on some file systems) can never leave it unchanged.
STAMP_SETTLE_NS = 2_000_000_000


def _dir_stamp(path: str) -> tuple[int, int, int, int] | None:
    """The stat of folder ``path`` that changes with its entries (None when it is missing)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def validate_name(name: object) -> str:
    """``name`` if it is a valid dataset name, else :class:`InvalidInputError`."""
    if not isinstance(name, str) or not name:
        raise InvalidInputError("a dataset name is required")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidInputError(f"dataset name longer than {MAX_NAME_LENGTH} characters")
    if not _NAME.fullmatch(name) or ".." in name:
        raise InvalidInputError(
            f"invalid dataset name {name!r}: use letters, digits, '_', '.', '-' "
            "(starting with a letter or digit; no paths)"
        )
    return name


class Catalog:
    """The datasets under one root (local directory, ``memory://`` or ``s3://``).

    Parameters
    ----------
    root:
        Root URI; a local directory is created when missing.
    storage_options:
        Object-store options passed to every dataset.
    latest_seconds:
        On object-store roots, how long a resolved "latest version" is reused before
        ``_versions/`` is listed again (a LIST request per call otherwise). Writes through this
        catalog's server process are seen at once; writes by other processes within this bound.
        On local roots any value above 0 reuses it while a ``stat`` of ``_versions/`` is unchanged
        (see :data:`STAMP_SETTLE_NS`), and 0 lists on every call.
    session:
        The engine session datasets are opened in (the process's default when omitted).
    """

    def __init__(
        self,
        root: str,
        storage_options: dict[str, str] | None = None,
        latest_seconds: float = DEFAULT_LATEST_VERSION_SECONDS,
        session: Session | None = None,
        orphan_min_age_seconds: float = DEFAULT_ORPHAN_MIN_AGE_SECONDS,
    ) -> None:
        self.session = session or Session.default()
        #: ``limits.orphanMinAgeSeconds``: unreferenced files younger than this survive any cleanup.
        self.orphan_min_age_seconds = float(orphan_min_age_seconds)
        scheme = urlparse(root).scheme.lower()
        self.local = scheme in ("", "file")
        if self.local:
            root = os.path.abspath(urlparse(root).path if scheme == "file" else root)
            os.makedirs(root, exist_ok=True)
        self.root = root.rstrip("/") or "/"
        self.storage_options = dict(storage_options or {})
        self._handles: OrderedDict[tuple[str, int], LanceDataset] = OrderedDict()
        self._lock = threading.Lock()
        self.latest_seconds = 0.0 if self.local else max(0.0, float(latest_seconds))
        self._latest: dict[str, tuple[int, float]] = {}  # name -> (version, monotonic time resolved)
        # Local roots: "latest" is reused while _versions/ has the stamp it had when listed.
        self.stat_latest = self.local and float(latest_seconds) > 0
        self._stamped: dict[str, tuple[tuple[int, int, int, int], int]] = {}  # name -> (stamp, version)
        # The store tag of each handle's manifest when "latest" resolved to it: a dataset dropped
        # and written again by another process reuses version numbers, never tags.
        self._tags: dict[tuple[str, int], Hashable] = {}

    # -- names -----------------------------------------------------------------------------------
    def uri(self, name: str) -> str:
        """The URI of dataset ``name`` (validated)."""
        validate_name(name)
        return f"{self.root}/{name}" if self.root != "/" else f"/{name}"

    def _store(self) -> ObjectStore:
        return self.session.store_for(self.root, self.storage_options or None)

    def exists(self, name: str) -> bool:
        """Whether dataset ``name`` has at least one version."""
        uri = self.uri(name)
        if self.local:
            return os.path.isdir(os.path.join(uri, _VERSIONS_DIR))
        return _has_versions(self._store(), name)

    def names(self) -> list[str]:
        """The datasets under the root, sorted."""
        if self.local:
            try:
                entries = list(os.scandir(self.root))
            except FileNotFoundError:
                return []
            found = [
                e.name
                for e in entries
                if e.is_dir()
                and _NAME.fullmatch(e.name)
                and os.path.isdir(os.path.join(e.path, _VERSIONS_DIR))
            ]
            return sorted(found)
        store = self._store()
        # Object stores: folders under the root with objects in their _versions folder (one listing
        # each; a folder alone proves nothing: some stores keep emptied "directories").
        return sorted(
            name for name in store.list_dirs("") if _NAME.fullmatch(name) and _has_versions(store, name)
        )

    # -- datasets --------------------------------------------------------------------------------
    def open(self, name: str, version: int | str | None = None, *, shared: bool = True) -> LanceDataset:
        """Dataset ``name`` at ``version`` (number or tag; latest when ``None``).

        ``shared=False`` returns a handle of the caller's own: writes (delete, add_columns, ...)
        move a handle to the new version, which must never happen to a shared, pinned one.

        Raises
        ------
        NotFoundError
            The dataset, version or tag does not exist.
        """
        uri = self.uri(name)
        if version is None and shared and self.latest_seconds > 0:
            with self._lock:
                seen = self._latest.get(name)
                if seen is not None and time.monotonic() - seen[1] < self.latest_seconds:
                    handle = self._handles.get((name, seen[0]))
                    if handle is not None:
                        self._handles.move_to_end((name, seen[0]))
                        return handle
        if isinstance(version, int) and shared:
            with self._lock:
                handle = self._handles.get((name, version))
                if handle is not None:
                    self._handles.move_to_end((name, version))
                    return handle
        stamp = None
        if version is None and shared and self.stat_latest:
            stamp = _dir_stamp(os.path.join(uri, _VERSIONS_DIR))
            with self._lock:
                stamped = self._stamped.get(name)
                handle = None
                if stamped is not None and stamped[0] == stamp:
                    handle = self._handles.get((name, stamped[1]))
                if handle is not None:
                    self._handles.move_to_end((name, handle.version))
                    return handle
            if stamp is not None and time.time_ns() - stamp[2] < STAMP_SETTLE_NS:
                stamp = None  # changed too recently to vouch for what the listing will see
        resolved_at = time.monotonic()
        tag: Hashable = None
        wants_latest = version is None
        if version is None and shared:
            # One listing says which version is the latest; a handle already open on it is reused
            # as is (opening builds the dataset from its manifest again: per column, milliseconds
            # for thousands of columns, on every plan and read of "latest").
            try:
                latest = VersionInfo(self.session.store_for(uri, self.storage_options or None))
            except FileNotFoundError as exc:
                raise NotFoundError(f"dataset {name!r} not found") from exc
            if latest.latest is not None:
                version, tag = latest.latest, latest.tags.get(latest.latest)
                with self._lock:
                    handle = self._handles.get((name, version))
                    if handle is not None and tag is not None and self._tags.get((name, version)) == tag:
                        self._handles.move_to_end((name, version))
                        if self.latest_seconds > 0:
                            self._latest[name] = (version, resolved_at)
                        if stamp is not None:
                            self._stamped[name] = (stamp, version)
                        return handle
        try:
            ds = open_dataset(
                uri, version=version, storage_options=self.storage_options or None, session=self.session
            )
        except NotFoundError:
            raise
        except FileNotFoundError as exc:
            raise NotFoundError(str(exc)) from exc
        if not shared:
            return ds
        with self._lock:
            if wants_latest and self.latest_seconds > 0:
                self._latest[name] = (ds.version, resolved_at)
            if wants_latest and stamp is not None:
                self._stamped[name] = (stamp, ds.version)
            # A handle already open on the resolved version keeps its warm per-file readers.
            known = self._handles.get((name, ds.version))
            if tag is not None:
                self._tags[(name, ds.version)] = tag
            if known is not None and known.manifest.timestamp_ns == ds.manifest.timestamp_ns:
                self._handles.move_to_end((name, ds.version))
                return known
            self._handles[(name, ds.version)] = ds
            while len(self._handles) > DATASET_HANDLES:
                self._tags.pop(self._handles.popitem(last=False)[0], None)
        return ds

    @property
    def handle_count(self) -> int:
        """Open dataset handles kept (at most :data:`DATASET_HANDLES`)."""
        with self._lock:
            return len(self._handles)

    def require(self, name: str) -> None:
        """Raise :class:`NotFoundError` unless dataset ``name`` exists."""
        if not self.exists(name):
            raise NotFoundError(f"dataset {name!r} not found")

    def forget(self, name: str) -> None:
        """Drop cached handles of ``name`` (after it was dropped or re-created)."""
        with self._lock:
            self._latest.pop(name, None)
            self._stamped.pop(name, None)
            for key in [k for k in self._handles if k[0] == name]:
                del self._handles[key]
                self._tags.pop(key, None)

    def written(self, name: str) -> None:
        """Note a write to ``name`` through this process: its latest version is resolved anew."""
        with self._lock:
            self._latest.pop(name, None)
            self._stamped.pop(name, None)

    def drop(self, name: str) -> None:
        """Delete dataset ``name`` and all its files."""
        self.require(name)
        uri = self.uri(name)
        self.forget(name)
        try:
            if self.local:
                shutil.rmtree(uri, ignore_errors=False)
                return
            store = self._store()
            # Versions first: a drop that dies midway leaves no dataset, only unreferenced files.
            _delete_tree(store, f"{name}/{_VERSIONS_DIR}")
            _delete_tree(store, name)
        finally:
            # A dataset re-created under this name starts again at version 1: no cached manifest,
            # footer or page of the old one may answer for it.
            self.session.forget(uri)
            self.forget(name)


def _has_versions(store: ObjectStore, name: str) -> bool:
    """Whether the folder ``name`` of an object store holds objects under ``_versions/``."""
    return next(iter(store.list(f"{name}/{_VERSIONS_DIR}")), None) is not None


def _delete_tree(store: ObjectStore, prefix: str) -> None:
    """Delete every object under the folder ``prefix``, sub-folders included."""
    for key, _ in list(store.list(prefix)):
        store.delete(key)
    for folder in list(store.list_dirs(prefix)):
        _delete_tree(store, f"{prefix}/{folder}")
