"""Dictionary building for strings in one compiled pass: a hash table of the distinct values that
gives up as soon as there are too many. Before it, a random sample of the strings is checked for
repeats: when the sample shows (almost) none, a dictionary cannot pay and the build is skipped, so
a high-cardinality page costs a sample instead of a pass over half its values."""

from __future__ import annotations

from functools import partial
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.core.concurrency import LazyPool
from lance_format.core.jit import kernel
from lance_format.encodings.v21.encode._split import run_split, split_rows, windows

__all__ = ["dictionary_strings", "warm_up"]

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
U64 = npt.NDArray[np.uint64]
Bools = npt.NDArray[np.bool_]

_MULT = np.uint64(0x9E3779B97F4A7C15)
_FMIX = np.uint64(0xFF51AFD7ED558CCD)

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


def dictionary_strings(
    data: U8, offsets: I64, valid: Bools | None, limit: int, split: LazyPool | None = None
) -> tuple[I32, I64] | None:
    """Dictionary indices of strings, in first-occurrence order (as Arrow's ``dictionary_encode``).

    Parameters
    ----------
    data, offsets:
        ``n`` strings (``n + 1`` offsets into ``data``).
    valid:
        Per string, whether it is valid (None: all are). Nulls get index 0 and are not entries.
    limit:
        Most distinct values wanted: beyond it the build stops and returns None.
    split:
        The writing session's split pool: a large page builds in ranges on it (same result).

    Returns
    -------
    (indices, firsts) or None
        Per string its entry; per entry the string that first held it.
    """
    n = len(offsets) - 1
    if n >= 4 * SAMPLE_SIZE and _sample_rules_out(data, offsets, valid, limit):
        return None
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    win = _windows(data)
    ok = np.ones(0, dtype=np.bool_) if valid is None else np.ascontiguousarray(valid, dtype=np.bool_)
    # Ranges of a large page build dictionaries of their own side by side; the ranges' entries are
    # then merged in range order, so the entries and their order are those of one pass.
    bounds = split_rows(offsets, split)
    parts = run_split([partial(_build, win, offsets, ok, a, b, limit) for a, b in pairwise(bounds)], split)
    if any(u < 0 for _, _, _, u in parts):
        return None
    idx, firsts, hashes, u = parts[0]
    if len(parts) == 1:
        return idx, firsts[:u]
    idx_parts = [idx]
    firsts, hashes = firsts[:u], hashes[:u]
    for pidx, pfirsts, phashes, pu in parts[1:]:
        remap, firsts, hashes = _merge(win, offsets, firsts, hashes, pfirsts[:pu], phashes[:pu], limit)
        if len(firsts) > limit:
            return None
        # A range of nulls only has no entries (its indices are all 0).
        idx_parts.append(remap[pidx] if len(remap) else pidx)
    idx = np.concatenate(idx_parts)
    if valid is not None:
        idx[~ok] = 0
    return idx, firsts


