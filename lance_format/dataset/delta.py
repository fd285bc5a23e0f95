"""pylance's ``LanceDataset.delta``: what changed between two versions of a dataset.

Rows carry the version that created them and the one that last updated them
(:mod:`lance_format.dataset.row_versions`), so the rows inserted in ``(begin, end]`` are those of
version ``end`` created after ``begin``, and the rows updated there those created by ``begin`` at
the latest and updated after it. Deleted rows are the stable row ids of version ``begin`` that
version ``end`` no longer has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lance_format.core.errors import InvalidInputError
from lance_format.dataset.scanner import CREATED_AT, ROWID, UPDATED_AT, LanceScanner
from lance_format.table.model import Transaction
from lance_format.table.versions import read_transaction

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["DatasetDelta", "delta_range"]


def delta_range(
    current: int, compared_against: int | None, begin_version: int | None, end_version: int | None
) -> tuple[int, int]:
    """``(begin, end)`` of pylance's ``delta`` arguments: ``compared_against`` and the current
    version in either order (it wins over an explicit range, as in pylance), else both of
    ``begin_version`` and ``end_version``."""
    for name, value in (
        ("compared_against", compared_against),
        ("begin_version", begin_version),
        ("end_version", end_version),
    ):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | np.integer)):
            raise InvalidInputError(f"{name} must be a version number, got {value!r}")
    if compared_against is not None:
        a, b = int(compared_against), int(current)
        return min(a, b), max(a, b)
    if begin_version is None and end_version is None:
        raise InvalidInputError(
            "Must specify either compared_against_version or both with_begin_version and with_end_version"
        )
    if begin_version is None or end_version is None:
        raise InvalidInputError("Must specify both with_begin_version and with_end_version")
    return int(begin_version), int(end_version)


class DatasetDelta:
    """The changes of a dataset between version ``begin`` (exclusive) and ``end`` (inclusive).

    Parameters
    ----------
    snapshot:
        Any version of the dataset (the others are opened from it).
    begin, end:
        The range, as :func:`delta_range` gives it.
    """

    def __init__(self, snapshot: Snapshot, begin: int, end: int) -> None:
        self._snapshot = snapshot
        self.begin_version = begin
        self.end_version = end

    def list_transactions(self) -> list[Transaction]:
        """The transactions of versions ``begin + 1`` to ``end``, in version order (a version
        that left none, or is gone, raises)."""
        out = []
        for v in range(self.begin_version + 1, self.end_version + 1):
            snap = self._snapshot.at_version(v)
            txn = read_transaction(snap.store, snap.manifest, snap.naming)
            if txn is None:
                raise InvalidInputError(f"{snap.uri}: version {v} records no transaction")
            out.append(txn)
        return out

    def _rows(self, where: str) -> pa.RecordBatchReader:
        end = self._snapshot.at_version(self.end_version)
        columns = [*end.schema.names, CREATED_AT, UPDATED_AT]
        scan = LanceScanner(end, columns=columns, filter=where, with_row_id=True)
        table = scan.to_table()
        order = [*end.schema.names, ROWID, CREATED_AT, UPDATED_AT]
        return table.select(order).to_reader()

    def get_inserted_rows(self) -> pa.RecordBatchReader:
        """Rows of version ``end`` created after ``begin``: every column, then ``_rowid``,
        ``_row_created_at_version`` and ``_row_last_updated_at_version``."""
        b, e = self.begin_version, self.end_version
        return self._rows(f"{CREATED_AT} > {b} AND {CREATED_AT} <= {e}")

    def get_updated_rows(self) -> pa.RecordBatchReader:
        """Rows of version ``end`` that existed at ``begin`` and were updated after it (columns as
        :meth:`get_inserted_rows`)."""
        b, e = self.begin_version, self.end_version
        return self._rows(f"{CREATED_AT} <= {b} AND {UPDATED_AT} > {b} AND {UPDATED_AT} <= {e}")

    def get_deleted_row_ids(self) -> pa.RecordBatchReader:
        """The stable row ids of version ``begin`` that version ``end`` no longer has, ascending
        (a ``_rowid`` column). Needs stable row ids."""
        begin = self._snapshot.at_version(self.begin_version)
        if not begin.has_stable_row_ids:
            raise InvalidInputError(
                f"deleted row ids require stable row ids, version {self.begin_version} does not use them"
            )
        end = self._snapshot.at_version(self.end_version)
        before = begin.row_id_index()[0]
        after = end.row_id_index()[0] if end.has_stable_row_ids else np.zeros(0, np.uint64)
        gone = np.setdiff1d(before, after, assume_unique=True)
        return pa.table({ROWID: pa.array(gone, pa.uint64())}).to_reader()
