"""Clones (pylance's ``shallow_clone`` and ``deep_clone``): a new dataset whose first version is a
version of another one.

Both write one manifest at the target with the source version's number, schema, fragments,
config and indices, and a ``Clone`` transaction naming the source (its path, version and the tag
it was named by). A shallow clone copies no data: the source's root becomes a base path of the
clone (``is_dataset_root``), and every data, deletion and index file of the source's own root
names that base. A deep clone copies every file the version needs (data, deletion and index
files, from the source's root and its other bases) under its own root and keeps no base paths.

As in pylance, a shallow clone reads the source's files for as long as it lives: cleaning up the
source can remove files the clone still needs.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from lance_format.core.errors import InvalidTypeError
from lance_format.dataset.indices import dataset_indices
from lance_format.dataset.tags import Reference, Tags
from lance_format.io.store import ObjectStore
from lance_format.table import index_section_to_bytes
from lance_format.table.commit import commit_first_version
from lance_format.table.flags import compute_flags
from lance_format.table.model import (
    BasePath,
    Clone,
    DataFragment,
    IndexMetadata,
    Manifest,
    Transaction,
)

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["clone_dataset"]

#: Index files are under ``_indices/<uuid>/`` of the root (or base) that holds them.
_INDEX_DIR = "_indices"


def clone_dataset(
    source: Snapshot,
    target: str | os.PathLike[str],
    reference: Reference,
    storage_options: dict[str, str] | None,
    *,
    shallow: bool,
) -> Manifest:
    """Clone the version of ``source`` that ``reference`` names (a version number, a tag, or
    ``(branch, version)`` of the main branch) to a new dataset at ``target``; its manifest.

    Raises :class:`~lance_format.errors.DatasetAlreadyExistsError` when ``target`` holds a
    dataset, :class:`~lance_format.errors.VersionNotFoundError` / ``TagNotFoundError`` for a
    reference that names nothing.
    """
    path = os.fspath(target)
    if not isinstance(path, str):
        raise InvalidTypeError(f"target_path must be a string or path, got {target!r}")
    version = Tags(source).resolve(reference)
    snap = source.at_version(version)
    m = snap.manifest
    store = source.session.store_for(path, storage_options)
    indices = dataset_indices(snap)
    if shallow:
        m, indices = _shallow(m, indices, source.uri)
    else:
        m, indices = _deep(snap, store, indices)
    txn = Transaction(
        version,
        str(uuid.uuid4()),
        # ref_name stays unset for a tag, as pylance records it (it names a branch reference).
        Clone(shallow, None, version, source.uri),
    )
    m = replace(
        m,
        transaction_file=txn.file_name(),
        timestamp_ns=time.time_ns(),
        tag="",
        index_section_bytes=None,
    )
    reader_flags, writer_flags = compute_flags(m)
    m = replace(m, reader_feature_flags=reader_flags, writer_feature_flags=writer_flags)
    section = index_section_to_bytes(indices) if indices else None
    return commit_first_version(store, txn, m, section)


def _shallow(
    m: Manifest, indices: tuple[IndexMetadata, ...], source_uri: str
) -> tuple[Manifest, tuple[IndexMetadata, ...]]:
    """``m`` and its indices with every file of the source's own root moved to a new base path
    (the source's root); files already in other bases keep theirs."""
    root_id = 1 + max((b.id for b in m.base_paths), default=-1)
    bases = (*m.base_paths, BasePath(root_id, None, True, source_uri))

    def moved(frag: DataFragment) -> DataFragment:
        files = tuple(f if f.base_id is not None else replace(f, base_id=root_id) for f in frag.files)
        d = frag.deletion_file
        if d is not None and d.base_id is None:
            d = replace(d, base_id=root_id)
        return replace(frag, files=files, deletion_file=d)

    frags = tuple(moved(f) for f in m.fragments)
    indices = tuple(i if i.base_id is not None else replace(i, base_id=root_id) for i in indices)
    return replace(m, base_paths=bases, fragments=frags), indices


def _deep(
    snap: Snapshot, store: ObjectStore, indices: tuple[IndexMetadata, ...]
) -> tuple[Manifest, tuple[IndexMetadata, ...]]:
    """``snap``'s manifest and indices with every file they need copied under ``store``'s root
    (from the source's root or its other bases): no base paths left."""
    m = snap.manifest

    def copy(base_id: int | None, folder: str, name: str) -> None:
        src_store, key = snap.locate(base_id, folder, name)
        _copy_object(src_store, key, store, f"{folder}/{name}")

    def local(frag: DataFragment) -> DataFragment:
        for f in frag.files:
            copy(f.base_id, "data", f.path)
        d = frag.deletion_file
        if d is not None:
            folder, _, name = d.key(frag.id).partition("/")
            copy(d.base_id, folder, name)
            d = replace(d, base_id=None)
        return replace(frag, files=tuple(replace(f, base_id=None) for f in frag.files), deletion_file=d)

    frags = tuple(local(f) for f in m.fragments)
    for i in indices:
        src_store, prefix = snap.locate(i.base_id, _INDEX_DIR, i.uuid)
        names = [n for n, _ in i.files] or [k.rsplit("/", 1)[-1] for k, _ in src_store.list(prefix)]
        for name in names:
            _copy_object(src_store, f"{prefix}/{name}", store, f"{_INDEX_DIR}/{i.uuid}/{name}")
    indices = tuple(replace(i, base_id=None) for i in indices)
    return replace(m, base_paths=(), fragments=frags), indices


def _copy_object(src: ObjectStore, src_key: str, dst: ObjectStore, dst_key: str) -> None:
    dst.write(dst_key, src.read_all(src_key))
