"""Arrow array -> repetition/definition levels of each leaf column (the inverse of ``repdef``).

The field tree is walked from the top down. Every *entry* (one level pair) carries: the slot it
points at in the current array (or -1 once it is invisible: a null or empty list), a null code
(the layer that made it null or empty, -1 while valid) and the list whose item it starts. Lists
expand an entry into one per item; structs keep entries and pass slots to their children.
Definition levels are numbered only at the end, leaf first, once every layer's kind (all valid /
nullable / emptyable) is known from the data. Each step is one compiled pass over the entries
(:mod:`._levels`), reading Arrow offsets and validity bitmaps in place; above the first list
every entry is its own slot, so no per-entry array exists until a layer needs one.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.types import LanceField
from lance_format.encodings.v21.encode._levels import (
    expand_lists,
    finish_levels,
    item_nulls,
    list_leaf_levels,
    readonly,
)
from lance_format.encodings.v21.model import RepDefLayer

__all__ = ["LeafLevels", "leaf_levels"]

I64 = npt.NDArray[np.int64]
I16 = npt.NDArray[np.int16]
U8 = npt.NDArray[np.uint8]
Bools = npt.NDArray[np.bool_]

_NO_I64 = np.zeros(0, dtype=np.int64)
_NO_I16 = np.zeros(0, dtype=np.int16)
_NO_BITS = readonly(np.zeros(0, dtype=np.uint8))
#: Null codes and list depths are int16: layers nest at most this deep.
MAX_DEPTH = 16_000


@dataclass(frozen=True)
class LeafLevels:
    """One leaf column's page data before encoding.

    Attributes
    ----------
    field:
        The leaf field (owner of the column).
    values:
        The leaf array (dictionaries decoded), indexed by ``slots``.
    slots:
        Per entry, its slot in ``values``, -1 for invisible entries (null or empty lists); None
        when entry ``i`` is slot ``i`` (no list above the leaf) or ``span`` and ``visible`` say
        it all (a leaf right below a list).
    rep, defs:
        Levels per entry (None when the column needs none).
    layers:
        Layer meanings, leaf first.
    num_rows:
        Top-level rows.
    index_bits:
        Key width of an Arrow dictionary leaf (its values were decoded into ``values``), else None.
    span:
        ``(first, count)`` when the visible slots are ``first, first + 1, ...`` in entry order (the
        values to store are then a slice), else None.
    visible:
        Per entry, whether it carries a value (null items included); None when all do.
    """

    field: LanceField
    values: pa.Array
    slots: I64 | None
    rep: npt.NDArray[np.uint16] | None
    defs: npt.NDArray[np.uint16] | None
    layers: tuple[RepDefLayer, ...]
    num_rows: int
    index_bits: int | None = None
    span: tuple[int, int] | None = None
    visible: Bools | None = None

    @property
    def num_entries(self) -> int:
        for levels in (self.rep, self.defs, self.slots):
            if levels is not None:
                return len(levels)
        return len(self.values)

    def visible_mask(self) -> Bools | None:
        """Per entry, whether it carries a value (null items included); None when all do."""
        if self.visible is not None or self.slots is None:
            return self.visible
        return self.slots >= 0

    def visible_values(self) -> pa.Array:
        """The values of the visible entries, in entry order."""
        if self.span is not None:
            first, count = self.span
            if first == 0 and count == len(self.values):
                return self.values
            return self.values.slice(first, count)
        assert self.slots is not None
        return self.values.take(pa.array(self.slots[self.slots >= 0], type=pa.int64()))

    @property
    def max_rep(self) -> int:
        return sum(1 for x in self.layers if x.is_list)


@dataclass
class _Layer:
    is_list: bool
    has_null: bool = False
    has_empty: bool = False


@dataclass
class _Entries:
    """The entries at one layer of the walk (see :mod:`._levels` for the empty-array shorthands)."""

    n: int
    slots: I64 = dc_field(default_factory=lambda: _NO_I64)
    identity: bool = True
    code: I16 = dc_field(default_factory=lambda: _NO_I16)
    starts: I16 = dc_field(default_factory=lambda: _NO_I16)
    #: Some live entry is null from a struct layer above (a layer below is then nullable too).
    null_visible: bool = False


def _validity(arr: pa.Array) -> tuple[U8, int]:
    """The validity bitmap of ``arr`` and its bit offset; an empty bitmap when all are valid."""
    if arr.null_count == 0:
        return _NO_BITS, 0
    if pa.types.is_null(arr.type):
        return readonly(np.zeros((len(arr) + 7) // 8, dtype=np.uint8)), 0
    buf = arr.buffers()[0]
    assert buf is not None
    return readonly(np.frombuffer(buf, dtype=np.uint8)), arr.offset


def _list_offsets(arr: pa.Array) -> npt.NDArray[np.signedinteger[Any]]:
    """The list's ``len + 1`` offsets into ``arr.values`` (int32 or int64, read in place)."""
    dtype = np.dtype(np.int64 if pa.types.is_large_list(arr.type) else np.int32)
    buf = arr.buffers()[1]
    if buf is None:
        return readonly(np.zeros(len(arr) + 1, dtype=dtype))
    offs: npt.NDArray[np.signedinteger[Any]] = np.frombuffer(buf, dtype=dtype)
    return readonly(offs[arr.offset : arr.offset + len(arr) + 1])


