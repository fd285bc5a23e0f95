"""Mini-block pages: small values in independently decodable chunks.

Buffers: 0 = one metadata word per chunk (``((bytes / 8 - 1) << 4) | log2(values)``; u16, or u32
when ``has_large_chunk``), 1 = the chunks, then the dictionary (if any) and the repetition index
(``depth + 1`` u64 per chunk, if ``repetition_index_depth > 0``).

A chunk: u16 level count, u16 rep size, u16 def size (each only when that compression is set),
one size per value buffer (u16, or u32 when ``has_large_chunk``), padding to 8, then rep, def and
the value buffers, each padded to 8.

The chunk metadata, dictionary and repetition index are read once per page and cached; a read
then fetches only the chunks that hold the selected rows (whole buffers for a full read) and
decodes all of them in one batch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from lance_format.core.errors import CorruptFileError
from lance_format.encodings.base import DecodeContext, IOGen, PageInfo, RowRuns, expand_ranges, fetch
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import Bufs, read_uint, single
from lance_format.encodings.v21._fsst import fsst_decompress
from lance_format.encodings.v21.compressive import decode_block, decode_levels, decode_mini
from lance_format.encodings.v21.minitake import decode_mini_take, levels_take, one_level, one_value
from lance_format.encodings.v21.page import PageData, row_entry_ranges
from lance_format.encodings.v21.repdef import max_visible_level
from lance_format.encodings.v21.values import Values, VarBin, take_values

__all__ = ["MiniBlockMeta", "can_merge", "merge_classes", "read_miniblock", "read_miniblock_pages"]

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
_ALIGN = 8
# A chunk's value count is a 4-bit log2 (or, for the last chunk, the remainder); Lance writes at
# most 4096. Anything past this bound is corrupt metadata, caught before allocating for it.
_MAX_CHUNK_VALUES = 1 << 16


@dataclass(frozen=True)
class MiniBlockMeta:
    """Per-page search state (cached): where each chunk is and which rows it holds."""

    chunk_pos: I64
    chunk_size: I64
    chunk_items: I64
    first_row: I64
    row_starts: I64
    has_trailer: Bools
    next_end: I64
    dictionary: Values | None
    #: Chunks in which some row starts, and that row: what row -> chunk lookups search.
    holders: I64
    holder_first_row: I64
    #: Merged pages of FSST strings (see :func:`read_miniblock_pages`): each page's symbol table
    #: and the page (index into ``tables``) of every chunk. Empty for a single page.
    tables: tuple[bytes, ...] = ()
    chunk_table: I64 | None = None
    #: Whether some chunk ends inside a row (a run may then need the chunk after its last).
    any_trailer: bool = False


def _pad(x: I64) -> I64:
    return (x + (_ALIGN - 1)) // _ALIGN * _ALIGN


def _load_meta(layout: m.MiniBlockLayout, page: PageInfo, bufs: list[memoryview], path: str) -> MiniBlockMeta:
    word_bytes = 4 if layout.has_large_chunk else 2
    raw = bytes(bufs[0])
    if len(raw) % word_bytes:
        raise CorruptFileError(path, "mini-block chunk metadata has a partial word")
    words = np.frombuffer(raw, dtype=np.uint32 if word_bytes == 4 else np.uint16).astype(np.int64)
    nchunks = len(words)
    sizes = ((words >> 4) + 1) * _ALIGN
    logs = words & 0xF
    items = np.where(logs > 0, np.left_shift(1, logs), 0).astype(np.int64)
    if nchunks:
        rest = layout.num_items - int(items[:-1].sum())
        if rest < 0 or (logs[-1] and items[-1] != rest):
            raise CorruptFileError(path, "mini-block chunk value counts do not add up")
        items[-1] = rest
        if rest > _MAX_CHUNK_VALUES:
            raise CorruptFileError(path, "mini-block chunk claims too many values")
    elif layout.num_items:
        raise CorruptFileError(path, "mini-block page without chunks")
    data_pos, data_size = page.buffer(1)
    if int(sizes.sum()) > data_size:
        raise CorruptFileError(path, "mini-block chunks overrun their buffer")
    chunk_pos = data_pos + np.cumsum(sizes) - sizes
    nxt = 1
    dictionary: Values | None = None
    if layout.dictionary is not None:
        try:
            dictionary = decode_block(
                layout.dictionary,
                single(bufs[nxt]),
                np.array([layout.num_dictionary_items], dtype=np.int64),
                path,
            )
        except (ValueError, IndexError) as e:
            raise CorruptFileError(path, f"mini-block dictionary does not decode: {e}") from None
        nxt += 1
    if layout.repetition_index_depth > 0:
        stride = layout.repetition_index_depth + 1
        ri = bytes(bufs[nxt])
        if len(ri) != 8 * stride * nchunks:
            raise CorruptFileError(path, "mini-block repetition index has the wrong size")
        idx = np.frombuffer(ri, dtype="<u8").reshape(nchunks, stride).astype(np.int64)
        ends = idx[:, 0]
        has_trailer = idx[:, 1] > 0
        has_preamble = np.zeros(nchunks, dtype=bool)
        has_preamble[1:] = has_trailer[:-1]
        row_starts = ends + has_trailer - has_preamble
        if bool((row_starts < 0).any()):
            raise CorruptFileError(path, "mini-block repetition index is inconsistent")
    else:
        row_starts = items
        has_trailer = np.zeros(nchunks, dtype=bool)
        ends = items
    first_row = np.cumsum(row_starts) - row_starts
    if nchunks and int(row_starts.sum()) != page.num_rows:
        raise CorruptFileError(path, "mini-block chunks do not hold the page's rows")
    # For each chunk, the first chunk at or after it in which some row ends.
    has_end = np.flatnonzero(ends > 0)
    pos = np.searchsorted(has_end, np.arange(nchunks))
    next_end = np.full(nchunks, nchunks - 1, dtype=np.int64)
    found = pos < len(has_end)
    next_end[found] = has_end[pos[found]]
    holders = np.flatnonzero(row_starts > 0)
    return MiniBlockMeta(
        chunk_pos,
        sizes,
        items,
        first_row,
        row_starts,
        has_trailer,
        next_end,
        dictionary,
        holders,
        first_row[holders],
        any_trailer=bool(has_trailer.any()),
    )


def _chunks_for_runs(meta: MiniBlockMeta, runs: RowRuns) -> tuple[I64, I64]:
    """First and last chunk each run of rows needs."""
    if not meta.any_trailer and len(runs) == 1:
        # One run (one-row takes): two scalar searches.
        start, stop = runs[0].tolist()
        hfr = meta.holder_first_row
        a = int(meta.holders[int(np.searchsorted(hfr, start, side="right")) - 1])
        b = (
            a
            if stop - start == 1
            else int(meta.holders[int(np.searchsorted(hfr, stop - 1, side="right")) - 1])
        )
        return np.array([a], dtype=np.int64), np.array([b], dtype=np.int64)
    first = _chunk_of_rows(meta, runs[:, 0])
    last_row = runs[:, 1] - 1
    last = _chunk_of_rows(meta, last_row)
    if not meta.any_trailer:
        return first, last
    is_trailer = meta.has_trailer[last] & (last_row == meta.first_row[last] + meta.row_starts[last] - 1)
    nchunks = len(meta.chunk_pos)
    follow = meta.next_end[np.minimum(last + 1, nchunks - 1)]
    last = np.where(is_trailer & (last + 1 < nchunks), follow, last)
    return first, last


def read_miniblock(
    ctx: DecodeContext, column: int, page_index: int, page: PageInfo, layout: m.MiniBlockLayout, runs: RowRuns
) -> IOGen[PageData]:
    """Decoder generator for page-local row ``runs`` of a mini-block page.

    The first read of a page fetches its chunk metadata, dictionary and repetition index (one
    round, cached); every read then fetches only the chunks holding its rows, one request per
    stretch of adjacent chunks, and decodes them as one batch.

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
    key = (column, page_index, "miniblock")
    meta = ctx.cache.get(key)
    whole = len(runs) == 1 and runs[0, 0] == 0 and runs[0, 1] == page.num_rows
    prefetched: memoryview | None = None
    if meta is None:
        want = [page.buffer(0)]
        nbuf = 2
        if layout.dictionary is not None:
            want.append(page.buffer(nbuf))
            nbuf += 1
        if layout.repetition_index_depth > 0:
            want.append(page.buffer(len(page.buffer_offsets) - 1))
        if whole:
            # A whole-page read needs every chunk: fetch them with the metadata, one round.
            want.append(page.buffer(1))
        got = yield from fetch(want)
        if whole:
            prefetched = got.pop()
        meta = _load_meta(layout, page, got, path)
        ctx.cache[key] = meta
    assert isinstance(meta, MiniBlockMeta)
    if whole and len(meta.chunk_pos):
        if prefetched is None:
            data_pos, data_size = page.buffer(1)
            prefetched = (yield from fetch([(data_pos, data_size)]))[0]
        blob = np.frombuffer(prefetched, dtype=np.uint8)
        nchunks = len(meta.chunk_pos)
        every = np.arange(nchunks, dtype=np.int64)
        first_seg, last_seg = every[:1], every[-1:]
        starts = meta.chunk_pos - meta.chunk_pos[0]
        try:
            return _decode(
                layout, meta, runs, blob, every, starts, meta.chunk_items, first_seg, last_seg, path
            )
        except (ValueError, IndexError) as e:
            raise CorruptFileError(path, f"mini-block page does not decode: {e}") from None
    return (yield from _read_chunks(layout, meta, runs, path))


