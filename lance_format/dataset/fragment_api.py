"""Fragment-level changes a distributed writer commits itself (pylance's ``LanceFragment`` methods).

Each returns new fragment metadata and writes files, but commits nothing: the caller gathers the
results of every worker and commits one ``LanceOperation`` (``Delete``, ``Merge``, ``Update``)
with ``LanceDataset.commit``. Also the dataset-level ``add_columns`` with a UDF or a reader.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_format.core.errors import InvalidInputError, InvalidTypeError, OutOfRangeError
from lance_format.core.types import LanceSchema
from lance_format.dataset.filters import Filter, evaluate, parse_filter, parse_value
from lance_format.dataset.operations import FragmentMetadata, schema_against
from lance_format.dataset.scanner import ROWADDR, ROWID, LanceScanner
from lance_format.dataset.udf_columns import BatchUDF, fragment_with_new_columns, new_columns_source
from lance_format.dataset.write import file_columns, to_reader
from lance_format.file import LanceFileVersion, LanceFileWriter
from lance_format.table.commit import commit_transaction
from lance_format.table.deletion import write_deletion_file
from lance_format.table.model import DataFile, DataFragment, Manifest, Merge, Transaction
from lance_format.table.naming import data_file_name

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = [
    "add_computed_columns",
    "delete_in_fragment",
    "delete_offsets_in_fragment",
    "merge_columns",
    "merge_fragment_on_key",
    "merge_on_key",
    "update_columns",
]

#: The field id pylance writes in a data file's ``fields`` for a column rewritten elsewhere.
TOMBSTONE_FIELD = -2


def delete_in_fragment(ds: Snapshot, frag: DataFragment, predicate: Filter) -> FragmentMetadata | None:
    """``frag`` with the rows matching ``predicate`` deleted (a new deletion file is written);
    ``None`` when no row is left, as pylance's ``LanceFragment.delete``."""
    bound = parse_filter(predicate, LanceScanner.filter_schema(ds.schema))
    scan = LanceScanner(ds, columns=[], filter=bound, with_row_address=True, fragments=[frag])
    hits = scan.to_table().column(ROWADDR).to_numpy() & np.uint64(0xFFFFFFFF)
    if not len(hits):
        return FragmentMetadata.of(frag)
    deleted = np.union1d(ds.deleted_offsets(frag), hits)
    if len(deleted) >= frag.physical_rows:
        return None
    d = write_deletion_file(ds.store, frag.id, ds.version, deleted)
    return FragmentMetadata.of(replace(frag, deletion_file=d))


def _local_offsets(offsets: Iterable[int]) -> npt.NDArray[np.int64]:
    """``offsets`` as integers, converted as pylance converts them (``int()`` of each, then an
    unsigned 32-bit offset): floats truncate, a string of digits counts, anything else fails."""
    if isinstance(offsets, pa.Array | pa.ChunkedArray):
        offsets = offsets.to_numpy(zero_copy_only=False)
    if not isinstance(offsets, np.ndarray):
        if not isinstance(offsets, Iterable):
            raise InvalidTypeError(f"'{type(offsets).__name__}' object is not iterable")
        offsets = list(offsets)
    arr = np.asarray(offsets) if len(offsets) else np.zeros(0, np.int64)
    if arr.ndim == 1 and arr.dtype.kind in "iub":
        values = arr.astype(object) if arr.dtype.kind == "u" else arr.astype(np.int64)
    elif arr.ndim == 1 and arr.dtype.kind == "f" and bool(np.isfinite(arr).all()):
        values = np.trunc(arr)  # int() of a float rounds toward zero
    else:
        # Mixed or non-numeric input: each value through int(), for its own error.
        try:
            values = np.array([int(o) for o in offsets], dtype=object)
        except TypeError as e:
            raise InvalidTypeError(str(e)) from None
        except OverflowError as e:
            raise OutOfRangeError(str(e)) from None
        except ValueError as e:
            raise InvalidInputError(str(e)) from None
    if len(values) and (values.min() < 0 or values.max() >= 2**32):
        raise OutOfRangeError("out of range integral type conversion attempted (offsets are u32)")
    return np.asarray(values, dtype=np.int64)


