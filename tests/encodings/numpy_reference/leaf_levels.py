"""Test oracle, the level walk before its compiled kernels: numpy passes over int64 entries.

Arrow array -> repetition/definition levels of each leaf column (the inverse of ``repdef``).

The field tree is walked from the top down. Every *entry* (one level pair) carries: the slot it
points at in the current array (or -1 once it is invisible: a null or empty list), whether a
layer above already made it null, and the repetition level it starts with. Lists expand an entry
into one per item; structs keep entries and pass slots to their children. Definition levels are
numbered only at the end, leaf first, once every layer's kind (all valid / nullable / emptyable)
is known from the data. Each step is a handful of numpy passes over the entries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.types import LanceField
from lance_format.encodings.v21.model import RepDefLayer
from tests.encodings.numpy_reference.list_levels import expand_lists

__all__ = ["LeafLevels", "leaf_levels"]

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class LeafLevels:
    """One leaf column's levels; ``slots``: per entry, its slot in ``values`` (-1: invisible)."""

    field: LanceField
    values: pa.Array
    slots: I64
    rep: npt.NDArray[np.uint16] | None
    defs: npt.NDArray[np.uint16] | None
    layers: tuple[RepDefLayer, ...]
    num_rows: int
    index_bits: int | None = None
    dense: bool = False


@dataclass
class _Layer:
    is_list: bool
    has_null: bool = False
    has_empty: bool = False


def _valid(arr: pa.Array) -> Bools:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    if pa.types.is_null(arr.type):
        return np.zeros(len(arr), dtype=bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _list_offsets(arr: pa.Array) -> I64:
    return np.ascontiguousarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)


