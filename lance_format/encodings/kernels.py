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
    from lance_format.encodings.v21 import _bytes, _decode_kernels, _fsst, _kernels
    from lance_format.encodings.v21.encode import _chunks, _dict, _levels, bitpack, fsst, fullzip

    start = time.perf_counter()
    warm_ups = (
        _bytes.warm_up,
        _decode_kernels.warm_up,
        _fsst.warm_up,
        fsst.warm_up,
        _kernels.warm_up,
        bitpack.warm_up,
        _dict.warm_up,
        _chunks.warm_up,
        _levels.warm_up,
        fullzip.warm_up,
    )
    for warm_up in warm_ups:
        warm_up()
    return time.perf_counter() - start