def _read_chunks(layout: m.MiniBlockLayout, meta: MiniBlockMeta, runs: RowRuns, path: str) -> IOGen[PageData]:
    """Fetch the chunks holding ``runs`` (rows as ``meta`` counts them) and decode them as one batch."""
    first, last = _chunks_for_runs(meta, runs)
    if len(first) == 1 and first[0] == last[0]:
        # One chunk: one read, no stretch bookkeeping.
        c = int(first[0])
        pos_c, size_c = int(meta.chunk_pos[c]), int(meta.chunk_size[c])
        got = yield from fetch([(pos_c, size_c)])
        blob = np.frombuffer(got[0], dtype=np.uint8)
        try:
            return _decode(
                layout,
                meta,
                runs,
                blob,
                first,
                np.zeros(1, dtype=np.int64),
                meta.chunk_items[first],
                first,
                first,
                path,
            )
        except (ValueError, IndexError) as e:
            raise CorruptFileError(path, f"mini-block page does not decode: {e}") from None
    if np.array_equal(first, last):
        # Every run inside one chunk (takes): the chunks are ``first`` without repeats (sorted).
        selected = first[np.concatenate(([True], first[1:] != first[:-1]))] if len(first) > 1 else first
    else:
        selected = np.unique(expand_ranges(first, last - first + 1))
    # Stretches of selected chunks adjacent in the file: one read each (chunks of merged pages
    # that follow each other by index may not be adjacent in the file).
    pos = meta.chunk_pos[selected]
    brk = np.flatnonzero(pos[1:] != pos[:-1] + meta.chunk_size[selected[:-1]]) + 1
    seg_first = selected[np.concatenate(([0], brk))]
    seg_last = selected[np.concatenate((brk - 1, [len(selected) - 1]))]
    seg_pos = meta.chunk_pos[seg_first]
    seg_len = meta.chunk_pos[seg_last] + meta.chunk_size[seg_last] - seg_pos
    got = yield from fetch(list(zip(seg_pos.tolist(), seg_len.tolist(), strict=True)))
    blob = (
        np.frombuffer(got[0], dtype=np.uint8)
        if len(got) == 1
        else np.frombuffer(b"".join(got), dtype=np.uint8)
    )
    sizes = meta.chunk_size[selected]
    starts = np.cumsum(sizes) - sizes
    items = meta.chunk_items[selected]
    try:
        return _decode(layout, meta, runs, blob, selected, starts, items, seg_first, seg_last, path)
    except (ValueError, IndexError) as e:
        raise CorruptFileError(path, f"mini-block page does not decode: {e}") from None


