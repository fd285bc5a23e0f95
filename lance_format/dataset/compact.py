"""Compaction: rewrite runs of small fragments (and fragments with deletions) into full ones."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import InvalidInputError, NotSupportedError
from lance_format.dataset.indices import dataset_indices
from lance_format.dataset.row_versions import CREATED, UPDATED, split_versions
from lance_format.dataset.scalar_index.remap import AddressMap, indices_to_remap, remap_indices
from lance_format.dataset.write import write_fragments
from lance_format.table.commit import commit_transaction
from lance_format.table.model import (
    DataFragment,
    IndexMetadata,
    Manifest,
    ReserveFragments,
    Rewrite,
    RewriteGroup,
    RewrittenIndex,
    Transaction,
)
from lance_format.table.rowids import encode_row_ids
from lance_format.table.transaction import check_conflict
from lance_format.table.versions import read_transaction

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["CompactionMetrics", "Compacts", "Optimize", "compact_files"]


@dataclass(frozen=True)
class CompactionMetrics:
    """What a compaction did, as pylance's ``ds.optimize.compact_files`` reports it."""

    fragments_removed: int = 0
    fragments_added: int = 0
    files_removed: int = 0
    files_added: int = 0


#: pylance's defaults (``CompactionOptions``): fragments under a million rows are merged; a fragment
#: with more than 10% of its rows deleted is rewritten to drop them.
DEFAULT_TARGET_ROWS = 1024 * 1024
DEFAULT_DELETIONS_THRESHOLD = 0.1


def _groups(
    frags: tuple[DataFragment, ...],
    target: int,
    materialize_deletions: bool,
    threshold: float,
    indices: Sequence[IndexMetadata] = (),
) -> list[list[DataFragment]]:
    """The groups of adjacent fragments to rewrite, planned as pylance plans them.

    A fragment is rewritten on its own account when more than ``threshold`` of its physical rows
    are deleted (compared in 32-bit floats, as pylance does), or with its neighbours when it has
    fewer than ``target`` physical rows. A run of such fragments covered by the same ``indices``
    is one candidate (a fragment an index covers and one it does not are never merged: the index
    could not be remapped; a lone small fragment is left alone), then cut into groups of at least
    ``target`` live rows, the remainder going to the last group.
    """
    own = materialize_deletions and threshold < 1.0
    runs: list[list[tuple[DataFragment, bool]]] = [[]]
    run_indices: frozenset[str] = frozenset()
    for f in frags:
        itself = (
            own
            and f.physical_rows > 0
            and (np.float32(f.num_deleted_rows) / np.float32(f.physical_rows) > np.float32(threshold))
        )
        if itself or f.physical_rows < target:
            covering = frozenset(i.uuid for i in indices if f.id in i.fragment_ids)
            if runs[-1] and covering != run_indices:
                runs.append([])
            runs[-1].append((f, bool(itself)))
            run_indices = covering
        elif runs[-1]:
            runs.append([])
    groups: list[list[DataFragment]] = []
    for run in runs:
        if not run or (len(run) == 1 and not run[0][1]):
            continue
        live = [f.physical_rows - f.num_deleted_rows for f, _ in run]
        start = 0
        while True:
            end, rows = start, 0
            while rows < target and end < len(run):
                rows += live[end]
                end += 1
            if sum(live[end:]) >= target:
                groups.append([f for f, _ in run[start:end]])
                start = end
            else:
                groups.append([f for f, _ in run[start:]])
                break
    return groups


