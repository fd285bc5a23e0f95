"""Removing old versions and the files only they referenced (pylance's ``cleanup_old_versions``).

A version is removed when it is older than the cutoff, not among the last ``retain_versions``, older
than the version the dataset has open, and not tagged. A tagged version that the policy would remove
is an error unless ``error_if_tagged_old_versions=False`` (then it is kept silently), as in pylance.
A file is removed only if a removed version referenced it and no kept version does, so tags and time
travel stay intact.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from lance_format.core.errors import InvalidInputError, LanceError
from lance_format.table import tags as _tags
from lance_format.table.manifest_file import read_manifest
from lance_format.table.model import Manifest
from lance_format.table.naming import transaction_key
from lance_format.table.versions import VersionInfo

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

__all__ = ["DEFAULT_CLEANUP_AGE", "CleanupStats", "cleanup_old_versions", "referenced_files"]

#: pylance's cutoff when neither ``older_than`` nor ``retain_versions`` is given.
DEFAULT_CLEANUP_AGE = timedelta(days=14)


@dataclass(frozen=True)
class CleanupStats:
    """What a cleanup removed; the field names of pylance's ``CleanupStats``."""

    bytes_removed: int = 0
    old_versions: int = 0
    data_files_removed: int = 0
    transaction_files_removed: int = 0
    index_files_removed: int = 0
    deletion_files_removed: int = 0
    failed_deletes: int = 0

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


def _positive(value: int | None, name: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")


def cleanup_old_versions(
    ds: LanceDataset,
    older_than: timedelta | None = None,
    retain_versions: int | None = None,
    *,
    error_if_tagged_old_versions: bool = True,
    delete_rate_limit: int | None = None,
    versions: Collection[int] | None = None,
) -> CleanupStats:
    """Delete old versions' manifests and the files only they referenced.

    See :meth:`lance_format.LanceDataset.cleanup_old_versions` for the parameters.
    """
    if older_than is not None and not isinstance(older_than, timedelta):
        raise InvalidInputError(f"older_than must be a datetime.timedelta, got {type(older_than).__name__}")
    _positive(retain_versions, "retain_versions")
    _positive(delete_rate_limit, "delete_rate_limit")
    if older_than is None and retain_versions is None and versions is None:
        older_than = DEFAULT_CLEANUP_AGE
    store = ds.store
    info = VersionInfo(store)
    if not info.entries:
        return CleanupStats()
    current = ds.version
    manifests = {v: read_manifest(store, key, size) for v, (key, size) in info.entries.items()}
    cutoff_ns = None
    if older_than is not None:
        try:
            cutoff_ns = time.time_ns() - int(older_than.total_seconds() * 1e9)
        except OverflowError:
            raise InvalidInputError(f"older_than is out of range: {older_than!r}") from None
    only = None if versions is None else {int(v) for v in versions}

    def expired(v: int) -> bool:
        # Versions at or after the one open are in use (or being written): never removed.
        if v >= current or (only is not None and v not in only):
            return False
        if retain_versions is not None and v > current - retain_versions:
            return False
        return cutoff_ns is None or manifests[v].timestamp_ns < cutoff_ns

    tags = _tags.list_tags(store)
    tagged = {int(t["version"]) for t in tags.values()}
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
    candidates: set[str] = set()
    for v in remove:
        candidates |= referenced_files(manifests[v])
    sizes = {}
    for folder in ("data", "_deletions", "_transactions"):
        sizes.update(dict(store.list(folder)))
    counts = dict.fromkeys(("_versions", "data", "_deletions", "_transactions"), 0)
    freed = failed = 0
    pace = 1.0 / delete_rate_limit if delete_rate_limit else 0.0
    # Manifests first, so a version is never visible with some of its files gone.
    doomed = [(info.entries[v][0], info.entries[v][1], "_versions") for v in remove]
    doomed += [(key, sizes[key], key.split("/", 1)[0]) for key in sorted(candidates - needed) if key in sizes]
    for key, size, folder in doomed:
        started = time.monotonic()
        try:
            store.delete(key)
        except (LanceError, OSError):
            failed += 1
        else:
            freed += size
            counts[folder] += 1
        if pace:
            time.sleep(max(0.0, pace - (time.monotonic() - started)))
    return CleanupStats(
        bytes_removed=freed,
        old_versions=counts["_versions"],
        data_files_removed=counts["data"],
        transaction_files_removed=counts["_transactions"],
        deletion_files_removed=counts["_deletions"],
        failed_deletes=failed,
    )
