"""Repetition/definition levels -> Arrow offsets and validity, one nesting layer at a time.

Lance numbers levels from the leaf outwards. Layer ``i`` owns definition levels
``cum[i] + 1 .. cum[i] + ndef[i]`` where ``cum[i]`` counts the levels of the layers inside it; a
definition level ``d`` means "null (or empty) at the layer owning ``d``, valid everywhere
outside". A repetition level ``r > 0`` starts a new list at list-layer ``r`` (counting lists from
the leaf, 1-based) and at every list inside it; ``r == 0`` continues the innermost list.

:func:`unravel` turns one page's levels into a :class:`Layer` per nesting layer (leaf first):
validity for struct/item layers, offsets plus validity for list layers. Everything is a handful of
numpy passes per layer; there is no loop over levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.core.records import fast_init
from lance_format.encodings.v21.model import RepDefLayer

__all__ = ["Layer", "concat_layers", "max_visible_level", "unravel"]

Bools = npt.NDArray[np.bool_]
I64 = npt.NDArray[np.int64]
Levels = npt.NDArray[np.uint16]


@fast_init
@dataclass(frozen=True)
class Layer:
    """One nesting layer of decoded rows.

    Attributes
    ----------
    is_list:
        List layer (``offsets`` set) or item/struct layer.
    length:
        Slots at this layer (lists for a list layer, values for an item layer).
    validity:
        ``length`` booleans, or None when every slot is valid.
    offsets:
        ``length + 1`` int64 offsets into the next layer inwards (list layers only).
    """

    is_list: bool
    length: int
    validity: Bools | None
    offsets: I64 | None = None


def _visibility_limits(layers: Sequence[RepDefLayer]) -> tuple[list[int], list[int]]:
    """Per layer: levels owned by the layers inside it, and the highest level visible at it."""
    ndef = [layer.num_def_levels for layer in layers]
    before = [int(sum(ndef[:i])) for i in range(len(layers))]
    limits = []
    for i in range(len(layers)):
        j = i + 1
        while j < len(layers) and not layers[j].is_list:
            j += 1
        limits.append(int(sum(ndef[:j])))
    return before, limits


def max_visible_level(layers: Sequence[RepDefLayer]) -> int:
    """Highest definition level that still produces a leaf value (no list is null or empty)."""
    return _visibility_limits(layers)[1][0] if layers else 0


def unravel(
    rep: Levels | None, defs: Levels | None, layers: Sequence[RepDefLayer], num_entries: int
) -> list[Layer]:
    """Offsets and validity of every layer of one page's selected rows.

    Parameters
    ----------
    rep, defs:
        Repetition and definition level of every entry (None when the page has none).
    layers:
        The page's layer meanings, leaf first.
    num_entries:
        Entries (levels) when both arrays are None.

    Returns
    -------
    list of Layer
        Leaf first; the last layer has one slot per row.

    Raises
    ------
    ValueError
        The levels contradict the layers.
    """
    if rep is None and defs is None and not any(layer.is_list for layer in layers):
        # No levels and no lists (non-nullable flat columns): every layer is all rows, all valid.
        return [Layer(False, num_entries, None) for _ in layers]
    n = len(rep) if rep is not None else len(defs) if defs is not None else num_entries
    d: npt.NDArray[np.int64] | None = defs.astype(np.int64) if defs is not None else None
    r: npt.NDArray[np.int64] | None = rep.astype(np.int64) if rep is not None else None
    if (d is not None and len(d) != n) or (r is not None and len(r) != n):
        raise ValueError("repetition and definition levels differ in length")
    before, limits = _visibility_limits(layers)
    if d is not None and n and int(d.max()) > (sum(layer.num_def_levels for layer in layers)):
        raise ValueError("definition level beyond the page's layers")
    out: list[Layer] = []
    for i, layer in enumerate(layers):
        if not layer.is_list:
            if d is None:
                out.append(Layer(False, n, None))
                continue
            slots = d <= limits[i]
            ds = d[slots]
            validity: Bools | None = None
            if layer.num_def_levels:
                valid = ds <= before[i]
                validity = None if bool(valid.all()) else valid
            out.append(Layer(False, len(ds), validity))
            continue
        if r is None:
            if n:
                raise ValueError("list layer without repetition levels")
            out.append(Layer(True, 0, None, np.zeros(1, dtype=np.int64)))
            continue
        starts = r != 0
        valid_level = before[i]
        if d is None:
            inner = np.ones(len(r), dtype=bool)
            listed = starts
        else:
            inner = d <= valid_level
            listed = starts & (d <= limits[i])
        before_count = np.cumsum(inner) - inner
        offsets = np.empty(int(listed.sum()) + 1, dtype=np.int64)
        offsets[:-1] = before_count[listed]
        offsets[-1] = int(inner.sum())
        validity = None
        if d is not None:
            dl = d[listed]
            upper = valid_level + layer.num_def_levels
            null_level = (
                valid_level + 1
                if layer in (RepDefLayer.NULLABLE_LIST, RepDefLayer.NULL_AND_EMPTY_LIST)
                else -1
            )
            invalid = (dl == null_level) | (dl > upper)
            validity = ~invalid if bool(invalid.any()) else None
            d = d[starts]
        r = r[starts] - 1
        n = len(r)
        out.append(Layer(True, len(offsets) - 1, validity, offsets))
    return out


def concat_layers(pages: Sequence[Sequence[Layer]]) -> list[Layer]:
    """Join the layers of consecutive pages.

    Parameters
    ----------
    pages:
        Per page, its layers (leaf first) as :func:`unravel` returned them.

    Returns
    -------
    list of Layer
        Offsets rebased, validity merged (None only if every page had none).

    Raises
    ------
    ValueError
        The pages disagree on the nesting.
    """
    if len(pages) == 1:
        return list(pages[0])
    depth = len(pages[0])
    if any(len(p) != depth for p in pages):
        raise ValueError("pages of one column disagree on nesting depth")
    out: list[Layer] = []
    for i in range(depth):
        parts = [p[i] for p in pages]
        is_list = parts[0].is_list
        if any(p.is_list != is_list for p in parts):
            raise ValueError("pages of one column disagree on nesting")
        length = sum(p.length for p in parts)
        validity: Bools | None = None
        if any(p.validity is not None for p in parts):
            validity = np.concatenate(
                [p.validity if p.validity is not None else np.ones(p.length, dtype=bool) for p in parts]
            )
        offsets: I64 | None = None
        if is_list:
            pieces = []
            base = 0
            for p in parts:
                assert p.offsets is not None
                pieces.append(p.offsets[:-1] - p.offsets[0] + base)
                base += int(p.offsets[-1] - p.offsets[0])
            offsets = np.concatenate([*pieces, np.array([base], dtype=np.int64)])
        out.append(Layer(is_list, length, validity, offsets))
    return out
