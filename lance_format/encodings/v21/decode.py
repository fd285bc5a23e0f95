"""Field-level decoding of 2.1/2.2 files: leaf columns -> levels -> nested Arrow arrays.

Only leaves own columns (a packed struct is one leaf; a list shares its item's column). For the
selected top-level rows, every leaf column below a field is read page by page (all leaves and
pages in lock-step, so one I/O round serves them all), its levels are unravelled into per-layer
offsets and validity, and the field is rebuilt from the outside in: struct validity and list
offsets come from the first leaf below them, leaf values get the leaf layer's validity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import CorruptFileError, NotSupportedError
from lance_format.core.records import fast_init
from lance_format.core.types import LanceField, empty_array
from lance_format.encodings.base import (
    DecodeContext,
    IOGen,
    PageInfo,
    RowRuns,
    gather,
    runs_length,
    split_runs,
)
from lance_format.encodings.v21._decode_kernels import dictionary_take
from lance_format.encodings.v21.miniblock_merge import merge_classes, read_miniblock_pages
from lance_format.encodings.v21.page import PageData
from lance_format.encodings.v21.readers import can_merge_pages, read_page
from lance_format.encodings.v21.repdef import Layer, concat_layers, unravel
from lance_format.encodings.v21.values import Fixed, VarBin, to_arrow

__all__ = ["decode_field", "read_page", "with_validity"]

# Largest 32-bit offset (a constant: np.iinfo costs microseconds per call on the take path).
_I32_MAX = 2**31 - 1

Bools = npt.NDArray[np.bool_]


@fast_init
@dataclass(frozen=True)
class _Leaf:
    """A decoded leaf column: its layers (leaf first) and its values with leaf validity."""

    layers: list[Layer]
    values: pa.Array


def _leaf_type(field: LanceField) -> pa.DataType:
    # The memoized Arrow field's type: ``field.arrow_type`` builds the type again on every call.
    return field.to_arrow().type


def _page_values(data: PageData, typ: pa.DataType, path: str) -> pa.Array:
    """A page's visible values as an Arrow array of ``typ`` (no validity yet)."""
    if data.dictionary is None:
        return to_arrow(data.values, typ)
    idx = data.values
    if not isinstance(idx, Fixed) or idx.bits not in (8, 16, 32, 64):
        raise CorruptFileError(path, "dictionary indices are not integers")
    raw = np.ascontiguousarray(idx.data).view(f"<u{idx.bits // 8}")
    ndict = data.dictionary.n
    dictionary = data.dictionary
    large = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
    strings = large or pa.types.is_string(typ) or pa.types.is_binary(typ)
    if ndict and isinstance(dictionary, VarBin) and strings:
        # Strings (the common dictionary): offsets and bytes built straight from the indices.
        offsets, got = dictionary_take(raw, dictionary.offsets, dictionary.data, large)
        return pa.Array.from_buffers(typ, len(raw), [None, pa.py_buffer(offsets), pa.py_buffer(got)])
    indices = raw.astype(np.int64)
    if len(indices) and (int(indices.max()) >= ndict or int(indices.min()) < 0):
        # Slots that are null may hold any index; clamp them (validity masks them later).
        indices = np.clip(indices, 0, max(ndict - 1, 0))
    if pa.types.is_dictionary(typ):
        dictionary = to_arrow(data.dictionary, typ.value_type)
        return pa.DictionaryArray.from_arrays(pa.array(indices).cast(typ.index_type), dictionary)
    if ndict == 0:
        return pa.nulls(len(indices), typ)
    # Arrow's take gathers variable-width values ~9x faster than building per-byte positions in
    # numpy (a dictionary-encoded string page is the costliest column of a full scan).
    try:
        return to_arrow(data.dictionary, typ).take(pa.array(indices))
    except (pa.ArrowCapacityError, pa.ArrowInvalid) as e:  # > 2 GiB of 32-bit-offset strings
        raise ValueError(f"dictionary values do not fit {typ}: {e}") from None


