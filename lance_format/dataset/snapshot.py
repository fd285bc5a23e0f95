"""``Snapshot``: one pinned, read-only version of a dataset, the thing operations work on.

A snapshot holds a version's manifest, its object store, how its manifests are named, and what is
derived from the manifest once and reused (fragment readers, the fragment index behind takes, the
stable row-id index). It never changes: operations (scan, take, delete, compact, evolve ...) take a
snapshot and return a new manifest or transaction, and :class:`~lance_format.dataset.LanceDataset`
(the pylance-shaped facade) swaps its snapshot for one of the new version after a commit.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import DatasetNotFoundError, InvalidInputError
from lance_format.core.records import fast_init
from lance_format.core.types import LanceSchema
from lance_format.dataset.cache import load_manifest_cached
from lance_format.dataset.fragment import FragmentReader, ReaderCache
from lance_format.dataset.multibase import BaseStoreParams
from lance_format.dataset.session import Session
from lance_format.file import LanceFileReader
from lance_format.io.store import ObjectStore
from lance_format.table import tags as _tags
from lance_format.table.flags import STABLE_ROW_IDS, check_reader_flags
from lance_format.table.model import BasePath, DataFile, DataFragment, Manifest
from lance_format.table.naming import ManifestNaming
from lance_format.table.versions import VersionInfo

__all__ = ["FragmentIndex", "RowIdIndex", "Snapshot", "SnapshotSource"]

#: ``(sorted stable row ids, their row addresses)`` over the live rows of one version.
RowIdIndex = tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]


@fast_init
@dataclass(frozen=True)
class FragmentIndex:
    """Per-version lookup arrays of the fragments, built once (a Python loop over fragments) and
    reused by every take of that version."""

    counts: npt.NDArray[np.uint64]  # live rows per fragment
    ends: npt.NDArray[np.uint64]  # cumulative live rows
    ids: npt.NDArray[np.uint64]  # fragment ids, in order
    by_id: dict[int, DataFragment]
    # Output schemas of takes by (columns, with_row_id, with_row_address, member order): a small take spends
    # more time building and checking its schema than copying its rows.
    schemas: dict[
        tuple[tuple[str, ...] | None, bool, bool, bool],
        tuple[list[str], pa.Schema, dict[str, list[tuple[int, ...]]], list[str]],
    ]

    @classmethod
    def of(cls, frags: Sequence[DataFragment]) -> FragmentIndex:
        """The index of ``frags`` (a manifest's fragments, in order)."""
        counts = np.array([f.num_rows for f in frags], dtype=np.uint64)
        ids = np.array([f.id for f in frags], dtype=np.uint64)
        return cls(counts, np.cumsum(counts), ids, {f.id: f for f in frags}, {})


def resolve_version(store: ObjectStore, version: int | str | None) -> int | None:
    """A version number from a number, a tag name or ``None`` (the latest)."""
    if isinstance(version, str):
        return int(_tags.get_tag(store, version)["version"])
    if version is not None and (isinstance(version, bool) or not isinstance(version, int | np.integer)):
        raise InvalidInputError(f"version must be an int or a tag name, got {version!r}")
    return None if version is None else int(version)


def load_version(
    store: ObjectStore, version: int | str | None, cache: ReaderCache, session: Session | None
) -> tuple[Manifest, ManifestNaming]:
    """The manifest of ``version`` (number, tag or ``None``: the latest) and the naming scheme. A
    version a tag or pin names is waited for (``put_back_wait_ms``) while a cleanup puts it back."""
    number = resolve_version(store, version)

    def read() -> tuple[Manifest, ManifestNaming]:
        return load_manifest_cached(store, number, cache.metadata)

    if number is None:
        return read()
    wait_s = (session or Session.default()).setting("put_back_wait_ms") / 1000
    return _tags.read_put_back(store, number, read, wait_s)


class SnapshotSource(Protocol):
    """Anything that reads one pinned version: a :class:`Snapshot` or a ``LanceDataset``."""

    @property
    def snapshot(self) -> Snapshot:
        """The version it reads now."""
        ...


def reader_cache(
    store: ObjectStore,
    storage_options: dict[str, str] | None = None,
    session: Session | None = None,
    base_store_params: BaseStoreParams | None = None,
) -> ReaderCache:
    """The reader cache of a dataset in ``store``, in ``session``'s caches (the default session's
    when omitted); ``base_store_params`` gives some bases' stores their own options."""
    runtime = session or Session.default()
    return ReaderCache(
        store,
        runtime.metadata_cache,
        storage_options,
        decoded=runtime.decoded_cache,
        base_store_params=base_store_params,
    )


class Snapshot:
    """One version of a dataset, pinned and read-only.

    Parameters
    ----------
    uri:
        The dataset root.
    store:
        The object store of ``uri``.
    manifest:
        The version's manifest.
    naming:
        How the dataset names its manifests (V1 or V2).
    cache:
        Open data files, deletion vectors and row ids (shared by snapshots of one dataset).
    storage_options:
        The object-store options the dataset was opened with.
    session:
        The :class:`~lance_format.dataset.session.Session` serving reads (``None``: the default).
    """

    def __init__(
        self,
        uri: str,
        store: ObjectStore,
        manifest: Manifest,
        naming: ManifestNaming,
        cache: ReaderCache,
        storage_options: dict[str, str] | None = None,
        session: Session | None = None,
    ) -> None:
        check_reader_flags(manifest, uri)
        self._session = session
        self._uri = uri
        self._store = store
        self._manifest = manifest
        self._naming = naming
        self._cache = cache
        self._storage_options = storage_options
        self._lock = threading.Lock()
        self._readers: dict[int, tuple[DataFragment, FragmentReader]] = {}
        self._frag_index: FragmentIndex | None = None
        self._row_index: RowIdIndex | None = None

    @classmethod
    def open(
        cls,
        uri: str | os.PathLike[str],
        version: int | str | None = None,
        storage_options: dict[str, str] | None = None,
        *,
        store: ObjectStore | None = None,
        cache: ReaderCache | None = None,
        session: Session | None = None,
        base_store_params: BaseStoreParams | None = None,
    ) -> Snapshot:
        """The snapshot of ``version`` (number or tag; the latest when omitted) of ``uri``, read
        through ``session`` (the default session when omitted); ``base_store_params`` gives some
        bases' stores their own options (pylance's)."""
        uri = os.fspath(uri)
        store = store or (session or Session.default()).store_for(uri, storage_options)
        cache = cache or reader_cache(store, storage_options, session, base_store_params)
        manifest, naming = load_version(store, version, cache, session)
        return cls(uri, store, manifest, naming, cache, storage_options, session)

    def at(self, manifest: Manifest, naming: ManifestNaming | None = None) -> Snapshot:
        """A snapshot of the same dataset at ``manifest`` (e.g. a version just committed)."""
        return Snapshot(
            self._uri,
            self._store,
            manifest,
            naming or self._naming,
            self._cache,
            self._storage_options,
            self._session,
        )

    def at_version(self, version: int | str) -> Snapshot:
        """A snapshot of the same dataset at ``version`` (number or tag)."""
        manifest, naming = load_version(self._store, version, self._cache, self._session)
        return self.at(manifest, naming)

    def latest(self) -> Snapshot:
        """A snapshot of the dataset's newest version."""
        return self.at_version(self.latest_version())

    def latest_version(self) -> int:
        """The newest committed version (one listing of ``_versions/``)."""
        latest = VersionInfo(self._store).latest
        if latest is None:
            raise DatasetNotFoundError(f"{self._uri}: dataset not found")
        return latest

    @property
    def snapshot(self) -> Snapshot:
        """This snapshot (so a Snapshot is a :class:`SnapshotSource`, as a ``LanceDataset`` is)."""
        return self

    # -- what the snapshot pins --------------------------------------------------------------------
    @property
    def uri(self) -> str:
        """The dataset root."""
        return self._uri

    @property
    def store(self) -> ObjectStore:
        """The object store holding the dataset."""
        return self._store

    @property
    def manifest(self) -> Manifest:
        """The manifest of this version."""
        return self._manifest

    @property
    def naming(self) -> ManifestNaming:
        """How this dataset names its manifests (V1 or V2)."""
        return self._naming

    @property
    def cache(self) -> ReaderCache:
        """Open data files, deletion vectors and row ids of the dataset."""
        return self._cache

    @property
    def storage_options(self) -> dict[str, str] | None:
        """The object-store options the dataset was opened with."""
        return self._storage_options

    @property
    def base_store_params(self) -> BaseStoreParams | None:
        """The options of some bases' stores, by base URI (pylance's ``base_store_params``)."""
        return self._cache.base_store_params

    @property
    def session(self) -> Session:
        """The session serving this snapshot's reads."""
        return self._session or Session.default()

    @property
    def version(self) -> int:
        """The version number."""
        return self._manifest.version

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of this version."""
        return self._manifest.schema.to_arrow()

    @property
    def lance_schema(self) -> LanceSchema:
        """The Lance field tree (with field ids) of this version."""
        return self._manifest.schema

    @property
    def data_storage_version(self) -> str:
        """File format version of the data files (``"2.0"``, ``"2.1"`` ...)."""
        return self._manifest.data_format.version

    @property
    def has_stable_row_ids(self) -> bool:
        """Whether rows carry stable ids."""
        return bool(self._manifest.reader_feature_flags & STABLE_ROW_IDS)

    @property
    def bases(self) -> dict[int, BasePath]:
        """The manifest's base paths by id."""
        return {b.id: b for b in self._manifest.base_paths}

    # -- derived once per snapshot -----------------------------------------------------------------
    def fragment_reader(self, frag: DataFragment) -> FragmentReader:
        """The reader of one of this version's fragments (made once; its projection plans reused)."""
        known = self._readers.get(frag.id)
        if known is not None and known[0] is frag:
            return known[1]
        reader = FragmentReader(frag, self._manifest.schema, self._cache, self.bases)
        self._readers[frag.id] = (frag, reader)  # one dict store: thread-safe
        return reader

    def fragment_index(self) -> FragmentIndex:
        """Row counts, ends and ids of this version's fragments (built once)."""
        index = self._frag_index
        if index is None:
            index = self._frag_index = FragmentIndex.of(self._manifest.fragments)
        return index

    def row_id_index(self) -> RowIdIndex:
        """``(sorted stable ids, their addresses)`` over live rows of this version."""
        with self._lock:
            if self._row_index is not None:
                return self._row_index
        # Process-wide too: a server opens the same version for many requests.
        manifest = self._manifest
        ckey = (self._store.uri, "row_id_index", manifest.version, manifest.timestamp_ns)
        cached: RowIdIndex | None = self._cache.metadata.get(ckey)
        if cached is None:
            ids, addrs = [], []
            for frag in manifest.fragments:
                reader = self.fragment_reader(frag)
                fid = reader.row_ids()
                offs = np.arange(frag.physical_rows, dtype=np.uint64)
                keep = reader.keep_mask()
                if keep is not None:
                    fid, offs = fid[keep], offs[keep]
                ids.append(fid)
                addrs.append((np.uint64(frag.id) << np.uint64(32)) | offs)
            all_ids = np.concatenate(ids) if ids else np.zeros(0, np.uint64)
            all_addr = np.concatenate(addrs) if addrs else np.zeros(0, np.uint64)
            order = np.argsort(all_ids, kind="stable")
            cached = (all_ids[order], all_addr[order])
            self._cache.metadata.put(ckey, cached, cached[0].nbytes + cached[1].nbytes)
        with self._lock:
            self._row_index = cached
        return cached

    def deleted_offsets(self, fragment: DataFragment) -> npt.NDArray[np.uint64]:
        """Sorted physical offsets of ``fragment``'s deleted rows."""
        return self.fragment_reader(fragment).deleted().astype(np.uint64)

    def data_file_reader(self, data_file: DataFile, *, cached: bool = True) -> LanceFileReader:
        """The open reader of one of this version's data files (``cached=False``: opened afresh,
        its size measured rather than taken from the manifest)."""
        if cached:
            return self._cache.reader(data_file, self.bases)
        store, key = self.locate(data_file.base_id, "data", data_file.path)
        return LanceFileReader(key, store=store)

    def locate(self, base_id: int | None, folder: str, name: str) -> tuple[ObjectStore, str]:
        """``(store, key)`` of a file named relative to ``folder`` of this version's root
        (``base_id`` ``None``) or of one of its base paths."""
        return self._cache.locate(base_id, folder, name, self.bases)

    def __repr__(self) -> str:
        return f"Snapshot(uri={self._uri!r}, version={self.version})"
