"""pylance's scanner options beyond projection, filter and limits: ordering, strict batch sizes,
deleted rows, and the tuning knobs that do not change results.

:func:`scan_options` takes them out of a scanner call's keyword arguments (what is left is checked
as pyarrow's scan options), validates them as pylance does and refuses, with a
:class:`NotSupportedError` naming it, any option that would change results and is not implemented
(vector and full-text search, blob descriptions, row-address allow/block lists ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from lance_format.dataset.projection import member_path

__all__ = [
    "ColumnOrdering",
    "ScanOptions",
    "combine_table",
    "scan_options",
    "sort_table",
    "strict_batches",
    "take_table_rows",
]


@dataclass(frozen=True)
class ColumnOrdering:
    """One sort key of ``order_by`` (pylance's ``ColumnOrdering``): ascending with nulls last by
    default; floats sort in IEEE 754 total order (-NaN, -inf, ..., -0.0, 0.0, ..., inf, NaN), as
    in DataFusion."""

    column_name: str
    ascending: bool = True
    nulls_first: bool = False


@dataclass(frozen=True)
class ScanOptions:
    """The options that change what a scan returns (see :func:`scan_options`)."""

    order_by: tuple[ColumnOrdering, ...] = ()
    strict_batch_size: bool = False
    include_deleted_rows: bool = False


#: Options that only tune pylance's execution (read-ahead, I/O buffers, scan order of fragments
#: run in parallel): accepted, validated, without effect on results here.
_TUNING = ("batch_readahead", "fragment_readahead", "io_buffer_size")
_FLAGS = ("scan_in_order", "prefilter", "use_stats", "fast_search", "disable_scoring_autoprojection")
#: Options for searches and features this implementation does not have: refused when set.
_UNSUPPORTED = (
    "nearest",
    "full_text_query",
    "index_segments",
    "blob_handling",
    "scan_stats_callback",
    "row_addr_allowlist",
    "row_addr_blocklist",
    "batch_size_bytes",
)


def _positive(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0:
        raise InvalidInputError(f"{name} must be greater than 0, got {value!r}")


def _orderings(value: Any, schema: pa.Schema) -> tuple[ColumnOrdering, ...]:
    if value is None or (isinstance(value, str) and not value):  # pylance: "" orders nothing
        return ()
    if isinstance(value, str | ColumnOrdering) or not isinstance(value, Iterable):
        raise InvalidTypeError("order_by must be a list of ColumnOrdering or column names")
    out = []
    for item in value:
        if isinstance(item, str):
            item = ColumnOrdering(item)
        elif not isinstance(item, ColumnOrdering):
            # pylance's own ColumnOrdering (same fields) is welcome too.
            name = getattr(item, "column_name", None)
            if not isinstance(name, str):
                raise InvalidTypeError(f"order_by takes ColumnOrdering or column names, got {item!r}")
            item = ColumnOrdering(name, bool(item.ascending), bool(item.nulls_first))
        if item.column_name not in schema.names:
            try:  # a struct member by path ("s.a"), as pylance sorts by one
                member_path(schema, item.column_name)
            except InvalidInputError:
                raise InvalidInputError(f"order_by: column {item.column_name} not found") from None
        out.append(item)
    return tuple(out)


def scan_options(kwargs: dict[str, Any], schema: pa.Schema) -> ScanOptions:
    """Take pylance's scan options out of ``kwargs`` (the rest stays) and validate them."""
    for name in _UNSUPPORTED:
        value = kwargs.pop(name, None)
        if value is not None:
            raise NotSupportedError(f"scanner option {name}")
    for name in _TUNING:
        _positive(name, kwargs.pop(name, None))
    for name in _FLAGS:
        value = kwargs.pop(name, None)
        if value is not None and not isinstance(value, bool):
            raise InvalidInputError(f"{name} must be a bool, got {value!r}")
    late = kwargs.pop("late_materialization", None)
    if late is not None and not isinstance(late, bool):
        if isinstance(late, str) or not all(isinstance(c, str) for c in late):
            raise InvalidInputError("late_materialization must be a bool or a list of column names")
        missing = [c for c in late if c not in schema.names]
        if missing:
            raise InvalidInputError(f"late_materialization: fields {missing} not found")
    strict = kwargs.pop("strict_batch_size", None)
    deleted = kwargs.pop("include_deleted_rows", None)
    return ScanOptions(_orderings(kwargs.pop("order_by", None), schema), bool(strict), bool(deleted))


def _total_order_key(col: pa.ChunkedArray) -> pa.Array:
    """A signed integer per float whose order is IEEE 754's total order of the floats (nulls: 0,
    placed by their own helper key)."""
    width = int(col.type.bit_width)
    values = pc.fill_null(col, 0).combine_chunks().to_numpy(zero_copy_only=False)
    signed = values.view(np.dtype(f"int{width}"))
    # Negative floats order backwards as integers: flipping all bits but the sign fixes that.
    magnitude = (1 << (width - 1)) - 1
    return pa.array(signed ^ ((signed >> (width - 1)) & magnitude))


def sort_table(table: pa.Table, orderings: Sequence[ColumnOrdering]) -> pa.Table:
    """``table`` sorted by ``orderings`` (stable; per-key null placement; floats in total order)."""
    keys: list[tuple[str, str]] = []
    helpers: dict[str, pa.Array] = {}
    for i, o in enumerate(orderings):
        col = table.column(o.column_name)
        # pyarrow places nulls for all keys at once: a 0/1 helper key per column places them
        # per key; NaN (above every number, as DataFusion orders it) gets one too.
        isnull = pc.is_null(col).cast(pa.int8())
        helpers[f"__null{i}"] = isnull
        keys.append((f"__null{i}", "descending" if o.nulls_first else "ascending"))
        direction = "ascending" if o.ascending else "descending"
        if pa.types.is_floating(col.type):
            # DataFusion sorts floats in IEEE 754 total order: -NaN < -inf < ... < -0.0 < 0.0 <
            # ... < inf < NaN. pyarrow would tie -0.0 with 0.0 and put every NaN last.
            helpers[f"__key{i}"] = _total_order_key(col)
            keys.append((f"__key{i}", direction))
            continue
        keys.append((o.column_name, direction))
    keyed = table
    for name, arr in helpers.items():
        keyed = keyed.append_column(name, arr)
    order = pc.sort_indices(keyed, sort_keys=keys)
    # Chunks of a dictionary column may hold dictionaries pyarrow cannot unify (with a null item).
    return take_table_rows(table, order)


def take_table_rows(table: pa.Table, positions: pa.Array) -> pa.Table:
    """``table.take(positions)``, also when chunks of a dictionary column hold different dictionaries
    with a null item (file version 2.0 writes one): Arrow cannot unify those ("Cannot yet unify
    dictionaries with nulls"), so such columns are taken as values and encoded again."""
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_dictionary(field.type) and column.num_chunks > 1:
            values = column.cast(field.type.value_type).take(positions)
            columns.append(pc.dictionary_encode(values).cast(field.type))
        else:
            columns.append(column.take(positions))
    return pa.Table.from_arrays(columns, schema=table.schema)


def combine_table(table: pa.Table) -> pa.Table:
    """``table.combine_chunks()``, also when chunks of a dictionary column hold different
    dictionaries with a null item (see :func:`take_table_rows`): such columns are combined as
    values and encoded again."""
    try:
        return table.combine_chunks()
    except pa.ArrowInvalid:
        columns = [
            pc.dictionary_encode(column.cast(field.type.value_type).combine_chunks()).cast(field.type)
            if pa.types.is_dictionary(field.type) and column.num_chunks > 1
            else column.combine_chunks()
            for field, column in zip(table.schema, table.columns, strict=True)
        ]
        return pa.Table.from_arrays(columns, schema=table.schema)


def strict_batches(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """``batches`` regrouped so that every batch but the last has exactly ``size`` rows."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        pending.append(batch)
        held += batch.num_rows
        while held >= size:
            joined = _joined(pending)
            yield joined.slice(0, size)
            rest = joined.slice(size)
            pending, held = ([rest] if rest.num_rows else []), rest.num_rows
    if held:
        yield _joined(pending)


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """One batch of ``batches`` (``concat_batches`` cannot unify dictionaries holding a null:
    :func:`combine_table` can)."""
    if len(batches) == 1:
        return batches[0]
    return combine_table(pa.Table.from_batches(batches)).to_batches()[0]
