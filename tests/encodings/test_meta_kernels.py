"""The compiled chunk-metadata pass of mini-block pages equals the numpy formulas it replaced,
and flags the corrupt counts they rejected."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lance_format.encodings.v21._meta_kernels import (
    CHUNK_COUNTS_DO_NOT_ADD_UP,
    CHUNK_TOO_LARGE,
    chunk_words,
)

MAX = 1 << 16


def _reference(words: np.ndarray, num_items: int, data_pos: int) -> tuple[np.ndarray, ...]:
    w = words.astype(np.int64)
    sizes = ((w >> 4) + 1) * 8
    logs = w & 0xF
    items = np.where(logs > 0, np.left_shift(1, logs), 0).astype(np.int64)
    items[-1] = num_items - int(items[:-1].sum())
    return data_pos + np.cumsum(sizes) - sizes, sizes, items, np.cumsum(items) - items


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
@pytest.mark.parametrize("readonly", [False, True])
def test_chunk_words_equal_the_numpy_formulas(dtype: type, readonly: bool) -> None:
    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 1000):
        logs = rng.integers(1, 13, n)
        size_words = rng.integers(0, 2000 if dtype is np.uint16 else 100_000, n)
        words = ((size_words << 4) | logs).astype(dtype)
        last = int(rng.integers(1, 1 << int(logs[-1]) + 1))
        words[-1] = (int(words[-1]) & ~0xF) | (0 if last != 1 << int(logs[-1]) else int(logs[-1]))
        num_items = int((1 << logs[:-1]).sum()) + last
        words.setflags(write=not readonly)
        pos, sizes, items, first, total, empty, status = chunk_words(words, num_items, 4096, MAX, 8)
        want = _reference(words, num_items, 4096)
        assert status == 0
        for got, ref in zip((pos, sizes, items, first), want, strict=True):
            np.testing.assert_array_equal(got, ref)
        assert total == int(sizes.sum())
        assert empty == int((items == 0).sum())


def test_counts_that_do_not_add_up_or_are_too_large_are_flagged() -> None:
    words = np.array([0x15, 0x15], dtype=np.uint16)  # two chunks of 32 values
    assert chunk_words(words, 64, 0, MAX, 8)[-1] == 0
    assert chunk_words(words, 63, 0, MAX, 8)[-1] == CHUNK_COUNTS_DO_NOT_ADD_UP  # last says 32
    assert chunk_words(words, 10, 0, MAX, 8)[-1] == CHUNK_COUNTS_DO_NOT_ADD_UP  # rest < 0
    tail = np.array([0x15, 0x10], dtype=np.uint16)  # the last chunk: "the rest"
    assert chunk_words(tail, 40, 0, MAX, 8)[2].tolist() == [32, 8]
    assert chunk_words(tail, 32 + MAX + 1, 0, MAX, 8)[-1] == CHUNK_TOO_LARGE
    assert chunk_words(np.zeros(0, np.uint16), 0, 0, MAX, 8)[4] == 0
    gap = np.array([0x15, 0x10, 0x10], dtype=np.uint16)  # a middle chunk of no values
    got = chunk_words(gap, 40, 0, MAX, 8)
    assert got[2].tolist() == [32, 0, 8]
    assert got[5] == 1


def _flat_page(words: np.ndarray, num_items: int) -> tuple[Any, Any, list[memoryview]]:
    from lance_format.encodings.base import PageInfo
    from lance_format.encodings.v21 import model as m

    layout = m.MiniBlockLayout(
        None, None, m.Flat(64), None, 0, (m.RepDefLayer.ALL_VALID_ITEM,), 1, 0, num_items
    )
    data = int(((words.astype(np.int64) >> 4) + 1).sum() * 8)
    page = PageInfo((0, 4096), (words.nbytes, data), num_items, 0, layout)
    return layout, page, [memoryview(words.tobytes())]


def test_flat_pages_share_their_trivial_search_arrays() -> None:
    """Opening a flat page (no repetition, every chunk holds rows) builds only the arrays the
    words define: the 'no chunk ends inside a row' flags and the chunk -> holder map are shared,
    read-only arrays per chunk count, the same for every open; a page with an empty chunk gets
    its own."""
    from lance_format.encodings.v21.miniblock_meta import chunk_of_rows, load_meta

    words = np.full(300, 0x16, dtype=np.uint16)  # 300 chunks of 64 values
    a = load_meta(*_flat_page(words, 300 * 64), path="t")
    b = load_meta(*_flat_page(words, 300 * 64), path="t")
    assert a.holders is b.holders
    assert a.has_trailer is b.has_trailer
    assert not a.holders.flags.writeable
    assert not a.any_trailer
    np.testing.assert_array_equal(a.holders, np.arange(300))
    assert not a.has_trailer.any()
    assert chunk_of_rows(a, np.array([0, 63, 64, 300 * 64 - 1])).tolist() == [0, 0, 1, 299]
    gap = words.copy()
    gap[5] = 0x10  # a chunk of no values: the holders skip it
    c = load_meta(*_flat_page(gap, 299 * 64), path="t")
    assert c.holders is not a.holders
    assert 5 not in c.holders.tolist()
    assert chunk_of_rows(c, np.array([5 * 64])).tolist() == [6]


@pytest.mark.parametrize("misaligned", [False, True])
def test_load_meta_reads_the_words_in_place_or_copies_misaligned_ones(misaligned: bool) -> None:
    # The chunk metadata buffer (read-only, as fetched) is read without a copy; a buffer at an odd
    # address is copied first (the compiled pass has no variant for unaligned arrays).
    from lance_format.encodings.base import PageInfo
    from lance_format.encodings.v21 import model as m
    from lance_format.encodings.v21.miniblock_meta import load_meta

    words = np.array([0x15, 0x15, 0x10], dtype=np.uint16)  # 32 + 32 + 8 values, 16 bytes each
    raw = bytes(1) + words.tobytes() if misaligned else words.tobytes()
    buf = memoryview(raw)[1:] if misaligned else memoryview(raw)
    assert np.frombuffer(buf, np.uint16).flags.aligned is not misaligned
    layout = m.MiniBlockLayout(None, None, m.Flat(32), None, 0, (m.RepDefLayer.ALL_VALID_ITEM,), 1, 0, 72)
    page = PageInfo((0, 64), (len(buf), 48), 72, 0, layout)
    meta = load_meta(layout, page, [buf], "test")
    assert meta.chunk_items.tolist() == [32, 32, 8]
    assert meta.chunk_pos.tolist() == [64, 80, 96]  # 16-byte chunks
    assert meta.first_row.tolist() == [0, 32, 64]
