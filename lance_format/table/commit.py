"""Committing a transaction: transaction file, put-if-not-exists of the next manifest, hint.

On a lost race the winners' transactions are read; compatible operations are rebased onto the new
latest version and the commit is retried (bounded, with jittered exponential backoff), otherwise a
:class:`CommitConflictError` is raised.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, replace

from lance_format.core.errors import (
    DatasetAlreadyExistsError,
    LanceError,
    RetryableCommitConflictError,
    StorageError,
)
from lance_format.io.store import ObjectStore
from lance_format.table import _serde
from lance_format.table.committers import (
    ExternalManifestCommitter,
    ManifestCommitter,
    PutIfNotExistsCommitter,
)
from lance_format.table.external_store import finalize_pending, manifest_store_for
from lance_format.table.flags import DISABLE_TRANSACTION_FILE, check_writer_flags
from lance_format.table.manifest_file import encode_manifest, read_manifest
from lance_format.table.model import DataStorageFormat, Manifest, Overwrite, Restore, Transaction
from lance_format.table.naming import ManifestNaming, manifest_key, transaction_key, write_hint
from lance_format.table.tags import pin_commit, unpin
from lance_format.table.transaction import build_manifest, check_conflict
from lance_format.table.versions import VersionInfo, load_manifest, read_index_section, read_transaction

__all__ = ["CommitOptions", "commit_first_version", "commit_transaction"]

#: Attempts after the first lost race before giving up with RetryableCommitConflictError.
DEFAULT_MAX_RETRIES = 20
#: Backoff between attempts: starts here, doubles, capped; jittered so racing writers spread out.
BACKOFF_START_S = 0.005
BACKOFF_MAX_S = 0.5


@dataclass(frozen=True)
class CommitOptions:
    """How to commit: naming scheme for new datasets, format, stable row ids, retries."""

    naming: ManifestNaming = ManifestNaming.V2
    data_format: DataStorageFormat | None = None
    stable_row_ids: bool = False
    max_retries: int = DEFAULT_MAX_RETRIES
    create_only: bool = False
    committer: ManifestCommitter | None = None
    #: Versions whose files the transaction names (fragments read from them): pinned while it commits.
    pinned_versions: frozenset[int] = frozenset()


# Weak values: a lock lives while a commit holds or waits on it, so the table stays as small as the
# commits in progress (a dict grew by one lock per dataset URI ever written, client-chosen names).
_COMMIT_LOCKS: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()
_COMMIT_LOCKS_GUARD = threading.Lock()


def _commit_lock(uri: str) -> threading.Lock:
    """The process-wide lock that orders this process's commits to the dataset at ``uri``."""
    with _COMMIT_LOCKS_GUARD:
        lock = _COMMIT_LOCKS.get(uri)
        if lock is None:
            lock = threading.Lock()
            _COMMIT_LOCKS[uri] = lock
        return lock


def _rebase(
    store: ObjectStore, txn: Transaction, base: Manifest | None, naming: ManifestNaming
) -> tuple[Manifest | None, ManifestNaming]:
    """The latest manifest, after checking ``txn`` against every version committed since ``base``.

    When the winning commit is not listed yet (eventually consistent listings), ``base`` comes back
    unchanged and the caller simply tries again.
    """
    external = manifest_store_for(store.uri)
    if external is not None:
        finalize_pending(store, external)
    info = VersionInfo(store)
    if info.naming is None or info.latest is None:
        return base, naming
    latest: Manifest | None = base
    for v in range((base.version if base else 0) + 1, info.latest + 1):
        entry = info.entries.get(v)
        if entry is None:
            # Cleaned up since: nothing tells us what it did, but planning again on the latest
            # version is sound (operations that win over anything need no check).
            if not isinstance(txn.operation, Overwrite | Restore):
                raise RetryableCommitConflictError(
                    f"{store.uri}: version {v}, committed after this commit's version "
                    f"{base.version if base else 0}, was cleaned up; plan again on the latest version"
                )
            continue
        latest = read_manifest(store, *entry)
        check_conflict(txn, read_transaction(store, latest, info.naming), v)
    if latest is not None:
        check_writer_flags(latest, store.uri)
    return latest, info.naming


@contextlib.contextmanager
def _pinned(
    store: ObjectStore, txn: Transaction, base: Manifest | None, sources: frozenset[int]
) -> Iterator[None]:
    """While it commits, a commit pins its base and every later version, and the versions whose
    files it copies (a restore's, ``sources``): a cleanup running meanwhile keeps them (see
    :mod:`lance_format.table.tags`). A new dataset has nothing to pin. Raises
    :class:`VersionNotFoundError` when a version to copy is gone (nothing committed)."""
    op = txn.operation
    copied = sorted(sources | ({op.version} if isinstance(op, Restore) else set()))
    keys: list[str] = []
    try:
        if base is not None or copied:
            keys.append(
                pin_commit(store, None if base is None else base.version, copied[0] if copied else None)
            )
        keys.extend(pin_commit(store, None, v) for v in copied[1:])
        yield
    finally:
        for key in keys:
            with contextlib.suppress(LanceError, OSError):  # an unreleased pin only expires
                unpin(store, key)


