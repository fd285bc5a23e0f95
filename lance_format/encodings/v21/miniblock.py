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

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.core.errors import CorruptFileError
from lance_format.encodings.base import DecodeContext, IOGen, PageInfo, RowRuns, expand_ranges, fetch
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import Bufs, read_uint, single
from lance_format.encodings.v21.compressive import decode_block, decode_levels, decode_mini
from lance_format.encodings.v21.page import PageData, row_entry_ranges
from lance_format.encodings.v21.repdef import max_visible_level
from lance_format.encodings.v21.values import Values, take_values

__all__ = ["MiniBlockMeta", "read_miniblock"]

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
    return MiniBlockMeta(chunk_pos, sizes, items, first_row, row_starts, has_trailer, next_end, dictionary)


def _chunks_for_runs(meta: MiniBlockMeta, runs: RowRuns) -> tuple[I64, I64]:
    """First and last chunk each run of rows needs."""
    holders = np.flatnonzero(meta.row_starts > 0)
    fr = meta.first_row[holders]

    def chunk_of(rows: I64) -> I64:
        return holders[np.searchsorted(fr, rows, side="right") - 1]

    first = chunk_of(runs[:, 0])
    last_row = runs[:, 1] - 1
    last = chunk_of(last_row)
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
    first, last = _chunks_for_runs(meta, runs)
    nchunks = len(meta.chunk_pos)
    marks = np.zeros(nchunks + 1, dtype=np.int64)
    np.add.at(marks, first, 1)
    np.add.at(marks, last + 1, -1)
    selected = np.flatnonzero(np.cumsum(marks[:-1]) > 0)
    # Contiguous stretches of selected chunks: one read each.
    brk = np.flatnonzero(np.diff(selected) != 1) + 1
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
    if def_size is not None:
        assert layout.def_compression is not None
        defs = decode_levels(layout.def_compression, Bufs(blob, starts + cursor, def_size), nlevels, path)
        cursor = _pad(cursor + def_size)
    value_bufs = []
    for bs in buf_sizes:
        value_bufs.append(Bufs(blob, starts + cursor, bs))
        cursor = _pad(cursor + bs)
    if bool((cursor > meta.chunk_size[selected]).any()):
        raise ValueError("chunk buffers overrun the chunk")
    for b in value_bufs:
        b.check()
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


def _chunk_of_rows(meta: MiniBlockMeta, rows: I64) -> I64:
    holders = np.flatnonzero(meta.row_starts > 0)
    return holders[np.searchsorted(meta.first_row[holders], rows, side="right") - 1]
