"""Compiled decode kernels for mini-block chunks: one pass where numpy needs a dozen.

Variable-width mini-block chunks hold ``n + 1`` offsets (relative to the chunk) followed by the
value bytes. numpy decodes a batch of them with a per-offset index, a gather, a diff, a mask, a
cumsum and a byte gather, each a full pass over temporaries; :func:`variable_chunks` reads each
chunk's offsets, checks them and copies its bytes in one compiled loop that holds no GIL, so the
pages of a scan decode on every core.

A dictionary-encoded string page decodes to indices; :func:`dictionary_take` turns them into the
strings' offsets and bytes in two compiled passes (sizes, then bytes), straight into the buffers
of the Arrow array: no int64 copy of the indices, no index array for Arrow's take.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.core.buffers import empty, empty_bytes
from lance_format.core.jit import kernel, warm
from lance_format.encodings.v21._bytes import Bufs, store_u64

__all__ = ["dictionary_take", "variable_chunks", "warm_up"]

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]


def variable_chunks(bufs: Bufs, offset_bits: int, counts: I64) -> tuple[I64, U8]:
    """Values of a batch of variable-width chunks, concatenated.

    Parameters
    ----------
    bufs:
        One value buffer per chunk: ``counts[k] + 1`` little-endian offsets of ``offset_bits``
        bits, relative to the buffer, then the bytes they point into.
    offset_bits:
        32 or 64.
    counts:
        Values in each chunk.

    Returns
    -------
    (offsets, data)
        ``sum(counts) + 1`` offsets (from 0) into ``data``, the values' bytes.

    Raises
    ------
    ValueError
        A bad offset width, offsets out of order or past their buffer, or a buffer outside the
        data read.
    """
    if offset_bits not in (32, 64):
        raise ValueError(f"bad offset width {offset_bits}")
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    if len(counts) != len(bufs.starts):
        raise ValueError("one count per chunk is needed")
    return _variable_chunks(
        np.ascontiguousarray(bufs.blob),
        np.ascontiguousarray(bufs.starts, dtype=np.int64),
        np.ascontiguousarray(bufs.sizes, dtype=np.int64),
        counts,
        offset_bits // 8,
    )


@kernel
def _read_le(blob: U8, pos: int, width: int) -> np.int64:  # pragma: no cover - compiled
    # The common widths spelled out: a loop over a run-time width kept every offset of a string
    # column (a million per scan) at ~80 ns; these compile to one load each.
    if width == 4:
        return np.int64(
            np.uint32(blob[pos])
            | (np.uint32(blob[pos + 1]) << np.uint32(8))
            | (np.uint32(blob[pos + 2]) << np.uint32(16))
            | (np.uint32(blob[pos + 3]) << np.uint32(24))
        )
    if width == 2:
        return np.int64(np.uint16(blob[pos]) | (np.uint16(blob[pos + 1]) << np.uint16(8)))
    v = np.uint64(0)
    for j in range(width):
        v |= np.uint64(blob[pos + j]) << np.uint64(8 * j)
    # Offsets past 2**63 are garbage; fold them to -1 so the range checks reject them.
    return np.int64(v) if v < np.uint64(1) << np.uint64(63) else np.int64(-1)


@kernel
def _variable_chunks(
    blob: U8, starts: I64, sizes: I64, counts: I64, ob: int
) -> tuple[I64, U8]:  # pragma: no cover - compiled
    k = starts.shape[0]
    total_values = 0
    for c in range(k):
        if counts[c] < 0:
            raise ValueError("negative value count")
        total_values += counts[c]
    offsets = np.empty(total_values + 1, dtype=np.int64)
    offsets[0] = 0
    first = np.empty(k, dtype=np.int64)
    nbytes = np.empty(k, dtype=np.int64)
    nblob = blob.shape[0]
    total = 0
    pos = 0
    for c in range(k):
        s = starts[c]
        cnt = counts[c]
        if s < 0 or s + (cnt + 1) * ob > nblob:
            raise ValueError("integer read outside the data read")
        lo = _read_le(blob, s, ob)
        if lo < 0:
            raise ValueError("variable-width offsets out of order")
        # Output offset = this chunk's base + the stored offset; order is checked once per chunk
        # (a flag, not a branch per value, so the loop stays a straight load-add-store).
        base = total - lo
        prev = lo
        bad = 0
        for j in range(1, cnt + 1):
            v = _read_le(blob, s + j * ob, ob)
            bad |= int(v < prev)
            offsets[pos + j] = base + v
            prev = v
        if bad:
            raise ValueError("variable-width offsets out of order")
        pos += cnt
        total += int(prev - lo)
        if prev > sizes[c]:
            raise ValueError("variable-width offsets out of order")
        if s + prev > nblob:
            raise ValueError("byte range outside the data read")
        first[c] = s + lo
        nbytes[c] = prev - lo
    data = np.empty(total, dtype=np.uint8)
    out = 0
    for c in range(k):
        n = nbytes[c]
        if n > 0:
            data[out : out + n] = blob[first[c] : first[c] + n]
            out += n
    return offsets, data


#: Largest byte offset of a string array with 32-bit offsets.
_I32_MAX = 2**31 - 1
_I64_MAX = 2**63 - 1


def dictionary_take(
    indices: npt.NDArray[np.unsignedinteger[Any]], offsets: I64, data: U8, large: bool
) -> tuple[npt.NDArray[Any], U8]:
    """The variable-width dictionary entries ``indices`` point at, as Arrow string buffers.

    Parameters
    ----------
    indices:
        Unsigned dictionary indices; one past the last entry or more (slots of null rows, which
        may hold anything) read the last entry, as the validity masks them anyway.
    offsets, data:
        The dictionary: ``len(offsets) - 1`` entries, entry ``k`` is ``data[offsets[k]:offsets[k + 1]]``.
    large:
        64-bit output offsets (``large_string``/``large_binary``), else 32-bit.

    Returns
    -------
    (offsets, data)
        ``len(indices) + 1`` offsets from 0 and the bytes of the selected entries.

    Raises
    ------
    ValueError
        An empty dictionary, dictionary offsets out of order or past its bytes, or more bytes than
        32-bit offsets address.
    """
    if len(offsets) < 2:
        raise ValueError("an empty dictionary has no entry to take")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if indices.dtype != np.uint32:
        # 32-bit indices are what writers emit; others are widened or clamped to them first.
        indices = np.minimum(indices, len(offsets) - 2).astype(np.uint32)
    if not indices.flags.writeable or not indices.flags.c_contiguous:
        indices = indices.copy()  # one specialization per array type: keep the kernel to one
    out = empty(len(indices) + 1, np.int64 if large else np.int32)
    # Two passes, so the bytes land in a buffer sized and pooled here (core.buffers), not one the
    # kernel allocates: a fresh allocation per page faulted in every one of its pages.
    total = _dictionary_sizes(indices, offsets, len(data), out, _I64_MAX if large else _I32_MAX)
    got = empty_bytes(total + 8)  # the last row's word store may run 7 bytes past its end
    _dictionary_fill(indices, offsets, np.ascontiguousarray(data), out, got)
    return out, got[:total]


@kernel
def _dictionary_sizes(
    indices: npt.NDArray[np.uint32], offsets: I64, ndata: int, out: npt.NDArray[Any], limit: int
) -> int:  # pragma: no cover - compiled
    """Check the dictionary, write the output offsets; the total bytes."""
    nd = offsets.shape[0] - 1
    if offsets[0] < 0 or offsets[nd] > ndata:
        raise ValueError("dictionary offsets outside its data")
    for k in range(nd):
        if offsets[k + 1] < offsets[k]:
            raise ValueError("dictionary offsets out of order")
    n = indices.shape[0]
    last = np.uint32(nd - 1)
    total = 0
    out[0] = 0
    for i in range(n):
        k = min(indices[i], last)
        total += offsets[k + 1] - offsets[k]
        if total > limit:
            raise ValueError("dictionary values too large for 32-bit offsets")
        out[i + 1] = total
    return total


@kernel
def _dictionary_fill(
    indices: npt.NDArray[np.uint32], offsets: I64, data: U8, out: npt.NDArray[Any], got: U8
) -> None:  # pragma: no cover - compiled
    """The bytes of the entries ``indices`` select, at the offsets ``out`` holds (``got`` has 8
    bytes of slack past the last)."""
    nd = offsets.shape[0] - 1
    n = indices.shape[0]
    last = np.uint32(nd - 1)
    if offsets[nd] - offsets[0] > 8 * n:
        for i in range(n):
            k = min(indices[i], last)
            s = offsets[k]
            o = out[i]
            for j in range(offsets[k + 1] - s):
                got[o + j] = data[s + j]
        return
    # Each entry as whole 8-byte words (zero-padded), stored unaligned and overlapped by the next
    # row's: a few stores per row instead of a byte loop. Worth it when the dictionary is small
    # next to the rows (its words are built once per call).
    first = np.empty(nd + 1, dtype=np.int64)
    first[0] = 0
    for k in range(nd):
        first[k + 1] = first[k] + (offsets[k + 1] - offsets[k] + 7) // 8
    words = np.zeros(first[nd], dtype=np.uint64)
    for k in range(nd):
        s = offsets[k]
        for j in range(offsets[k + 1] - s):
            w = first[k] + j // 8
            words[w] |= np.uint64(data[s + j]) << np.uint64(8 * (j % 8))
    for i in range(n):
        k = min(indices[i], last)
        o = out[i]
        for w in range(first[k], first[k + 1]):
            store_u64(got, o, words[w])  # type: ignore[call-arg]  # typingctx is numba's
            o += 8


def warm_up() -> None:
    """Compile (or load) the kernels for writable and read-only blobs."""
    blob = np.array([0, 0, 0, 0, 1, 0, 0, 0, 7], dtype=np.uint8)
    one = np.zeros(1, dtype=np.int64)
    warm(_variable_chunks, blob, one, np.array([9], np.int64), np.array([1], np.int64), 4, readonly=(0,))
    for large in (False, True):
        warm(
            dictionary_take,
            np.array([1, 0, 5], np.uint32),
            np.array([0, 2, 3], np.int64),
            np.array([97, 98, 99], np.uint8),
            large,
            readonly=(1, 2),
        )
