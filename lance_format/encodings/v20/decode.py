"""Decoding the selected rows of a field from a 2.0 file (see ``encodings.base`` for the protocol).

In 2.0 every field owns a column: a struct's children are read from their own columns (the struct's
column only counts rows), a list's column holds page-local end offsets into its item column (which
has one row per item and pages of its own), a fixed-size list or a packed struct is one column, and
a blob column holds (position, size) descriptions of bytes stored elsewhere in the file.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import CorruptFileError
from lance_format.core.types import LanceField, empty_array
from lance_format.encodings.base import (
    ColumnInfo,
    DecodeContext,
    IOGen,
    RowRuns,
    fetch,
    gather,
    join_buffers,
    pair_columns,
    runs_length,
    split_runs,
)
from lance_format.encodings.v20 import model as m
from lance_format.encodings.v20.buffers import bitmap, read_end_offsets, run_spans
from lance_format.encodings.v20.pages import decode_array

__all__ = ["decode_column", "decode_field"]

# Largest 32-bit offset (a constant: np.iinfo costs microseconds per call on the take path).
_I32_MAX = 2**31 - 1

_LISTS = ("list", "list.struct", "large_list", "large_list.struct")

# Null blobs are described as (position 1, size 0); empty ones as (0, 0).
_NULL_BLOB_POSITION = 1

_BLOB_DESCRIPTION = pa.struct(
    [pa.field("position", pa.uint64(), False), pa.field("size", pa.uint64(), False)]
)


def _concat(pieces: list[pa.Array], t: pa.DataType) -> pa.Array:
    if not pieces:
        return empty_array(t)
    if len(pieces) == 1:
        return pieces[0]
    # Dictionary pages carry their own dictionaries; Arrow unifies them.
    return pa.concat_arrays(pieces)


def decode_field(
    ctx: DecodeContext, field: LanceField, columns_of: dict[int, int], runs: RowRuns
) -> IOGen[pa.Array]:
    """Decoder for the selected rows of ``field`` and everything below it.

    Parameters
    ----------
    ctx:
        The file's columns and cache.
    field:
        A top-level field (possibly a projection of one: a struct with some of its children).
    columns_of:
        Column index of every field that owns a column, by field id.
    runs:
        Sorted, disjoint row runs (empty for no rows).

    Returns
    -------
    pyarrow.Array
        The selected rows in run order, of type ``field.to_arrow().type``.
    """
    t = field.to_arrow().type
    n = runs_length(runs)
    if n == 0:
        return empty_array(t)
    col = _column(ctx, field, columns_of)
    if field.logical_type == "struct" and not _is_packed(col):
        children = yield from gather([decode_field(ctx, c, columns_of, runs) for c in field.children])
        if not children:
            return pa.Array.from_buffers(t, n, [None], children=[])
        return pa.StructArray.from_arrays(children, fields=list(t))
    if field.logical_type in _LISTS:
        return (yield from _decode_list(ctx, field, col, columns_of, runs, t))
    if isinstance(col.encoding, m.Blob):
        return (yield from _decode_blob(ctx, col, runs, t))
    return (yield from decode_column(ctx, col, runs, t))


def _column(ctx: DecodeContext, field: LanceField, columns_of: dict[int, int]) -> ColumnInfo:
    index = columns_of.get(field.id)
    if index is None or index >= len(ctx.columns):
        raise CorruptFileError(ctx.path, f"field {field.name!r} (id {field.id}) has no column")
    col = ctx.columns[index]
    if col.num_rows == 0 and not col.pages:
        raise CorruptFileError(ctx.path, f"column {index} has no pages but rows were asked")
    return col


def _is_packed(col: ColumnInfo) -> bool:
    # Like pylance, tell a packed struct by its first page, not by the field metadata.
    return bool(col.pages) and isinstance(col.pages[0].encoding, m.PackedStruct)


def decode_column(ctx: DecodeContext, col: ColumnInfo, runs: RowRuns, t: pa.DataType) -> IOGen[pa.Array]:
    """Selected rows of a column whose pages hold values, page by page (all pages fetched together).

    Parameters
    ----------
    ctx, col:
        The file and the column.
    runs:
        Column-level row runs.
    t:
        Arrow type of the result.
    """
    if len(runs) and int(runs[-1, 1]) > col.num_rows:
        raise CorruptFileError(
            ctx.path, f"column {col.index} has {col.num_rows} rows, row {int(runs[-1, 1]) - 1} asked"
        )
    pieces = yield from gather(
        [
            decode_array(ctx, col.pages[p], col.pages[p].encoding, local, t, (col.index, p))
            for p, local in split_runs(runs, col.page_starts)
        ],
        pool=ctx.page_pool,
    )
    return _concat(pieces, t)


# -- lists ------------------------------------------------------------------------------------------
def _page_item_starts(ctx: DecodeContext, col: ColumnInfo) -> npt.NDArray[np.int64]:
    """Item-column row at which each list page's items start (plus the total), cached."""
    key = (col.index, "item_starts")
    cached = ctx.cache.get(key)
    if cached is None:
        counts = []
        for p in col.pages:
            if not isinstance(p.encoding, m.List):
                raise CorruptFileError(
                    ctx.path, f"column {col.index}: list column page is {type(p.encoding).__name__}"
                )
            counts.append(p.encoding.num_items)
        cached = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=cached[1:])
        ctx.cache[key] = cached
    return np.asarray(cached, dtype=np.int64)


