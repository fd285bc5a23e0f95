"""FSST decompression with Lance's symbol-table serialization, a compiled sequential kernel.

The symbol table is one u64 header (``"FSST"`` magic in the high 32 bits; bit 24 = the data really
is compressed; low byte = number of symbols), then 256 little-endian u64 symbols, then 256 symbol
lengths. Code 255 escapes: the next byte is a literal. The kernel expands the codes in one
sequential pass (no GIL held), after a first pass that sizes the output and validates every code.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.core.jit import kernel, warm
from lance_format.encodings.v21._bytes import store_u64

__all__ = ["fsst_decompress", "warm_up"]

_MAGIC = 0x46535354 << 32
_ESC = 255
#: Parsed symbol tables kept, by the serialized table: one per string page in use (~2.3 KiB each,
#: so at most ~2.3 MiB). Tables repeat across the pages of a file only by chance; the bound keeps
#: a scan over many files from growing the map.
_MAX_TABLES = 1024
_TABLES: dict[bytes, tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]] = {}

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]


def fsst_decompress(symbol_table: bytes, offsets: I64, data: U8) -> tuple[I64, U8]:
    """Decompress FSST-coded strings.

    Parameters
    ----------
    symbol_table:
        Lance's serialized table.
    offsets:
        ``n + 1`` offsets of the compressed strings into ``data``.
    data:
        The compressed bytes.

    Returns
    -------
    (offsets, data)
        ``n + 1`` offsets (from 0) and the decompressed bytes.

    Raises
    ------
    ValueError
        The table or the codes are malformed.
    """
    if len(symbol_table) < 8:
        raise ValueError("FSST symbol table is too short")
    info = int.from_bytes(symbol_table[:8], "little")
    if info & _MAGIC != _MAGIC:
        raise ValueError("FSST symbol table has no magic")
    offsets = np.asarray(offsets, dtype=np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    codes = data[lo:hi]
    if not info & (1 << 24):
        # Stored uncompressed: the "codes" are the bytes.
        return offsets - lo, codes
    sym, tlen = _tables(symbol_table, info)
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    rel = offsets - lo
    new, out, regular = _decode_strings(codes, rel, sym, tlen)
    if regular:
        return new, out
    # Offsets out of order, or an escape whose literal lies in the next string: the sequential
    # kernel defines what those decode to (or raises).
    return _decode(codes, rel, sym, tlen)


def _tables(symbol_table: bytes, info: int) -> tuple[U8, U8]:
    """The kernels' symbol and length tables of ``symbol_table``, parsed once per table: a
    one-row take decodes a single short string, and building the tables cost it more than that."""
    known = _TABLES.get(symbol_table)
    if known is not None:
        return known
    nsym = info & 0xFF
    if len(symbol_table) < 8 + 9 * nsym:
        raise ValueError("FSST symbol table is truncated")
    # n symbols of 8 bytes, then their n lengths (the rest of the table is padding); codes past
    # the symbols have length 0 (invalid).
    sym = np.zeros(256 * 8, dtype=np.uint8)
    sym[: 8 * nsym] = np.frombuffer(symbol_table, dtype=np.uint8, count=8 * nsym, offset=8)
    tlen = np.zeros(256, dtype=np.uint8)
    tlen[:nsym] = np.frombuffer(symbol_table, dtype=np.uint8, count=nsym, offset=8 + nsym * 8)
    if int(tlen[:nsym].max(initial=0)) > 8:
        raise ValueError("FSST symbol longer than 8 bytes")
    # Shared between calls and threads: the kernels only read them (left writeable: the
    # compiled signatures are those of writeable tables).
    if len(_TABLES) >= _MAX_TABLES:
        _TABLES.clear()  # rare (more string pages in use than the bound): start over
    _TABLES[bytes(symbol_table)] = (sym, tlen)
    return sym, tlen


@kernel
def _decode_strings(codes: U8, offs: I64, sym: U8, tlen: U8) -> tuple[I64, U8, bool]:  # pragma: no cover
    """Expand codes string by string; ``(offsets, bytes, True)``, or ``(_, _, False)`` when the
    offsets are not ascending within ``codes`` or an escape's literal crosses into the next string.

    A first pass sizes every string and validates its codes; the second stores each symbol as one
    unaligned eight-byte word (no branch on the symbol length; byte-wise stores of the same word
    took 1.6x as long) and advances by its length: later writes overwrite the padding, and eight
    spare bytes take the last one's.
    """
    m = offs.shape[0] - 1
    n = codes.shape[0]
    new = np.empty(m + 1, dtype=np.int64)
    new[0] = 0
    total = 0
    bad = False
    if m < 0 or offs[0] < 0 or offs[m] > n:
        return new, np.empty(0, dtype=np.uint8), False
    prev = offs[0]
    for s in range(m):
        e = offs[s + 1]
        if e < prev:
            return new, np.empty(0, dtype=np.uint8), False
        i = prev
        while i < e:
            c = codes[i]
            if c == _ESC:
                total += 1
                i += 2
            else:
                ln = tlen[c]
                bad |= ln == 0
                total += ln
                i += 1
        if i != e:
            return new, np.empty(0, dtype=np.uint8), False
        new[s + 1] = total
        prev = e
    if bad:
        raise ValueError("FSST code without a symbol")
    words = np.empty(256, dtype=np.uint64)
    lens = np.empty(256, dtype=np.int64)
    for c in range(256):
        w = np.uint64(0)
        for j in range(8):
            w |= np.uint64(sym[c * 8 + j]) << np.uint64(8 * j)
        words[c] = w
        lens[c] = tlen[c]
    out = np.empty(total + 8, dtype=np.uint8)
    cur = 0
    i = offs[0]
    end = offs[m]
    while i < end:
        c = codes[i]
        if c == _ESC:
            out[cur] = codes[i + 1]
            cur += 1
            i += 2
        else:
            store_u64(out, cur, words[c])  # type: ignore[call-arg]  # typingctx is numba's
            cur += lens[c]
            i += 1
    return new, out[:total], True


@kernel
def _decode(codes: U8, offs: I64, sym: U8, tlen: U8) -> tuple[I64, U8]:  # pragma: no cover - compiled
    """Expand codes sequentially (255 escapes the next byte); output offsets at each input offset."""
    n = codes.shape[0]
    total = 0
    bad = False
    i = 0
    while i < n:
        c = codes[i]
        if c == _ESC:
            if i + 1 >= n:
                raise ValueError("FSST data ends with an escape")
            total += 1
            i += 2
        else:
            ln = tlen[c]
            bad |= ln == 0
            total += ln
            i += 1
    if bad:
        raise ValueError("FSST code without a symbol")
    out = np.empty(total, dtype=np.uint8)
    m = offs.shape[0]
    new = np.empty(m, dtype=np.int64)
    k = 0
    cur = 0
    i = 0
    while i < n:
        while k < m and offs[k] <= i:
            new[k] = cur
            k += 1
        c = codes[i]
        if c == _ESC:
            # An offset pointing at the literal maps to where the literal lands.
            while k < m and offs[k] <= i + 1:
                new[k] = cur
                k += 1
            out[cur] = codes[i + 1]
            cur += 1
            i += 2
        else:
            ln = tlen[c]
            base = np.int64(c) * 8
            for j in range(ln):
                out[cur + j] = sym[base + j]
            cur += ln
            i += 1
    while k < m:
        new[k] = cur
        k += 1
    return new, out


def warm_up() -> None:
    """Compile (or load) the decode kernel for every argument type the readers pass."""
    tlen = np.zeros(256, dtype=np.uint8)
    tlen[0] = 1
    codes = np.array([0, _ESC, 7], dtype=np.uint8)
    for fn in (_decode_strings, _decode):
        warm(fn, codes, np.array([0, 3], dtype=np.int64), np.zeros(256 * 8, np.uint8), tlen, readonly=(0,))
