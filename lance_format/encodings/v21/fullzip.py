"""Full-zip pages: large values one after another, each behind a control word of rep/def levels.

Buffer 0 holds, per entry, a control word (``ceil((bits_rep + bits_def) / 8)`` bytes rounded to
1, 2 or 4; repetition in the high bits), then for variable-width values a length
(``bits_per_offset`` bits) and the bytes. Null or empty entries write only the control word (a
fixed-width null item still carries its bytes; only invisible entries drop them). Buffer 1, when
present, is the repetition index: ``rows + 1`` byte offsets into buffer 0, each 1, 2, 4 or 8 bytes.

Without a repetition index (fixed width, no lists) a row is at a fixed stride. Otherwise a read
fetches the index entries of its runs, then exactly the bytes of those rows, and unzips every
row in lock-step (one numpy pass per entry position within a row, never per row).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.core.buffers import concat_bytes
from lance_format.core.errors import CorruptFileError
from lance_format.encodings.base import DecodeContext, IOGen, PageInfo, RowRuns, expand_ranges, fetch
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import gather, read_uint
from lance_format.encodings.v21.codecs import decode_fixed_rows, decode_variable_rows
from lance_format.encodings.v21.compressive import fixed_row_bytes
from lance_format.encodings.v21.page import PageData
from lance_format.encodings.v21.repdef import max_visible_level
from lance_format.encodings.v21.values import VarBin

__all__ = ["read_fullzip"]

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
Levels = npt.NDArray[np.uint16]

# Reading the whole repetition index is one request; reading per-run slices is one per run. Past
# this share of the page's rows, the whole index is cheaper (and gets cached for later reads).
_WHOLE_INDEX_SHARE = 0.25


def _control_bytes(bits_rep: int, bits_def: int) -> int:
    total = bits_rep + bits_def
    if total == 0:
        return 0
    return 1 if total <= 8 else 2 if total <= 16 else 4


def _split_words(
    words: npt.NDArray[np.uint64], bits_rep: int, bits_def: int
) -> tuple[I64 | None, I64 | None]:
    w = words.astype(np.int64)
    if bits_rep and bits_def:
        return w >> bits_def, w & ((1 << bits_def) - 1)
    if bits_rep:
        return w, None
    if bits_def:
        return None, w
    return None, None


def _blob(got: list[memoryview]) -> U8:
    if len(got) == 1:
        return np.frombuffer(got[0], dtype=np.uint8)
    return concat_bytes(got)


def read_fullzip(
    ctx: DecodeContext, column: int, page_index: int, page: PageInfo, layout: m.FullZipLayout, runs: RowRuns
) -> IOGen[PageData]:
    """Decoder generator for page-local row ``runs`` of a full-zip page.

    Reads the repetition-index entries of the runs (the whole index, cached, when a large share
    of the page is wanted), then exactly the bytes of the selected rows.

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
    cw = _control_bytes(layout.bits_rep, layout.bits_def)
    fixed = layout.bits_per_value is not None
    data_pos, data_size = page.buffer(0)
    n_rows = page.num_rows
    if len(page.buffer_offsets) < 2:
        if not fixed or layout.bits_rep:
            raise CorruptFileError(path, "full-zip page without a repetition index needs fixed-width rows")
        assert layout.bits_per_value is not None
        width = fixed_row_bytes(layout.value_compression, layout.bits_per_value)
        row = cw + width
        if row * n_rows > data_size:
            raise CorruptFileError(path, "full-zip rows overrun their buffer")
        lengths = runs[:, 1] - runs[:, 0]
        got = yield from fetch(
            list(zip((data_pos + runs[:, 0] * row).tolist(), (lengths * row).tolist(), strict=True))
        )
        blob = _blob(got)
        n = int(lengths.sum())
        try:
            mat = blob.reshape(n, row)
            defs = None
            if cw:
                words = np.ascontiguousarray(mat[:, :cw]).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[cw])
                _, d = _split_words(words.reshape(-1).astype(np.uint64), 0, layout.bits_def)
                defs = d.astype(np.uint16) if d is not None else None
            values = decode_fixed_rows(
                layout.value_compression, np.ascontiguousarray(mat[:, cw:]).reshape(-1), n, path
            )
        except (ValueError, IndexError) as e:
            raise CorruptFileError(path, f"full-zip page does not decode: {e}") from None
        return PageData(None, defs, layout.layers, n, values)

    ri_pos, ri_size = page.buffer(1)
    if n_rows + 1 == 0 or ri_size % (n_rows + 1):
        raise CorruptFileError(path, "full-zip repetition index has the wrong size")
    bpe = ri_size // (n_rows + 1)
    if bpe not in (1, 2, 4, 8):
        raise CorruptFileError(path, f"full-zip repetition index entries of {bpe} bytes")
    key = (column, page_index, "fullzip-index")
    index = ctx.cache.get(key)
    lengths = runs[:, 1] - runs[:, 0]
    if index is None and int(lengths.sum()) >= _WHOLE_INDEX_SHARE * n_rows:
        got = yield from fetch([(ri_pos, ri_size)])
        index = read_uint(np.frombuffer(got[0], dtype=np.uint8), np.arange(n_rows + 1) * bpe, bpe).astype(
            np.int64
        )
        ctx.cache[key] = index
    if index is not None:
        offs = index[expand_ranges(runs[:, 0], lengths + 1)]
    else:
        got = yield from fetch(
            list(zip((ri_pos + runs[:, 0] * bpe).tolist(), ((lengths + 1) * bpe).tolist(), strict=True))
        )
        raw = _blob(got)
        offs = read_uint(raw, np.arange(len(raw) // bpe) * bpe, bpe).astype(np.int64)
    # offs holds, per run, its rows' start offsets followed by the run's end offset.
    run_first = np.cumsum(lengths + 1) - (lengths + 1)
    run_start = offs[run_first]
    run_stop = offs[run_first + lengths]
    if bool((run_stop < run_start).any()) or (len(offs) and int(offs.max()) > data_size):
        raise CorruptFileError(path, "full-zip repetition index points outside its buffer")
    run_bytes = run_stop - run_start
    got = yield from fetch(list(zip((data_pos + run_start).tolist(), run_bytes.tolist(), strict=True)))
    blob = _blob(got)
    blob_base = np.cumsum(run_bytes) - run_bytes
    # Every selected row's byte range within the fetched data.
    row_run = np.repeat(np.arange(len(runs)), lengths)
    row_local = expand_ranges(run_first, lengths)
    row_begin = offs[row_local] - run_start[row_run] + blob_base[row_run]
    row_end = offs[row_local + 1] - run_start[row_run] + blob_base[row_run]
    try:
        return _unzip(layout, cw, blob, row_begin, row_end, path)
    except (ValueError, IndexError) as e:
        raise CorruptFileError(path, f"full-zip page does not decode: {e}") from None


def _unzip(layout: m.FullZipLayout, cw: int, blob: U8, row_begin: I64, row_end: I64, path: str) -> PageData:
    """Split the rows' bytes into entries: one pass per entry position, all rows at once."""
    fixed = layout.bits_per_value is not None
    width = fixed_row_bytes(layout.value_compression, layout.bits_per_value) if fixed else 0  # type: ignore[arg-type]
    lb = (layout.bits_per_offset or 0) // 8
    if not fixed and lb not in (1, 2, 4, 8):
        raise ValueError(f"bad length width {layout.bits_per_offset}")
    max_vis = max_visible_level(layout.layers)
    has_rep, has_def = layout.bits_rep > 0, layout.bits_def > 0
    nrows = len(row_begin)
    cur = row_begin.copy()
    active = np.flatnonzero(cur < row_end)
    if len(active) != nrows and cw:
        raise ValueError("a row without any entry")
    rows_l: list[I64] = []
    rep_l: list[I64] = []
    def_l: list[I64] = []
    start_l: list[I64] = []
    len_l: list[I64] = []
    vis_l: list[npt.NDArray[np.bool_]] = []
    while len(active):
        p = cur[active]
        rep = d = None
        if cw:
            rep, d = _split_words(read_uint(blob, p, cw), layout.bits_rep, layout.bits_def)
        vis = d <= max_vis if (d is not None and has_rep) else np.ones(len(p), dtype=bool)
        if fixed:
            dlen = np.where(vis, width, 0)
            size = cw + dlen
            dstart = p + cw
        else:
            valid = vis & (d == 0) if d is not None else vis
            lens = np.zeros(len(p), dtype=np.int64)
            if valid.any():
                lens[valid] = read_uint(blob, p[valid] + cw, lb).astype(np.int64)
            dlen = lens
            size = cw + np.where(valid, lb, 0) + lens
            dstart = p + cw + lb
        if not bool((size > 0).all()):
            raise ValueError("an entry of zero bytes")
        rows_l.append(active)
        if rep is not None:
            rep_l.append(rep)
        if d is not None:
            def_l.append(d)
        start_l.append(dstart)
        len_l.append(dlen)
        vis_l.append(vis)
        cur[active] = p + size
        if bool((cur[active] > row_end[active]).any()):
            raise ValueError("an entry runs past its row")
        active = active[cur[active] < row_end[active]]
    rows = np.concatenate(rows_l) if rows_l else np.zeros(0, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    starts = np.concatenate(start_l)[order] if start_l else rows
    dlens = np.concatenate(len_l)[order] if len_l else rows
    visible = np.concatenate(vis_l)[order] if vis_l else np.zeros(0, dtype=bool)
    rep_out: Levels | None = np.concatenate(rep_l)[order].astype(np.uint16) if has_rep and rep_l else None
    def_out: Levels | None = np.concatenate(def_l)[order].astype(np.uint16) if has_def and def_l else None
    if has_rep and rep_out is None:
        rep_out = np.zeros(0, dtype=np.uint16)
    if has_def and def_out is None:
        def_out = np.zeros(0, dtype=np.uint16)
    vstart, vlen = starts[visible], dlens[visible]
    n_vis = len(vstart)
    if fixed:
        rows_bytes = gather(blob, vstart, vlen)
        values = decode_fixed_rows(layout.value_compression, rows_bytes, n_vis, path)
    else:
        offsets = np.zeros(n_vis + 1, dtype=np.int64)
        np.cumsum(vlen, out=offsets[1:])
        values = decode_variable_rows(
            layout.value_compression, VarBin(offsets, np.ascontiguousarray(gather(blob, vstart, vlen))), path
        )
    return PageData(rep_out, def_out, layout.layers, len(rows), values)