def delete_offsets_in_fragment(
    ds: Snapshot, frag: DataFragment, offsets: Iterable[int]
) -> FragmentMetadata | None:
    """``frag`` with the rows at physical ``offsets`` deleted too, as pylance's
    ``LanceFragment.delete_rows``: ``None`` when no row is left.

    As pylance, a new deletion file is written whenever any row ends up deleted, even when
    ``offsets`` adds none; a fragment without deletions given no offsets stays as it is.
    """
    wanted = _local_offsets(offsets)
    outside = wanted >= frag.physical_rows
    if outside.any():
        bad = int(wanted[outside][0])
        raise InvalidInputError(
            f"delete_rows offset {bad} is out of range for fragment {frag.id} with {frag.physical_rows} rows"
        )
    deleted = np.union1d(ds.deleted_offsets(frag), wanted.astype(np.uint64))
    if len(deleted) >= frag.physical_rows:
        return None
    if not len(deleted):
        return FragmentMetadata.of(frag)
    d = write_deletion_file(ds.store, frag.id, ds.version, deleted)
    return FragmentMetadata.of(replace(frag, deletion_file=d))


def _new_schema(ds: Snapshot, added: pa.Schema) -> tuple[LanceSchema, LanceSchema]:
    """``(the dataset's schema with the new columns, the new columns' own fields)``."""
    for f in added:
        if f.name in ds.schema.names:
            raise InvalidInputError(f"column {f.name!r} already exists in the dataset")
    if not len(added):
        raise InvalidInputError("no new columns to add")
    full = schema_against(pa.schema([*ds.schema, *added], metadata=ds.schema.metadata), ds.manifest)
    new = LanceSchema(full.fields[len(ds.schema) :])
    return LanceSchema(full.fields, dict(ds.lance_schema.metadata)), new


def _sql_udf(ds: Snapshot, exprs: dict[str, str]) -> tuple[BatchUDF, list[str]]:
    parsed, used = {}, set()
    for name, sql in exprs.items():
        if not isinstance(name, str) or not isinstance(sql, str):
            raise InvalidInputError("columns to add are {name: SQL expression} strings")
        value = parsed[name] = parse_value(sql, ds.schema)
        used |= value.columns
    read = [c for c in ds.schema.names if c in used]

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.concat_batches(evaluate(pa.Table.from_batches([batch]), parsed).to_batches())

    empty = pa.schema([ds.schema.field(c) for c in read]).empty_table()
    return BatchUDF(run, evaluate(empty, parsed).schema), read


def merge_columns(
    ds: Snapshot,
    frag: DataFragment,
    value_func: Any,
    columns: Sequence[str] | None = None,
    batch_size: int | None = None,
    reader_schema: pa.Schema | None = None,
) -> tuple[FragmentMetadata, LanceSchema]:
    """New columns for one fragment: ``(its new metadata, the dataset schema with them)``.

    ``value_func`` is what ``add_columns`` takes (SQL expressions, a UDF, a reader with the
    fragment's live rows); commit every fragment's result with ``LanceOperation.Merge``.
    """
    if isinstance(value_func, dict):
        value_func, columns = _sql_udf(ds, value_func)
    if isinstance(value_func, BatchUDF) and value_func.cache is not None:
        raise InvalidInputError("a checkpoint file cannot be used with LanceFragment.merge_columns")
    schema, values, finish = new_columns_source(ds, value_func, columns, reader_schema, batch_size)
    full, new = _new_schema(ds, schema)
    out = fragment_with_new_columns(ds, frag, values(frag), new)
    finish()
    return FragmentMetadata.of(out), full


def add_computed_columns(
    ds: Snapshot,
    transforms: Any,
    read_columns: Sequence[str] | None,
    reader_schema: pa.Schema | None,
    batch_size: int | None,
) -> Manifest:
    """Commit new columns computed by a UDF or read from a reader (one new file per fragment)."""
    schema, values, finish = new_columns_source(ds, transforms, read_columns, reader_schema, batch_size)
    full, new = _new_schema(ds, schema)
    frags = tuple(fragment_with_new_columns(ds, f, values(f), new) for f in ds.manifest.fragments)
    finish()
    txn = Transaction(ds.version, str(uuid.uuid4()), Merge(frags, full))
    return commit_transaction(ds.store, txn, ds.manifest, ds.naming)


