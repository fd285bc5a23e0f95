"""Changes to an existing dataset: delete rows, restore an old version."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InternalError, InvalidInputError, RetryableCommitConflictError
from lance_format.dataset.filters import Filter, evaluate, parse_filter, parse_value
from lance_format.dataset.row_versions import CREATED, split_versions
from lance_format.dataset.scanner import ROWADDR, ROWID, LanceScanner
from lance_format.dataset.write import write_fragments
from lance_format.table.commit import commit_transaction
from lance_format.table.deletion import write_deletion_file
from lance_format.table.model import (
    DataFragment,
    Delete,
    Manifest,
    Operation,
    Restore,
    Transaction,
    Update,
    UpdateConfig,
)
from lance_format.table.rowids import encode_row_ids
from lance_format.table.versions import load_manifest

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["delete_rows", "restore_version", "update_config", "update_rows"]

#: Times an operation is planned again on the latest version after losing to a conflicting commit.
CONFLICT_RETRIES = 10

T = TypeVar("T")


def with_retries(ds: Snapshot, attempt: Callable[[Snapshot], T]) -> T:
    """Run ``attempt`` (plan and commit) on ``ds``, then on the latest version after each
    :class:`RetryableCommitConflictError`, up to :data:`CONFLICT_RETRIES` times."""
    current = ds
    for n in range(CONFLICT_RETRIES + 1):
        try:
            return attempt(current)
        except RetryableCommitConflictError:
            if n == CONFLICT_RETRIES:
                raise
            current = current.latest()
    raise InternalError("conflict retry loop ended without a result")


def _commit(ds: Snapshot, op: Operation) -> Manifest:
    txn = Transaction(ds.version, str(uuid.uuid4()), op)
    return commit_transaction(ds.store, txn, ds.manifest, ds.naming)


def _plan_delete(ds: Snapshot, predicate: Filter) -> tuple[Delete, int]:
    """The Delete operation for ``predicate`` on ``ds``'s version, and the rows it deletes."""
    text = predicate if isinstance(predicate, str) else str(predicate)
    # Parsed and bound once (before touching storage), then shared by every fragment's scan.
    predicate = parse_filter(predicate, LanceScanner.filter_schema(ds.schema))
    updated: list[DataFragment] = []
    gone: list[int] = []
    total = 0
    for frag in ds.manifest.fragments:
        scan = LanceScanner(ds, columns=[], filter=predicate, with_row_address=True, fragments=[frag])
        hits = scan.to_table().column(ROWADDR).to_numpy() & np.uint64(0xFFFFFFFF)
        if not len(hits):
            continue
        total += len(hits)
        old = ds.fragment_reader(frag).deleted()
        deleted = np.union1d(old.astype(np.uint64), hits)
        if len(deleted) >= frag.physical_rows:
            gone.append(frag.id)
            continue
        d = write_deletion_file(ds.store, frag.id, ds.version, deleted)
        updated.append(replace(frag, deletion_file=d))
    return Delete(tuple(updated), tuple(gone), text), total


def delete_rows(ds: Snapshot, predicate: Filter) -> tuple[Manifest, int]:
    """Commit a delete of the rows matching ``predicate``; returns the new manifest and rows deleted.

    When a concurrent commit touched the same fragments, the delete is planned again on the latest
    version (up to :data:`DELETE_CONFLICT_RETRIES` times).
    """

    def attempt(current: Snapshot) -> tuple[Manifest, int]:
        op, total = _plan_delete(current, predicate)
        return _commit(current, op), total

    return with_retries(ds, attempt)


def update_config(ds: Snapshot, updates: dict[str, str | None]) -> Manifest:
    """Commit config upserts (str values) and deletions (``None``)."""
    for k, v in updates.items():
        if not isinstance(k, str) or not (v is None or isinstance(v, str)):
            raise InvalidInputError(f"config keys and values must be strings, got {k!r}: {v!r}")
    txn = Transaction(ds.version, str(uuid.uuid4()), UpdateConfig(updates))
    return commit_transaction(ds.store, txn, ds.manifest, ds.naming)


