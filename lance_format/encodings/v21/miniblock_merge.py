"""Takes over several mini-block pages of one column read as one batch.

A take touches many pages with a few rows each. Consecutive pages whose layouts differ only in
what each page owns (value count, FSST symbol table) are merged: their chunk metadata is joined
once (cached) and the rows of all of them decode as one batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from lance_format.encodings.base import DecodeContext, IOGen, PageInfo, RowRuns, fetch
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21.codecs import page_neutral
from lance_format.encodings.v21.miniblock import read_chunks
from lance_format.encodings.v21.miniblock_meta import MiniBlockMeta, load_meta
from lance_format.encodings.v21.page import PageData

__all__ = ["can_merge", "gather_metas", "merge_classes", "read_miniblock_pages"]

I64 = npt.NDArray[np.int64]


def can_merge(layout: m.MiniBlockLayout) -> bool:
    """Whether takes may treat consecutive pages of this layout as one (see :func:`read_miniblock_pages`)."""
    if not (
        layout.dictionary is None and layout.rep_compression is None and layout.repetition_index_depth == 0
    ):
        return False
    return page_neutral(layout.value_compression) is not None


def _merge_key(layout: m.MiniBlockLayout) -> m.MiniBlockLayout:
    """The layout without what differs between pages of one column (value count, FSST table)."""
    neutral = page_neutral(layout.value_compression)
    assert neutral is not None  # asked only of layouts can_merge accepts
    return replace(layout, num_items=0, value_compression=neutral)


def merge_classes(
    ctx: DecodeContext, column: int, pages: Sequence[PageInfo], mergeable: Callable[[object], bool]
) -> list[tuple[int, int]]:
    """Per page, the ``[first, last]`` pages of its stretch of equal mergeable layouts (cached).

    A page whose layout ``mergeable`` rejects (the page reader's ``can_merge``: for mini-block
    layouts, :func:`can_merge`) is a stretch of its own.
    """
    key = (column, "miniblock-classes")
    cached = ctx.cache.get(key)
    if cached is None:
        out: list[tuple[int, int]] = []
        start = 0
        keys = [_merge_key(p.encoding) if mergeable(p.encoding) else None for p in pages]
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
    pages: Sequence[PageInfo],
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
    return (yield from read_chunks(layout, merged, runs, ctx.path))


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
        mt = load_meta(own, pages[i][1], [buf], ctx.path)
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