def _committer(store: ObjectStore, opts: CommitOptions) -> ManifestCommitter:
    if opts.committer is not None:
        return opts.committer
    external = manifest_store_for(store.uri)
    return PutIfNotExistsCommitter() if external is None else ExternalManifestCommitter(external)


def commit_first_version(
    store: ObjectStore,
    txn: Transaction,
    manifest: Manifest,
    index_section: bytes | None,
    options: CommitOptions | None = None,
) -> Manifest:
    """Commit ``manifest``, built whole by the caller (a clone's: its version is the source's),
    as the first version of a new dataset in ``store``, with ``txn`` and ``index_section``.

    Raises :class:`DatasetAlreadyExistsError` when ``store`` holds a dataset already or another
    writer commits that version first.
    """
    opts = options or CommitOptions()
    if VersionInfo(store).latest is not None:
        raise DatasetAlreadyExistsError(f"{store.uri}: dataset already exists")
    store.write(transaction_key(txn.file_name()), _serde.transaction_to_bytes(txn))
    data, new = encode_manifest(manifest, txn, index_section)
    key = manifest_key(new.version, opts.naming)
    with _commit_lock(store.uri):
        try:
            won = _committer(store, opts).commit(store, new.version, key, data)
        except OSError as e:
            raise StorageError(f"{store.uri}/{key}: commit failed: {e}") from e
    if not won:
        raise DatasetAlreadyExistsError(f"{store.uri}: dataset already exists")
    with contextlib.suppress(OSError):  # only a hint: readers never rely on it
        write_hint(store, new.version)
    return replace(new, index_section_bytes=None)


def commit_transaction(
    store: ObjectStore,
    txn: Transaction,
    base: Manifest | None,
    naming: ManifestNaming | None = None,
    options: CommitOptions | None = None,
) -> Manifest:
    """Commit ``txn`` planned against ``base`` (``None``: new dataset); returns the new manifest."""
    opts = options or CommitOptions()
    naming = naming or opts.naming
    if base is not None:
        check_writer_flags(base, store.uri)
        if base.index_section is not None and base.index_section_bytes is None:
            base = replace(base, index_section_bytes=read_index_section(store, base, naming))
    # A dataset flagged DISABLE_TRANSACTION_FILE keeps its transactions inline only.
    inline_only = base is not None and bool(base.writer_feature_flags & DISABLE_TRANSACTION_FILE)
    if not inline_only:
        store.write(transaction_key(txn.file_name()), _serde.transaction_to_bytes(txn))

    def load(v: int) -> Manifest:
        old, old_naming = load_manifest(store, v)
        return replace(old, index_section_bytes=read_index_section(store, old, old_naming))

    committer = _committer(store, opts)
    # Writers in this process take turns: they would only race each other for the same version
    # and burn retries (32 threads appending through one server gave up after 21 attempts).
    # Other processes still race optimistically through the store's conditional put.
    with _commit_lock(store.uri), _pinned(store, txn, base, opts.pinned_versions):
        if base is not None:
            # A stale base's next version may have been committed and then cleaned up: its
            # put-if-not-exists would win and land under the latest version, a lost write. So
            # check what was committed since first (one listing, as the loser of a race does).
            # A version committed and cleaned up between this listing and the put cannot be:
            # the pin above keeps every version from the base on from cleanups that list after it.
            base, naming = _rebase(store, txn, base, naming)
            if base is not None and base.index_section is not None and base.index_section_bytes is None:
                base = replace(base, index_section_bytes=read_index_section(store, base, naming))
        delay = BACKOFF_START_S
        for attempt in range(opts.max_retries + 1):
            new = build_manifest(
                base,
                txn,
                data_format=opts.data_format,
                stable_row_ids=opts.stable_row_ids,
                load_version=load,
            )
            if inline_only:
                new = replace(new, transaction_file="")
            data, new = encode_manifest(new, txn, new.index_section_bytes)
            key = manifest_key(new.version, naming)
            try:
                won = committer.commit(store, new.version, key, data)
            except OSError as e:
                raise StorageError(f"{store.uri}/{key}: commit failed: {e}") from e
            if won:
                with contextlib.suppress(OSError):  # only a hint: readers never rely on it
                    write_hint(store, new.version)
                return replace(new, index_section_bytes=None)
            if base is None and opts.create_only:
                raise DatasetAlreadyExistsError(f"{store.uri}: dataset already exists")
            # Lost the race: check every version committed since our base, then rebase onto the latest.
            base, naming = _rebase(store, txn, base, naming)
            if base is not None and base.index_section is not None and base.index_section_bytes is None:
                base = replace(base, index_section_bytes=read_index_section(store, base, naming))
            if attempt < opts.max_retries:
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, BACKOFF_MAX_S)
        raise RetryableCommitConflictError(
            f"{store.uri}: gave up after {opts.max_retries + 1} attempts lost to concurrent commits"
        )
