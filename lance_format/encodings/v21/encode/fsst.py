"""FSST compression with Lance's symbol-table serialization (inverse of ``v21._fsst``).

Training follows the FSST idea in a vectorized form: parse a sample with the current table, count
how much each used symbol and each pair of adjacent symbols (glued, at most 8 bytes) would save,
keep the best 255, repeat a few generations. Compression parses every string greedily (longest
symbol first) in a compiled kernel that releases the GIL.
"""

from __future__ import annotations

from functools import partial
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from lance_format.core.concurrency import LazyPool
from lance_format.core.jit import kernel
from lance_format.encodings.v21.encode._split import run_split, split_rows, windows
from lance_format.encodings.v21.encode.values import longest_value

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


#: Symbols of 3..8 bytes: the first three bytes at a position pick one of this many buckets (a
#: hash, FSST's scheme), which says which symbol lengths start there; each of those lengths, longest
#: first, is one probe of an exact open-addressing table keyed by (bytes, length). Usually one or two
#: probes per code. Symbols of 1 and 2 bytes are looked up directly.
_BUCKET_BITS = 12
_BUCKET_MULT = np.uint64(0x9E3779B1)
#: Exact table: 2048 slots for at most 253 long symbols keep probe chains about one slot long.
_EXACT_BITS = 11
_EXACT_MULT = np.uint64(0x9E3779B97F4A7C15)

I16 = npt.NDArray[np.int16]
U16 = npt.NDArray[np.uint16]
Lookup = tuple[U16, U64, I64, I16, I16, U8, I16]


class _Table:
    """Symbols (zero-padded little-endian u64) with their lengths, and the kernel's lookup arrays:
    per bucket a bit mask of the lengths of the 3+ byte symbols in it; the exact table (symbol,
    length (0 = empty slot), code); per two bytes the code of the longest symbol they start (2 or 1
    bytes, -1 = escape) and its length; per byte its 1-byte code."""

    def __init__(self, vals: U64, lens: I64) -> None:
        self.vals = np.ascontiguousarray(vals, dtype=np.uint64)
        self.lens = np.ascontiguousarray(lens, dtype=np.int64)
        self._lookup: Lookup = _lookup_tables(self.vals, self.lens)

    def lookup(self) -> Lookup:
        return self._lookup


@kernel
def _lookup_tables(vals: U64, lens: I64) -> Lookup:  # pragma: no cover - compiled
    """The lookup arrays of :class:`_Table` (one compiled pass: the table is rebuilt every
    training generation)."""
    lenmask = np.zeros(1 << _BUCKET_BITS, dtype=np.uint16)
    xval = np.zeros(1 << _EXACT_BITS, dtype=np.uint64)
    xlen = np.zeros(1 << _EXACT_BITS, dtype=np.int64)
    xcode = np.full(1 << _EXACT_BITS, -1, dtype=np.int16)
    code1 = np.full(256, -1, dtype=np.int16)
    xmask = np.uint64((1 << _EXACT_BITS) - 1)
    for c in range(vals.shape[0]):
        k = lens[c]
        v = vals[c]
        if k == 1:
            code1[v & np.uint64(0xFF)] = c
        elif k >= 3:
            b = ((v & np.uint64(0xFFFFFF)) * _BUCKET_MULT & np.uint64(0xFFFFFFFF)) >> np.uint64(
                32 - _BUCKET_BITS
            )
            lenmask[b] |= np.uint16(1 << k)
            h = ((v ^ np.uint64(k)) * _EXACT_MULT) >> np.uint64(64 - _EXACT_BITS)
            while xlen[h]:
                h = (h + np.uint64(1)) & xmask
            xval[h] = v
            xlen[h] = k
            xcode[h] = c
    # Two bytes: the 1-byte code of the first byte, unless a 2-byte symbol matches.
    code2 = np.empty(1 << 16, dtype=np.int16)
    for i in range(1 << 16):
        code2[i] = code1[i & 0xFF]
    len2 = np.ones(1 << 16, dtype=np.uint8)
    for c in range(vals.shape[0]):
        if lens[c] == 2:
            t = vals[c] & np.uint64(0xFFFF)
            code2[t] = c
            len2[t] = 2
    return lenmask, xval, xlen, xcode, code2, len2, code1


