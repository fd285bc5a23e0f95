"""FSST compression with Lance's symbol-table serialization (inverse of ``v21._fsst``).

Training follows the FSST idea in a vectorized form: parse a sample with the current table, count
how much each used symbol and each pair of adjacent symbols (glued, at most 8 bytes) would save,
keep the best 255, repeat a few generations. Compression parses every string greedily (longest
symbol first) in a compiled kernel that releases the GIL.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.core.jit import kernel, warm

__all__ = ["FSST_MIN_BYTES", "fsst_compress", "warm_up"]

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

_MAGIC = 0x46535354 << 32
_ESC = 255
#: pylance's decoder insists on the full table: header, 256 symbols, 256 lengths.
TABLE_SIZE = 8 + 256 * 8 + 256
#: pylance compresses with FSST only pages of at least 32 KiB of string data whose longest value
#: has at least 5 bytes; below that the table costs more than it saves.
FSST_MIN_BYTES = 32 * 1024
FSST_MIN_MAX_LEN = 5
#: Training sample (FSST's 16 KiB) and generations.
_SAMPLE_BYTES = 1 << 14
_GENERATIONS = 5
#: The lock-step parse takes one pass per code of the longest string: longer values are left plain.
MAX_FSST_VALUE = 4096
_MASKS = np.array([0] + [(1 << (8 * k)) - 1 for k in range(1, 8)] + [2**64 - 1], dtype=np.uint64)


#: Symbols of 3..8 bytes are found through an open-addressing hash table of this many slots (a
#: power of two, four times the 255 symbols so probes stay short), keyed by (masked window, length),
#: and probed only for the lengths present among symbols starting with the window's first two bytes.
#: Symbols of 1 and 2 bytes are looked up directly.
_HASH_SLOTS = 1024
_HASH_SHIFT = np.uint64(64 - 10)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


class _Table:
    """Symbols (zero-padded little-endian u64) with their lengths, and the kernel's lookup arrays
    (see :func:`_build_lookup`)."""

    def __init__(self, vals: U64, lens: I64) -> None:
        self.vals = np.ascontiguousarray(vals, dtype=np.uint64)
        self.lens = np.ascontiguousarray(lens, dtype=np.int64)
        self.slots, self.first, self.short = _build_lookup(self.vals, self.lens)

    def lookup(self) -> tuple[U64, I64, I16, U16, I16]:
        return self.vals, self.lens, self.slots, self.first, self.short


I16 = npt.NDArray[np.int16]
U16 = npt.NDArray[np.uint16]


@kernel
def _slot(w: np.uint64, k: int) -> np.int64:  # pragma: no cover - compiled
    return np.int64(((w ^ np.uint64(k)) * _GOLDEN) >> _HASH_SHIFT)


@kernel
def _build_lookup(vals: U64, lens: I64) -> tuple[I16, U16, I16]:  # pragma: no cover - compiled
    """(hash slots -> code for symbols of 3+ bytes; per first two bytes, a bit mask of those symbols'
    lengths; direct codes: ``[b0]`` for 1-byte symbols, ``[256 + b0 + 256 * b1]`` for 2-byte ones)."""
    slots = np.full(_HASH_SLOTS, -1, dtype=np.int16)
    first = np.zeros(1 << 16, dtype=np.uint16)
    short = np.full(256 + (1 << 16), -1, dtype=np.int16)
    for c in range(vals.shape[0]):
        k = lens[c]
        if k == 1:
            short[int(vals[c] & np.uint64(0xFF))] = c
        elif k == 2:
            short[256 + int(vals[c] & np.uint64(0xFFFF))] = c
        else:
            h = _slot(vals[c], k)
            while slots[h] >= 0:
                h = (h + np.int64(1)) & np.int64(_HASH_SLOTS - 1)
            slots[h] = c
            first[int(vals[c] & np.uint64(0xFFFF))] |= np.uint16(1 << k)
    return slots, first, short


@kernel
def _longest(
    data: U8, pos: int, remaining: int, vals: U64, lens: I64, slots: I16, first: U16, short: I16
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Longest symbol at ``pos`` (at most ``remaining`` bytes): (code or -1 for an escape, length)."""
    top = min(8, remaining)
    w = np.uint64(0)
    for j in range(top):
        w |= np.uint64(data[pos + j]) << np.uint64(8 * j)
    two = int(w & np.uint64(0xFFFF))
    if top >= 3:
        present = first[two]
        if present:
            for k in range(top, 2, -1):
                if not (present >> k) & 1:
                    continue
                mw = w if k == 8 else w & ((np.uint64(1) << np.uint64(8 * k)) - np.uint64(1))
                h = _slot(mw, k)
                while slots[h] >= 0:
                    c = slots[h]
                    if lens[c] == k and vals[c] == mw:
                        return int(c), k
                    h = (h + np.int64(1)) & np.int64(_HASH_SLOTS - 1)
    if top >= 2:
        c2 = short[256 + two]
        if c2 >= 0:
            return int(c2), 2
    c1 = short[two & 0xFF]
    if c1 >= 0:
        return int(c1), 1
    return -1, 1