def _concat(arrays: Sequence[pa.Array], typ: pa.DataType) -> pa.Array:
    if len(arrays) == 1:
        return arrays[0]
    if pa.types.is_dictionary(typ):
        # As pylance does: the pages' dictionaries one after another, indices shifted to match.
        dicts = [a.dictionary for a in arrays]
        shifts = np.cumsum([0] + [len(d) for d in dicts[:-1]])
        # Validity is applied after the pages are joined, but an all-null page comes back with
        # null indices: any slot will do for them.
        indices = np.concatenate(
            [
                pc.fill_null(a.indices, 0).to_numpy(zero_copy_only=False).astype(np.int64) + s
                for a, s in zip(arrays, shifts, strict=True)
            ]
        )
        values = pa.concat_arrays(dicts)
        if len(values) == 0:  # only all-null pages: no slot exists to point at
            return pa.DictionaryArray.from_arrays(pa.nulls(len(indices), typ.index_type), values)
        merged = pa.array(indices).cast(typ.index_type)
        return pa.DictionaryArray.from_arrays(merged, values)
    return pa.concat_arrays(list(arrays))


def with_validity(arr: pa.Array, valid: Bools | None) -> pa.Array:
    """``arr`` with ``valid`` as its validity.

    Parameters
    ----------
    arr:
        An array without nulls of its own at the top level (children may have nulls).
    valid:
        One boolean per element, or None to keep ``arr`` as it is.
    """
    if valid is None or bool(valid.all()):
        return arr
    if len(valid) != len(arr):
        raise ValueError("validity and values differ in length")
    if pa.types.is_dictionary(arr.type):
        indices = with_validity(arr.indices, valid)
        return pa.DictionaryArray.from_arrays(indices, arr.dictionary)
    if pa.types.is_null(arr.type):
        return arr
    if arr.offset:
        arr = pa.concat_arrays([arr])
    vbuf = pa.py_buffer(np.packbits(valid, bitorder="little"))
    typ = arr.type
    if pa.types.is_struct(typ) or pa.types.is_fixed_size_list(typ):
        kids = [arr.field(i) for i in range(typ.num_fields)] if pa.types.is_struct(typ) else [arr.values]
        return pa.Array.from_buffers(typ, len(arr), [vbuf], children=kids)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return pa.Array.from_buffers(typ, len(arr), [vbuf, arr.buffers()[1]], children=[arr.values])
    bufs = arr.buffers()
    return pa.Array.from_buffers(typ, len(arr), [vbuf, *bufs[1:]])


def _page_readers(
    ctx: DecodeContext, column: int, pieces: list[tuple[int, RowRuns]]
) -> list[IOGen[PageData]]:
    """One reader per page, except that partial reads of pages sharing a mergeable mini-block
    layout are read as one batch (takes touch many pages with few rows each)."""
    col = ctx.columns[column]
    stretches = merge_classes(ctx, column, col.pages, can_merge_pages)
    gens: list[IOGen[PageData]] = []
    i = 0
    while i < len(pieces):
        p, local = pieces[i]
        stretch = stretches[p]
        j = i + 1
        if stretch[0] != stretch[1] and not _whole_page(col.pages[p], local):
            while (
                j < len(pieces)
                and stretches[pieces[j][0]] == stretch
                and not _whole_page(col.pages[pieces[j][0]], pieces[j][1])
            ):
                j += 1
        if j - i == 1:
            gens.append(read_page(ctx, column, p, col.pages[p], local))
        else:
            base = int(col.page_starts[stretch[0]])
            runs = np.concatenate([r + (int(col.page_starts[q]) - base) for q, r in pieces[i:j]])
            gens.append(read_miniblock_pages(ctx, column, col.pages, stretch, col.page_starts, runs))
        i = j
    return gens


def _whole_page(page: PageInfo, runs: RowRuns) -> bool:
    return len(runs) == 1 and int(runs[0, 0]) == 0 and int(runs[0, 1]) == page.num_rows