@kernel
def _code_strings(
    data: U8,
    win: U64,
    offsets: I64,
    lenmask: U16,
    xval: U64,
    xlen: I64,
    xcode: I16,
    code2: I16,
    len2: U8,
    code1: I16,
    record: bool,
) -> tuple[I64, U8, I64]:  # pragma: no cover - compiled
    """Greedy longest-symbol coding of every string: (new offsets, codes with 255 + literal
    escapes, and when ``record``: per code its string, code (-1 = escape), start and length, as
    the rows of a ``(4, codes)`` array).

    One function for compression and the training parse, so both see the same symbols; the lookup
    is written inline (a call per code costs more than the lookup itself). ``win`` is
    :func:`windows` of ``data``: a position with 8 bytes left in the buffer reads them at once."""
    n = offsets.shape[0] - 1
    nwin = win.shape[0]
    cap = 0
    for i in range(n):
        if offsets[i + 1] > offsets[i]:
            cap += offsets[i + 1] - offsets[i]
    out = np.empty(2 * cap, dtype=np.uint8)
    new = np.zeros(n + 1, dtype=np.int64)
    rec = np.empty((4, cap if record else 0), dtype=np.int64)
    xmask = np.uint64((1 << _EXACT_BITS) - 1)
    m = 0
    r = 0
    for i in range(n):
        cur = offsets[i]
        end = offsets[i + 1]
        while cur < end:
            rem = end - cur
            if cur < nwin:
                # Bytes past the string's end are masked off or never compared.
                w = win[cur]
                if rem < 8:
                    w &= (np.uint64(1) << np.uint64(8 * rem)) - np.uint64(1)
            else:
                w = np.uint64(0)
                for j in range(min(rem, 8)):
                    w |= np.uint64(data[cur + j]) << np.uint64(8 * j)
            c = np.int64(-1)
            k = np.int64(0)
            if rem >= 3:
                b = ((w & np.uint64(0xFFFFFF)) * _BUCKET_MULT & np.uint64(0xFFFFFFFF)) >> np.uint64(
                    32 - _BUCKET_BITS
                )
                present = np.int64(lenmask[b])
                kk = min(8, rem)
                while present and kk >= 3:
                    if (present >> kk) & 1:
                        mw = w if kk == 8 else w & ((np.uint64(1) << np.uint64(8 * kk)) - np.uint64(1))
                        h = ((mw ^ np.uint64(kk)) * _EXACT_MULT) >> np.uint64(64 - _EXACT_BITS)
                        while xlen[h]:
                            if xlen[h] == kk and xval[h] == mw:
                                c = np.int64(xcode[h])
                                k = kk
                                break
                            h = (h + np.uint64(1)) & xmask
                        if k:
                            break
                    kk -= 1
            if k == 0:
                if rem >= 2:
                    two = w & np.uint64(0xFFFF)
                    c = np.int64(code2[two])
                    k = np.int64(len2[two])
                else:
                    c = np.int64(code1[w & np.uint64(0xFF)])
                    k = np.int64(1)
            if record:
                rec[0, r] = i
                rec[1, r] = c
                rec[2, r] = cur
                rec[3, r] = k
                r += 1
            if c < 0:
                out[m] = _ESC
                out[m + 1] = data[cur]
                m += 2
            else:
                out[m] = c
                m += 1
            cur += k
        new[i + 1] = m
    return new, out[:m], rec[:, :r]


#: The 8-byte windows of a buffer (see :func:`windows`).
_windows = windows


def _code(table: _Table, data: U8, offsets: I64, record: bool) -> tuple[I64, U8, I64]:
    data = np.ascontiguousarray(data, dtype=np.uint8)
    offs = np.ascontiguousarray(offsets, dtype=np.int64)
    return _code_strings(data, windows(data), offs, *table.lookup(), record)


def _parse(table: _Table, data: U8, offsets: I64) -> tuple[I64, I64, I64, I64]:
    """Greedy parse of every string: per code, its string, its code (-1 = escape), its start and
    length, in string order."""
    _new, _out, rec = _code(table, data, offsets, True)
    return rec[0], rec[1], rec[2], rec[3]


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
    padded = np.concatenate((sdata, np.zeros(8, dtype=np.uint8)))
    win = windows(padded)
    for _ in range(_GENERATIONS):
        s, _code, pos, ln = _parse(table, sdata, soffs)
        if not len(s):
            break
        uv, ul, counts = _candidates(win, s, pos, ln)
        # Single bytes are worth less than their count suggests only if they are escapes; keep all.
        best = _best(uv, ul, counts * ul, 255)
        table = _Table(uv[best], ul[best])
    return table


@kernel
def _candidates(win: U64, s: I64, pos: I64, ln: I64) -> tuple[U64, I64, I64]:  # pragma: no cover
    """Candidate symbols of a parse: every code's bytes, and every two adjacent codes of a string
    glued (cut to 8 bytes). Returns the distinct (value, length) pairs in first-occurrence order
    and how often each occurs (:func:`_best` orders only the few that matter)."""
    nc = s.shape[0]
    cv = np.empty(2 * nc, dtype=np.uint64)
    cl = np.empty(2 * nc, dtype=np.int64)
    m = 0
    for i in range(nc):
        k = ln[i]
        w = win[pos[i]]
        cv[m] = w if k >= 8 else w & ((np.uint64(1) << np.uint64(8 * k)) - np.uint64(1))
        cl[m] = k
        m += 1
    for i in range(nc - 1):
        if s[i + 1] == s[i]:
            k = min(ln[i] + ln[i + 1], 8)
            w = win[pos[i]]
            cv[m] = w if k >= 8 else w & ((np.uint64(1) << np.uint64(8 * k)) - np.uint64(1))
            cl[m] = k
            m += 1
    # Count the distinct (value, length) pairs in a hash table.
    slots = 16
    while slots < 2 * m:
        slots *= 2
    smask = np.uint64(slots - 1)
    table = np.full(slots, -1, dtype=np.int64)
    uv = np.empty(m, dtype=np.uint64)
    ul = np.empty(m, dtype=np.int64)
    cnt = np.zeros(m, dtype=np.int64)
    u = 0
    for i in range(m):
        v = cv[i]
        k = cl[i]
        h = ((v ^ np.uint64(k)) * _EXACT_MULT) >> np.uint64(32) & smask
        while True:
            e = table[h]
            if e < 0:
                table[h] = u
                uv[u] = v
                ul[u] = k
                cnt[u] = 1
                u += 1
                break
            if uv[e] == v and ul[e] == k:
                cnt[e] += 1
                break
            h = (h + np.uint64(1)) & smask
    return uv[:u], ul[:u], cnt[:u]


