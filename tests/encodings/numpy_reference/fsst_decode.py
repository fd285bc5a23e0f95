"""Test oracle, the numpy code before the compiled kernels.

FSST decompression with Lance's symbol-table serialization, vectorized with numpy.

The symbol table is one u64 header (``"FSST"`` magic in the high 32 bits; bit 24 = the data really
is compressed; low byte = number of symbols), then 256 little-endian u64 symbols, then 256 symbol
lengths. Code 255 escapes: the next byte is a literal. A byte is an escape when it is 255 and the
run of 255s it belongs to has an even number of bytes before it (an escape is always followed by
its literal, so runs pair up) - which lets every string be expanded at once.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["fsst_decompress"]

_MAGIC = 0x46535354 << 32
_ESC = 255

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
    nsym = info & 0xFF
    if len(symbol_table) < 8 + 9 * nsym:
        raise ValueError("FSST symbol table is truncated")
    # n symbols of 8 bytes, then their n lengths (the rest of the table is padding). Entries
    # 0..255 are the symbols (zero-padded u64), 256 + b is the literal byte b.
    sym = np.zeros(512, dtype=np.uint64)
    sym[:nsym] = np.frombuffer(symbol_table, dtype="<u8", count=nsym, offset=8)
    sym[256:] = np.arange(256, dtype=np.uint64)
    tlen = np.ones(512, dtype=np.uint8)
    tlen[:256] = 0
    tlen[:nsym] = np.frombuffer(symbol_table, dtype=np.uint8, count=nsym, offset=8 + nsym * 8)
    if int(tlen[:nsym].max(initial=0)) > 8:
        raise ValueError("FSST symbol longer than 8 bytes")
    n = len(codes)
    is_ff = codes == _ESC
    if is_ff.any():
        # Position of every byte within its run of 255s decides escape (even) or literal (odd).
        idx = np.arange(n, dtype=np.int64)
        run_start = np.where(is_ff, 0, idx + 1)
        np.maximum.accumulate(run_start, out=run_start)
        escape = is_ff & (((idx - run_start) & 1) == 0)
        if escape[-1]:
            raise ValueError("FSST data ends with an escape")
        entry: npt.NDArray[np.integer] = codes.astype(np.int16)
        entry[1:] += escape[:-1].astype(np.int16) << 8
        out_len = np.take(tlen, entry)
        out_len[escape] = 0
        if bool(((out_len == 0) & ~escape).any()):
            raise ValueError("FSST code without a symbol")
    else:
        entry = codes
        out_len = np.take(tlen, entry)
        if not bool(out_len.all()):
            raise ValueError("FSST code without a symbol")
    # Output offsets: per input string, the sum of its codes' output lengths.
    csum = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(out_len, out=csum[1:])
    total = int(csum[-1])
    buf = np.zeros(total + 8, dtype=np.uint8)
    # Every code stores its whole 8-byte symbol at its output position through an unaligned,
    # overlapping u64 view of the output. The assignment writes in code order, so each code overwrites
    # the padding its predecessor left (an escape writes nothing useful and its literal, at the
    # same position, overwrites it). Eight spare bytes take the last code's padding.
    view = np.ndarray((total + 1,), dtype="<u8", buffer=buf, strides=(1,))
    view[csum[:-1]] = sym[entry]
    return csum[offsets - lo], buf[:total]