def _plain(arr: pa.Array) -> pa.Array:
    """Dictionary arrays are stored as their values (pylance reads them back as dictionaries)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = pa.concat_arrays(arr.chunks) if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_dictionary(arr.type):
        return arr.cast(arr.type.value_type)
    return arr


def leaf_levels(field: LanceField, arr: pa.Array, columns_of: dict[int, int]) -> list[LeafLevels]:
    """Levels and values of every leaf column under a top-level field, for one page of rows.

    Parameters
    ----------
    field:
        A top-level field.
    arr:
        Its rows.
    columns_of:
        Column index by field id (leaves and packed structs own columns).

    Returns
    -------
    list of LeafLevels
        In column order.
    """
    out: list[LeafLevels] = []
    _walk(field, arr, _Entries(len(arr)), [], columns_of, len(arr), out)
    return out


def _walk(
    field: LanceField,
    arr: pa.Array,
    ent: _Entries,
    layers: list[_Layer],
    columns_of: dict[int, int],
    num_rows: int,
    out: list[LeafLevels],
) -> None:
    is_dict = arr.type.index_type.bit_width if pa.types.is_dictionary(arr.type) else None
    arr = _plain(arr)
    typ = arr.type
    is_leaf = field.id in columns_of
    depth = len(layers)
    if depth >= MAX_DEPTH:
        raise ValueError(f"field {field.name!r} is nested deeper than {MAX_DEPTH} layers")
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        if is_leaf:
            raise ValueError(f"list field {field.name!r} cannot own a column")
        bitmap, bit_off = _validity(arr)
        if ent.identity and not len(ent.code) and _simple_leaf(field.children[0], arr, columns_of):
            done = _list_of_leaf(field.children[0], arr, bitmap, bit_off, layers, num_rows)
            if done is not None:
                out.append(done)
                return
        # Entries already null above (a null struct around this list) stay single and invisible:
        # Arrow may hold any list in their slot.
        slots, code, starts, has_null, has_empty = expand_lists(
            ent.slots, ent.identity, ent.code, ent.starts, ent.n, _list_offsets(arr), bitmap, bit_off, depth
        )
        keep_code = len(ent.code) > 0 or has_null or has_empty
        below = _Entries(len(slots), slots, False, code if keep_code else _NO_I16, starts, False)
        # A list below a null struct entry is nullable too (pylance pushes the null down, as for
        # item layers below): pylance sizes a list's validity from its own layer's kind.
        layers = [*layers, _Layer(True, bool(has_null) or ent.null_visible, bool(has_empty))]
        _walk(field.children[0], arr.values, below, layers, columns_of, num_rows, out)
        return
    # Item / struct layer: nulls only. pylance pushes a null struct entry down into its children,
    # so a layer below a null struct entry is nullable too: pylance derives a child's validity from
    # its own layer only, and reads the stored value (not null) under a null struct when that layer
    # says "all valid".
    layer = _Layer(False, ent.null_visible)
    if arr.null_count:
        bitmap, bit_off = _validity(arr)
        code, any_null = item_nulls(ent.slots, ent.identity, ent.code, ent.n, bitmap, bit_off, depth)
        if any_null:
            ent = _Entries(ent.n, ent.slots, ent.identity, code, ent.starts, True)
            layer.has_null = True
    layers = [*layers, layer]
    if is_leaf:
        out.append(_finish(field, arr, ent, layers, num_rows, is_dict))
        return
    if not pa.types.is_struct(typ):
        raise ValueError(f"field {field.name!r} of type {typ} has no column")
    for i, child in enumerate(field.children):
        _walk(child, arr.field(i), ent, layers, columns_of, num_rows, out)


def _simple_leaf(child: LanceField, arr: pa.Array, columns_of: dict[int, int]) -> bool:
    """Whether a list's item field is a leaf column (not itself a list)."""
    t = arr.type.value_type
    return child.id in columns_of and not (pa.types.is_list(t) or pa.types.is_large_list(t))


