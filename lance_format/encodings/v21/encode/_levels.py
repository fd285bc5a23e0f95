"""Compiled steps of the level walk (:mod:`lance_format.encodings.v21.encode.levels`).

Each step is one pass over the entries. An entry carries its slot in the current array (or -1
once invisible), a null code (-1 while valid, else ``2 * depth + empty`` with ``depth`` the
outer-first layer that made it null or empty) and the outer-first depth of the list whose item it
starts (-1: it starts a top-level row). Before the first list every entry is its own slot and a
top-level row: ``identity`` then stands for ``slots``, and empty ``code`` / ``starts`` arrays for
"all -1", so a struct without lists costs no per-entry arrays at all. Validity comes as the Arrow
bitmap and its bit offset (an empty bitmap: all valid), never as a bool array.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.core.jit import kernel, warm

__all__ = [
    "chunk_bounds",
    "expand_lists",
    "finish_levels",
    "item_nulls",
    "list_leaf_levels",
    "readonly",
    "rep_index",
    "warm_up",
]

I64 = npt.NDArray[np.int64]
I16 = npt.NDArray[np.int16]
U8 = npt.NDArray[np.uint8]
U16 = npt.NDArray[np.uint16]
Bools = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.signedinteger[Any]]


@kernel
def _is_valid(bitmap: U8, bit_off: int, i: int) -> bool:  # pragma: no cover - compiled
    if bitmap.shape[0] == 0:
        return True
    j = bit_off + i
    return bool((bitmap[j >> 3] >> (j & 7)) & 1)


@kernel
def item_nulls(
    slots: I64, identity: bool, code: I16, n: int, bitmap: U8, bit_off: int, depth: int
) -> tuple[I16, bool]:  # pragma: no cover - compiled
    """Null codes after an item (or struct) layer at ``depth``: a live entry (a slot, valid so
    far) whose slot is null in ``bitmap`` becomes null here. Returns (codes, any became null)."""
    out = np.empty(n, dtype=np.int16)
    has_code = code.shape[0] > 0
    here = np.int16(2 * depth)
    any_null = False
    for e in range(n):
        c = code[e] if has_code else np.int16(-1)
        if c < 0:
            s = e if identity else slots[e]
            if s >= 0 and not _is_valid(bitmap, bit_off, s):
                c = here
                any_null = True
        out[e] = c
    return out, any_null


@kernel
def expand_lists(
    slots: I64,
    identity: bool,
    code: I16,
    starts: I16,
    n: int,
    offsets: Ints,
    bitmap: U8,
    bit_off: int,
    depth: int,
) -> tuple[I64, I16, I16, bool, bool]:  # pragma: no cover - compiled
    """Entries below a list layer at outer-first ``depth``.

    A live entry (a slot, valid so far) whose list is valid and not empty becomes one entry per
    item (slot ``offsets[slot] + j``; the first keeps the entry's ``starts``, the others start an
    item of list ``depth``). Any other entry stays single and invisible (slot -1); a null or empty
    list here makes it null at ``depth`` (code ``2 * depth``, ``+ 1`` for empty).

    Returns
    -------
    (slots, code, starts, has_null, has_empty)
    """
    has_code = code.shape[0] > 0
    has_starts = starts.shape[0] > 0
    # Pass 1: entries out (a list of k > 0 items gives k, anything else 1).
    total = 0
    for e in range(n):
        s = e if identity else slots[e]
        if s >= 0 and (not has_code or code[e] < 0) and _is_valid(bitmap, bit_off, s):
            ln = offsets[s + 1] - offsets[s]
            total += ln if ln > 0 else 1
        else:
            total += 1
    new_slots = np.empty(total, dtype=np.int64)
    # Items of an expanded list are valid (only valid entries expand) and, but for the first,
    # start an item of this list: fill those values once, write only the exceptions.
    new_code = np.full(total, -1, dtype=np.int16)
    inner = np.int16(depth)
    new_starts = np.full(total, inner, dtype=np.int16)
    null_code = np.int16(2 * depth)
    empty_code = np.int16(2 * depth + 1)
    has_null = False
    has_empty = False
    p = 0
    for e in range(n):
        s = e if identity else slots[e]
        c = code[e] if has_code else np.int16(-1)
        new_starts[p] = starts[e] if has_starts else np.int16(-1)
        if s >= 0 and c < 0:
            if not _is_valid(bitmap, bit_off, s):
                new_slots[p] = -1
                new_code[p] = null_code
                has_null = True
                p += 1
                continue
            b = offsets[s]
            ln = offsets[s + 1] - b
            if ln > 0:
                for j in range(ln):
                    new_slots[p + j] = b + j
                p += ln
            else:
                new_slots[p] = -1
                new_code[p] = empty_code
                has_empty = True
                p += 1
        else:
            new_slots[p] = -1
            new_code[p] = c
            p += 1
    return new_slots, new_code, new_starts, has_null, has_empty


@kernel
def list_leaf_levels(
    n: int, offsets: Ints, list_bm: U8, list_off: int, leaf_bm: U8, leaf_off: int
) -> tuple[U16, U16, Bools, bool, bool, bool, int, int, bool]:  # pragma: no cover - compiled
    """The levels of a leaf right below the only list, itself below top-level entries that are
    all valid (no list or null above): :func:`expand_lists` and :func:`finish_levels` in two
    passes over the lists, without entry arrays in between.

    Pass 1 finds the layer kinds (null lists, empty lists, null items among the visible ones)
    and whether the visible items are one run; pass 2 writes the levels. Rows start with rep 1,
    other items have 0. Definition levels: a null item 1, a null list one more than the item
    layer has, an empty list one more again when the list layer has both nulls and empties.

    Returns
    -------
    (rep, defs (empty: none needed), visible (empty: every entry is an item), has_null,
    has_empty, leaf_null, first item, item count, whether the items are one run: when not,
    nothing else is computed and the caller takes the general walk)
    """
    total = 0
    has_null = False
    has_empty = False
    leaf_null = False
    first = 0
    end = 0
    nvis = 0
    check_leaf = leaf_bm.shape[0] > 0
    for e in range(n):
        if not _is_valid(list_bm, list_off, e):
            has_null = True
            total += 1
            continue
        b = offsets[e]
        ln = offsets[e + 1] - b
        if ln <= 0:
            has_empty = True
            total += 1
            continue
        if nvis == 0:
            first = b
        elif b != end:
            no16 = np.zeros(0, dtype=np.uint16)
            return no16, no16, np.zeros(0, dtype=np.bool_), False, False, False, 0, 0, False
        end = b + ln
        nvis += ln
        total += ln
        if check_leaf and not leaf_null:
            for j in range(b, b + ln):
                if not _is_valid(leaf_bm, leaf_off, j):
                    leaf_null = True
                    break
    item_def = 1 if leaf_null else 0
    null_def = np.uint16(item_def + 1)
    empty_def = np.uint16(item_def + 1 + (1 if has_null and has_empty else 0))
    some_invisible = has_null or has_empty
    rep = np.zeros(total, dtype=np.uint16)
    defs = np.zeros(total if (leaf_null or some_invisible) else 0, dtype=np.uint16)
    visible = np.ones(total if some_invisible else 0, dtype=np.bool_)
    p = 0
    for e in range(n):
        rep[p] = 1
        if not _is_valid(list_bm, list_off, e):
            defs[p] = null_def
            visible[p] = False
            p += 1
            continue
        b = offsets[e]
        ln = offsets[e + 1] - b
        if ln <= 0:
            defs[p] = empty_def
            visible[p] = False
            p += 1
            continue
        if leaf_null:
            for j in range(ln):
                if not _is_valid(leaf_bm, leaf_off, b + j):
                    defs[p + j] = 1
        p += ln
    return rep, defs, visible, has_null, has_empty, leaf_null, first, nvis, True


@kernel
def finish_levels(
    slots: I64, identity: bool, code: I16, starts: I16, n: int, def_table: I64, rep_table: I64
) -> tuple[U16, U16, Bools, int, int, bool]:  # pragma: no cover - compiled
    """Levels of a leaf's entries and where its visible values are, in one pass.

    ``def_table[code]`` is the definition level of a null code (valid entries: 0);
    ``rep_table[starts + 1]`` the repetition level of an entry starting an item of that list (or a
    row). An empty table skips that kind of level (its array comes back empty).

    Returns
    -------
    (defs, rep, visible (per entry; empty for ``identity``: all are), visible count, first
    visible slot, whether the visible slots are consecutive)
    """
    want_def = def_table.shape[0] > 0
    has_code = code.shape[0] > 0
    want_rep = rep_table.shape[0] > 0
    has_starts = starts.shape[0] > 0
    defs = np.zeros(n if want_def else 0, dtype=np.uint16)
    rep = np.empty(n if want_rep else 0, dtype=np.uint16)
    visible = np.empty(0 if identity else n, dtype=np.bool_)
    row = np.uint16(rep_table[0]) if want_rep else np.uint16(0)
    nvis = 0
    first = -1
    prev = -1
    consecutive = True
    for e in range(n):
        if want_def and has_code:
            c = code[e]
            if c >= 0:
                defs[e] = def_table[c]
        if want_rep:
            rep[e] = rep_table[starts[e] + 1] if has_starts else row
        if not identity:
            s = slots[e]
            visible[e] = s >= 0
            if s >= 0:
                if nvis == 0:
                    first = s
                elif s != prev + 1:
                    consecutive = False
                prev = s
                nvis += 1
    if identity:
        return defs, rep, visible, n, 0, True
    return defs, rep, visible, nvis, first, consecutive


@kernel
def chunk_bounds(visible: Bools, counts: I64, nent: int) -> I64:  # pragma: no cover - compiled
    """Entry range of each mini-block chunk: chunk ``c`` holds ``counts[c]`` values and starts at
    the entry of its first value (chunk 0 at entry 0, so leading invisible entries go with it);
    the last ends at ``nent``."""
    nc = counts.shape[0]
    bounds = np.empty(nc + 1, dtype=np.int64)
    c = 0
    seen = 0
    next_first = 0
    for e in range(visible.shape[0]):
        if visible[e]:
            if c < nc and seen == next_first:
                bounds[c] = e
                next_first += counts[c]
                c += 1
            seen += 1
    bounds[nc] = nent
    bounds[0] = 0
    return bounds


@kernel
def rep_index(rep: U16, bounds: I64, max_rep: int) -> I64:  # pragma: no cover - compiled
    """The mini-block repetition index: per chunk (entries ``bounds[c]:bounds[c + 1]``), the rows
    that end in it and the levels of a row that continues into the next chunk, as pairs."""
    nc = bounds.shape[0] - 1
    out = np.zeros(2 * nc, dtype=np.int64)
    top = np.uint16(max_rep)
    for c in range(nc):
        a = bounds[c]
        b = bounds[c + 1]
        starts = 0
        last = -1
        for i in range(a, b):
            if rep[i] == top:
                starts += 1
                last = i
        nxt_is_start = c == nc - 1 or rep[b] == top
        first_is_start = b > a and rep[a] == top
        ends = starts - (0 if nxt_is_start else 1) + (0 if first_is_start else 1)
        out[2 * c] = ends
        if not nxt_is_start:
            out[2 * c + 1] = b - last if last >= 0 else b - a
    return out


def readonly(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``a`` marked read-only. Bitmaps and offsets reach the kernels read-only (as Arrow buffers
    are), also when made here, so each kernel compiles once for them rather than once per mix of
    writable and read-only arguments."""
    a.setflags(write=False)
    return a


def warm_up() -> None:
    """Compile (or load) the kernels for the argument types the walk passes (offsets and bitmaps
    always read-only)."""
    one = np.zeros(1, dtype=np.int64)
    code = np.full(1, -1, dtype=np.int16)
    bm = readonly(np.ones(1, dtype=np.uint8))
    warm(item_nulls, one, False, code, 1, bm, 0, 0)
    for dtype in (np.int32, np.int64):
        offs = readonly(np.array([0, 1], dtype=dtype))
        warm(expand_lists, one, False, code, code, 1, offs, bm, 0, 0)
        warm(list_leaf_levels, 1, offs, bm, 0, bm, 0)
    warm(finish_levels, one, False, code, code, 1, one, one)
    warm(rep_index, np.ones(2, dtype=np.uint16), np.array([0, 2]), 1)
    warm(chunk_bounds, np.ones(2, dtype=np.bool_), np.array([2]), 2)
