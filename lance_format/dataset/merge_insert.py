"""``merge_insert``: the upsert (update matched rows, insert new ones, delete rows the source lacks).

The plan is vectorised: the target's key columns and row addresses are scanned once, joined to the
source's keys with a pyarrow hash join, and every decision is a numpy mask over the match pairs.
The result commits as one ``Update`` transaction, as pylance writes it: rewritten and inserted rows
go to new fragments, the old versions of rewritten rows and the deleted rows are marked in deletion
files. A commit that loses to a concurrent change of the same fragments is planned again on the
latest version (pylance does the same); concurrent inserts of the same new key both land, as in
pylance, because Lance has no unique constraint.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError, RetryableCommitConflictError, SchemaMismatchError
from lance_format.dataset.filters import evaluate, parse_filter
from lance_format.dataset.row_versions import CREATED, versions_at
from lance_format.dataset.scanner import ROWADDR, ROWID, LanceScanner
from lance_format.dataset.take import take_addresses
from lance_format.dataset.write import DEFAULT_MAX_ROWS_PER_FILE, to_reader, write_fragments
from lance_format.table.commit import commit_transaction
from lance_format.table.deletion import write_deletion_file
from lance_format.table.model import DataFragment, Manifest, Transaction, Update
from lance_format.table.rowids import encode_row_ids, encode_row_versions

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["MergeInsertBuilder", "MergeInsertConflictError", "MergeInsertError"]

_SRC = "__lance_merge_src"
_TGT = "__lance_merge_tgt"
#: pylance's default for ``conflict_retries``: plans made again after losing a commit race.
DEFAULT_CONFLICT_RETRIES = 10


class MergeInsertError(InvalidInputError, OSError):
    """A merge the data makes ambiguous or forbidden (pylance raises ``OSError`` for these)."""


class MergeInsertConflictError(RetryableCommitConflictError, OSError):
    """Every retry lost to concurrent commits (pylance raises ``OSError`` "Too many concurrent
    writers" here)."""


@dataclass
class _Plan:
    op: Update
    inserted: int
    updated: int
    deleted: int


class MergeInsertBuilder:
    """pylance's ``MergeInsertBuilder``: configure with ``when_*`` calls, then :meth:`execute`."""

    def __init__(
        self, ds: Snapshot, on: str | Iterable[str], on_commit: Callable[[Manifest], None] | None = None
    ) -> None:
        keys = [on] if isinstance(on, str) else list(on)
        if not keys:
            raise InvalidInputError("merge_insert needs at least one key column in `on`")
        for k in keys:
            if not isinstance(k, str) or k not in ds.schema.names:
                raise InvalidInputError(
                    f"Merge insert key column {k!r} does not exist in schema {ds.schema.names}"
                )
        self._ds = ds
        self._on_commit = on_commit or (lambda manifest: None)
        self._on = keys
        self._matched: str = "nothing"  # nothing | update | delete | fail
        self._matched_condition: str | None = None
        self._insert = False
        self._by_source: str | None = None  # None: keep; "" delete all; else a SQL predicate
        self._retries = DEFAULT_CONFLICT_RETRIES

    # -- configuration (each returns the builder, as in pylance) -----------------------------------
    def when_matched_update_all(self, condition: str | None = None) -> MergeInsertBuilder:
        """Replace matched target rows by the source rows (only where ``condition`` holds; it may
        name ``target.col`` and ``source.col``)."""
        self._matched, self._matched_condition = "update", condition
        return self

    def when_matched_delete(self) -> MergeInsertBuilder:
        """Delete the target rows the source matches."""
        self._matched, self._matched_condition = "delete", None
        return self

    def when_matched_fail(self) -> MergeInsertBuilder:
        """Fail (and change nothing) when any source row matches a target row."""
        self._matched, self._matched_condition = "fail", None
        return self

    def when_not_matched_insert_all(self) -> MergeInsertBuilder:
        """Insert source rows that match no target row."""
        self._insert = True
        return self

    def when_not_matched_by_source_delete(self, expr: str | None = None) -> MergeInsertBuilder:
        """Delete target rows no source row matches (only those matching ``expr`` when given)."""
        self._by_source = "" if expr is None else expr
        return self

    def conflict_retries(self, max_retries: int) -> MergeInsertBuilder:
        """Times to plan again on the latest version after losing to a concurrent commit."""
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidInputError(f"max_retries must be a non-negative integer, got {max_retries!r}")
        self._retries = max_retries
        return self

    # -- running -------------------------------------------------------------------------------------
    def execute(self, data_obj: Any, *, schema: pa.Schema | None = None) -> dict[str, int]:
        """Run the merge against ``data_obj`` and commit it as one new version.

        Returns
        -------
        dict
            ``{"num_inserted_rows", "num_updated_rows", "num_deleted_rows"}`` as pylance does.
        """
        if self._matched == "nothing" and not self._insert and self._by_source is None:
            raise InvalidInputError("The merge insert job is not configured to change the data in any way")
        source = self._source(data_obj, schema)
        current = self._ds
        for attempt in range(self._retries + 1):
            plan = self._plan(current, source)
            txn = Transaction(current.version, str(uuid.uuid4()), plan.op)
            try:
                manifest = commit_transaction(current.store, txn, current.manifest, current.naming)
            except RetryableCommitConflictError as e:
                if attempt == self._retries:
                    raise MergeInsertConflictError(
                        f"Too many concurrent writers. Attempted {self._retries} retries: {e}"
                    ) from None
                current = current.latest()
                continue
            self._ds = current.at(manifest)
            self._on_commit(manifest)
            return {
                "num_inserted_rows": plan.inserted,
                "num_updated_rows": plan.updated,
                "num_deleted_rows": plan.deleted,
            }
        raise AssertionError("unreachable")  # pragma: no cover

    def _source(self, data_obj: Any, schema: pa.Schema | None) -> pa.Table:
        """The source rows as a table with the dataset's types (columns it lacks are left out)."""
        table = to_reader(data_obj, schema).read_all()
        target = self._ds.schema
        for k in self._on:
            if k not in table.schema.names:
                raise InvalidInputError(f"the source data has no key column {k!r}")
        extra = [n for n in table.schema.names if n not in target.names]
        if extra:
            raise SchemaMismatchError(f"the source data has columns {extra} the dataset does not have")
        names = [n for n in target.names if n in table.schema.names]
        fields = [target.field(n) for n in names]
        try:
            return table.select(names).cast(pa.schema(fields))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise SchemaMismatchError(f"the source data does not match the dataset's schema: {e}") from None

    def _matches(
        self, target_keys: pa.Table, source: pa.Table
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``(target index, source index)`` of every pair with equal keys (null keys never match)."""
        if not target_keys.num_rows or not source.num_rows:
            empty = np.zeros(0, np.int64)
            return empty, empty
        left = target_keys.select(self._on).append_column(_TGT, pa.array(np.arange(target_keys.num_rows)))
        right = source.select(self._on).append_column(_SRC, pa.array(np.arange(source.num_rows)))
        try:
            joined = left.join(right, keys=self._on, join_type="inner")
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise InvalidInputError(f"cannot join on {self._on}: {e}") from None
        t = joined.column(_TGT).to_numpy().astype(np.int64)
        s = joined.column(_SRC).to_numpy().astype(np.int64)
        order = np.lexsort((s, t))  # deterministic: target order, then source order
        return t[order], s[order]

    def _plan(self, ds: Snapshot, source: pa.Table) -> _Plan:
        """The Update for ``source`` on ``ds``'s version (an empty one commits a version too, as
        in pylance)."""
        stable = ds.has_stable_row_ids
        scan = LanceScanner(ds, columns=self._on, with_row_address=True, with_row_id=stable)
        target_keys = scan.to_table()
        addrs = target_keys.column(ROWADDR).to_numpy().astype(np.uint64)
        t_all, s_all = self._matches(target_keys, source)

        if self._matched == "fail" and len(t_all):
            raise MergeInsertError(
                f"Merge insert failed: {len(np.unique(t_all))} target rows match source rows on {self._on}"
            )
        if self._matched == "delete":
            self._check_unambiguous(t_all)

        schema = ds.schema
        updated_rows: pa.Table | None = None
        updated_ids: npt.NDArray[np.uint64] | None = None
        updated_born: npt.NDArray[np.uint64] | None = None
        remove = np.zeros(0, np.uint64)
        n_updated = n_deleted = 0
        if self._matched == "update" and len(t_all):
            t_idx, s_idx = t_all, s_all
            old = take_addresses(ds, addrs[t_idx], None)
            new_vals = source.take(pa.array(s_idx))
            if self._matched_condition is not None:
                keep = self._condition(old, new_vals)
                t_idx, s_idx = t_idx[keep], s_idx[keep]
                old, new_vals = old.filter(pa.array(keep)), new_vals.filter(pa.array(keep))
            # Like pylance: only the pairs the condition lets through must be one per target row
            # (a repeated key whose other source rows fail the condition updates from the one).
            self._check_unambiguous(t_idx)
            cols = [new_vals.column(n) if n in new_vals.schema.names else old.column(n) for n in schema.names]
            updated_rows = pa.Table.from_arrays(cols, schema=schema)
            if stable:
                updated_ids = target_keys.column(ROWID).to_numpy().astype(np.uint64)[t_idx]
                updated_born = versions_at(ds, addrs[t_idx], CREATED)
            remove = addrs[t_idx]
            n_updated = len(t_idx)
        elif self._matched == "delete" and len(t_all):
            remove = addrs[np.unique(t_all)]
            n_deleted += len(remove)

        inserted: pa.Table | None = None
        if self._insert:
            unmatched = np.ones(source.num_rows, bool)
            unmatched[s_all] = False
            if unmatched.any():
                inserted = _fill_missing(source.filter(pa.array(unmatched)), schema)

        if self._by_source is not None:
            candidates = np.ones(target_keys.num_rows, bool)
            candidates[t_all] = False
            if self._by_source:
                flt = LanceScanner(ds, columns=[], filter=self._by_source, with_row_address=True).to_table()
                candidates &= np.isin(addrs, flt.column(ROWADDR).to_numpy().astype(np.uint64))
            gone = addrs[candidates]
            n_deleted += len(gone)
            remove = np.union1d(remove, gone)

        n_inserted = 0 if inserted is None else inserted.num_rows
        op = self._update_op(ds, remove, updated_rows, updated_ids, updated_born, inserted)
        return _Plan(op, n_inserted, n_updated, n_deleted)

    def _check_unambiguous(self, targets: npt.NDArray[np.int64]) -> None:
        """Refuse a merge where a target row (``targets``: sorted target indices of the pairs that
        update or delete) is matched by more than one source row."""
        if len(targets) > 1 and bool((targets[1:] == targets[:-1]).any()):
            raise MergeInsertError(
                "Ambiguous merge inserts are prohibited: multiple source rows match the same target "
                f"row on {self._on}. Please ensure each target row is matched by at most one source row."
            )

    def _condition(self, old: pa.Table, new: pa.Table) -> npt.NDArray[np.bool_]:
        """Where the ``when_matched_update_all`` condition holds (null counts as false)."""
        old, new = _one_chunk(old), _one_chunk(new)
        pair = pa.table(
            {
                "target": pa.StructArray.from_arrays(
                    [c.chunk(0) for c in old.columns], names=old.schema.names
                ),
                "source": pa.StructArray.from_arrays(
                    [c.chunk(0) for c in new.columns], names=new.schema.names
                ),
            }
        )
        assert self._matched_condition is not None
        expr = parse_filter(self._matched_condition, pair.schema).expression
        mask = evaluate(pair, {"m": expr}).column("m")
        return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)

    def _update_op(
        self,
        ds: Snapshot,
        remove: npt.NDArray[np.uint64],
        updated_rows: pa.Table | None,
        updated_ids: npt.NDArray[np.uint64] | None,
        updated_born: npt.NDArray[np.uint64] | None,
        inserted: pa.Table | None,
    ) -> Update:
        """Deletion files for ``remove`` and new fragments for the rewritten and inserted rows."""
        frag_of = (remove >> np.uint64(32)).astype(np.int64)
        offsets = remove & np.uint64(0xFFFFFFFF)
        updated: list[DataFragment] = []
        removed: list[int] = []
        for frag in ds.manifest.fragments:
            hits = offsets[frag_of == frag.id]
            if not len(hits):
                continue
            deleted = np.union1d(ds.deleted_offsets(frag), hits)
            if len(deleted) >= frag.physical_rows:
                removed.append(frag.id)
                continue
            d = write_deletion_file(ds.store, frag.id, ds.version, deleted)
            updated.append(replace(frag, deletion_file=d))

        def write(table: pa.Table) -> list[DataFragment]:
            reader = table.to_reader()
            return write_fragments(
                ds.store, reader, ds.lance_schema, ds.data_storage_version, DEFAULT_MAX_ROWS_PER_FILE
            )

        new: list[DataFragment] = []
        parts = [t for t in (updated_rows, inserted) if t is not None and t.num_rows]
        if parts:
            # Updated rows, then inserted ones, written together (one fragment where they fit, as
            # pylance writes them).
            new = write(pa.concat_tables(parts))
        if updated_ids is not None and updated_rows is not None and updated_rows.num_rows:
            # Rewritten rows keep their stable ids and creation versions; inserted ones get fresh
            # ids at commit (``pending_row_ids``), and the commit records the update.
            assert updated_born is not None
            known = len(updated_ids)
            start = 0
            for i, f in enumerate(new):
                kept = max(0, min(known - start, f.physical_rows))
                if kept:
                    rows = slice(start, start + kept)
                    new[i] = replace(
                        f,
                        row_ids=encode_row_ids(updated_ids[rows]),
                        created_at_versions=encode_row_versions(updated_born[rows]),
                        pending_row_ids=f.physical_rows - kept,
                    )
                start += f.physical_rows
        return Update(tuple(removed), tuple(updated), tuple(new))


def _fill_missing(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the dataset's columns in order, nulls for the ones it lacks."""
    cols = [
        table.column(f.name) if f.name in table.schema.names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def _one_chunk(table: pa.Table) -> pa.Table:
    """``table`` in one chunk. Dictionary columns whose chunks have different dictionaries are
    decoded when pyarrow cannot unify them (a dictionary holding a null value: "Cannot yet unify
    dictionaries with nulls"); a dictionary compares as its values, so the condition is the same."""
    try:
        return table.combine_chunks()
    except pa.ArrowInvalid:
        columns = [
            c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) and c.num_chunks > 1 else c
            for c in table.columns
        ]
        return pa.Table.from_arrays(columns, names=table.column_names).combine_chunks()