def can_merge(layout: object) -> bool:
    """Whether takes may treat consecutive pages of this layout as one (see :func:`read_miniblock_pages`)."""
    if not (
        isinstance(layout, m.MiniBlockLayout)
        and layout.dictionary is None
        and layout.rep_compression is None
        and layout.repetition_index_depth == 0
    ):
        return False
    vc = layout.value_compression
    # FSST pages each have their own symbol table: merged only over plain variable-width codes,
    # which a take always addresses directly (see ``_fsst_by_page``).
    return not isinstance(vc, m.Fsst) or (
        isinstance(vc.values, m.Variable)
        and isinstance(vc.values.offsets, m.Flat)
        and (vc.values.values is None or vc.values.values.scheme is None)
    )


def _merge_key(layout: m.MiniBlockLayout) -> m.MiniBlockLayout:
    """The layout without what differs between pages of one column (value count, FSST table)."""
    vc = layout.value_compression
    if isinstance(vc, m.Fsst):
        vc = replace(vc, symbol_table=b"")
    return replace(layout, num_items=0, value_compression=vc)


def merge_classes(ctx: DecodeContext, column: int, pages: tuple[PageInfo, ...]) -> list[tuple[int, int]]:
    """Per page, the ``[first, last]`` pages of its stretch of equal mergeable layouts (cached).

    A page whose layout :func:`can_merge` rejects is a stretch of its own.
    """
    key = (column, "miniblock-classes")
    cached = ctx.cache.get(key)
    if cached is None:
        out: list[tuple[int, int]] = []
        start = 0
        keys = [_merge_key(p.encoding) if can_merge(p.encoding) else None for p in pages]
        for i in range(1, len(pages) + 1):
            if i == len(pages) or keys[i] is None or keys[i] != keys[start]:
                out.extend([(start, i - 1)] * (i - start))
                start = i
            elif keys[start] is None:
                out.append((start, start))
                start = i
        cached = out
        ctx.cache[key] = cached
    assert isinstance(cached, list)
    return cached


