"""Mini-block pages: small values in independently decodable chunks.

Buffers: 0 = one metadata word per chunk (``((bytes / 8 - 1) << 4) | log2(values)``; u16, or u32
when ``has_large_chunk``), 1 = the chunks, then the dictionary (if any) and the repetition index
(``depth + 1`` u64 per chunk, if ``repetition_index_depth > 0``).

A chunk: u16 level count, u16 rep size, u16 def size (each only when that compression is set),
one size per value buffer (u16, or u32 when ``has_large_chunk``), padding to 8, then rep, def and
the value buffers, each padded to 8.

The chunk metadata, dictionary and repetition index are read once per page and cached; a read
then fetches only the chunks that hold the selected rows (whole buffers for a full read) and
decodes all of them in one batch. The chunk metadata and the row -> chunk search live in
:mod:`.miniblock_meta`; takes over several pages read as one batch in :mod:`.miniblock_merge`.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import numpy.typing as npt

from lance_format.core.buffers import concat_bytes
from lance_format.core.errors import CorruptFileError
from lance_format.encodings.base import DecodeContext, IOGen, PageInfo, RowRuns, expand_ranges, fetch
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import Bufs, read_uint
from lance_format.encodings.v21._fsst import fsst_decompress
from lance_format.encodings.v21.codecs import (
    decode_levels,
    decode_mini,
    decode_mini_take,
    levels_take,
    one_level,
    one_value,
)
from lance_format.encodings.v21.miniblock_meta import (
    ALIGN,
    MiniBlockMeta,
    chunk_of_rows,
    chunks_for_runs,
    load_meta,
    pad,
)
from lance_format.encodings.v21.page import PageData, row_entry_ranges
from lance_format.encodings.v21.repdef import max_visible_level
from lance_format.encodings.v21.values import Values, VarBin, slice_values, take_values

__all__ = ["read_chunks", "read_miniblock"]

I64 = npt.NDArray[np.int64]

#: A read decodes only its wanted values (one address per value, ``minitake``) when they are
#: fewer than 1/this of the values in the chunks it fetched; otherwise it decodes whole chunks
#: (a few ns per value in bulk, against tens per addressed value) and slices or gathers.
SPARSE_TAKE_FRACTION = 4


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
        meta = load_meta(layout, page, got, path)
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
    return (yield from read_chunks(layout, meta, runs, path))


def read_chunks(layout: m.MiniBlockLayout, meta: MiniBlockMeta, runs: RowRuns, path: str) -> IOGen[PageData]:
    """Fetch the chunks holding ``runs`` (rows as ``meta`` counts them) and decode them as one batch."""
    first, last = chunks_for_runs(meta, runs)
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
    elif len(first) == 1:
        # One run of rows (scans): its chunks, in order, without sorting them again.
        selected = np.arange(first[0], last[0] + 1, dtype=np.int64)
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
    blob = np.frombuffer(got[0], dtype=np.uint8) if len(got) == 1 else concat_bytes(got)
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
    cursor = np.full(len(selected), (pos + ALIGN - 1) // ALIGN * ALIGN, dtype=np.int64)
    rep = defs = None
    if rep_size is not None:
        assert layout.rep_compression is not None
        rep = decode_levels(layout.rep_compression, Bufs(blob, starts + cursor, rep_size), nlevels, path)
        cursor = pad(cursor + rep_size)
    def_bufs = None
    if def_size is not None:
        def_bufs = Bufs(blob, starts + cursor, def_size)
        cursor = pad(cursor + def_size)
    value_bufs = []
    for bs in buf_sizes:
        value_bufs.append(Bufs(blob, starts + cursor, bs))
        cursor = pad(cursor + bs)
    if bool((cursor > meta.chunk_size[selected]).any()):
        raise ValueError("chunk buffers overrun the chunk")
    for b in value_bufs:
        b.check()
    if rep is None and (meta.tables or _is_sparse(runs, items)):
        # A take of rows without repetition: decode only the wanted values when they can be
        # addressed directly (see ``minitake``), not whole chunks.
        chunk_base = np.cumsum(items) - items
        local = np.searchsorted(selected, chunk_of_rows(meta, runs[:, 0]))
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
        local = np.searchsorted(selected, chunk_of_rows(meta, runs[:, 0]))
        entry_start = chunk_base[local] + runs[:, 0] - meta.first_row[selected[local]]
        lengths = runs[:, 1] - runs[:, 0]
        if len(runs) == 1 or not bool((entry_start[1:] != entry_start[:-1] + lengths[:-1]).any()):
            # One range of entries (scans, also across merged pages): views of the decoded
            # chunks, no gather.
            lo, n = int(entry_start[0]), int(lengths.sum())
            if lo < 0 or lo + n > values.n:
                raise ValueError("rows outside the chunks read")
            return PageData(
                None,
                defs[lo : lo + n] if defs is not None else None,
                layers,
                n,
                slice_values(values, lo, n),
                meta.dictionary,
            )
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
    return (x + ALIGN - 1) // ALIGN * ALIGN


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


def _is_sparse(runs: RowRuns, items: I64) -> bool:
    """Whether the rows of ``runs`` are few enough among the values of the chunks read that
    addressing each (``minitake``) beats decoding the chunks whole and slicing (scans: one range
    covering all but the edges of its first and last chunk)."""
    wanted = int((runs[:, 1] - runs[:, 0]).sum())
    return wanted * SPARSE_TAKE_FRACTION < int(items.sum())
