"""Blob pages: (position, size) descriptions in an inner layout, the bytes elsewhere in the file.

A null or empty blob has size 0: position 0 means empty, otherwise the position holds
``def << 16 | rep``. A read decodes the descriptions of its rows through the inner layout, then
fetches the blob bytes themselves - blobs close together in one request.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lance_format.core.buffers import concat_bytes
from lance_format.core.errors import CorruptFileError
from lance_format.encodings.base import DecodeContext, IOGen, PageInfo, RowRuns, fetch
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import gather
from lance_format.encodings.v21.page import PageData
from lance_format.encodings.v21.repdef import max_visible_level
from lance_format.encodings.v21.values import Fixed, Struct, VarBin

__all__ = ["read_blob"]

# Blob bytes closer together than this are fetched in one request (the gap is read and dropped):
# one larger read beats two round trips on every store we serve from.
_BLOB_MERGE_GAP = 16 * 1024


def read_blob(
    ctx: DecodeContext,
    column: int,
    page_index: int,
    page: PageInfo,
    layout: m.BlobLayout,
    runs: RowRuns,
    read_inner: Callable[[DecodeContext, int, int, PageInfo, RowRuns], IOGen[PageData]],
) -> IOGen[PageData]:
    """Decoder generator for page-local row ``runs`` of a blob page (descriptions, then bytes).

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
    read_inner:
        Reads a page of any layout (the descriptions' inner layout).

    Returns
    -------
    PageData
        Levels and visible values of the selected rows, in order.
    """
    path = ctx.path
    inner_page = PageInfo(
        page.buffer_offsets, page.buffer_sizes, page.num_rows, page.priority, layout.inner_layout
    )
    desc = yield from read_inner(ctx, column, page_index, inner_page, runs)
    if not isinstance(desc.values, Struct) or len(desc.values.children) != 2:
        raise CorruptFileError(path, "blob descriptions are not (position, size) pairs")
    pos_v, size_v = desc.values.children
    if not isinstance(pos_v, Fixed) or not isinstance(size_v, Fixed) or pos_v.bits != 64 or size_v.bits != 64:
        raise CorruptFileError(path, "blob descriptions are not 64-bit")
    pos = np.ascontiguousarray(pos_v.data).view("<u8").astype(np.int64)
    size = np.ascontiguousarray(size_v.data).view("<u8").astype(np.int64)
    special = size == 0
    defs = np.where(special, (pos >> 16) & 0xFFFF, 0).astype(np.uint16)
    has_nulls = any(layer.num_def_levels for layer in layout.layers)
    fetch_rows = np.flatnonzero(~special)
    data = np.zeros(0, dtype=np.uint8)
    lens = np.where(special, 0, size)
    if len(fetch_rows):
        fpos, fsize = pos[fetch_rows], size[fetch_rows]
        end = ctx.data_end if ctx.data_end is not None else page.buffer_offsets[0]
        if int(fpos.min()) < 0 or int(fsize.min()) < 0 or bool(((fpos > end) | (fsize > end - fpos)).any()):
            raise CorruptFileError(path, "blob description points outside the data section")
        order = np.argsort(fpos, kind="stable")
        spos, send = fpos[order], fpos[order] + fsize[order]
        # Merge blobs that are close together into one request.
        run_end = np.maximum.accumulate(send)
        new = np.ones(len(spos), dtype=bool)
        new[1:] = spos[1:] > run_end[:-1] + _BLOB_MERGE_GAP
        grp = np.cumsum(new) - 1
        g_start = spos[new]
        g_end = np.maximum.reduceat(send, np.flatnonzero(new))
        got = yield from fetch(list(zip(g_start.tolist(), (g_end - g_start).tolist(), strict=True)))
        blob = concat_bytes(got) if len(got) > 1 else np.frombuffer(got[0], dtype=np.uint8)
        g_base = np.cumsum(g_end - g_start) - (g_end - g_start)
        where = np.empty(len(fetch_rows), dtype=np.int64)
        where[order] = spos - g_start[grp] + g_base[grp]
        try:
            data = np.ascontiguousarray(gather(blob, where, fsize))
        except ValueError as e:
            raise CorruptFileError(path, f"blob bytes do not read: {e}") from None
    visible = defs <= max_visible_level(layout.layers)
    vlens = lens[visible]
    offsets = np.zeros(len(vlens) + 1, dtype=np.int64)
    np.cumsum(vlens, out=offsets[1:])
    if int(offsets[-1]) != len(data):
        raise CorruptFileError(path, "blob descriptions disagree with the bytes read")
    return PageData(None, defs if has_nulls else None, layout.layers, len(pos), VarBin(offsets, data))
