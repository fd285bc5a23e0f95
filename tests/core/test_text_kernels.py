"""The row-by-row string kernels against Python's own string methods (Rust's agree with them)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_format.core import text_kernels as tk

texts = st.lists(st.one_of(st.none(), st.text(alphabet="abß€😀 ", max_size=6)), min_size=1, max_size=8)


def _strip(s: str, chars: str, left: bool, right: bool) -> str:
    if left:
        s = s.lstrip(chars) if chars else s
    if right:
        s = s.rstrip(chars) if chars else s
    return s


def _py_replace(s: str, old: str, new: str) -> str:
    return s.replace(old, new)  # an empty `old` matches around every character, as in Rust


@settings(max_examples=60, deadline=None, derandomize=True)
@given(texts, st.data())
def test_kernels_match_python(values: list[str | None], data: st.DataObject) -> None:
    patterns = data.draw(
        st.lists(
            st.one_of(st.none(), st.text(alphabet="abß€😀 ", max_size=2)),
            min_size=len(values),
            max_size=len(values),
        )
    )
    large = data.draw(st.booleans())
    t = pa.large_string() if large else pa.string()
    # a slice, so views start at an offset into the buffers
    s_arr = pa.array([None, *values], t).slice(1)
    p_arr = pa.array(["x", *patterns], pa.string()).slice(1)
    n = len(values)
    s, p = tk.view(s_arr, n), tk.view(p_arr, n)
    pairs = list(zip(values, patterns, strict=True))

    def each(fn: Callable[..., object]) -> list[object]:
        return [None if a is None or b is None else fn(a, b) for a, b in pairs]

    assert tk.contains(s, p).to_pylist() == each(lambda a, b: b in a)
    assert tk.strpos(s, p).to_pylist() == each(lambda a, b: a.find(b) + 1)
    assert tk.starts_with(s, p).to_pylist() == each(str.startswith)
    assert tk.ends_with(s, p).to_pylist() == each(str.endswith)
    assert tk.replace(s, p, tk.view(pa.scalar("<>"), n)).to_pylist() == each(
        lambda a, b: _py_replace(a, b, "<>")
    )
    for left, right in ((True, True), (True, False), (False, True)):
        assert tk.trim(s, p, left, right).to_pylist() == each(
            lambda a, b, lf=left, rt=right: _strip(a, b, lf, rt)
        )


def test_a_null_scalar_pattern_makes_every_row_null() -> None:
    s = tk.view(pa.array(["a", "b"]), 2)
    assert tk.contains(s, tk.view(pa.scalar(None, pa.string()), 2)).to_pylist() == [None, None]


@pytest.mark.parametrize("values", [[], [None, None], ["", ""]])
def test_empty_and_all_null_inputs(values: list[str | None]) -> None:
    s = tk.view(pa.array(values, pa.string()), len(values))
    assert tk.replace(s, s, s).to_pylist() == values
    assert tk.trim(s, s, True, True).to_pylist() == values