def _read_leaf(ctx: DecodeContext, field: LanceField, column: int, runs: RowRuns) -> IOGen[_Leaf]:
    col = ctx.columns[column]
    pieces = split_runs(runs, col.page_starts)
    gens = (
        _page_readers(ctx, column, pieces)
        if len(pieces) > 1
        else [read_page(ctx, column, p, col.pages[p], local) for p, local in pieces]
    )
    pages: list[PageData] = yield from gather(gens, pool=ctx.page_pool)
    typ = _leaf_type(field)
    layers_per_page = []
    arrays = []
    for data in pages:
        try:
            layers = unravel(data.rep, data.defs, data.layers, data.num_entries)
            vals = _page_values(data, typ, ctx.path)
        except (ValueError, IndexError, TypeError, pa.ArrowException) as e:
            raise CorruptFileError(ctx.path, f"column {column} does not decode: {e}") from None
        if layers and layers[0].length != len(vals):
            raise CorruptFileError(ctx.path, f"column {column}: levels and values disagree")
        layers_per_page.append(layers)
        arrays.append(vals)
    try:
        merged = concat_layers(layers_per_page)
        values = _concat(arrays, typ)
        values = with_validity(values, merged[0].validity if merged else None)
    except (ValueError, pa.ArrowException) as e:
        raise CorruptFileError(ctx.path, f"column {column} does not decode: {e}") from None
    return _Leaf(merged, values)


def _leaves(field: LanceField, columns_of: dict[int, int]) -> list[tuple[LanceField, int, int]]:
    """(leaf field, its column, its depth below ``field``) for every column under ``field``
    (kept on the field for the file's ``columns_of``: every take of a column asks again)."""
    col = columns_of.get(field.id)
    if col is not None and (field.children or field.logical_type != "struct"):  # not an empty struct
        # A leaf column (the usual top-level field): nothing to cache, and a cached entry naming
        # the field itself would be a reference cycle, left to the cycle collector.
        return [(field, col, 0)]
    known = field.__dict__.get("_v21_leaves")
    if known is not None and known[0] is columns_of:
        return known[1]  # type: ignore[no-any-return]
    out: list[tuple[LanceField, int, int]] = []
    _visit_leaves(field, 0, columns_of, out)
    field.__dict__["_v21_leaves"] = (columns_of, out)  # frozen dataclass: as LanceField.to_arrow
    return out


def _visit_leaves(
    f: LanceField, depth: int, columns_of: dict[int, int], out: list[tuple[LanceField, int, int]]
) -> None:
    # A module function, not a closure calling itself (a reference cycle left to the collector).
    col = columns_of.get(f.id)
    if f.is_empty_struct:  # its column holds nothing to read (see _assemble)
        return
    if col is not None:
        out.append((f, col, depth))
        return
    for c in f.children:
        _visit_leaves(c, depth + 1, columns_of, out)


def _empty(typ: pa.DataType) -> pa.Array:
    return empty_array(typ)


def decode_field(
    ctx: DecodeContext, field: LanceField, columns_of: dict[int, int], runs: RowRuns
) -> IOGen[pa.Array]:
    """Decoder generator for the selected top-level rows of a top-level field.

    Parameters
    ----------
    ctx:
        The file's decode context (2.1 or 2.2).
    field:
        A top-level field (possibly a projection of its struct children).
    columns_of:
        Column index of every field that owns a column, by field id.
    runs:
        Sorted, disjoint row runs.

    Returns
    -------
    pyarrow.Array
        The selected rows, of type ``field.to_arrow().type``.
    """
    typ = field.to_arrow().type
    leaves = _leaves(field, columns_of)
    n = runs_length(runs)
    if n == 0:
        return _empty(typ)
    if not leaves:
        if pa.types.is_struct(typ) and not typ.num_fields:
            return pa.Array.from_buffers(typ, n, [None], children=[])
        raise CorruptFileError(ctx.path, f"field {field.name!r} has no column")
    decoded: list[_Leaf] = yield from gather([_read_leaf(ctx, leaf, col, runs) for leaf, col, _ in leaves])
    by_id = {leaf.id: d for (leaf, _, _), d in zip(leaves, decoded, strict=True)}
    depth_of = {leaf.id: depth for leaf, _, depth in leaves}
    try:
        out = _assemble(field, 0, by_id, depth_of, columns_of)
    except (ValueError, IndexError, pa.ArrowException) as e:
        raise CorruptFileError(ctx.path, f"field {field.name!r} does not assemble: {e}") from None
    if len(out) != n:
        raise CorruptFileError(ctx.path, f"field {field.name!r} decoded {len(out)} rows, expected {n}")
    return out