def _windows(data: U8) -> U64:
    """The 8-byte windows of the strings' bytes (at least one: a buffer under 8 bytes is padded)."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    if len(data) < 8:
        data = np.concatenate((data, np.zeros(8, dtype=np.uint8)))
    return windows(data)


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
    u = _count_distinct(_windows(data), np.ascontiguousarray(offsets, dtype=np.int64), pick, slots)
    dups = m - u
    # ``dups`` repeats come from at most dups * (dups + 1) / 2 equal pairs.
    return bool(dups * (dups + 1) / 2 < _PAIRS_FRACTION * expected)


#: The low ``k`` bytes of a word, for ``k`` = 0..8.
_MASKS = np.array([0] + [(1 << (8 * k)) - 1 for k in range(1, 8)] + [2**64 - 1], dtype=np.uint64)


@kernel
def _word(win: U64, i: int, k: int) -> np.uint64:  # pragma: no cover - compiled
    """The ``k`` (0..8) bytes at ``i`` as a little-endian word, in one load and no branch (a
    position in the last 7 bytes reads the last window and shifts): branches here cost more than
    the whole hash."""
    j = min(i, win.shape[0] - 1)
    return np.uint64((win[j] >> (np.uint64(8 * (i - j)) & np.uint64(63))) & _MASKS[k])


@kernel
def _hash(win: U64, a: int, b: int) -> np.uint64:  # pragma: no cover - compiled
    h = np.uint64(b - a) * _MULT
    i = a
    while i + 8 <= b:
        h = (h ^ win[i]) * _MULT
        h ^= h >> np.uint64(29)
        i += 8
    h = (h ^ _word(win, i, b - i)) * _MULT
    # Tables index by the low bits: mix the high ones in (MurmurHash3's finalizer).
    h ^= h >> np.uint64(33)
    h *= _FMIX
    h ^= h >> np.uint64(33)
    return h


@kernel
def _same(win: U64, offsets: I64, f: int, i: int) -> bool:  # pragma: no cover - compiled
    """Whether strings ``f`` and ``i`` hold the same bytes (compared a word at a time)."""
    fa = offsets[f]
    a = offsets[i]
    size = offsets[i + 1] - a
    if offsets[f + 1] - fa != size:
        return False
    j = 0
    while j + 8 <= size:
        if win[fa + j] != win[a + j]:
            return False
        j += 8
    return bool(_word(win, fa + j, size - j) == _word(win, a + j, size - j))


#: Entries' hash table: it starts this small (a low-cardinality page stays in the L1 cache) and
#: doubles whenever it is half full.
_FIRST_SLOTS = 1 << 20


@kernel
def _grow(table: I64, hashes: U64, u: int) -> I64:  # pragma: no cover - compiled
    """The hash table of the first ``u`` entries at twice the size of ``table``."""
    slots = 2 * table.shape[0]
    mask = np.uint64(slots - 1)
    out = np.full(slots, -1, dtype=np.int64)
    for e in range(u):
        s = hashes[e] & mask
        while out[s] >= 0:
            s = (s + np.uint64(1)) & mask
        out[s] = e
    return out


@kernel
def _build(
    win: U64, offsets: I64, valid: Bools, lo: int, hi: int, limit: int
) -> tuple[I32, I64, U64, int]:  # pragma: no cover - compiled
    """Dictionary of strings ``lo..hi``: per string its entry, per entry its first string and
    hash, and the entries (-1: more than ``limit``)."""
    n = hi - lo
    cap = min(limit, n) + 1
    table = np.full(_FIRST_SLOTS, -1, dtype=np.int64)
    hashes = np.empty(cap, dtype=np.uint64)
    firsts = np.empty(cap, dtype=np.int64)
    has_valid = valid.shape[0] > 0
    idx = np.zeros(n, dtype=np.int32) if has_valid else np.empty(n, dtype=np.int32)
    mask = np.uint64(table.shape[0] - 1)
    u = 0
    for i in range(lo, hi):
        if has_valid and not valid[i]:
            continue
        h = _hash(win, offsets[i], offsets[i + 1])
        s = h & mask
        while True:
            e = table[s]
            if e < 0:
                if u >= limit:
                    return idx, firsts, hashes, -1
                table[s] = u
                hashes[u] = h
                firsts[u] = i
                idx[i - lo] = u
                u += 1
                if 2 * u > table.shape[0]:
                    table = _grow(table, hashes, u)
                    mask = np.uint64(table.shape[0] - 1)
                break
            if hashes[e] == h and _same(win, offsets, firsts[e], i):
                idx[i - lo] = e
                break
            s = (s + np.uint64(1)) & mask
    return idx, firsts, hashes, u


@kernel
def _merge(
    win: U64, offsets: I64, firsts: I64, hashes: U64, more: I64, more_hashes: U64, limit: int
) -> tuple[I32, I64, U64]:  # pragma: no cover - compiled
    """Entries ``firsts`` followed by those of ``more`` they lack (stopping past ``limit``), and
    per entry of ``more`` its number among them."""
    u = firsts.shape[0]
    total = u + more.shape[0]
    slots = 16
    while slots < 2 * total:
        slots *= 2
    mask = np.uint64(slots - 1)
    table = np.full(slots, -1, dtype=np.int64)
    out_firsts = np.empty(total, dtype=np.int64)
    out_hashes = np.empty(total, dtype=np.uint64)
    for e in range(u):
        out_firsts[e] = firsts[e]
        out_hashes[e] = hashes[e]
        s = hashes[e] & mask
        while table[s] >= 0:
            s = (s + np.uint64(1)) & mask
        table[s] = e
    remap = np.empty(more.shape[0], dtype=np.int32)
    for j in range(more.shape[0]):
        h = more_hashes[j]
        s = h & mask
        while True:
            e = table[s]
            if e < 0:
                table[s] = u
                out_firsts[u] = more[j]
                out_hashes[u] = h
                remap[j] = u
                u += 1
                break
            if out_hashes[e] == h and _same(win, offsets, out_firsts[e], more[j]):
                remap[j] = e
                break
            s = (s + np.uint64(1)) & mask
        if u > limit:
            break
    return remap, out_firsts[:u], out_hashes[:u]


@kernel
def _count_distinct(win: U64, offsets: I64, rows: I64, slots: int) -> int:  # pragma: no cover
    """Distinct values among the strings ``rows`` (a hash set of row numbers)."""
    table = np.full(slots, -1, dtype=np.int64)
    hashes = np.empty(slots, dtype=np.uint64)
    mask = np.uint64(slots - 1)
    u = 0
    for r in rows:
        h = _hash(win, offsets[r], offsets[r + 1])
        s = h & mask
        while True:
            e = table[s]
            if e < 0:
                table[s] = r
                hashes[s] = h
                u += 1
                break
            if hashes[s] == h and _same(win, offsets, e, r):
                break
            s = (s + np.uint64(1)) & mask
    return u


def _variants(a: npt.NDArray[Any]) -> list[npt.NDArray[Any]]:
    """``a`` writable and read-only (numba compiles each apart)."""
    ro = a.copy()
    ro.setflags(write=False)
    return [a.copy(), ro]


def warm_up() -> None:
    """Compile (or load) the kernels for the argument types used: strings from Arrow buffers (and
    so their windows), offsets and validity may be read-only arrays."""
    text = np.frombuffer(b"abcabcabcabcabcab", dtype=np.uint8)
    offsets = np.array([0, 3, 6, 17], dtype=np.int64)
    valids = [np.ones(0, dtype=np.bool_), *_variants(np.ones(3, dtype=np.bool_))]
    firsts = np.array([0], dtype=np.int64)
    hashes = np.array([1], dtype=np.uint64)
    for data in _variants(text):
        win = _windows(data)
        for offs in _variants(offsets):
            for valid in valids:
                _build(win, offs, valid, 0, 3, 3)
            _merge(win, offs, firsts, hashes, firsts + 1, hashes + 1, 3)
            _count_distinct(win, offs, np.array([0, 2], dtype=np.int64), 16)
