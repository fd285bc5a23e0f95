"""Removing old versions and the files only they referenced.

A version is kept when it is the latest, newer than the cutoff, or tagged. A file is removed only if
a removed version referenced it and no kept version does, so tags and time travel stay intact.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from lance_format.table import tags as _tags
from lance_format.table.manifest_file import read_manifest
from lance_format.table.model import Manifest
from lance_format.table.naming import transaction_key
from lance_format.table.versions import VersionInfo

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

__all__ = ["cleanup_old_versions", "referenced_files"]


def referenced_files(m: Manifest) -> set[str]:
    """Keys (relative to the root) of every file a version needs."""
    keys = {f"data/{df.path}" for f in m.fragments for df in f.files if df.base_id is None}
    keys |= {f.deletion_file.key(f.id) for f in m.fragments if f.deletion_file is not None}
    if m.transaction_file:
        keys.add(transaction_key(m.transaction_file))
    return keys


def cleanup_old_versions(
    ds: LanceDataset, older_than_seconds: float, *, delete_unverified: bool = False
) -> dict[str, int]:
    """Delete old versions' manifests and files; returns ``{"old_versions", "bytes_removed"}``.

    ``delete_unverified`` is accepted for API compatibility; files no version names are left alone.
    """
    store = ds.store
    info = VersionInfo(store)
    if not info.entries:
        return {"old_versions": 0, "bytes_removed": 0}
    latest = max(info.entries)
    tagged = {int(t["version"]) for t in _tags.list_tags(store).values()}
    cutoff_ns = time.time_ns() - int(older_than_seconds * 1e9)
    manifests = {v: read_manifest(store, key, size) for v, (key, size) in info.entries.items()}
    keep = {v for v, m in manifests.items() if v == latest or v in tagged or m.timestamp_ns >= cutoff_ns}
    keep.add(ds.version)
    needed: set[str] = set()
    for v in keep:
        needed |= referenced_files(manifests[v])
    candidates: set[str] = set()
    removed = 0
    freed = 0
    for v, (key, size) in sorted(info.entries.items()):
        if v in keep:
            continue
        candidates |= referenced_files(manifests[v])
        store.delete(key)
        removed += 1
        freed += size
    sizes = {}
    for folder in ("data", "_deletions", "_transactions"):
        sizes.update(dict(store.list(folder)))
    for key in sorted(candidates - needed):
        if key in sizes:
            store.delete(key)
            freed += sizes[key]
    return {"old_versions": removed, "bytes_removed": freed}