def restore_version(ds: Snapshot) -> Manifest:
    """Commit a Restore of ``ds``'s version on top of the latest one."""
    latest, naming = load_manifest(ds.store)
    txn = Transaction(latest.version, str(uuid.uuid4()), Restore(ds.version))
    return commit_transaction(ds.store, txn, latest, naming)


def _encode_dictionaries(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the values computed for dictionary columns of ``schema`` encoded (pyarrow
    casts strings to a dictionary, not integers)."""
    for i, f in enumerate(schema):
        col = table.column(i)
        if pa.types.is_dictionary(f.type) and not pa.types.is_dictionary(col.type):
            encoded = pc.dictionary_encode(col.cast(f.type.value_type))
            table = table.set_column(i, f.name, encoded.cast(f.type))
    return table


def _plan_update(ds: Snapshot, values: dict[str, str], where: Filter | None) -> tuple[Update, int]:
    """Rows matching ``where`` rewritten with ``values`` into new fragments; old rows deleted."""
    schema = ds.schema
    exprs = {}
    for name, sql in values.items():
        if name not in schema.names:
            raise InvalidInputError(f"cannot update {name!r}: no such column; columns are {schema.names}")
        t = schema.field(name).type
        # A dictionary column's value is computed as its values and encoded by the cast below.
        exprs[name] = parse_value(sql, schema, t.value_type if pa.types.is_dictionary(t) else t).expression
    if where is not None:
        where = parse_filter(where, LanceScanner.filter_schema(schema))  # once, before touching storage
    stable = ds.has_stable_row_ids
    moved: list[pa.Table] = []
    ids: list[np.ndarray] = []
    born: list[np.ndarray] = []
    updated: list[DataFragment] = []
    removed: list[int] = []
    for frag in ds.manifest.fragments:
        scan = LanceScanner(ds, filter=where, with_row_id=stable, with_row_address=True, fragments=[frag])
        hits = scan.to_table()
        if not hits.num_rows:
            continue
        offsets = hits.column(ROWADDR).to_numpy() & np.uint64(0xFFFFFFFF)
        if stable:
            ids.append(hits.column(ROWID).to_numpy())
            born.append(ds.fragment_reader(frag).row_versions(CREATED)[offsets.astype(np.int64)])
        projection = {c: exprs.get(c, pc.field(c)) for c in schema.names}
        moved.append(evaluate(hits.select(schema.names), projection))
        deleted = np.union1d(ds.fragment_reader(frag).deleted().astype(np.uint64), offsets)
        if len(deleted) >= frag.physical_rows:
            removed.append(frag.id)
            continue
        d = write_deletion_file(ds.store, frag.id, ds.version, deleted)
        updated.append(replace(frag, deletion_file=d))
    new: list[DataFragment] = []
    if moved:
        data = _encode_dictionaries(pa.concat_tables(moved), schema).cast(schema)
        new = write_fragments(ds.store, data.to_reader(), ds.lance_schema, ds.data_storage_version, 1 << 20)
        if stable:
            all_ids = np.concatenate(ids).astype(np.uint64)
            # Rewritten rows keep their creation version; the commit records their update.
            created = split_versions(np.concatenate(born), [f.physical_rows for f in new])
            start = 0
            for i, f in enumerate(new):
                rows = all_ids[start : start + f.physical_rows]
                new[i] = replace(f, row_ids=encode_row_ids(rows), created_at_versions=created[i])
                start += f.physical_rows
    total = sum(t.num_rows for t in moved)
    return Update(tuple(removed), tuple(updated), tuple(new)), total


def update_rows(ds: Snapshot, values: dict[str, str], where: Filter | None) -> tuple[Manifest, int]:
    """Commit an update; re-planned on the latest version after a conflicting concurrent commit."""
    if not values:
        raise InvalidInputError("update needs at least one column value")

    def attempt(current: Snapshot) -> tuple[Manifest, int]:
        op, total = _plan_update(current, values, where)
        return _commit(current, op), total

    return with_retries(ds, attempt)
