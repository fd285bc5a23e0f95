"""Dictionary building for strings in one compiled pass: a hash table of the distinct values that
gives up as soon as there are too many. Before it, a random sample of the strings is checked for
repeats: when the sample shows (almost) none, a dictionary cannot pay and the build is skipped, so
a high-cardinality page costs a sample instead of a pass over half its values."""

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

#: Distinct strings sampled (fixed seed) to rule a dictionary out before building it. When ``nv``
#: valid values hold at most ``limit`` distinct ones, they have at least ``(nv^2 / limit - nv) / 2``
#: equal pairs, and a sample of ``m`` of them (without replacement) expects that many times
#: ``m(m-1) / (nv(nv-1))``: 16384 samples expect >= 268 equal pairs for the usual ``limit = n / 2``
#: of a 500k-row page, while all-distinct strings show none.
SAMPLE_SIZE = 16384
#: The sample decides only when it expects at least this many equal pairs (below that, a Poisson
#: count could plausibly come out small by chance) ...
_MIN_EXPECTED_PAIRS = 64.0
#: ... and it found fewer than this fraction of them: the chance that the values still have at
#: most ``limit`` distinct ones is then below e^-40.
_PAIRS_FRACTION = 1 / 8


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
    if n >= 4 * SAMPLE_SIZE and _sample_rules_out(data, offsets, valid, limit):
        return None
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


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """SplitMix64's finalizer: well-spread pseudo-random numbers from a counter."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _sample_rules_out(data: U8, offsets: I64, valid: Bools | None, limit: int) -> bool:
    """Whether a random sample shows so few repeats that the strings surely have more than
    ``limit`` distinct values (see :data:`SAMPLE_SIZE`)."""
    n = len(offsets) - 1
    nv = n
    # Pseudo-random distinct positions (a repeated position would look like a repeated value; a
    # regular stride would miss the repeats of sorted data), in order for locality.
    pick = np.sort((_mix(np.arange(SAMPLE_SIZE, dtype=np.uint64)) % np.uint64(n)).astype(np.int64))
    pick = pick[np.concatenate(([True], pick[1:] != pick[:-1]))]
    if valid is not None:
        ok = np.asarray(valid, dtype=np.bool_)
        nv = int(np.count_nonzero(ok))
        pick = pick[ok[pick]]
    m = len(pick)
    if nv < 2 or m < 2:
        return False
    pairs = (nv * nv / max(1, limit) - nv) / 2
    expected = pairs * m * (m - 1) / (nv * (nv - 1))
    if expected < _MIN_EXPECTED_PAIRS:
        return False
    slots = 1 << max(4, int(2 * m + 1).bit_length())
    u = _count_distinct(
        np.ascontiguousarray(data, dtype=np.uint8), np.ascontiguousarray(offsets, dtype=np.int64), pick, slots
    )
    dups = m - u
    # ``dups`` repeats come from at most dups * (dups + 1) / 2 equal pairs.
    return bool(dups * (dups + 1) / 2 < _PAIRS_FRACTION * expected)


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
def _same(data: U8, offsets: I64, f: int, i: int) -> bool:  # pragma: no cover - compiled
    """Whether strings ``f`` and ``i`` hold the same bytes."""
    fa = offsets[f]
    a = offsets[i]
    size = offsets[i + 1] - a
    if offsets[f + 1] - fa != size:
        return False
    for j in range(size):  # noqa: SIM110 - numba compiles loops, not generators
        if data[fa + j] != data[a + j]:
            return False
    return True


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
            if hashes[e] == h and _same(data, offsets, firsts[e], i):
                idx[i] = e
                break
            s = (s + np.uint64(1)) & mask
    return idx, firsts, u


@kernel
def _count_distinct(data: U8, offsets: I64, rows: I64, slots: int) -> int:  # pragma: no cover
    """Distinct values among the strings ``rows`` (a hash set of row numbers)."""
    table = np.full(slots, -1, dtype=np.int64)
    hashes = np.empty(slots, dtype=np.uint64)
    mask = np.uint64(slots - 1)
    u = 0
    for r in rows:
        a = offsets[r]
        b = offsets[r + 1]
        h = _hash(data, a, b)
        s = h & mask
        while True:
            e = table[s]
            if e < 0:
                table[s] = r
                hashes[s] = h
                u += 1
                break
            if hashes[s] == h and _same(data, offsets, e, r):
                break
            s = (s + np.uint64(1)) & mask
    return u


def warm_up() -> None:
    """Compile (or load) the kernel for the argument types used (strings from Arrow buffers are
    read-only arrays)."""
    data = np.frombuffer(b"abcabcab", dtype=np.uint8).copy()
    offsets = np.array([0, 3, 6, 8], dtype=np.int64)
    for valid in (np.ones(0, dtype=np.bool_), np.ones(3, dtype=np.bool_)):
        warm(_build, data, offsets, valid, 3, 16, readonly=(0, 1, 2))
    warm(_count_distinct, data, offsets, np.array([0, 2], dtype=np.int64), 16, readonly=(0, 1))
