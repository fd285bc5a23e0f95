"""Dictionary building for strings in one compiled pass: a hash table of the distinct values that
gives up as soon as there are too many (most high-cardinality pages then cost a fraction of a full
``dictionary_encode``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.core.jit import kernel, warm

__all__ = ["dictionary_strings", "warm_up"]

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
Bools = npt.NDArray[np.bool_]

_MULT = np.uint64(0x9E3779B97F4A7C15)


def dictionary_strings(data: U8, offsets: I64, valid: Bools | None, limit: int) -> tuple[I32, I64] | None:
    """Dictionary indices of strings, in first-occurrence order (as Arrow's ``dictionary_encode``).

    Parameters
    ----------
    data, offsets:
        ``n`` strings (``n + 1`` offsets into ``data``).
    valid:
        Per string, whether it is valid (None: all are). Nulls get index 0 and are not entries.
    limit:
        Most distinct values wanted: beyond it the build stops and returns None.

    Returns
    -------
    (indices, firsts) or None
        Per string its entry; per entry the string that first held it.
    """
    n = len(offsets) - 1
    slots = 1 << max(4, int(2 * min(limit, n) + 1).bit_length())
    ok = np.ones(0, dtype=np.bool_) if valid is None else np.ascontiguousarray(valid, dtype=np.bool_)
    idx, firsts, u = _build(
        np.ascontiguousarray(data, dtype=np.uint8),
        np.ascontiguousarray(offsets, dtype=np.int64),
        ok,
        limit,
        slots,
    )
    if u < 0:
        return None
    return idx, firsts[:u]


@kernel
def _hash(data: U8, a: int, b: int) -> np.uint64:  # pragma: no cover - compiled
    h = np.uint64(b - a) * _MULT
    i = a
    while i + 8 <= b:
        w = np.uint64(0)
        for j in range(8):
            w |= np.uint64(data[i + j]) << np.uint64(8 * j)
        h = (h ^ w) * _MULT
        h ^= h >> np.uint64(29)
        i += 8
    w = np.uint64(0)
    for j in range(b - i):
        w |= np.uint64(data[i + j]) << np.uint64(8 * j)
    h = (h ^ w) * _MULT
    h ^= h >> np.uint64(32)
    return h


@kernel
def _build(
    data: U8, offsets: I64, valid: Bools, limit: int, slots: int
) -> tuple[I32, I64, int]:  # pragma: no cover - compiled
    n = offsets.shape[0] - 1
    table = np.full(slots, -1, dtype=np.int64)
    hashes = np.empty(min(limit, n) + 1, dtype=np.uint64)
    firsts = np.empty(min(limit, n) + 1, dtype=np.int64)
    idx = np.zeros(n, dtype=np.int32)
    mask = np.uint64(slots - 1)
    u = 0
    has_valid = valid.shape[0] > 0
    for i in range(n):
        if has_valid and not valid[i]:
            continue
        a = offsets[i]
        b = offsets[i + 1]
        h = _hash(data, a, b)
        s = h & mask
        while True:
            e = table[s]
            if e < 0:
                if u >= limit:
                    return idx, firsts, -1
                table[s] = u
                hashes[u] = h
                firsts[u] = i
                idx[i] = u
                u += 1
                break
            if hashes[e] == h:
                f = firsts[e]
                fa = offsets[f]
                if offsets[f + 1] - fa == b - a:
                    same = True
                    for j in range(b - a):
                        if data[fa + j] != data[a + j]:
                            same = False
                            break
                    if same:
                        idx[i] = e
                        break
            s = (s + np.uint64(1)) & mask
    return idx, firsts, u


def warm_up() -> None:
    """Compile (or load) the kernel for the argument types used (strings from Arrow buffers are
    read-only arrays)."""
    data = np.frombuffer(b"abcabcab", dtype=np.uint8).copy()
    offsets = np.array([0, 3, 6, 8], dtype=np.int64)
    for valid in (np.ones(0, dtype=np.bool_), np.ones(3, dtype=np.bool_)):
        warm(_build, data, offsets, valid, 3, 16, readonly=(0, 1, 2))
