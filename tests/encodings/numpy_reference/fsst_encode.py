"""Test oracle, the numpy code before the compiled kernels.

FSST compression with Lance's symbol-table serialization (inverse of ``v21._fsst``).

Training follows the FSST idea in a vectorized form: parse a sample with the current table, count
how much each used symbol and each pair of adjacent symbols (glued, at most 8 bytes) would save,
keep the best 255, repeat a few generations. Compression parses every string greedily (longest
symbol first) in lock-step: one numpy pass per output code position, across all strings at once.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["FSST_MIN_BYTES", "assert_same_compression", "fsst_compress"]

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


#: Symbols of 3..8 bytes are found through a 2^16-slot table per length, addressed by a
#: multiplicative hash of the symbol; up to this many multipliers are tried for one without
#: collisions (255 symbols in 65536 slots: ~60% of multipliers work), else binary search is used.
_HASH_BITS = 16
_HASH_TRIES = 16
_HASH_SHIFT = np.uint64(64 - _HASH_BITS)
#: Multipliers: 2^64 / golden ratio plus even multiples of a second constant (so always odd).
_GOLDEN = 0x9E3779B97F4A7C15
_STEP = 0x632BE59BD9B4E019


class _Table:
    """Symbols with their lengths, and per length an exact lookup from a masked window to a code:
    direct tables for 1 and 2 bytes, collision-free hashes (or sorted keys) for longer symbols."""

    def __init__(self, vals: U64, lens: I64) -> None:
        self.vals = vals
        self.lens = lens
        # length -> ("direct"|"hash"|"sorted", table or keys, multiplier or codes)
        self.lookup: dict[int, tuple[str, npt.NDArray[np.int16] | U64, U64 | I64 | None]] = {}
        for k in range(1, 9):
            sel = np.flatnonzero(lens == k)
            if not len(sel):
                continue
            keys = vals[sel]
            if k <= 2:
                direct = np.full(1 << (8 * k), -1, dtype=np.int16)
                direct[keys.astype(np.intp)] = sel
                self.lookup[k] = ("direct", direct, None)
                continue
            for attempt in range(_HASH_TRIES):
                mult = np.array([(_GOLDEN + 2 * attempt * _STEP) % (1 << 64)], dtype=np.uint64)  # odd
                slots = (keys * mult) >> _HASH_SHIFT
                if len(np.unique(slots)) == len(slots):
                    hashed = np.full(1 << _HASH_BITS, -1, dtype=np.int16)
                    hashed[slots.astype(np.intp)] = sel
                    self.lookup[k] = ("hash", hashed, mult)
                    break
            else:
                order = np.argsort(keys, kind="stable")
                self.lookup[k] = ("sorted", keys[order], sel[order])

    def codes(self, k: int, w: U64) -> I64:
        """Code of the length-``k`` symbol equal to each masked window ``w``, or -1."""
        kind, table, extra = self.lookup[k]
        if kind == "sorted":
            codes = extra
            assert codes is not None
            at = np.minimum(np.searchsorted(table, w), len(table) - 1)
            return np.where(table[at] == w, codes[at], -1)
        if kind == "direct":
            c = table[w.astype(np.intp)].astype(np.int64)
        else:
            assert extra is not None
            c = table[((w * extra) >> _HASH_SHIFT).astype(np.intp)].astype(np.int64)
        # A hash slot holds one symbol: check it is this window's.
        return np.where((c >= 0) & (self.vals[np.maximum(c, 0)] == w), c, -1)


class _Windows:
    """Every 8-byte window of ``data`` (zero past the end) as a little-endian u64: an overlapping,
    unaligned view with a stride of one byte, so a gather at any positions is one numpy take."""

    def __init__(self, data: U8) -> None:
        self._pad = np.concatenate((data, np.zeros(8, dtype=np.uint8)))
        self.view = np.ndarray((len(data) + 1,), dtype="<u8", buffer=self._pad, strides=(1,))

    def at(self, pos: I64) -> U64:
        return self.view[pos]


def _match(table: _Table, word: U64, remaining: I64) -> tuple[I64, I64]:
    """Longest symbol at each position: (code or -1 for an escape, bytes consumed)."""
    code = np.full(len(word), -1, dtype=np.int64)
    length = np.ones(len(word), dtype=np.int64)
    # Shortest first: a longer match found later overrides a shorter one.
    for k in range(1, 9):
        if k not in table.lookup:
            continue
        found = table.codes(k, word & _MASKS[k])
        hit = (found >= 0) & (remaining >= k)
        code = np.where(hit, found, code)
        length = np.where(hit, k, length)
    return code, length


def _parse(table: _Table, data: U8, offsets: I64) -> tuple[I64, I64, I64, I64]:
    """Greedy parse of every string: per code, its string, its code (-1 = escape), its start and
    length, in string order."""
    starts = offsets[:-1].copy()
    ends = offsets[1:]
    active = np.flatnonzero(ends > starts)
    cur = starts[active]
    strs, codes, poss, lens = [], [], [], []
    windows = _Windows(data)
    while len(active):
        word = windows.at(cur)
        code, length = _match(table, word, ends[active] - cur)
        strs.append(active)
        codes.append(code)
        poss.append(cur)
        lens.append(length)
        cur = cur + length
        keep = cur < ends[active]
        active, cur = active[keep], cur[keep]
    if not strs:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    s = np.concatenate(strs)
    order = np.argsort(s, kind="stable")
    return s[order], np.concatenate(codes)[order], np.concatenate(poss)[order], np.concatenate(lens)[order]


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
        key = np.stack((cv, cl.astype(np.uint64)), axis=1)
        uniq, counts = np.unique(key, axis=0, return_counts=True)
        gain = counts * uniq[:, 1].astype(np.int64)
        # Single bytes are worth less than their count suggests only if they are escapes; keep all.
        best = np.argsort(-gain, kind="stable")[:255]
        table = _Table(uniq[best, 0].astype(np.uint64), uniq[best, 1].astype(np.int64))
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
    s, code, pos, _ln = _parse(table, data, offsets)
    esc = code < 0
    nbytes = np.where(esc, 2, 1)
    out_pos = np.cumsum(nbytes) - nbytes
    out = np.empty(int(nbytes.sum()), dtype=np.uint8)
    out[out_pos] = np.where(esc, _ESC, code).astype(np.uint8)
    out[out_pos[esc] + 1] = data[pos[esc]]
    per = np.bincount(s, weights=nbytes, minlength=len(lens)).astype(np.int64)
    new = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(per, out=new[1:])
    if len(out) + TABLE_SIZE >= total:
        return None
    return _serialize(table), new, out


def assert_same_compression(got: tuple[bytes, I64, U8] | None, data: U8, offsets: I64) -> None:
    """Assert a compressor's ``got`` is this reference's result for the strings: the same symbol
    table, offsets and codes, or None where the reference declines."""
    want = fsst_compress(data, offsets)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert got[0] == want[0]
    assert np.array_equal(got[1], want[1])
    assert got[2].tobytes() == want[2].tobytes()