def read_miniblock_pages(
    ctx: DecodeContext,
    column: int,
    pages: tuple[PageInfo, ...],
    stretch: tuple[int, int],
    page_starts: I64,
    runs: RowRuns,
) -> IOGen[PageData]:
    """Decoder generator for rows spread over a stretch of pages that share one layout.

    A take touches many pages with a few rows each; reading them as one batch (the stretch's chunk
    metadata joined once and cached) costs one decode instead of one per page. Only for layouts
    :func:`can_merge` accepts (no repetition, no dictionary): their chunks need no page context.

    Parameters
    ----------
    ctx:
        The file's decode context.
    column:
        The column.
    pages:
        All pages of the column.
    stretch:
        ``[first, last]`` page of the stretch (from :func:`merge_classes`).
    page_starts:
        The column's page start rows (``ColumnInfo.page_starts``).
    runs:
        Row runs counted from the start of the stretch's first page.
    """
    first, last = stretch
    layout = pages[first].encoding
    assert isinstance(layout, m.MiniBlockLayout)
    key = (column, stretch, "miniblock-merged")
    merged = ctx.cache.get(key)
    if merged is None:
        members = [(p, pages[p]) for p in range(first, last + 1)]
        metas = yield from gather_metas(ctx, column, members)
        merged = _merge_meta(metas, [int(page_starts[p]) for p, _ in members])
        if isinstance(layout.value_compression, m.Fsst):
            tables = tuple(_fsst_table(pages[p].encoding) for p, _ in members)
            which = np.repeat(np.arange(len(metas)), [len(mt.chunk_pos) for mt in metas])
            merged = replace(merged, tables=tables, chunk_table=which)
        ctx.cache[key] = merged
    assert isinstance(merged, MiniBlockMeta)
    return (yield from _read_chunks(layout, merged, runs, ctx.path))


def _fsst_table(layout: object) -> bytes:
    assert isinstance(layout, m.MiniBlockLayout)
    assert isinstance(layout.value_compression, m.Fsst)
    return layout.value_compression.symbol_table