@kernel
def _string_bytes(offsets: I64) -> int:  # pragma: no cover - compiled
    """Bytes in all strings (empty or reversed ranges count 0): at most one code per byte."""
    cap = 0
    for i in range(offsets.shape[0] - 1):
        if offsets[i + 1] > offsets[i]:
            cap += offsets[i + 1] - offsets[i]
    return cap


@kernel
def _parse_kernel(
    data: U8, offsets: I64, vals: U64, lens: I64, slots: I16, first: U16, short: I16
) -> tuple[I64, I64, I64, I64]:  # pragma: no cover - compiled
    n = offsets.shape[0] - 1
    cap = _string_bytes(offsets)
    s = np.empty(cap, dtype=np.int64)
    code = np.empty(cap, dtype=np.int64)
    pos = np.empty(cap, dtype=np.int64)
    ln = np.empty(cap, dtype=np.int64)
    m = 0
    for i in range(n):
        cur = offsets[i]
        end = offsets[i + 1]
        while cur < end:
            c, k = _longest(data, cur, end - cur, vals, lens, slots, first, short)
            s[m] = i
            code[m] = c
            pos[m] = cur
            ln[m] = k
            m += 1
            cur += k
    return s[:m], code[:m], pos[:m], ln[:m]


class _Windows:
    """Every 8-byte window of ``data`` (zero past the end) as a little-endian u64: an overlapping,
    unaligned view with a stride of one byte, so a gather at any positions is one numpy take."""

    def __init__(self, data: U8) -> None:
        self._pad = np.concatenate((data, np.zeros(8, dtype=np.uint8)))
        self.view = np.ndarray((len(data) + 1,), dtype="<u8", buffer=self._pad, strides=(1,))

    def at(self, pos: I64) -> U64:
        return self.view[pos]


def _parse(table: _Table, data: U8, offsets: I64) -> tuple[I64, I64, I64, I64]:
    """Greedy parse of every string: per code, its string, its code (-1 = escape), its start and
    length, in string order."""
    return _parse_kernel(
        np.ascontiguousarray(data, dtype=np.uint8),
        np.ascontiguousarray(offsets, dtype=np.int64),
        *table.lookup(),
    )


@kernel
def _compress_kernel(
    data: U8, offsets: I64, vals: U64, lens: I64, slots: I16, first: U16, short: I16
) -> tuple[I64, U8]:  # pragma: no cover - compiled
    """Greedy longest-symbol coding of every string: (new offsets, codes with 255 + literal escapes)."""
    n = offsets.shape[0] - 1
    cap = _string_bytes(offsets)
    out = np.empty(2 * cap, dtype=np.uint8)
    new = np.zeros(n + 1, dtype=np.int64)
    m = 0
    for i in range(n):
        cur = offsets[i]
        end = offsets[i + 1]
        while cur < end:
            c, k = _longest(data, cur, end - cur, vals, lens, slots, first, short)
            if c < 0:
                out[m] = _ESC
                out[m + 1] = data[cur]
                m += 2
            else:
                out[m] = c
                m += 1
            cur += k
        new[i + 1] = m
    return new, out[:m]


