"""The generic lazy sequence under a file's columns and a column's pages."""

from __future__ import annotations

import pytest

from lance_format.file.columns import LazyColumns, LazyPages, LazySequence


class _Squares(LazySequence[int]):
    __slots__ = ("calls",)

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.calls: list[int] = []

    def _parse(self, i: int) -> int:
        self.calls.append(i)
        return i * i


def test_lazy_sequence_parses_each_item_once_by_its_normalized_index() -> None:
    assert issubclass(LazyPages, LazySequence)
    assert issubclass(LazyColumns, LazySequence)
    seq = _Squares(4)
    assert seq.parsed == 0
    assert seq[-1] == 9
    assert seq[3] == 9
    assert seq[1:3] == (1, 4)
    assert seq.calls == [3, 1, 2]
    assert seq == [0, 1, 4, 9]
    assert repr(seq) == "_Squares([0, 1, 4, 9])"
    assert seq.parsed == 4
    with pytest.raises(IndexError):
        seq[4]