def gather_metas(
    ctx: DecodeContext, column: int, pages: list[tuple[int, PageInfo]]
) -> IOGen[list[MiniBlockMeta]]:
    """The (cached) chunk metadata of several pages; the missing ones are fetched in one round."""
    metas: list[MiniBlockMeta | None] = [ctx.cache.get((column, p, "miniblock")) for p, _ in pages]
    missing = [i for i, mt in enumerate(metas) if mt is None]
    got = yield from fetch([pages[i][1].buffer(0) for i in missing])
    for i, buf in zip(missing, got, strict=True):
        own = pages[i][1].encoding
        assert isinstance(own, m.MiniBlockLayout)
        mt = _load_meta(own, pages[i][1], [buf], ctx.path)
        ctx.cache[(column, pages[i][0], "miniblock")] = mt
        metas[i] = mt
    return [mt for mt in metas if mt is not None]


def _merge_meta(metas: list[MiniBlockMeta], row_offsets: list[int]) -> MiniBlockMeta:
    """One search state over the chunks of several pages, rows counted from the first page's start."""
    base = row_offsets[0]
    counts = [len(mt.chunk_pos) for mt in metas]
    chunk_offsets = np.cumsum([0, *counts[:-1]])
    first_row = np.concatenate(
        [mt.first_row + (off - base) for mt, off in zip(metas, row_offsets, strict=True)]
    )
    row_starts = np.concatenate([mt.row_starts for mt in metas])
    holders = np.flatnonzero(row_starts > 0)
    return MiniBlockMeta(
        np.concatenate([mt.chunk_pos for mt in metas]),
        np.concatenate([mt.chunk_size for mt in metas]),
        np.concatenate([mt.chunk_items for mt in metas]),
        first_row,
        row_starts,
        np.concatenate([mt.has_trailer for mt in metas]),
        np.concatenate([mt.next_end + o for mt, o in zip(metas, chunk_offsets.tolist(), strict=True)]),
        None,
        holders,
        first_row[holders],
        any_trailer=any(mt.any_trailer for mt in metas),
    )


