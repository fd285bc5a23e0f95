"""Compaction: rewrite runs of small fragments (and fragments with deletions) into full ones."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lance_format.core.errors import InvalidInputError
from lance_format.dataset.write import write_fragments
from lance_format.table.commit import commit_transaction
from lance_format.table.model import DataFragment, Manifest, Rewrite, RewriteGroup, Transaction
from lance_format.table.rowids import encode_row_ids

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["compact_files"]


def _groups(frags: tuple[DataFragment, ...], target: int) -> list[list[DataFragment]]:
    """Runs of adjacent candidate fragments worth rewriting."""
    groups: list[list[DataFragment]] = []
    run: list[DataFragment] = []
    for f in frags:
        if f.physical_rows < target or f.deletion_file is not None:
            run.append(f)
            continue
        groups.append(run)
        run = []
    groups.append(run)
    return [g for g in groups if len(g) > 1 or (g and g[0].deletion_file is not None)]


def _no_checkpoint() -> None:
    return None


def compact_files(
    ds: Snapshot, target_rows_per_fragment: int, checkpoint: Callable[[], None] = _no_checkpoint
) -> tuple[Manifest, dict[str, int]]:
    """Commit a Rewrite; returns the new manifest and pylance-like metrics.

    ``checkpoint`` is called before each fragment is read and before the commit; whatever it
    raises (a server's "the caller is gone") stops the compaction with nothing committed (files
    already written are orphans that cleanup removes). The work grows with fragments x columns,
    so a caller with a deadline needs a way to stop it.
    """
    if target_rows_per_fragment <= 0:
        raise InvalidInputError("target_rows_per_fragment must be positive")
    groups = _groups(ds.manifest.fragments, target_rows_per_fragment)
    stats = {"fragments_removed": 0, "fragments_added": 0, "files_removed": 0, "files_added": 0}
    if not groups:
        return ds.manifest, stats
    schema = ds.lance_schema
    names = [f.name for f in schema.fields]
    stable = ds.has_stable_row_ids
    out: list[RewriteGroup] = []
    for group in groups:
        tables = []
        ids = []
        for frag in group:
            checkpoint()
            reader = ds.fragment_reader(frag)
            table = reader.read_range(names, 0, frag.physical_rows)
            keep = reader.keep_mask()
            if keep is not None:
                table = table.filter(pa.array(keep))
            tables.append(table)
            if stable:
                rid = reader.row_ids()
                ids.append(rid[keep] if keep is not None else rid)
        data = pa.concat_tables(tables)
        new = write_fragments(
            ds.store, data.to_reader(), schema, ds.data_storage_version, target_rows_per_fragment
        )
        if stable:
            all_ids = np.concatenate(ids)
            start = 0
            for i, f in enumerate(new):
                chunk = all_ids[start : start + f.physical_rows]
                start += f.physical_rows
                new[i] = replace(f, row_ids=encode_row_ids(chunk))
        out.append(RewriteGroup(tuple(group), tuple(new)))
        stats["fragments_removed"] += len(group)
        stats["fragments_added"] += len(new)
        stats["files_removed"] += sum(len(f.files) for f in group)
        stats["files_added"] += sum(len(f.files) for f in new)
    checkpoint()
    txn = Transaction(ds.version, str(uuid.uuid4()), Rewrite(tuple(out)))
    return commit_transaction(ds.store, txn, ds.manifest, ds.naming), stats