def _list_of_leaf(
    child: LanceField, arr: pa.Array, bitmap: U8, bit_off: int, outer: list[_Layer], num_rows: int
) -> LeafLevels | None:
    """The leaf below a list with no list or null above it, in one compiled step; None when the
    list's items are not one run of values (null lists holding items), for the general walk."""
    values = arr.values
    is_dict = values.type.index_type.bit_width if pa.types.is_dictionary(values.type) else None
    values = _plain(values)
    leaf_bm, leaf_off = _validity(values)
    rep, defs, visible, has_null, has_empty, leaf_null, first, nvis, run = list_leaf_levels(
        len(arr), _list_offsets(arr), bitmap, bit_off, leaf_bm, leaf_off
    )
    if not run:
        return None
    layers = [*outer, _Layer(True, bool(has_null), bool(has_empty)), _Layer(False, bool(leaf_null))]
    return LeafLevels(
        child,
        values,
        None,
        rep,
        defs if len(defs) else None,
        tuple(_kind(x) for x in reversed(layers)),
        num_rows,
        is_dict,
        (int(first), int(nvis)),
        visible if len(visible) else None,
    )


def _kind(layer: _Layer) -> RepDefLayer:
    if not layer.is_list:
        return RepDefLayer.NULLABLE_ITEM if layer.has_null else RepDefLayer.ALL_VALID_ITEM
    if layer.has_null and layer.has_empty:
        return RepDefLayer.NULL_AND_EMPTY_LIST
    if layer.has_null:
        return RepDefLayer.NULLABLE_LIST
    return RepDefLayer.EMPTYABLE_LIST if layer.has_empty else RepDefLayer.ALL_VALID_LIST


def _finish(
    field: LanceField,
    arr: pa.Array,
    ent: _Entries,
    outer_layers: list[_Layer],
    num_rows: int,
    is_dict: int | None,
) -> LeafLevels:
    nl = len(outer_layers)
    kinds = [_kind(layer) for layer in outer_layers]
    if ent.identity and not len(ent.code) and not any(layer.is_list for layer in outer_layers):
        # No list and no null on the way down (the common flat column): no levels at all, and
        # the values are the entries (no pass over them needed).
        return LeafLevels(field, arr, None, None, None, tuple(reversed(kinds)), num_rows, is_dict, (0, ent.n))
    # Level numbering: the layer at outer index k owns the levels after those of the layers inside
    # it; a null there has the first of them, an empty list (when the layer has both) the second.
    ndef = [k.num_def_levels for k in kinds]
    def_table = _NO_I64
    if any(ndef):
        def_table = np.zeros(2 * nl, dtype=np.int64)
        for k in range(nl):
            inside = sum(ndef[k + 1 :])
            def_table[2 * k] = inside + 1
            def_table[2 * k + 1] = inside + 1 + (kinds[k] is RepDefLayer.NULL_AND_EMPTY_LIST)
    list_depths = [k for k in range(nl) if outer_layers[k].is_list]
    rep_table = _NO_I64
    if list_depths:
        # Outer-first list q (0 = outermost) at depth k: an entry starting one of its items has
        # leaf-first level max_rep - q - 1; an entry starting a row has max_rep.
        max_rep = len(list_depths)
        rep_table = np.zeros(nl + 1, dtype=np.int64)
        rep_table[0] = max_rep
        for q, k in enumerate(list_depths):
            rep_table[k + 1] = max_rep - q - 1
    defs, rep, visible, nvis, first, consecutive = finish_levels(
        ent.slots, ent.identity, ent.code, ent.starts, ent.n, def_table, rep_table
    )
    return LeafLevels(
        field,
        arr,
        None if ent.identity else ent.slots,
        rep if len(rep_table) else None,
        defs if len(def_table) else None,
        tuple(reversed(kinds)),
        num_rows,
        is_dict,
        (int(first) if nvis else 0, int(nvis)) if consecutive else None,
        None if ent.identity else visible,
    )