def _decode(
    layout: m.MiniBlockLayout,
    meta: MiniBlockMeta,
    runs: RowRuns,
    blob: npt.NDArray[np.uint8],
    selected: I64,
    starts: I64,
    items: I64,
    seg_first: I64,
    seg_last: I64,
    path: str,
) -> PageData:
    has_rep = layout.rep_compression is not None
    has_def = layout.def_compression is not None
    size_bytes = 4 if layout.has_large_chunk else 2
    nbuf = layout.num_buffers
    head = 2 * (1 + has_rep + has_def) + size_bytes * nbuf
    one_row = len(runs) == 1 and int(runs[0, 1] - runs[0, 0]) == 1
    if not has_rep and not meta.tables and len(selected) == 1 and one_row:
        row = int(runs[0, 0] - meta.first_row[selected[0]])
        one = _decode_one(layout, meta, blob, int(selected[0]), int(starts[0]), int(items[0]), row)
        if one is not None:
            return one
    if len(selected) and int(starts[-1]) + head > len(blob):
        raise ValueError("chunk header outside the chunk")
    nlevels = read_uint(blob, starts, 2).astype(np.int64)
    pos = 2
    rep_size = def_size = None
    if has_rep:
        rep_size = read_uint(blob, starts + pos, 2).astype(np.int64)
        pos += 2
    if has_def:
        def_size = read_uint(blob, starts + pos, 2).astype(np.int64)
        pos += 2
    buf_sizes = []
    for _ in range(nbuf):
        buf_sizes.append(read_uint(blob, starts + pos, size_bytes).astype(np.int64))
        pos += size_bytes
    cursor = np.full(len(selected), (pos + _ALIGN - 1) // _ALIGN * _ALIGN, dtype=np.int64)
    rep = defs = None
    if rep_size is not None:
        assert layout.rep_compression is not None
        rep = decode_levels(layout.rep_compression, Bufs(blob, starts + cursor, rep_size), nlevels, path)
        cursor = _pad(cursor + rep_size)
    def_bufs = None
    if def_size is not None:
        def_bufs = Bufs(blob, starts + cursor, def_size)
        cursor = _pad(cursor + def_size)
    value_bufs = []
    for bs in buf_sizes:
        value_bufs.append(Bufs(blob, starts + cursor, bs))
        cursor = _pad(cursor + bs)
    if bool((cursor > meta.chunk_size[selected]).any()):
        raise ValueError("chunk buffers overrun the chunk")
    for b in value_bufs:
        b.check()
    if rep is None and (meta.tables or not _is_whole(meta, runs, selected, items)):
        # A take of rows without repetition: decode only the wanted values when they can be
        # addressed directly (see ``minitake``), not whole chunks.
        chunk_base = np.cumsum(items) - items
        local = np.searchsorted(selected, _chunk_of_rows(meta, runs[:, 0]))
        entry_start = chunk_base[local] + runs[:, 0] - meta.first_row[selected[local]]
        idx = expand_ranges(entry_start, runs[:, 1] - runs[:, 0])
        if len(idx) and int(idx[-1]) >= int(items.sum()):
            raise ValueError("rows outside the chunks read")
        owner = np.searchsorted(chunk_base, idx, side="right") - 1
        at = idx - chunk_base[owner]
        vc = layout.value_compression
        if meta.tables and isinstance(vc, m.Fsst):
            codes = decode_mini_take(vc.values, value_bufs, items, owner, at)
            # can_merge admits only FSST over plain variable-width codes, which always decode here.
            assert isinstance(codes, VarBin)
            assert meta.chunk_table is not None
            picked: Values | None = _fsst_by_page(codes, meta.tables, meta.chunk_table[selected[owner]])
        else:
            picked = decode_mini_take(vc, value_bufs, items, owner, at)
        if picked is not None:
            picked_defs = None
            if def_bufs is not None:
                assert layout.def_compression is not None
                def_bufs.check()
                if not bool((nlevels != items).any()):
                    picked_defs = levels_take(layout.def_compression, def_bufs, nlevels, owner, at)
                if picked_defs is None:
                    all_defs = decode_levels(layout.def_compression, def_bufs, nlevels, path)
                    if len(all_defs) != int(items.sum()):
                        raise ValueError("definition levels and values differ in number")
                    picked_defs = all_defs[idx]
            return PageData(None, picked_defs, layout.layers, len(idx), picked, meta.dictionary)
    if def_bufs is not None:
        assert layout.def_compression is not None
        defs = decode_levels(layout.def_compression, def_bufs, nlevels, path)
    values = decode_mini(layout.value_compression, value_bufs, items, path)
    if values.n != int(items.sum()):
        raise ValueError("chunks decoded to the wrong number of values")
    layers = layout.layers

    if rep is None:
        # One entry per row per chunk: a row's entry sits at its chunk's base plus its offset.
        if defs is not None and len(defs) != values.n:
            raise ValueError("definition levels and values differ in number")
        chunk_base = np.cumsum(items) - items
        local = np.searchsorted(selected, _chunk_of_rows(meta, runs[:, 0]))
        entry_start = chunk_base[local] + runs[:, 0] - meta.first_row[selected[local]]
        lengths = runs[:, 1] - runs[:, 0]
        if len(runs) == 1 and entry_start[0] == 0 and lengths[0] == values.n:
            return PageData(None, defs, layers, values.n, values, meta.dictionary)
        idx = expand_ranges(entry_start, lengths)
        return PageData(
            None,
            defs[idx] if defs is not None else None,
            layers,
            len(idx),
            take_values(values, idx),
            meta.dictionary,
        )

    nent = len(rep)
    if defs is not None and len(defs) != nent:
        raise ValueError("repetition and definition levels differ in number")
    max_rep = sum(1 for layer in layers if layer.is_list)
    # Entries of each chunk, then of each contiguous stretch of chunks.
    ent_base = np.cumsum(nlevels) - nlevels
    seg_start_local = np.searchsorted(selected, seg_first)
    seg_end_local = np.searchsorted(selected, seg_last)
    seg_begin = ent_base[seg_start_local]
    seg_end = ent_base[seg_end_local] + nlevels[seg_end_local]
    row_pos = np.flatnonzero(rep == max_rep)
    seg_of = np.searchsorted(seg_begin, row_pos, side="right") - 1
    first_in_seg = np.searchsorted(row_pos, seg_begin)
    row_ids = meta.first_row[seg_first][seg_of] + np.arange(len(row_pos)) - first_in_seg[seg_of]
    start, stop = row_entry_ranges(row_pos, row_ids, runs, seg_end, seg_of)
    visible = defs <= max_visible_level(layers) if defs is not None else np.ones(nent, dtype=bool)
    if int(visible.sum()) != values.n:
        raise ValueError("visible levels and values differ in number")
    if len(runs) == 1 and start[0] == 0 and stop[0] == nent:
        return PageData(rep, defs, layers, nent, values, meta.dictionary)
    ent = expand_ranges(start, stop - start)
    item_of = np.cumsum(visible) - 1
    vis_sel = visible[ent]
    vals = take_values(values, item_of[ent][vis_sel])
    return PageData(
        rep[ent], defs[ent] if defs is not None else None, layers, len(ent), vals, meta.dictionary
    )


def _decode_one(
    layout: m.MiniBlockLayout,
    meta: MiniBlockMeta,
    blob: npt.NDArray[np.uint8],
    chunk: int,
    start: int,
    n: int,
    i: int,
) -> PageData | None:
    """Entry ``i`` of one chunk (of ``n`` values, at ``start`` in ``blob``) of a page without
    repetition, addressed with Python integers; None when its compression needs the batch path."""
    has_def = layout.def_compression is not None
    size_bytes = 4 if layout.has_large_chunk else 2
    end = start + int(meta.chunk_size[chunk])
    if end > len(blob) or not 0 <= i < n:
        raise ValueError("row outside the chunk read")
    words = [int.from_bytes(blob[start : start + 2].tobytes(), "little")]
    pos = start + 2
    if has_def:
        words.append(int.from_bytes(blob[pos : pos + 2].tobytes(), "little"))
        pos += 2
    sizes = []
    for _ in range(layout.num_buffers):
        sizes.append(int.from_bytes(blob[pos : pos + size_bytes].tobytes(), "little"))
        pos += size_bytes
    cursor = start + _pad8(pos - start)
    def_at = cursor
    if has_def:
        cursor = start + _pad8(cursor - start + words[1])
    bufs = []
    for size in sizes:
        bufs.append((cursor, size))
        cursor = start + _pad8(cursor - start + size)
    if cursor > end:
        raise ValueError("chunk buffers overrun the chunk")
    defs = None
    if has_def:
        assert layout.def_compression is not None
        if words[0] != n:
            return None
        level = one_level(layout.def_compression, blob, def_at, words[1], n, i)
        if level is None:
            return None
        defs = np.array([level], dtype=np.uint16)
    value = one_value(layout.value_compression, blob, bufs, i)
    if value is None:
        return None
    return PageData(None, defs, layout.layers, 1, value, meta.dictionary)


def _pad8(x: int) -> int:
    return (x + _ALIGN - 1) // _ALIGN * _ALIGN


def _fsst_by_page(codes: VarBin, tables: tuple[bytes, ...], table_of: I64) -> VarBin:
    """FSST-decompress strings whose pages (hence symbol tables) are ``table_of`` (sorted)."""
    cut = (np.flatnonzero(table_of[1:] != table_of[:-1]) + 1).tolist()
    bounds = [0, *cut, len(table_of)]
    lengths, datas = [], []
    for a, b in pairwise(bounds):
        offs, data = fsst_decompress(tables[int(table_of[a])], codes.offsets[a : b + 1], codes.data)
        lengths.append(np.diff(offs))
        datas.append(data)
    offsets = np.zeros(len(table_of) + 1, dtype=np.int64)
    if len(table_of):
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
    return VarBin(offsets, np.concatenate(datas) if datas else np.zeros(0, dtype=np.uint8))


def _is_whole(meta: MiniBlockMeta, runs: RowRuns, selected: I64, items: I64) -> bool:
    """Whether ``runs`` are one run covering every value of the ``selected`` chunks."""
    if len(runs) != 1 or not len(selected):
        return False
    start, stop = runs[0].tolist()
    return bool(start == int(meta.first_row[selected[0]]) and stop - start == int(items.sum()))


def _chunk_of_rows(meta: MiniBlockMeta, rows: I64) -> I64:
    return meta.holders[np.searchsorted(meta.holder_first_row, rows, side="right") - 1]
