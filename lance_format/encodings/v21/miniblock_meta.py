"""Mini-block page metadata: where each chunk is and which rows it holds, and the row -> chunk search.

The chunk metadata words (buffer 0), the dictionary and the repetition index of a page are turned
into a :class:`MiniBlockMeta` once per page (then cached); :func:`chunks_for_runs` finds the chunks
a read needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.core.errors import CorruptFileError
from lance_format.core.records import fast_init
from lance_format.encodings.base import PageInfo, RowRuns
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21._bytes import single
from lance_format.encodings.v21._meta_kernels import CHUNK_COUNTS_DO_NOT_ADD_UP, CHUNK_TOO_LARGE, chunk_words
from lance_format.encodings.v21.codecs import decode_block
from lance_format.encodings.v21.values import Values

__all__ = ["ALIGN", "MiniBlockMeta", "chunk_of_rows", "chunks_for_runs", "load_meta", "pad"]

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
ALIGN = 8
# A chunk's value count is a 4-bit log2 (or, for the last chunk, the remainder); Lance writes at
# most 4096. Anything past this bound is corrupt metadata, caught before allocating for it.
_MAX_CHUNK_VALUES = 1 << 16


@fast_init
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


def pad(x: I64) -> I64:
    return (x + (ALIGN - 1)) // ALIGN * ALIGN


def load_meta(layout: m.MiniBlockLayout, page: PageInfo, bufs: list[memoryview], path: str) -> MiniBlockMeta:
    word_bytes = 4 if layout.has_large_chunk else 2
    raw = bufs[0]
    if len(raw) % word_bytes:
        raise CorruptFileError(path, "mini-block chunk metadata has a partial word")
    # Read in place (no copy: the words are only read, by chunk_words below, and not kept); a
    # copy only if misaligned, which the compiled kernel would need a variant of its own for.
    words: npt.NDArray[np.unsignedinteger[Any]] = np.frombuffer(
        raw, dtype=np.uint32 if word_bytes == 4 else np.uint16
    )
    if not words.flags.aligned:
        words = words.copy()
    nchunks = len(words)
    data_pos, data_size = page.buffer(1)
    # One compiled pass: positions, sizes, value counts (the last chunk holds the rest) and the
    # first value of every chunk.
    chunk_pos, sizes, items, first_item, total, empty, status = chunk_words(
        words, layout.num_items, data_pos, _MAX_CHUNK_VALUES, ALIGN
    )
    if status == CHUNK_COUNTS_DO_NOT_ADD_UP:
        raise CorruptFileError(path, "mini-block chunk value counts do not add up")
    if status == CHUNK_TOO_LARGE:
        raise CorruptFileError(path, "mini-block chunk claims too many values")
    if not nchunks and layout.num_items:
        raise CorruptFileError(path, "mini-block page without chunks")
    if total > data_size:
        raise CorruptFileError(path, "mini-block chunks overrun their buffer")
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
        first_row = np.cumsum(row_starts) - row_starts
        rows = int(row_starts.sum())
    else:
        row_starts = items
        has_trailer = _shared("none", nchunks)
        ends = items
        first_row = first_item  # a row per value
        rows = int(first_item[-1] + items[-1]) if nchunks else 0
    if nchunks and rows != page.num_rows:
        raise CorruptFileError(path, "mini-block chunks do not hold the page's rows")
    holder_first_row = first_row
    if layout.repetition_index_depth == 0 and not empty:
        # Flat pages (the usual case): every chunk holds rows and ends one, no searches needed
        # (the holders are all chunks, so their first rows are first_row itself).
        next_end = holders = _shared("every", nchunks)
    else:
        # For each chunk, the first chunk at or after it in which some row ends.
        has_end = np.flatnonzero(ends > 0)
        pos = np.searchsorted(has_end, np.arange(nchunks))
        next_end = np.full(nchunks, nchunks - 1, dtype=np.int64)
        found = pos < len(has_end)
        next_end[found] = has_end[pos[found]]
        holders = np.flatnonzero(row_starts > 0)
        holder_first_row = first_row[holders]
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
        holder_first_row,
        any_trailer=layout.repetition_index_depth > 0 and bool(has_trailer.any()),
    )


def _shared(kind: str, n: int) -> npt.NDArray[Any]:
    """A read-only ``zeros(n, bool)`` (``"none"``: no chunk ends inside a row) or ``arange(n)``
    (``"every"``: every chunk holds rows), shared by the pages of that many chunks: a flat page of
    15,000 chunks allocated both on every open."""
    key = (kind, n)
    known = _SHARED.get(key)
    if known is None:
        known = np.zeros(n, dtype=bool) if kind == "none" else np.arange(n, dtype=np.int64)
        known.flags.writeable = False
        if len(_SHARED) >= _MAX_SHARED:
            _SHARED.clear()
        _SHARED[key] = known
    return known


#: Shared arrays kept: two per distinct chunk count of the flat pages in use, 9 bytes per chunk
#: (~140 KiB for a page of 15,000 chunks); past the bound the map starts over.
_MAX_SHARED = 256
_SHARED: dict[tuple[str, int], npt.NDArray[Any]] = {}


def chunks_for_runs(meta: MiniBlockMeta, runs: RowRuns) -> tuple[I64, I64]:
    """First and last chunk each run of rows needs."""
    if not meta.any_trailer and len(runs) == 1:
        # One run (one-row takes): two scalar searches.
        start, stop = runs[0].tolist()
        hfr = meta.holder_first_row
        # The array method: np.searchsorted's dispatch wrapper costs more than the search.
        a = int(meta.holders[int(hfr.searchsorted(start, side="right")) - 1])
        b = a if stop - start == 1 else int(meta.holders[int(hfr.searchsorted(stop - 1, side="right")) - 1])
        return np.array([a], dtype=np.int64), np.array([b], dtype=np.int64)
    first = chunk_of_rows(meta, runs[:, 0])
    last_row = runs[:, 1] - 1
    last = chunk_of_rows(meta, last_row)
    if not meta.any_trailer:
        return first, last
    is_trailer = meta.has_trailer[last] & (last_row == meta.first_row[last] + meta.row_starts[last] - 1)
    nchunks = len(meta.chunk_pos)
    follow = meta.next_end[np.minimum(last + 1, nchunks - 1)]
    last = np.where(is_trailer & (last + 1 < nchunks), follow, last)
    return first, last


def chunk_of_rows(meta: MiniBlockMeta, rows: I64) -> I64:
    return meta.holders[np.searchsorted(meta.holder_first_row, rows, side="right") - 1]
