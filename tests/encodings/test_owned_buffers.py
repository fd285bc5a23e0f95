"""Decoded values own only their bytes: a view of a larger scratch array would keep it alive while
the decoded-block cache charges the view's size (issue 14: memory accounted honestly)."""

from __future__ import annotations

import numpy as np
import pytest

from lance_format.encodings.v21._bytes import Bufs
from lance_format.encodings.v21.compressive import inline_bitpacked


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


@pytest.mark.parametrize("count", [1, 100, 1023])
def test_a_short_inline_bitpacked_block_owns_only_its_values(count: int) -> None:
    # One buffer: the bit width as a 64-bit word, then a 1,024-value FastLanes block of 3 bits
    # (all zeros decode to zeros whatever the lane order).
    blob = np.concatenate([np.array([3], dtype=np.uint64).view(np.uint8), np.zeros(1024 * 3 // 8, np.uint8)])
    bufs = Bufs(blob, np.array([0], dtype=np.int64), np.array([len(blob)], dtype=np.int64))
    out = inline_bitpacked(bufs, 64, np.array([count], dtype=np.int64))
    assert out.n == count
    assert isinstance(out.data, np.ndarray)
    assert out.data.nbytes == count * 8
    assert not out.data.any()
    assert _root(out.data).nbytes == count * 8  # before: the 8 KiB block stayed behind the view
