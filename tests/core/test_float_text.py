"""Floats as Arrow's Rust cast writes them (the text pylance compares), measured through pylance."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lance_format.core.float_text import rust_float_text

#: (value, float64 text, float32 text) as pylance 14 printed them with CAST(x AS STRING).
CASES = [
    (0.0, "0.0", "0.0"),
    (-0.0, "-0.0", "-0.0"),
    (1.0, "1.0", "1.0"),
    (100.0, "100.0", "100.0"),
    (1e20, "1e20", "1e20"),
    (1e-7, "1e-7", "1e-7"),
    (1e-6, "1e-6", "0.000001"),
    (1e-5, "0.00001", "0.00001"),
    (1.5e-5, "0.000015", "0.000015"),
    (123456789.125, "123456789.125", "123456790.0"),
    (1 / 3, "0.3333333333333333", "0.33333334"),
    (1e13, "10000000000000.0", "1e13"),
    (1e15, "1000000000000000.0", "1e15"),
    (1e16, "1e16", "1e16"),
    (1.2345678901234567e-06, "1.2345678901234567e-6", "0.0000012345679"),
    (2.5e300, "2.5e300", "inf"),
    (5e-324, "5e-324", "0.0"),
    (float("nan"), "NaN", "NaN"),
    (float("inf"), "inf", "inf"),
    (-float("inf"), "-inf", "-inf"),
    (None, None, None),
]


@pytest.mark.parametrize("width", [64, 32])
def test_floats_are_written_as_rust_writes_them(width: int) -> None:
    t = pa.float64() if width == 64 else pa.float32()
    values = pa.array([c[0] for c in CASES], pa.float64()).cast(t, safe=False)
    want = [c[1] if width == 64 else c[2] for c in CASES]
    assert rust_float_text(values).to_pylist() == want
    assert rust_float_text(values.slice(3, 5)).to_pylist() == want[3:8]  # an offset array


def test_other_types_are_refused() -> None:
    with pytest.raises(TypeError):
        rust_float_text(pa.array([1.0], pa.float16()))


def test_the_warm_up_covers_every_call() -> None:
    """After warm_up() (compile_kernels runs it at a server's start) no call compiles a new kernel
    specialization: no request pays JIT time."""
    from lance_format.core import float_text

    float_text.warm_up()
    kernels = [f for f in vars(float_text).values() if hasattr(f, "signatures") and hasattr(f, "py_func")]
    assert kernels
    before = [len(k.signatures) for k in kernels]
    for t in (pa.float64(), pa.float32()):
        rust_float_text(pa.array([1.5, None, 2e30], t).slice(1))
        rust_float_text(pa.array([0.25], t))
        rust_float_text(pa.array([None], t))
        rust_float_text(pa.array([], t))
    assert [len(k.signatures) for k in kernels] == before
