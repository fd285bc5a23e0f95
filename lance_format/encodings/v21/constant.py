"""All-null and constant pages.

An all-null / constant page stores no values: every visible value is null (no ``inline_value``)
or one scalar (``inline_value``, or a scalar buffer 0 when there is no inline value). Levels, when
needed, come as the last two buffers: repetition then definition, plain u16 unless the layout
names a compression. They are read once per page and cached; a read then needs no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.core.errors import CorruptFileError
from lance_format.encodings.base import DecodeContext, IOGen, PageInfo, RowRuns, expand_ranges, fetch
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import single
from lance_format.encodings.v21.codecs import decode_levels
from lance_format.encodings.v21.page import PageData, row_entry_ranges
from lance_format.encodings.v21.repdef import max_visible_level
from lance_format.encodings.v21.values import Fixed, Nulls, Values, VarBin, take_values

__all__ = ["read_constant"]

I64 = npt.NDArray[np.int64]
Levels = npt.NDArray[np.uint16]


@dataclass(frozen=True)
class _ConstantState:
    scalar: Values | None
    rep: Levels | None
    defs: Levels | None
    row_pos: I64 | None


def _scalar_from_buffer(raw: bytes, path: str) -> Values:
    """A scalar's Arrow buffers: u32 count, a u32 length per buffer, then the buffers."""
    if len(raw) < 4:
        raise CorruptFileError(path, "constant scalar buffer is too short")
    count = int.from_bytes(raw[:4], "little")
    if count not in (1, 2) or len(raw) < 4 + 4 * count:
        raise CorruptFileError(path, f"constant scalar with {count} buffers is not supported")
    sizes = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "little") for i in range(count)]
    body = raw[4 + 4 * count :]
    if sum(sizes) > len(body):
        raise CorruptFileError(path, "constant scalar buffer is truncated")
    if count == 1:
        return Fixed(np.frombuffer(body[: sizes[0]], dtype=np.uint8), 8 * sizes[0], 1)
    ob = sizes[0] // 2
    if ob not in (4, 8):
        raise CorruptFileError(path, "constant scalar offsets have a bad width")
    offs = np.frombuffer(body[: sizes[0]], dtype=f"<i{ob}").astype(np.int64)
    data = np.frombuffer(body[sizes[0] : sizes[0] + sizes[1]], dtype=np.uint8)
    if offs[0] < 0 or offs[1] < offs[0] or offs[1] > len(data):
        raise CorruptFileError(path, "constant scalar offsets are out of range")
    return VarBin(offs - offs[0], data[offs[0] : offs[1]].copy())


def _repeat(scalar: Values | None, n: int) -> Values:
    if scalar is None:
        return Nulls(n)
    return take_values(scalar, np.zeros(n, dtype=np.int64))


def _levels(raw: memoryview, ce: m.CompressiveEncoding | None, count: int, path: str) -> Levels | None:
    if len(raw) == 0:
        return None
    if ce is None:
        if len(raw) % 2:
            raise CorruptFileError(path, "level buffer has an odd size")
        return np.frombuffer(raw, dtype="<u2").astype(np.uint16)
    try:
        return decode_levels(ce, single(raw), np.array([count], dtype=np.int64), path)
    except (ValueError, IndexError) as e:
        raise CorruptFileError(path, f"levels do not decode: {e}") from None


def read_constant(
    ctx: DecodeContext, column: int, page_index: int, page: PageInfo, layout: m.AllNullLayout, runs: RowRuns
) -> IOGen[PageData]:
    """Decoder generator for page-local row ``runs`` of an all-null or constant page.

    The scalar and the levels are read once per page and cached.

    Parameters
    ----------
    ctx:
        The file's decode context (its cache keeps the per-page state).
    column, page_index:
        Which page, for cache keys.
    page:
        The page's buffers and row count.
    layout:
        The page's layout.
    runs:
        Page-local, sorted, disjoint row runs.

    Returns
    -------
    PageData
        Levels and visible values of the selected rows, in order.
    """
    path = ctx.path
    key = (column, page_index, "constant")
    state = ctx.cache.get(key)
    nbuf = len(page.buffer_offsets)
    if state is None:
        has_scalar_buf = layout.inline_value is None and nbuf in (1, 3)
        want = [page.buffer(i) for i in range(nbuf) if page.buffer_sizes[i]]
        got = yield from fetch(want)
        by_index: dict[int, memoryview] = {}
        it = iter(got)
        for i in range(nbuf):
            by_index[i] = next(it) if page.buffer_sizes[i] else memoryview(b"")
        scalar: Values | None = None
        if layout.inline_value is not None:
            raw = np.frombuffer(layout.inline_value, dtype=np.uint8)
            scalar = Fixed(raw, 8 * len(raw), 1)
        elif has_scalar_buf:
            scalar = _scalar_from_buffer(bytes(by_index[0]), path)
        rep = defs = None
        if nbuf - int(has_scalar_buf) >= 2:
            base = int(has_scalar_buf)
            rep = _levels(by_index[base], layout.rep_compression, layout.num_rep_values, path)
            defs = _levels(by_index[base + 1], layout.def_compression, layout.num_def_values, path)
        if rep is not None and defs is not None and len(rep) != len(defs):
            raise CorruptFileError(path, "repetition and definition levels differ in number")
        row_pos = None
        if rep is not None:
            max_rep = sum(1 for layer in layout.layers if layer.is_list)
            row_pos = np.flatnonzero(rep == max_rep)
            if len(row_pos) != page.num_rows:
                raise CorruptFileError(path, "constant page levels do not hold the page's rows")
        elif defs is not None and len(defs) != page.num_rows:
            raise CorruptFileError(path, "constant page levels do not hold the page's rows")
        state = _ConstantState(scalar, rep, defs, row_pos)
        ctx.cache[key] = state
    assert isinstance(state, _ConstantState)
    lengths = runs[:, 1] - runs[:, 0]
    simple_null = state.scalar is None and state.rep is None and state.defs is None
    if state.rep is None:
        n = int(lengths.sum())
        if state.defs is None:
            defs = np.ones(n, dtype=np.uint16) if simple_null else None
            layers = (m.RepDefLayer.NULLABLE_ITEM,) if simple_null and not layout.layers else layout.layers
            return PageData(None, defs, layers, n, _repeat(state.scalar, n))
        idx = expand_ranges(runs[:, 0], lengths)
        d = state.defs[idx]
        nvis = int((d <= max_visible_level(layout.layers)).sum())
        return PageData(None, d, layout.layers, n, _repeat(state.scalar, nvis))
    assert state.row_pos is not None
    total = len(state.rep)
    start, stop = row_entry_ranges(
        state.row_pos,
        np.arange(len(state.row_pos), dtype=np.int64),
        runs,
        np.array([total], dtype=np.int64),
        np.zeros(len(state.row_pos), dtype=np.int64),
    )
    ent = expand_ranges(start, stop - start)
    rep = state.rep[ent]
    defs = state.defs[ent] if state.defs is not None else None
    nvis = int((defs <= max_visible_level(layout.layers)).sum()) if defs is not None else len(ent)
    return PageData(rep, defs, layout.layers, len(ent), _repeat(state.scalar, nvis))
