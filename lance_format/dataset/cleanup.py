"""Removing old versions, the files only they referenced, and files no version references.

A version is kept when it is the latest, newer than the cutoff, or tagged. A file is removed only
when no kept version references it, so tags and time travel stay intact, and only when either

* a removed version referenced it ("verified": it belonged to the dataset's history), or
* no version ever referenced it (an orphan: a write or stage killed mid-way, a commit that lost its
  race, a stage never committed) and it was last written before the cutoff and more than
  :data:`UNVERIFIED_AGE_S` ago, or before the cutoff with ``delete_unverified=True``, as pylance
  does. The age is the safety margin for writes still in flight: their files are new.

Staging records (``_staged/{file}``, see :mod:`lance_format.dataset.staging`) go with their file,
and records of files that were committed or are gone are dropped once past the same age.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from lance_format.core.concurrency import env_positive_int
from lance_format.core.errors import InvalidInputError
from lance_format.io.store import ObjectStore
from lance_format.table import tags as _tags
from lance_format.table.manifest_file import read_manifest
from lance_format.table.model import Manifest
from lance_format.table.naming import STAGED_DIR, staged_key, transaction_key
from lance_format.table.versions import VersionInfo

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

__all__ = [
    "UNVERIFIED_AGE_S",
    "cleanup_old_versions",
    "files_of_every_version",
    "referenced_files",
]

#: Seconds a file no version references must have existed before cleanup removes it without
#: ``delete_unverified``: pylance's threshold (7 days), far beyond any write or Spark job in
#: flight. Override: ``LANCE_FORMAT_CLEANUP_UNVERIFIED_AGE_S`` or the ``unverified_age_seconds``
#: argument.
UNVERIFIED_AGE_S = env_positive_int("LANCE_FORMAT_CLEANUP_UNVERIFIED_AGE_S", 7 * 24 * 3600)

#: Folders whose files belong to versions (indices are not written by this implementation).
_FILE_DIRS = ("data", "_deletions", "_transactions")


def referenced_files(m: Manifest) -> set[str]:
    """Keys (relative to the root) of every file a version needs."""
    keys = {f"data/{df.path}" for f in m.fragments for df in f.files if df.base_id is None}
    keys |= {f.deletion_file.key(f.id) for f in m.fragments if f.deletion_file is not None}
    if m.transaction_file:
        keys.add(transaction_key(m.transaction_file))
    return keys


def files_of_every_version(store: ObjectStore) -> set[str]:
    """Keys of every file any version of the dataset at ``store`` references (tagged ones included:
    a tag points at a version, and cleanup never removes a tagged version's manifest)."""
    needed: set[str] = set()
    for key, size in VersionInfo(store).entries.values():
        needed |= referenced_files(read_manifest(store, key, size))
    return needed


def _seconds(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidInputError(f"{name} must be a finite, non-negative number of seconds, got {value!r}")
    return float(value)


def cleanup_old_versions(
    ds: LanceDataset,
    older_than_seconds: float,
    *,
    delete_unverified: bool = False,
    unverified_age_seconds: float | None = None,
) -> dict[str, int]:
    """Delete old versions' manifests and files, and old orphans.

    Returns ``{"old_versions", "bytes_removed", "orphans_removed"}``. ``delete_unverified`` removes
    files no version references once they are older than the cutoff, however young; without it
    they must also be older than ``unverified_age_seconds`` (default :data:`UNVERIFIED_AGE_S`).
    """
    cutoff_s = _seconds(older_than_seconds, "older_than_seconds")
    min_age = UNVERIFIED_AGE_S if unverified_age_seconds is None else unverified_age_seconds
    min_age = _seconds(min_age, "unverified_age_seconds")
    store = ds.store
    info = VersionInfo(store)
    if not info.entries:
        return {"old_versions": 0, "bytes_removed": 0, "orphans_removed": 0}
    latest = max(info.entries)
    tagged = {int(t["version"]) for t in _tags.list_tags(store).values()}
    now = time.time()
    cutoff_ns = time.time_ns() - int(min(cutoff_s, now) * 1e9)  # a cutoff before 1970 is 1970
    manifests = {v: read_manifest(store, key, size) for v, (key, size) in info.entries.items()}
    keep = {v for v, m in manifests.items() if v == latest or v in tagged or m.timestamp_ns >= cutoff_ns}
    keep.add(ds.version)
    needed: set[str] = set()
    for v in keep:
        needed |= referenced_files(manifests[v])
    verified: set[str] = set()
    removed = 0
    freed = 0
    for v, (key, size) in sorted(info.entries.items()):
        if v in keep:
            continue
        verified |= referenced_files(manifests[v])
        store.delete(key)
        removed += 1
        freed += size
    sizes: dict[str, int] = {}
    for folder in _FILE_DIRS:
        sizes.update(dict(store.list(folder)))

    def old_orphan(key: str) -> bool:
        written = store.modified(key)  # unknown age: keep (it may be a write in flight)
        if written is None or now - written < cutoff_s:
            return False
        return delete_unverified or now - written >= min_age

    orphans = 0
    for key in sorted(set(sizes) - needed):
        if key in verified or old_orphan(key):
            store.delete(key)
            freed += sizes[key]
            orphans += key not in verified
            if key.startswith("data/"):
                store.delete(staged_key(key[len("data/") :]))
    # Records of files since committed or removed by someone else: tidy once as old as orphans.
    for key, _ in list(store.list(STAGED_DIR)):
        data_key = f"data/{key[len(STAGED_DIR) + 1 :]}"
        if (data_key not in sizes or data_key in needed) and old_orphan(key):
            store.delete(key)
    return {"old_versions": removed, "bytes_removed": freed, "orphans_removed": orphans}