def _train(data: U8, offsets: I64) -> _Table:
    n = len(offsets) - 1
    total = int(offsets[-1] - offsets[0])
    step = max(1, total // _SAMPLE_BYTES)
    pick = np.arange(0, n, step)
    lens = (offsets[pick + 1] - offsets[pick]).astype(np.int64)
    from lance_format.encodings.base import expand_ranges

    sdata = data[expand_ranges(offsets[pick], lens)]
    soffs = np.zeros(len(pick) + 1, dtype=np.int64)
    np.cumsum(lens, out=soffs[1:])
    table = _Table(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64))
    windows = _Windows(sdata)
    for _ in range(_GENERATIONS):
        s, _code, pos, ln = _parse(table, sdata, soffs)
        if not len(s):
            break
        word = windows.at(pos)
        val = word & _MASKS[ln]
        # Adjacent pairs within a string, glued and cut to 8 bytes.
        same = s[1:] == s[:-1]
        plen = np.minimum(ln[:-1] + ln[1:], 8)[same]
        pval = windows.at(pos[:-1][same]) & _MASKS[plen]
        cv = np.concatenate((val, pval))
        cl = np.concatenate((ln, plen))
        # Distinct (value, length) pairs in (value, length) order with their counts: a lexsort and
        # run boundaries (what np.unique(axis=0) computes, without its slow row-wise sort).
        order = np.lexsort((cl, cv))
        sv, sl = cv[order], cl[order]
        starts = np.flatnonzero(np.concatenate(([True], (sv[1:] != sv[:-1]) | (sl[1:] != sl[:-1]))))
        counts = np.diff(np.append(starts, len(sv)))
        uv, ul = sv[starts], sl[starts].astype(np.int64)
        gain = counts * ul
        # Single bytes are worth less than their count suggests only if they are escapes; keep all.
        best = np.argsort(-gain, kind="stable")[:255]
        table = _Table(uv[best], ul[best])
    return table


def _serialize(table: _Table) -> bytes:
    n = len(table.vals)
    head = _MAGIC | (1 << 24) | n
    out = np.zeros(TABLE_SIZE, dtype=np.uint8)
    out[:8] = np.frombuffer(np.array([head], dtype="<u8").tobytes(), dtype=np.uint8)
    out[8 : 8 + 8 * n] = np.frombuffer(table.vals.astype("<u8").tobytes(), dtype=np.uint8)
    out[8 + 8 * n : 8 + 9 * n] = table.lens.astype(np.uint8)
    return out.tobytes()


def fsst_compress(data: U8, offsets: I64) -> tuple[bytes, I64, U8] | None:
    """Compress strings; None when FSST does not apply or does not pay.

    Parameters
    ----------
    data, offsets:
        The strings (``n + 1`` offsets into ``data``).

    Returns
    -------
    (symbol table, offsets, codes) or None
    """
    total = int(offsets[-1] - offsets[0])
    lens = np.diff(offsets)
    if total < FSST_MIN_BYTES or not len(lens) or int(lens.max()) < FSST_MIN_MAX_LEN:
        return None
    if int(lens.max()) > MAX_FSST_VALUE:
        return None
    table = _train(data, offsets)
    new, out = _compress_kernel(
        np.ascontiguousarray(data, dtype=np.uint8),
        np.ascontiguousarray(offsets, dtype=np.int64),
        *table.lookup(),
    )
    if len(out) + TABLE_SIZE >= total:
        return None
    return _serialize(table), new, out


def warm_up() -> None:
    """Compile (or load) the training and compression kernels for the argument types used."""
    data = np.frombuffer(b"abcabcab", dtype=np.uint8).copy()
    offsets = np.array([0, 3, 8], dtype=np.int64)
    table = _Table(np.array([0x636261], dtype=np.uint64), np.array([3], dtype=np.int64))
    _parse(table, data, offsets)
    warm(_compress_kernel, data, offsets, *table.lookup(), readonly=(0, 1))
