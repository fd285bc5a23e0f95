"""Removing old versions, the files only they referenced, and old files no version references.

pylance's ``cleanup_old_versions``: a version is removed when it is older than the cutoff, not among
the last ``retain_versions``, older than the version the dataset has open, and not tagged. A tagged
version that the policy would remove is an error unless ``error_if_tagged_old_versions=False`` (then
it is kept silently), as in pylance. A file is removed only when no kept version references it, so
tags and time travel stay intact, and only when either

* a removed version referenced it ("verified": it belonged to the dataset's history), or
* no version ever referenced it (an orphan: a write or stage killed mid-way, a commit that lost its
  race, a stage never committed) and it was last written before the cutoff and more than
  :data:`UNVERIFIED_AGE_S` ago, or before the cutoff with ``delete_unverified=True``, as pylance
  does. The age is the safety margin for writes still in flight: their files are new.

Versions tagged or pinned (a restore copying them) are kept, also when the tag or pin is created
while cleanup runs (see :mod:`lance_format.table.tags`), and so are the files of versions
committed while it runs.

Staging records (``_staged/{file}``, see :mod:`lance_format.dataset.staging`) go with their file,
and records of files that were committed or are gone are dropped once past the same age.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Collection, Iterator
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from lance_format.core.config import env_setting
from lance_format.core.errors import InvalidInputError, InvalidTypeError, LanceError, NotFoundError
from lance_format.io.store import ObjectStore
from lance_format.table import tags as _tags
from lance_format.table.manifest_file import read_manifest
from lance_format.table.model import Manifest
from lance_format.table.naming import STAGED_DIR, staged_key, transaction_key
from lance_format.table.versions import VersionInfo

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = [
    "DEFAULT_CLEANUP_AGE",
    "UNVERIFIED_AGE_S",
    "CleanupStats",
    "cleanup_old_versions",
    "files_of_every_version",
    "referenced_files",
]

#: pylance's cutoff when neither ``older_than`` nor ``retain_versions`` is given.
DEFAULT_CLEANUP_AGE = timedelta(days=14)

#: Seconds a file no version references must have existed before cleanup removes it without
#: ``delete_unverified``: pylance's threshold (7 days), far beyond any write or Spark job in
#: flight. Override: ``LANCE_FORMAT_CLEANUP_UNVERIFIED_AGE_S`` or the ``unverified_age_seconds``
#: argument.
UNVERIFIED_AGE_S = env_setting("cleanup_unverified_age_s")

#: Folders whose files belong to versions (indices are not written by this implementation).
_FILE_DIRS = ("data", "_deletions", "_transactions")


@dataclass(frozen=True)
class CleanupStats:
    """What a cleanup removed: the field names of pylance's ``CleanupStats``, plus ``orphans_removed``
    (how many of the removed files no version ever referenced)."""

    bytes_removed: int = 0
    old_versions: int = 0
    data_files_removed: int = 0
    transaction_files_removed: int = 0
    index_files_removed: int = 0
    deletion_files_removed: int = 0
    failed_deletes: int = 0
    orphans_removed: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by field name."""
        return asdict(self)


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