def _keys(ds: Snapshot, frag: DataFragment, column: str) -> pa.ChunkedArray | pa.Array:
    """``column`` (or ``_rowid`` / ``_rowaddr``) for every physical row of ``frag``."""
    addr = (np.uint64(frag.id) << np.uint64(32)) | np.arange(frag.physical_rows, dtype=np.uint64)
    if column == ROWADDR or (column == ROWID and not ds.has_stable_row_ids):
        return pa.array(addr, pa.uint64())
    if column == ROWID:
        return pa.array(ds.fragment_reader(frag).row_ids(), pa.uint64())
    if column not in ds.schema.names:
        raise InvalidInputError(f"no column {column!r} to join on")
    return ds.fragment_reader(frag).read_range([column], 0, frag.physical_rows).column(0)


def update_columns(
    ds: Snapshot,
    frag: DataFragment,
    data_obj: Any,
    left_on: str = ROWID,
    right_on: str | None = None,
    schema: pa.Schema | None = None,
    *,
    with_offsets: bool = False,
) -> tuple[FragmentMetadata, list[int]] | tuple[FragmentMetadata, list[int], bytes]:
    """Rewrite columns of ``frag`` from ``data_obj`` joined on ``left_on`` = ``right_on``.

    Rows without a match keep their values; with several matches one of them is used. The new
    values go to a new data file; the old files keep their bytes but stop naming the rewritten
    fields (pylance's tombstone ``-2``). Returns the new metadata and the field ids modified (and
    with ``with_offsets`` the matched physical offsets as a portable Roaring bitmap); commit with
    ``LanceOperation.Update(updated_fragments=[...])``.
    """
    right = to_reader(data_obj, schema).read_all()
    right_on = right_on or left_on
    if right_on not in right.column_names:
        raise InvalidInputError(f"the data has no join column {right_on!r}")
    targets = [c for c in right.column_names if c != right_on]
    if not targets:
        raise InvalidInputError("the data has no columns to update besides the join column")
    for c in targets:
        if c not in ds.schema.names:
            raise InvalidInputError(f"cannot update {c!r}: no such column")
    left = pa.table({"k": _keys(ds, frag, left_on), "__pos": pa.array(np.arange(frag.physical_rows))})
    rkeys = right.column(right_on)
    if not rkeys.type.equals(left.schema.field("k").type):
        try:
            rkeys = rkeys.cast(left.schema.field("k").type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise InvalidInputError(f"cannot join {left_on!r} with {right_on!r}: {e}") from None
    rtab = pa.table({"k": rkeys, "__r": pa.array(np.arange(right.num_rows))})
    joined = left.join(rtab, "k", join_type="inner")
    pos = joined.column("__pos").to_numpy()
    ridx = joined.column("__r").to_numpy()
    pos, first = np.unique(pos, return_index=True)
    ridx = ridx[first]
    fields = [ds.lance_schema.field_by_name(c) for c in targets]
    old = ds.fragment_reader(frag).read_range(targets, 0, frag.physical_rows)
    picks = np.arange(frag.physical_rows, dtype=np.int64)
    picks[pos] = frag.physical_rows + ridx
    arrow = pa.schema([ds.schema.field(c) for c in targets])
    cols = []
    for c in targets:
        merged = pa.chunked_array([*old.column(c).chunks, *right.column(c).cast(arrow.field(c).type).chunks])
        cols.append(merged.take(pa.array(picks)))
    table = pa.Table.from_arrays(cols, schema=arrow)
    new_fields = LanceSchema(tuple(fields))
    version = LanceFileVersion(ds.data_storage_version)
    name = data_file_name()
    writer = LanceFileWriter(f"data/{name}", arrow, version=ds.data_storage_version, store=ds.store)
    writer.write_batch(table)
    writer.close()
    fids, indices = file_columns(new_fields, version)
    major, minor = version.manifest
    rewritten = {x.id for f in fields for x in f.walk()}
    files = tuple(
        replace(df, fields=tuple(TOMBSTONE_FIELD if fid in rewritten else fid for fid in df.fields))
        for df in frag.files
    )
    new = replace(frag, files=(*files, DataFile(name, fids, indices, major, minor, writer.size)))
    modified = [f.id for f in fields]
    meta = FragmentMetadata.of(new)
    if with_offsets:
        return meta, modified, BitMap(pos.astype(np.uint32)).serialize()
    return meta, modified


def _key_type(ds: Snapshot, column: str, where: str) -> pa.DataType:
    """The type of the left key ``column``: a column of the dataset, or ``_rowid`` / ``_rowaddr``
    (pylance joins on them too; stable row ids where the dataset has them)."""
    if column in ds.schema.names:
        return ds.schema.field(column).type
    if column in (ROWID, ROWADDR):
        return pa.uint64()
    raise InvalidInputError(f"Column {column} does not exist in the left side {where}")


def _merge_udf(
    ds: Snapshot, data: Any, left_on: str, right_on: str | None, schema: pa.Schema | None, where: str
) -> BatchUDF:
    """The UDF computing ``data``'s columns for batches of the left key (pylance's hash join):
    rows without a match get nulls; a key repeated in ``data`` takes its last row; null keys
    match nothing. ``where`` names the left side in errors ("dataset" or "fragment")."""
    right_on = left_on if right_on is None else right_on
    left_type = _key_type(ds, left_on, where)
    right = to_reader(data, schema).read_all()
    if right_on not in right.schema.names:
        raise InvalidInputError(f"Column {right_on} does not exist in the right side {where}")
    right_type = right.schema.field(right_on).type
    if left_type != right_type:
        raise InvalidInputError(f"Index column type mismatch: expected {right_type}, got {left_type}")
    for name in right.schema.names:
        if name != right_on and name in ds.schema.names:
            both = (
                "both sides of the dataset"
                if where == "dataset"
                else "left side fragment and right side dataset"
            )
            raise InvalidInputError(f"Column {name} exists in {both}")
    added = right.drop_columns([right_on])
    if not added.num_columns:
        raise InvalidInputError(f"merge needs columns besides the key {right_on!r}")  # pylance panics
    if not right.num_rows:
        raise InvalidInputError("merge of no rows (pylance: 'HashJoiner: No data')")
    # Reversed, so ``index_in`` (the first match) finds a repeated key's last row.
    reverse = pa.array(np.arange(right.num_rows - 1, -1, -1, dtype=np.int64))
    keys = right.column(right_on).take(reverse).combine_chunks()
    values = [c.combine_chunks() for c in added.take(reverse).columns]
    out_schema = added.schema

    required = [f.name for f in out_schema if not f.nullable]

    def joined(batch: pa.RecordBatch) -> pa.RecordBatch:
        pos = pc.index_in(batch.column(0), value_set=keys)
        if required and pos.null_count:
            # An unmatched row would hold NULL in a non-nullable column; pylance refuses it too.
            raise InvalidInputError(
                f"Column {required[0]!r} is declared as non-nullable but rows without a match "
                "would hold NULL in it"
            )
        return pa.RecordBatch.from_arrays([c.take(pos) for c in values], schema=out_schema)

    return BatchUDF(joined, out_schema)


def merge_on_key(
    ds: Snapshot, data: Any, left_on: str, right_on: str | None, schema: pa.Schema | None
) -> Manifest:
    """Commit ``data``'s columns (all but ``right_on``) joined to the dataset on ``left_on`` =
    ``right_on``: one new data file per fragment, one ``Merge`` version (pylance's
    ``LanceDataset.merge``; see :func:`_merge_udf` for the join)."""
    udf = _merge_udf(ds, data, left_on, right_on, schema, "dataset")
    return add_computed_columns(ds, udf, [left_on], None, None)


def merge_fragment_on_key(
    ds: Snapshot,
    frag: DataFragment,
    data: Any,
    left_on: str,
    right_on: str | None = None,
    schema: pa.Schema | None = None,
) -> tuple[FragmentMetadata, LanceSchema]:
    """``frag`` with ``data``'s columns joined on ``left_on`` = ``right_on`` in a new data file,
    and the dataset schema with them (pylance's ``LanceFragment.merge``); commit every fragment's
    result with ``LanceOperation.Merge``. The join is the dataset-level merge's."""
    udf = _merge_udf(ds, data, left_on, right_on, schema, "fragment")
    return merge_columns(ds, frag, udf, [left_on])
