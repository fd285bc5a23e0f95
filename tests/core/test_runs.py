"""Row runs and the generator driver of the decoder contract."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from lance_format.encodings.base import (
    IOGen,
    Range,
    drive,
    fetch,
    runs_from_sorted_indices,
    runs_length,
    split_runs,
)


@given(st.sets(st.integers(0, 500), max_size=100), st.lists(st.integers(1, 80), min_size=1, max_size=10))
def test_split_runs_partitions_rows(rows: set[int], page_lengths: list[int]) -> None:
    bounds = np.concatenate(([0], np.cumsum(page_lengths))).astype(np.int64)
    idx = np.array(sorted(r for r in rows if r < bounds[-1]), dtype=np.int64)
    runs = runs_from_sorted_indices(idx)
    assert runs_length(runs) == len(idx)
    got = []
    for page, local in split_runs(runs, bounds):
        assert (local[:, 0] >= 0).all()
        assert (local[:, 1] <= page_lengths[page]).all()
        for s, e in local.tolist():
            got.extend(range(s + int(bounds[page]), e + int(bounds[page])))
    assert got == idx.tolist()


def test_drive_batches_rounds() -> None:
    calls: list[list[Range]] = []

    def read(ranges: list[Range]) -> list[memoryview]:
        calls.append(list(ranges))
        return [memoryview(bytes([off % 256]) * length) for off, length in ranges]

    def two_rounds(base: int) -> IOGen[bytes]:
        (a,) = yield from fetch([(base, 2)])
        (b,) = yield from fetch([(base + a[0], 1)])
        return bytes(a) + bytes(b)

    def no_io() -> IOGen[str]:
        return "done"
        yield []  # pragma: no cover - makes this a generator

    results = drive([two_rounds(1), two_rounds(10), no_io()], read)
    assert results == [b"\x01\x01\x02", b"\x0a\x0a\x14", "done"]
    assert calls == [[(1, 2), (10, 2)], [(2, 1), (20, 1)]]