def _positive(value: int | None, name: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")


def seconds_argument(value: float, name: str) -> float:
    """``value`` as seconds, or :class:`InvalidInputError` unless a finite, non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidInputError(f"{name} must be a finite, non-negative number of seconds, got {value!r}")
    return float(value)


def cleanup_old_versions(
    ds: Snapshot,
    older_than: timedelta | None = None,
    retain_versions: int | None = None,
    *,
    error_if_tagged_old_versions: bool = True,
    delete_rate_limit: int | None = None,
    versions: Collection[int] | None = None,
    delete_unverified: bool = False,
    unverified_age_seconds: float | None = None,
    min_orphan_age_seconds: float = 0.0,
) -> CleanupStats:
    """Delete old versions' manifests, the files only they referenced, and old orphans.

    See :meth:`lance_format.Snapshot.cleanup_old_versions` for the parameters.
    ``unverified_age_seconds`` overrides :data:`UNVERIFIED_AGE_S`; orphans younger than
    ``min_orphan_age_seconds`` are kept even with ``delete_unverified`` (writes in flight).
    """
    if older_than is not None and not isinstance(older_than, timedelta):
        raise InvalidTypeError(f"older_than must be a datetime.timedelta, got {type(older_than).__name__}")
    _positive(retain_versions, "retain_versions")
    _positive(delete_rate_limit, "delete_rate_limit")
    if unverified_age_seconds is None:
        min_age: float = ds.session.setting("cleanup_unverified_age_s")
    else:
        min_age = unverified_age_seconds
    min_age = seconds_argument(min_age, "unverified_age_seconds")
    if older_than is None and retain_versions is None and versions is None:
        older_than = DEFAULT_CLEANUP_AGE
    if older_than is not None and older_than < timedelta(0):
        raise InvalidInputError(f"older_than must not be negative, got {older_than!r}")
    store = ds.store
    info = VersionInfo(store)
    if not info.entries:
        return CleanupStats()
    current = ds.version
    manifests = {v: read_manifest(store, key, size) for v, (key, size) in info.entries.items()}
    now = time.time()
    # Orphans must be older than the cutoff too; with no age cutoff, any age qualifies.
    cutoff_s = None if older_than is None else older_than.total_seconds()
    cutoff_ns = None if cutoff_s is None else time.time_ns() - int(min(cutoff_s, now) * 1e9)
    only = None if versions is None else {int(v) for v in versions}

    def expired(v: int) -> bool:
        # Versions at or after the one open are in use (or being written): never removed.
        if v >= current or (only is not None and v not in only) or (since is not None and v >= since):
            return False
        if retain_versions is not None and v > current - retain_versions:
            return False
        return cutoff_ns is None or manifests[v].timestamp_ns < cutoff_ns

    tags = _tags.list_tags(store)
    # Pinned versions (a restore copying their files) are kept like tagged ones, silently, and so
    # is every version from a commit's base on while it commits (see lance_format.table.tags).
    pins = _tags.list_pins(store).values()
    tagged = {int(t["version"]) for t in tags.values()} | {p.version for p in pins if p.version is not None}
    since = min((p.since for p in pins if p.since is not None), default=None)
    doomed_tags = {name: int(t["version"]) for name, t in sorted(tags.items()) if expired(int(t["version"]))}
    if doomed_tags and error_if_tagged_old_versions:
        raise InvalidInputError(
            f"cleanup would remove {len(doomed_tags)} tagged version(s): set "
            f"error_if_tagged_old_versions=False or delete the tag(s) {json.dumps(doomed_tags)}"
        )
    remove = sorted(v for v in manifests if expired(v) and v not in tagged)
    needed: set[str] = set()
    for v in set(manifests) - set(remove):
        needed |= referenced_files(manifests[v])
    verified: set[str] = set()
    for v in remove:
        verified |= referenced_files(manifests[v])
    sizes: dict[str, int] = {}
    for folder in _FILE_DIRS:
        sizes.update(dict(store.list(folder)))

    def old_orphan(key: str) -> bool:
        written = store.modified(key)  # unknown age: keep (it may be a write in flight)
        if written is None or (cutoff_s is not None and now - written < cutoff_s):
            return False
        if now - written < min_orphan_age_seconds:
            return False  # a write in flight, whatever delete_unverified says
        return delete_unverified or now - written >= min_age

    counts = dict.fromkeys(("_versions", "data", "_deletions", "_transactions"), 0)
    freed = failed = orphans = 0
    pace = 1.0 / delete_rate_limit if delete_rate_limit else 0.0

    revived: list[int] = []

    def doomed() -> Iterator[tuple[str, int, str]]:
        # Manifests first, so a version is never visible with some of its files gone; their bytes
        # are kept to put one back (below).
        kept_bytes: dict[int, bytes] = {}
        for v in remove:
            key, size = info.entries[v]
            try:
                kept_bytes[v] = store.read_all(key)
            except NotFoundError:
                continue  # another cleanup removed it
            yield key, size, "_versions"
        # A tag or pin created since the listing above may point at a version just removed: its
        # creator checks for the manifest only after writing it (lance_format.table.tags), so
        # either it saw the manifest gone and withdrew, or this listing sees it. Put the
        # manifest back and keep the version's files.
        refs = {int(t["version"]) for t in _tags.list_tags(store).values()}
        refs |= {p.version for p in _tags.list_pins(store).values() if p.version is not None}
        for v in sorted(refs & set(kept_bytes)):
            store.put_if_not_exists(info.entries[v][0], kept_bytes[v])
            needed.update(referenced_files(manifests[v]))
            revived.append(v)
        # Versions committed since the listing above (a restore of a removed version, a stale
        # handle's commit) may reference its files: keep them too. A commit that copies an old
        # version's files (a restore) pins it first, so it is seen by one listing or the other.
        for v, (key, size) in VersionInfo(store).entries.items():
            if v not in manifests:
                needed.update(referenced_files(read_manifest(store, key, size)))
        for key in sorted(set(sizes) - needed):
            if key in verified or old_orphan(key):
                yield key, sizes[key], key.split("/", 1)[0]

    for key, size, folder in doomed():
        started = time.monotonic()
        try:
            store.delete(key)
        except (LanceError, OSError):
            failed += 1
        else:
            freed += size
            counts[folder] += 1
            if folder != "_versions" and key not in verified:
                orphans += 1
            if folder == "data":
                store.delete(staged_key(key[len("data/") :]))
        if pace:
            time.sleep(max(0.0, pace - (time.monotonic() - started)))
    for v in revived:
        counts["_versions"] -= 1
        freed -= info.entries[v][1]
    # Records of files since committed or removed by someone else: tidy once as old as orphans.
    for key, _ in list(store.list(STAGED_DIR)):
        data_key = f"data/{key[len(STAGED_DIR) + 1 :]}"
        if (data_key not in sizes or data_key in needed) and old_orphan(key):
            store.delete(key)
    return CleanupStats(
        bytes_removed=freed,
        old_versions=counts["_versions"],
        data_files_removed=counts["data"],
        transaction_files_removed=counts["_transactions"],
        deletion_files_removed=counts["_deletions"],
        failed_deletes=failed,
        orphans_removed=orphans,
    )