def _plain(arr: pa.Array) -> pa.Array:
    """Dictionary arrays are stored as their values (pylance reads them back as dictionaries)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = pa.concat_arrays(arr.chunks) if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_dictionary(arr.type):
        return arr.cast(arr.type.value_type)
    return arr


def leaf_levels(field: LanceField, arr: pa.Array, columns_of: dict[int, int]) -> list[LeafLevels]:
    """Levels and values of every leaf column under a top-level field, in column order."""
    n = len(arr)
    top = _plain(arr)
    if field.id in columns_of and not _nested(top.type):
        # A top-level leaf: one entry per row, null or not; no walk needed.
        is_dict = arr.type.index_type.bit_width if pa.types.is_dictionary(arr.type) else None
        nullable = top.null_count > 0
        defs = (~_valid(top)).astype(np.uint16) if nullable else None
        kind = RepDefLayer.NULLABLE_ITEM if nullable else RepDefLayer.ALL_VALID_ITEM
        slots = np.arange(n, dtype=np.int64)
        return [LeafLevels(field, top, slots, None, defs, (kind,), n, is_dict, dense=True)]
    out: list[LeafLevels] = []
    _walk(
        field,
        arr,
        np.arange(n, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        [],
        columns_of,
        n,
        out,
    )
    return out


def _nested(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_struct(t))


def _walk(
    field: LanceField,
    arr: pa.Array,
    slots: I64,
    null_at: I64,
    kind: I64,
    starts: I64,
    layers: list[_Layer],
    columns_of: dict[int, int],
    num_rows: int,
    out: list[LeafLevels],
) -> None:
    """``null_at``: outer-first layer index where each entry became null/empty (-1 = valid so far);
    ``kind``: 1 when that was an empty list; ``starts``: per entry, the outer-first depth of the
    list whose item it starts (-1 = it starts a top-level row)."""
    is_dict = arr.type.index_type.bit_width if pa.types.is_dictionary(arr.type) else None
    arr = _plain(arr)
    typ = arr.type
    live = slots >= 0
    is_leaf = field.id in columns_of
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        if is_leaf:
            raise ValueError(f"list field {field.name!r} cannot own a column")
        _walk_list(field, arr, slots, null_at, kind, starts, layers, columns_of, num_rows, out)
        return
    # Item / struct layer: nulls only.
    valid = _valid(arr)
    layer = _Layer(False)
    idx = slots[live]
    null_here = np.zeros(len(slots), dtype=bool)
    null_here[live] = ~valid[idx]
    null_here &= null_at < 0
    # pylance pushes a null struct entry down into its children, so a layer below a null struct
    # entry is nullable too: pylance derives a child's validity from its own layer only, and reads
    # the stored value (not null) under a null struct when that layer says "all valid".
    below_null = live & (null_at >= 0)
    layer.has_null = bool(null_here.any() or below_null.any())
    depth = len(layers)
    null_at = np.where(null_here, depth, null_at)
    layers = [*layers, layer]
    if is_leaf:
        out.append(_finish(field, arr, slots, null_at, kind, starts, layers, num_rows, is_dict))
        return
    if not pa.types.is_struct(typ):
        raise ValueError(f"field {field.name!r} of type {typ} has no column")
    for i, child in enumerate(field.children):
        _walk(child, arr.field(i), slots, null_at, kind, starts, layers, columns_of, num_rows, out)


def _walk_list(
    field: LanceField,
    arr: pa.Array,
    slots: I64,
    null_at: I64,
    kind: I64,
    starts: I64,
    layers: list[_Layer],
    columns_of: dict[int, int],
    num_rows: int,
    out: list[LeafLevels],
) -> None:
    depth = len(layers)
    valid = _valid(arr)
    offsets = _list_offsets(arr)
    # Entries already null above (a null struct around this list) stay single and invisible:
    # Arrow may hold any list in their slot.
    # A list below a null struct entry is nullable too (pylance pushes the null down).
    below_null = bool(((slots >= 0) & (null_at >= 0)).any())
    new_slots, new_null_at, new_kind, new_starts, has_null, has_empty = expand_lists(
        slots, null_at, kind, starts, offsets, valid, depth
    )
    layer = _Layer(True, bool(has_null) or below_null, bool(has_empty))
    layers = [*layers, layer]
    _walk(
        field.children[0],
        arr.values,
        new_slots,
        new_null_at,
        new_kind,
        new_starts,
        layers,
        columns_of,
        num_rows,
        out,
    )


def _finish(
    field: LanceField,
    arr: pa.Array,
    slots: I64,
    null_at: I64,
    kind: I64,
    starts: I64,
    outer_layers: list[_Layer],
    num_rows: int,
    is_dict: int | None,
) -> LeafLevels:
    nl = len(outer_layers)
    kinds: list[RepDefLayer] = []
    for layer in outer_layers:
        if layer.is_list:
            kinds.append(
                RepDefLayer.NULL_AND_EMPTY_LIST
                if layer.has_null and layer.has_empty
                else RepDefLayer.NULLABLE_LIST
                if layer.has_null
                else RepDefLayer.EMPTYABLE_LIST
                if layer.has_empty
                else RepDefLayer.ALL_VALID_LIST
            )
        else:
            kinds.append(RepDefLayer.NULLABLE_ITEM if layer.has_null else RepDefLayer.ALL_VALID_ITEM)
    leaf_first = tuple(reversed(kinds))
    # Level numbering: layer at outer index k owns levels after those of the layers inside it.
    ndef = [k.num_def_levels for k in kinds]
    inside = [int(sum(ndef[k + 1 :])) for k in range(nl)]
    defs = None
    if any(ndef):
        base = np.array(inside, dtype=np.int64)
        d = np.zeros(len(slots), dtype=np.int64)
        nulls = null_at >= 0
        at = null_at[nulls]
        lvl = base[at] + 1
        both = np.array([k is RepDefLayer.NULL_AND_EMPTY_LIST for k in kinds], dtype=bool)
        lvl = lvl + (both[at] & (kind[nulls] == 1))
        d[nulls] = lvl
        defs = d.astype(np.uint16)
    list_depths = [k for k in range(nl) if outer_layers[k].is_list]
    rep = None
    if list_depths:
        max_rep = len(list_depths)
        # Outer-first list index q (0 = outermost) of depth k has leaf-first number max_rep - q;
        # an entry starting an item of list depth k starts a list one level inside it.
        rank = np.full(nl + 1, 0, dtype=np.int64)
        for q, k in enumerate(list_depths):
            rank[k] = max_rep - q - 1
        r = np.where(starts < 0, max_rep, rank[np.maximum(starts, 0)])
        rep = r.astype(np.uint16)
    return LeafLevels(field, arr, slots, rep, defs, leaf_first, num_rows, is_dict)