def _decode_list(
    ctx: DecodeContext,
    field: LanceField,
    col: ColumnInfo,
    columns_of: dict[int, int],
    runs: RowRuns,
    t: pa.DataType,
) -> IOGen[pa.Array]:
    item_starts = _page_item_starts(ctx, col)
    if int(runs[-1, 1]) > col.num_rows:
        raise CorruptFileError(
            ctx.path, f"column {col.index} has {col.num_rows} rows, row {int(runs[-1, 1]) - 1} asked"
        )
    pages = split_runs(runs, col.page_starts)
    encs: list[m.List] = []
    for p, _ in pages:
        enc = col.pages[p].encoding
        assert isinstance(enc, m.List)  # checked by _page_item_starts
        encs.append(enc)
    parts = yield from gather(
        [
            read_end_offsets(
                ctx, col.pages[p], enc.offsets, enc.null_offset_adjustment, local, (col.index, p)
            )
            for (p, local), enc in zip(pages, encs, strict=True)
        ]
    )
    lengths, nulls, spans = [], [], []
    for (p, local), enc, (starts, ends, null) in zip(pages, encs, parts, strict=True):
        if len(ends) and int(ends.max()) > enc.num_items:
            raise CorruptFileError(ctx.path, f"column {col.index}: list offsets exceed the page's items")
        lo, hi = run_spans(local, starts, ends)
        base = int(item_starts[p])
        spans.append(pair_columns(lo + base, hi + base))
        lengths.append(ends - starts)
        nulls.append(null)
    item_runs = np.concatenate(spans)
    item_runs = item_runs[item_runs[:, 1] > item_runs[:, 0]]
    child = yield from decode_field(ctx, field.children[0], columns_of, item_runs)
    n = runs_length(runs)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.concatenate(lengths), out=offsets[1:])
    if not pa.types.is_large_list(t):
        if offsets[-1] > _I32_MAX:
            raise CorruptFileError(ctx.path, f"more than 2^31 items in one read of {t}")
        offsets = offsets.astype(np.int32)
    validity = bitmap(~np.concatenate(nulls))
    return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(offsets)], children=[child])


# -- blobs ------------------------------------------------------------------------------------------
def _decode_blob(ctx: DecodeContext, col: ColumnInfo, runs: RowRuns, t: pa.DataType) -> IOGen[pa.Array]:
    """Blob bytes: read the selected rows' (position, size) descriptions, then fetch the bytes."""
    if not (pa.types.is_large_binary(t) or pa.types.is_binary(t)):
        raise CorruptFileError(ctx.path, f"blob column {col.index} read as {t}")
    desc = yield from decode_column(ctx, col, runs, _BLOB_DESCRIPTION)
    positions = np.asarray(desc.field(0).to_numpy(zero_copy_only=False), dtype=np.uint64)
    sizes = np.asarray(desc.field(1).to_numpy(zero_copy_only=False), dtype=np.uint64)
    if len(sizes) and (int(positions.max()) >= 2**62 or int(sizes.max()) >= 2**62):
        raise CorruptFileError(ctx.path, f"blob column {col.index} describes bytes outside the file")
    null = (positions == _NULL_BLOB_POSITION) & (sizes == 0)
    present = sizes > 0
    ranges = list(zip(positions[present].tolist(), sizes[present].tolist(), strict=True))
    got = yield from fetch(ranges)
    data = join_buffers(got) if got else b""
    n = len(sizes)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes.astype(np.int64), out=offsets[1:])
    if pa.types.is_binary(t):
        if offsets[-1] > _I32_MAX:
            raise CorruptFileError(ctx.path, f"more than 2 GiB of blobs in one read of {t}")
        offsets = offsets.astype(np.int32)
    return pa.Array.from_buffers(t, n, [bitmap(~null), pa.py_buffer(offsets), pa.py_buffer(data)])