@kernel
def _best(uv: U64, ul: I64, gain: I64, k: int) -> I64:  # pragma: no cover - compiled
    """The ``k`` candidates of most gain, most first, ties in (value, length) order: the first
    ``k`` of all candidates in that order, while sorting only those that can be among them."""
    u = uv.shape[0]
    if u > k:
        thr = np.partition(gain, u - k)[u - k]
        sel = np.flatnonzero(gain >= thr)
    else:
        sel = np.arange(u)
    order = sel[np.argsort(uv[sel], kind="mergesort")]
    # Equal values of different lengths (rare): by length.
    for i in range(1, order.shape[0]):
        x = order[i]
        j = i - 1
        while j >= 0 and uv[order[j]] == uv[x] and ul[order[j]] > ul[x]:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = x
    order = order[np.argsort(-gain[order], kind="mergesort")]
    return order[:k]


def _serialize(table: _Table) -> bytes:
    n = len(table.vals)
    head = _MAGIC | (1 << 24) | n
    out = np.zeros(TABLE_SIZE, dtype=np.uint8)
    out[:8] = np.frombuffer(np.array([head], dtype="<u8").tobytes(), dtype=np.uint8)
    out[8 : 8 + 8 * n] = np.frombuffer(table.vals.astype("<u8").tobytes(), dtype=np.uint8)
    out[8 + 8 * n : 8 + 9 * n] = table.lens.astype(np.uint8)
    return out.tobytes()


def fsst_compress(data: U8, offsets: I64, split: LazyPool | None = None) -> tuple[bytes, I64, U8] | None:
    """Compress strings; None when FSST does not apply or does not pay.

    Parameters
    ----------
    data, offsets:
        The strings (``n + 1`` offsets into ``data``).
    split:
        The writing session's split pool: a large page codes in ranges on it (same bytes).

    Returns
    -------
    (symbol table, offsets, codes) or None
    """
    total = int(offsets[-1] - offsets[0])
    longest = longest_value(offsets)
    if total < FSST_MIN_BYTES or not FSST_MIN_MAX_LEN <= longest <= MAX_FSST_VALUE:
        return None
    table = _train(data, offsets)
    new, out = _code_split(table, data, offsets, split)
    if len(out) + TABLE_SIZE >= total:
        return None
    return _serialize(table), new, out


def _code_split(table: _Table, data: U8, offsets: I64, split: LazyPool | None) -> tuple[I64, U8]:
    """Compression of every string, ranges of a large page on threads side by side (each string
    codes on its own, so the joined ranges are the bytes of one pass)."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    offs = np.ascontiguousarray(offsets, dtype=np.int64)
    bounds = split_rows(offs, split)
    if len(bounds) == 2:
        new, out, _ = _code(table, data, offs, False)
        return new, out
    win = windows(data)
    look = table.lookup()
    parts = run_split(
        [partial(_code_strings, data, win, offs[a : b + 1], *look, False) for a, b in pairwise(bounds)],
        split,
    )
    out = np.concatenate([p[1] for p in parts])
    new = np.empty(len(offs), dtype=np.int64)
    new[0] = 0
    base = 0
    for (a, b), (pn, po, _) in zip(pairwise(bounds), parts, strict=True):
        new[a + 1 : b + 1] = pn[1:] + base
        base += len(po)
    return new, out


def warm_up() -> None:
    """Compile (or load) the coding kernel for the argument types used (strings read from Arrow
    buffers are read-only arrays)."""
    data = np.frombuffer(b"abcabcab", dtype=np.uint8).copy()
    offsets = np.array([0, 3, 8], dtype=np.int64)
    table = _Table(np.array([0x636261, 0x61, 0x6362], dtype=np.uint64), np.array([3, 1, 2], dtype=np.int64))
    # Offsets are always the writer's own arrays and training codes a copied sample: only the
    # compressed bytes (and so their windows) may be a read-only Arrow buffer.
    # Data of one 8-byte window has a contiguous window view, longer data a strided one: numba
    # compiles each layout apart, so warm both.
    longer = np.frombuffer(b"abcabcababcabcab", dtype=np.uint8)
    for d0, offs in ((data, offsets), (longer, np.array([0, 3, 8, 16], dtype=np.int64))):
        for ro in (False, True):
            d = d0.copy()
            d.setflags(write=not ro)
            _code(table, d, offs, False)
    _code(table, data, offsets, True)
    _train(data, offsets)  # the training kernels: candidates, their selection, lookup tables