def _file_sizes(rows: int, target: int) -> list[int]:
    """Rows of each file a rewritten group makes: ``rows // target`` files (at least one) of sizes
    as equal as can be, the larger first (pylance's compaction output)."""
    if rows == 0:
        return []
    n = max(1, rows // target)
    base, extra = divmod(rows, n)
    return [base + 1] * extra + [base] * (n - extra)


def compact_files(
    ds: Snapshot,
    target_rows_per_fragment: int = DEFAULT_TARGET_ROWS,
    *,
    materialize_deletions: bool = True,
    materialize_deletions_threshold: float = DEFAULT_DELETIONS_THRESHOLD,
    checkpoint: Callable[[], None] | None = None,
) -> tuple[Manifest, dict[str, int]]:
    """Commit a Rewrite planned as pylance's ``compact_files`` plans it (same groups, same fragment
    sizes); returns the new manifest and pylance's metrics. Nothing to do commits nothing.

    ``checkpoint`` is called before each fragment is read and before the commit; whatever it
    raises (a server's "the caller is gone") stops the compaction with nothing committed (files
    already written are orphans that cleanup removes). The work grows with fragments x columns,
    so a caller with a deadline needs a way to stop it.
    """
    step = checkpoint or (lambda: None)  # no caller to outlive: nothing to check
    target = target_rows_per_fragment
    if isinstance(target, bool) or not isinstance(target, int) or target < 0:
        raise InvalidInputError(f"target_rows_per_fragment must be a non-negative integer, got {target!r}")
    groups = _groups(
        ds.manifest.fragments,
        target,
        materialize_deletions,
        materialize_deletions_threshold,
        dataset_indices(ds),
    )
    stats = {"fragments_removed": 0, "fragments_added": 0, "files_removed": 0, "files_added": 0}
    if not groups:
        return ds.manifest, stats
    schema = ds.lance_schema
    names = [f.name for f in schema.fields]
    stable = ds.has_stable_row_ids
    rewritten = {f.id for g in groups for f in g}
    to_remap = indices_to_remap(ds, rewritten)  # refuses an index it cannot remap before any work
    old_addrs: list[npt.NDArray[np.uint64]] = []
    out: list[RewriteGroup] = []
    for group in groups:
        tables = []
        ids = []
        born: list[npt.NDArray[np.uint64]] = []
        touched: list[npt.NDArray[np.uint64]] = []
        for frag in group:
            step()
            reader = ds.fragment_reader(frag)
            table = reader.read_range(names, 0, frag.physical_rows)
            keep = reader.keep_mask()
            if keep is not None:
                table = table.filter(pa.array(keep))
            tables.append(table)
            if to_remap:
                offsets = np.arange(frag.physical_rows, dtype=np.uint64)
                live = offsets[keep] if keep is not None else offsets
                old_addrs.append((np.uint64(frag.id) << np.uint64(32)) | live)
            if stable:
                rid = reader.row_ids()
                ids.append(rid[keep] if keep is not None else rid)
                for which, sink in ((CREATED, born), (UPDATED, touched)):
                    v = reader.row_versions(which)
                    sink.append(v[keep] if keep is not None else v)
        data = pa.concat_tables(tables)
        new = []
        start = 0
        for size in _file_sizes(data.num_rows, target):
            part = data.slice(start, size)
            start += size
            new += write_fragments(ds.store, part.to_reader(), schema, ds.data_storage_version, size)
        if stable:
            all_ids = np.concatenate(ids)
            # Rows keep their versions through a compaction, as pylance's do.
            sizes = [f.physical_rows for f in new]
            created_seqs = split_versions(np.concatenate(born), sizes)
            updated_seqs = split_versions(np.concatenate(touched), sizes)
            start = 0
            for i, f in enumerate(new):
                chunk = all_ids[start : start + f.physical_rows]
                start += f.physical_rows
                new[i] = replace(
                    f,
                    row_ids=encode_row_ids(chunk),
                    created_at_versions=created_seqs[i],
                    last_updated_at_versions=updated_seqs[i],
                )
        out.append(RewriteGroup(tuple(group), tuple(new)))
        stats["fragments_removed"] += len(group)
        stats["fragments_added"] += len(new)
        stats["files_removed"] += sum(len(f.files) + (f.deletion_file is not None) for f in group)
        stats["files_added"] += sum(len(f.files) for f in new)
    step()
    base = ds.manifest
    added = stats["fragments_added"]
    if added:
        # pylance commits twice: ids for the new fragments are reserved first (a version of its
        # own), so the Rewrite names them; versions and transactions then read alike on both.
        reserve = Transaction(ds.version, str(uuid.uuid4()), ReserveFragments(added))
        base = commit_transaction(ds.store, reserve, base, ds.naming)
        nid = base.next_fragment_id() - added
        for i, rg in enumerate(out):
            named = tuple(replace(f, id=nid + k) for k, f in enumerate(rg.new_fragments))
            nid += len(named)
            out[i] = replace(rg, new_fragments=named)
    remapped: tuple[RewrittenIndex, ...] = ()
    if to_remap:
        step()
        moved = np.concatenate(old_addrs) if old_addrs else np.zeros(0, np.uint64)
        amap = AddressMap.of(moved, [f for rg in out for f in rg.new_fragments], frozenset(rewritten))
        remapped = remap_indices(ds, to_remap, amap)
    txn = Transaction(ds.version, str(uuid.uuid4()), Rewrite(tuple(out), remapped))
    _check_landed_before(ds, txn, base.version)
    return commit_transaction(ds.store, txn, base, ds.naming), stats


def _check_landed_before(ds: Snapshot, txn: Transaction, reserved: int) -> None:
    """Check the Rewrite against the commits that landed between the version it read and the
    reservation of its fragment ids (it is committed on top of the reservation, so the commit's own
    rebase starts after them): a delete of rows it copied, or an index over fragments it moved,
    must make it plan again, as pylance's Rewrite (read version before the reservation) does."""
    for v in range(ds.version + 1, reserved):
        snap = ds.at_version(v)
        check_conflict(txn, read_transaction(snap.store, snap.manifest, snap.naming), v)


class Compacts(Protocol):
    """What :class:`Optimize` drives: a dataset's ``compact_files`` (``LanceDataset``'s)."""

    def compact_files(
        self,
        target_rows_per_fragment: int = ...,
        *,
        materialize_deletions: bool = ...,
        materialize_deletions_threshold: float = ...,
    ) -> dict[str, int]: ...


class Optimize:
    """pylance's ``ds.optimize`` namespace (``LanceDataset.optimize``)."""

    def __init__(self, ds: Compacts) -> None:
        self._ds = ds

    def compact_files(
        self,
        *,
        target_rows_per_fragment: int = 1024 * 1024,
        max_rows_per_group: int = 1024,
        max_bytes_per_file: int | None = None,
        materialize_deletions: bool = True,
        materialize_deletions_threshold: float = 0.1,
        num_threads: int | None = None,
        batch_size: int | None = None,
        defer_index_remap: bool | None = None,
    ) -> CompactionMetrics:
        """Rewrite small fragments and fragments with deletions into full ones, planned as pylance
        plans them; pylance's ``CompactionMetrics``. Indices covering the rewritten fragments are
        remapped in the same commit, as pylance does. ``max_rows_per_group``,
        ``max_bytes_per_file``, ``num_threads`` and ``batch_size`` are accepted for pylance's
        signature and change nothing in the result; ``defer_index_remap=True`` (pylance's
        fragment reuse index) is refused."""
        del max_rows_per_group, max_bytes_per_file, num_threads, batch_size
        if defer_index_remap:
            raise NotSupportedError(
                "compact_files(defer_index_remap=True) is not supported: this engine does not "
                "write pylance's fragment reuse index; indices are remapped during compaction"
            )
        stats = self._ds.compact_files(
            target_rows_per_fragment,
            materialize_deletions=materialize_deletions,
            materialize_deletions_threshold=materialize_deletions_threshold,
        )
        return CompactionMetrics(**stats)