def _first_leaf(field: LanceField, columns_of: dict[int, int]) -> LanceField:
    node = field
    while node.id not in columns_of:
        if not node.children:
            raise ValueError(f"field {node.name!r} has no column below it")
        node = next((c for c in node.children if _has_column(c, columns_of)), node.children[0])
    return node


def _has_column(f: LanceField, columns_of: dict[int, int]) -> bool:
    """Whether a column with values lies at or under ``f`` (an empty struct's column has none)."""
    if f.id in columns_of and not f.is_empty_struct:
        return True
    return any(_has_column(c, columns_of) for c in f.children)


def _layer_for(
    field: LanceField,
    depth: int,
    by_id: dict[int, _Leaf],
    depth_of: dict[int, int],
    columns_of: dict[int, int],
) -> Layer:
    leaf = _first_leaf(field, columns_of)
    d = by_id[leaf.id]
    idx = depth_of[leaf.id] - depth
    if idx >= len(d.layers):
        raise ValueError(f"column of {leaf.name!r} has {len(d.layers)} layers, needs {idx + 1}")
    return d.layers[idx]


def _assemble(
    field: LanceField,
    depth: int,
    by_id: dict[int, _Leaf],
    depth_of: dict[int, int],
    columns_of: dict[int, int],
) -> pa.Array:
    typ = field.to_arrow().type
    if field.id in columns_of:
        arr = by_id[field.id].values
        return arr if arr.type == typ else arr.cast(typ)
    layer = _layer_for(field, depth, by_id, depth_of, columns_of)
    vbuf = (
        pa.py_buffer(np.packbits(layer.validity, bitorder="little")) if layer.validity is not None else None
    )
    if pa.types.is_struct(typ):
        if layer.is_list:
            raise ValueError(f"struct {field.name!r} decoded as a list")
        kids = []
        for i, c in enumerate(field.children):
            if c.is_empty_struct:  # pylance writes these only without nulls: every row is {}
                kids.append(pa.Array.from_buffers(typ.field(i).type, layer.length, [None], children=[]))
                continue
            if not _has_column(c, columns_of):
                kids.append(pa.nulls(layer.length, typ.field(i).type))
                continue
            kids.append(_assemble(c, depth + 1, by_id, depth_of, columns_of))
        return pa.Array.from_buffers(typ, layer.length, [vbuf], children=kids)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        if not layer.is_list or layer.offsets is None:
            raise ValueError(f"list {field.name!r} decoded without offsets")
        child = _assemble(field.children[0], depth + 1, by_id, depth_of, columns_of)
        offsets = layer.offsets
        if int(offsets[-1]) != len(child):
            raise ValueError(f"list {field.name!r} offsets do not match its items")
        if pa.types.is_list(typ):
            if int(offsets[-1]) > _I32_MAX:
                raise NotSupportedError(f"list {field.name!r} has more items than 32-bit offsets hold")
            obuf = pa.py_buffer(offsets.astype(np.int32))
        else:
            obuf = pa.py_buffer(offsets.astype(np.int64))
        return pa.Array.from_buffers(typ, layer.length, [vbuf, obuf], children=[child])
    raise NotSupportedError(f"field {field.name!r} of type {typ} has no column in a 2.1 file")
