"""Ahead-of-time compilation of the encode/decode kernels (see :mod:`lance_format.core.jit`)."""

from __future__ import annotations

import time

__all__ = ["compile_kernels"]


def compile_kernels() -> float:
    """Compile every encode/decode kernel, or load it from the kernel cache, before any request.

    A server calls this at start so no request pays the JIT time (seconds per kernel without a
    cache, milliseconds with one).

    Returns
    -------
    float
        Seconds it took.
    """
    from lance_format.core import float_text, text_kernels
    from lance_format.encodings import v21
    from lance_format.encodings.v21 import encode

    start = time.perf_counter()
    v21.warm_up_kernels()
    encode.warm_up_kernels()
    float_text.warm_up()  # filters' CAST(f AS STRING) and length(f)
    text_kernels.warm_up()  # filters' string functions of two columns (contains(s, t))
    return time.perf_counter() - start
