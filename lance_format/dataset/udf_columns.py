"""New columns computed by Python: ``add_columns`` / ``merge_columns`` with a UDF or a reader.

pylance's rules, kept here:

* A UDF (a :class:`BatchUDF` from :func:`batch_udf`, or any callable taking and returning a
  RecordBatch or a pandas DataFrame) sees the **live** rows of each fragment in order, in batches,
  with only ``read_columns`` (``_rowid`` / ``_rowaddr`` may be named). Its output schema is given
  or inferred from a one-row sample call.
* A reader (anything :func:`~lance_format.dataset.write.to_reader` takes) supplies the new values
  of the dataset's live rows in order: exactly as many rows as the dataset has.

Each fragment gets one new data file with a row per *physical* row (the file must line up with the
fragment's other files); a deleted row's slot holds a copy of a live row's value, which no read
ever returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_format.core.errors import InvalidInputError, NotSupportedError
from lance_format.core.types import LanceSchema
from lance_format.dataset.scanner import ROWADDR, ROWID, LanceScanner
from lance_format.dataset.write import file_columns, to_reader
from lance_format.file import LanceFileVersion, LanceFileWriter
from lance_format.table.model import DataFile, DataFragment
from lance_format.table.naming import data_file_name

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = [
    "BatchUDF",
    "Source",
    "batch_udf",
    "fragment_with_new_columns",
    "is_udf_like",
    "new_columns_source",
]

#: Live rows per UDF call when ``batch_size`` is not given (pylance's scan batch size).
DEFAULT_UDF_BATCH_SIZE = 8192


class BatchUDF:
    """A function from a RecordBatch to the new columns' RecordBatch (pylance's ``BatchUDF``).

    Parameters
    ----------
    func:
        Called with each batch of the columns read; returns a RecordBatch (or pandas DataFrame).
    output_schema:
        The new columns; inferred from a one-row sample call when ``None``.
    checkpoint_file:
        pylance caches finished batches in this file to resume a failed run; not supported here
        (a :class:`NotSupportedError` when set).
    """

    def __init__(
        self,
        func: Callable[[pa.RecordBatch], Any],
        output_schema: pa.Schema | None = None,
        checkpoint_file: str | Path | None = None,
    ) -> None:
        if checkpoint_file is not None:
            raise NotSupportedError("BatchUDF checkpoint_file (resumable add_columns)")
        self.func = func
        self.output_schema = output_schema
        self.cache = None

    def __call__(self, batch: pa.RecordBatch) -> Any:
        return self.func(batch)


def batch_udf(
    output_schema: pa.Schema | None = None, checkpoint_file: str | Path | None = None
) -> Callable[[Callable[[pa.RecordBatch], Any]], BatchUDF]:
    """Decorator making a function a :class:`BatchUDF` (pylance's ``lance.batch_udf``)."""

    def wrap(func: Callable[[pa.RecordBatch], Any]) -> BatchUDF:
        return BatchUDF(func, output_schema, checkpoint_file)

    return wrap


def is_udf_like(value: object) -> bool:
    """Whether ``add_columns`` should treat ``value`` as a UDF (else as SQL, fields or a reader)."""
    return isinstance(value, BatchUDF) or (
        callable(value) and not isinstance(value, type) and not hasattr(value, "__arrow_c_stream__")
    )


def _as_batch(value: Any, schema: pa.Schema | None) -> pa.RecordBatch:
    if not isinstance(value, pa.RecordBatch | pa.Table):
        # A pandas DataFrame (checked by type name: pandas is optional and not imported here).
        if type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pandas"):
            value = pa.RecordBatch.from_pandas(value)
        else:
            raise InvalidInputError(f"a UDF must return a RecordBatch, got {type(value).__name__}")
    if isinstance(value, pa.Table):
        value = pa.concat_batches(value.to_batches()) if value.num_rows else _empty_batch(value.schema)
    if schema is not None and not value.schema.equals(schema):
        if value.schema.names != schema.names:
            raise InvalidInputError(f"the UDF returned columns {value.schema.names}, expected {schema.names}")
        value = value.cast(schema)
    return value


def _empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _read_spec(read_columns: Sequence[str] | None) -> tuple[list[str] | None, bool, bool]:
    if read_columns is None:
        return None, False, False
    cols = [c for c in read_columns if c not in (ROWID, ROWADDR)]
    return cols, ROWID in read_columns, ROWADDR in read_columns


def _live_batches(
    ds: Snapshot,
    frags: Sequence[DataFragment],
    read_columns: Sequence[str] | None,
    batch_size: int | None,
    limit: int | None = None,
) -> Iterator[pa.RecordBatch]:
    cols, rowid, rowaddr = _read_spec(read_columns)
    scan = LanceScanner(
        ds,
        columns=cols,
        limit=limit,
        batch_size=batch_size or DEFAULT_UDF_BATCH_SIZE,
        with_row_id=rowid,
        with_row_address=rowaddr,
        fragments=frags,
    )
    return scan.to_batches()


#: What :func:`new_columns_source` returns: the new columns' schema, their values per fragment
#: (live rows in order) and a check to run once every fragment was asked for.
Source = tuple[pa.Schema, Callable[[DataFragment], Iterator[pa.RecordBatch]], Callable[[], None]]


def _nothing() -> None:
    return None


def new_columns_source(
    ds: Snapshot,
    transform: Any,
    read_columns: Sequence[str] | None,
    reader_schema: pa.Schema | None,
    batch_size: int | None,
) -> Source:
    """The new columns of a UDF or a reader: see :data:`Source`.

    Fragments must be asked for in the dataset's order when ``transform`` is a reader.
    """
    if is_udf_like(transform):
        udf = transform if isinstance(transform, BatchUDF) else BatchUDF(transform)
        schema = udf.output_schema
        if schema is None:
            sample = next(_live_batches(ds, ds.manifest.fragments, read_columns, 1, limit=1), None)
            if sample is None:
                raise InvalidInputError("cannot infer the UDF's output schema of an empty dataset")
            schema = _as_batch(udf(sample), None).schema
        out_schema = schema

        def compute(frag: DataFragment) -> Iterator[pa.RecordBatch]:
            for batch in _live_batches(ds, [frag], read_columns, batch_size):
                yield _as_batch(udf(batch), out_schema)

        return out_schema, compute, _nothing
    if read_columns is not None:
        raise InvalidInputError("read_columns is for UDFs; a reader supplies the new columns itself")
    reader = to_reader(transform, reader_schema)
    batches = _rebatch(reader)

    def take_rows(frag: DataFragment) -> Iterator[pa.RecordBatch]:
        need = frag.num_rows
        while need:
            batch = batches.send(need)
            if batch is None:
                raise InvalidInputError("the reader has fewer rows than the dataset")
            need -= batch.num_rows
            yield batch

    def finish() -> None:
        if batches.send(1) is not None:
            raise InvalidInputError("the reader has more rows than the dataset")

    next(batches)  # primed
    return reader.schema, take_rows, finish


def _rebatch(reader: pa.RecordBatchReader) -> Any:
    """A generator: ``send(n)`` returns the reader's next batch of at most ``n`` rows (``None``
    at the end)."""
    pending: pa.RecordBatch | None = None
    it = iter(reader)
    n = yield None
    while True:
        if pending is None or not pending.num_rows:
            pending = next(it, None)
            if pending is None:
                n = yield None
                continue
        out, pending = pending.slice(0, n), pending.slice(n)
        n = yield out


def fragment_with_new_columns(
    ds: Snapshot,
    frag: DataFragment,
    values: Iterator[pa.RecordBatch],
    new_fields: LanceSchema,
) -> DataFragment:
    """``frag`` with one more data file holding the new columns (``values``: its live rows)."""
    arrow = new_fields.to_arrow()
    version = LanceFileVersion(ds.data_storage_version)
    name = data_file_name()
    writer = LanceFileWriter(f"data/{name}", arrow, version=ds.data_storage_version, store=ds.store)
    deleted = ds.deleted_offsets(frag).astype(np.int64)
    position = 0  # physical rows written
    last: pa.RecordBatch | None = None
    for batch in values:
        batch = pa.RecordBatch.from_arrays(batch.columns, schema=arrow)
        if not batch.num_rows:
            continue
        # Physical rows up to this batch's last live row: its rows, and copies where deleted.
        first_live = position - int(np.searchsorted(deleted, position))
        end = _physical_of(first_live + batch.num_rows - 1, deleted) + 1
        if end > frag.physical_rows:
            raise InvalidInputError(f"the new values have more rows than fragment {frag.id}")
        idx = np.arange(position, end, dtype=np.int64)
        live_before = idx - np.searchsorted(deleted, idx, side="right")
        writer.write_batch(batch.take(pa.array(np.clip(live_before - first_live, 0, None))))
        position, last = end, batch
    if position < frag.physical_rows:
        if last is None or position - int(np.searchsorted(deleted, position)) < frag.num_rows:
            raise InvalidInputError(f"the new values have fewer rows than fragment {frag.id}")
        # Only deleted rows left: fill them with copies of the last value.
        filler = np.full(frag.physical_rows - position, last.num_rows - 1, np.int64)
        writer.write_batch(last.take(pa.array(filler)))
    writer.close()
    fields, indices = file_columns(new_fields, version)
    major, minor = version.manifest
    data_file = DataFile(name, fields, indices, major, minor, writer.size)
    return replace(frag, files=(*frag.files, data_file))


def _physical_of(live_index: int, deleted: np.ndarray) -> int:
    """The physical offset of the ``live_index``-th live row (``deleted`` sorted)."""
    # Offset p is the k-th live row when p - (deleted rows <= p) == k and p is not deleted.
    lo = live_index
    hi = live_index + len(deleted)
    while lo < hi:
        mid = (lo + hi) // 2
        if mid - int(np.searchsorted(deleted, mid, side="right")) < live_index:
            lo = mid + 1
        else:
            hi = mid
    return lo
