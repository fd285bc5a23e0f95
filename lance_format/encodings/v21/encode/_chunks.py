"""Compiled kernels that cut a mini-block page into chunks and lay the chunks out.

Every per-chunk stream (repetition levels, definition levels, each value buffer) is one flat array
with ``nchunks + 1`` offsets (chunk ``c`` owns ``flat[offs[c]:offs[c + 1]]``), so a whole page is
cut, bit-packed and assembled in a few passes without a Python step per chunk.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.core.jit import kernel, warm
from lance_format.encodings.v21.fastlanes import FL_BLOCK, fastlanes_order

__all__ = [
    "Stream",
    "assemble_chunks",
    "bitpack_chunks",
    "bitpack_page",
    "copy_bytes",
    "flat_page",
    "pack_level_chunks",
    "variable_chunks",
    "warm_up",
]

U8 = npt.NDArray[np.uint8]
U16 = npt.NDArray[np.uint16]
I64 = npt.NDArray[np.int64]
UInts = npt.NDArray[np.unsignedinteger[Any]]
#: One stream: flat bytes and ``nchunks + 1`` byte offsets.
Stream = tuple[U8, I64]

#: Padding byte between buffers of a chunk (what pylance writes).
PAD = 0xFE


@kernel
def copy_bytes(dst: U8, d: int, src: U8, s: int, n: int) -> None:  # pragma: no cover - compiled
    """``dst[d:d + n] = src[s:s + n]`` inside kernels. numba compiles a slice assignment to a
    generic element loop (broadcasting, negative-index checks per byte) that copies a 62 KB page
    about 20x slower than this loop over two views, whose index is a plain non-negative range."""
    a = dst[d : d + n]
    b = src[s : s + n]
    for k in range(n):
        a[k] = b[k]


@kernel
def _variable_plan(offs: I64, ob: int, chunk_bytes: int, max_values: int) -> I64:  # pragma: no cover
    """Values per chunk: the largest power of two (at most ``max_values``) whose offsets and bytes
    fit ``chunk_bytes``; the last chunk takes all that is left when that fits."""
    n = offs.shape[0] - 1
    counts = np.empty(n + 1, dtype=np.int64)
    nc = 0
    s = 0
    while s < n:
        left = min(max_values, n - s)
        cand = 1
        while cand * 2 <= left:
            cand *= 2
        while cand > 1 and offs[s + cand] - offs[s] + ob * (cand + 1) > chunk_bytes:
            cand //= 2
        k = cand
        if s + k < n and n - s <= max_values:
            rest = n - s
            if offs[n] - offs[s] + ob * (rest + 1) <= chunk_bytes:
                k = rest
        counts[nc] = k
        nc += 1
        s += k
    return counts[:nc]


@kernel
def _variable_fill(offs: I64, data: U8, counts: I64, ob: int) -> tuple[U8, I64]:  # pragma: no cover
    """Each chunk's buffer: ``k + 1`` local offsets of ``ob`` bytes (counted from the buffer start)
    then the value bytes, zero-padded to a multiple of ``ob``."""
    nc = counts.shape[0]
    boffs = np.zeros(nc + 1, dtype=np.int64)
    s = 0
    for c in range(nc):
        k = counts[c]
        raw = ob * (k + 1) + offs[s + k] - offs[s]
        boffs[c + 1] = boffs[c] + (raw + ob - 1) // ob * ob
        s += k
    # Whole 8-byte words, so the offsets are written through u32 / u64 views (each chunk starts at
    # a multiple of ``ob``); the tail past ``boffs[nc]`` is cut off at the end.
    out = np.zeros((boffs[nc] + 7) // 8 * 8, dtype=np.uint8)
    o32 = out.view(np.uint32)
    o64 = out.view(np.uint64)
    s = 0
    for c in range(nc):
        k = counts[c]
        p = boffs[c]
        head = ob * (k + 1)
        base = offs[s] - head
        if ob == 4:
            w = p // 4
            for j in range(k + 1):
                o32[w + j] = offs[s + j] - base
        else:
            w = p // 8
            for j in range(k + 1):
                o64[w + j] = offs[s + j] - base
        q = p + head
        size = offs[s + k] - offs[s]
        copy_bytes(out, q, data, offs[s], size)
        s += k
    return out[: boffs[nc]], boffs


def variable_chunks(
    offsets: I64, data: U8, large: bool, chunk_bytes: int, max_values: int
) -> tuple[I64, Stream]:
    """Cut variable-width values into chunks: (values per chunk, the chunks' value buffers)."""
    offs = np.ascontiguousarray(offsets, dtype=np.int64)
    ob = 8 if large else 4
    counts = _variable_plan(offs, ob, chunk_bytes, max_values)
    out, boffs = _variable_fill(offs, np.ascontiguousarray(data, dtype=np.uint8), counts, ob)
    return counts, (out, boffs)


@kernel
def _block_widths(values: UInts, t: int) -> I64:  # pragma: no cover - compiled
    """Bits of the largest value of each block of 1024 (0 when all are zero)."""
    n = values.shape[0]
    nb = (n + FL_BLOCK - 1) // FL_BLOCK
    widths = np.zeros(nb, dtype=np.int64)
    for b in range(nb):
        widths[b] = _block_width(values, b, t)
    return widths


@kernel
def _block_width(values: UInts, b: int, t: int) -> int:  # pragma: no cover - compiled
    """Bits of the largest value of block ``b`` of 1024."""
    mx = np.uint64(0)
    for i in range(b * FL_BLOCK, min(values.shape[0], (b + 1) * FL_BLOCK)):
        v = np.uint64(values[i])
        if v > mx:
            mx = v
    w = 0
    while w < t and mx >> np.uint64(w) != 0:
        w += 1
    return w


@kernel
def _pack_into(
    values: UInts, count: int, first: int, width: int, t: int, order: I64, out: UInts, base: int
) -> None:  # pragma: no cover - compiled
    """FastLanes-pack ``values[first:first + count]`` (zeros past ``count``) with ``width`` bits
    into ``out[base:]``: row ``r`` of lane ``l`` (the value at ``order[r * lanes + l]``) goes to bits
    ``r * width ..`` of that lane's words, spilling into the next word."""
    lanes = FL_BLOCK // t
    mask = ~np.uint64(0) >> np.uint64(64 - width)
    for j in range(width * lanes):
        out[base + j] = 0
    for r in range(t):
        start = r * width
        col = base + (start // t) * lanes
        shift = np.uint64(start % t)
        spill = start % t + width > t
        hi = np.uint64(t) - shift
        for lane in range(lanes):
            src = order[r * lanes + lane]
            if src >= count:
                continue
            v = np.uint64(values[first + src]) & mask
            out[col + lane] |= v << shift
            if spill:
                out[col + lanes + lane] |= v >> hi


@kernel
def _bitpack_fill(
    values: UInts, widths: I64, woffs: I64, t: int, order: I64, out: UInts
) -> None:  # pragma: no cover - compiled
    """Per block: one word holding its bit width, then its packed words."""
    n = values.shape[0]
    for b in range(widths.shape[0]):
        base = woffs[b]
        out[base] = widths[b]
        if widths[b]:
            count = min(FL_BLOCK, n - b * FL_BLOCK)
            _pack_into(values, count, b * FL_BLOCK, widths[b], t, order, out, base + 1)


def bitpack_chunks(values: UInts) -> Stream:
    """One chunk per 1024 values: a word with the block's bit width, then the values bit-packed
    with it (FastLanes order; a short last block is packed as if zero-padded)."""
    values = np.ascontiguousarray(values)
    t = values.dtype.itemsize * 8
    widths = _block_widths(values, t)
    words = 1 + widths * (FL_BLOCK // t)
    woffs = np.zeros(len(widths) + 1, dtype=np.int64)
    np.cumsum(words, out=woffs[1:])
    out = np.empty(int(woffs[-1]), dtype=values.dtype)
    _bitpack_fill(values, widths, woffs, t, fastlanes_order(t), out)
    return out.view(np.uint8), woffs * (t // 8)


@kernel
def _bitpack_page(
    values: UInts, t: int, order: I64, large: bool
) -> tuple[U8, I64]:  # pragma: no cover - compiled
    """A whole bit-packed page without levels in one pass: per block of 1024 values, a chunk of a
    header (u16 value count, the buffer's u16 (u32 when ``large``) size, padded to 8) and the
    buffer (a word with the block's bit width, then its packed words) padded to 8 with ``PAD``.
    Returns (chunks, per chunk its metadata word)."""
    n = values.shape[0]
    nb = (n + FL_BLOCK - 1) // FL_BLOCK
    lanes = FL_BLOCK // t
    tb = t // 8
    szw = 4 if large else 2
    widths = np.zeros(nb, dtype=np.int64)
    coffs = np.zeros(nb + 1, dtype=np.int64)
    woffs = np.zeros(nb + 1, dtype=np.int64)
    for b in range(nb):
        w = _block_width(values, b, t)
        widths[b] = w
        words = 1 + w * lanes
        woffs[b + 1] = woffs[b] + words
        coffs[b + 1] = coffs[b] + 8 + (words * tb + 7) // 8 * 8
    packed = np.empty(woffs[nb], dtype=values.dtype)
    for b in range(nb):
        packed[woffs[b]] = widths[b]
        if widths[b]:
            count = min(FL_BLOCK, n - b * FL_BLOCK)
            _pack_into(values, count, b * FL_BLOCK, widths[b], t, order, packed, woffs[b] + 1)
    pb = packed.view(np.uint8)
    out = np.full(coffs[nb], PAD, dtype=np.uint8)
    meta = np.empty(nb, dtype=np.int64)
    for b in range(nb):
        p = coffs[b]
        count = min(FL_BLOCK, n - b * FL_BLOCK)
        out[p] = count & 0xFF
        out[p + 1] = (count >> 8) & 0xFF
        size = (woffs[b + 1] - woffs[b]) * tb
        for k in range(szw):
            out[p + 2 + k] = (size >> (8 * k)) & 0xFF
        copy_bytes(out, p + 8, pb, woffs[b] * tb, size)
        log = 10 if b < nb - 1 else 0  # log2(FL_BLOCK) for every chunk but the last
        meta[b] = (((coffs[b + 1] - p) // 8 - 1) << 4) | log
    return out, meta


def bitpack_page(values: UInts, large: bool) -> tuple[U8, I64]:
    """Chunks and metadata words of a mini-block page of integers without levels, bit-packed per
    block of 1024 (the page :func:`bitpack_chunks` and :func:`assemble_chunks` make together, in
    one compiled call: a small page costs no per-step overhead)."""
    values = np.ascontiguousarray(values)
    t = values.dtype.itemsize * 8
    return _bitpack_page(values, t, fastlanes_order(t), large)


@kernel
def _flat_page(
    data: U8, n: int, bits: int, per: int, large: bool, limit: int
) -> tuple[U8, I64, int]:  # pragma: no cover - compiled
    """A whole page of fixed-width values without levels in one pass: chunks of ``per`` values
    (the last one shorter) of ``bits`` bits each, every chunk a header (u16 value count, the
    buffer's u16 (u32 when ``large``) size, padded to 8) and its bytes of ``data`` padded to 8
    with ``PAD``. Returns (chunks, per chunk its metadata word, error as :func:`_assemble`'s)."""
    nc = (n + per - 1) // per
    szw = 4 if large else 2
    log = 0
    while (1 << (log + 1)) <= per:
        log += 1
    coffs = np.zeros(nc + 1, dtype=np.int64)
    for c in range(nc):
        count = min(per, n - c * per)
        size = (count * bits + 7) // 8
        coffs[c + 1] = coffs[c] + 8 + (size + 7) // 8 * 8
    out = np.full(coffs[nc], PAD, dtype=np.uint8)
    meta = np.empty(nc, dtype=np.int64)
    err = 0
    for c in range(nc):
        p = coffs[c]
        count = min(per, n - c * per)
        size = (count * bits + 7) // 8
        a = c * per * bits // 8
        out[p] = count & 0xFF
        out[p + 1] = (count >> 8) & 0xFF
        if size >> (8 * szw) != 0:
            err = 2
        for k in range(szw):
            out[p + 2 + k] = (size >> (8 * k)) & 0xFF
        copy_bytes(out, p + 8, data, a, size)
        total = coffs[c + 1] - p
        if limit and total > limit:
            err = 3
        meta[c] = ((total // 8 - 1) << 4) | (log if c < nc - 1 else 0)
        if err:
            return out, meta, err
    return out, meta, err


def flat_page(data: U8, n: int, bits: int, per: int, large: bool, limit: int) -> tuple[U8, I64, int]:
    """Chunks, metadata words and error code (see :func:`assemble_chunks`) of a mini-block page of
    ``n`` fixed-width values of ``bits`` bits without levels, ``per`` values a chunk (a power of
    two; ``per * bits`` a multiple of 8), in one compiled call."""
    return _flat_page(np.ascontiguousarray(data, dtype=np.uint8), n, bits, per, large, limit)


@kernel
def _level_plan(bounds: I64, width: int) -> I64:  # pragma: no cover - compiled
    """u16 words of each chunk's packed levels: whole blocks packed, a tail packed as a block only
    when that is smaller than storing it raw."""
    nc = bounds.shape[0] - 1
    block_words = FL_BLOCK * width // 16
    woffs = np.zeros(nc + 1, dtype=np.int64)
    for c in range(nc):
        count = bounds[c + 1] - bounds[c]
        full = count // FL_BLOCK
        tail = count % FL_BLOCK
        words = full * block_words
        if tail > 0:
            words += block_words if tail * 2 > block_words * 2 else tail
        woffs[c + 1] = woffs[c] + words
    return woffs


@kernel
def _level_fill(
    levels: U16, bounds: I64, width: int, order: I64, woffs: I64, out: U16
) -> None:  # pragma: no cover - compiled
    nc = bounds.shape[0] - 1
    block_words = FL_BLOCK * width // 16
    for c in range(nc):
        a = bounds[c]
        count = bounds[c + 1] - a
        p = woffs[c]
        done = 0
        while count - done >= FL_BLOCK:
            _pack_into(levels, FL_BLOCK, a + done, width, 16, order, out, p)
            p += block_words
            done += FL_BLOCK
        tail = count - done
        if tail > 0:
            if tail * 2 > block_words * 2:
                _pack_into(levels, tail, a + done, width, 16, order, out, p)
            else:
                for j in range(tail):
                    out[p + j] = levels[a + done + j]


def pack_level_chunks(levels: U16, bounds: I64, width: int) -> Stream:
    """Out-of-line bit-packing of each chunk's u16 levels (``levels[bounds[c]:bounds[c + 1]]``)
    with one ``width``: whole 1024-level blocks packed, a short tail stored raw unless packing a
    zero-padded block is smaller."""
    levels = np.ascontiguousarray(levels, dtype=np.uint16)
    bounds = np.ascontiguousarray(bounds, dtype=np.int64)
    woffs = _level_plan(bounds, width)
    out = np.empty(int(woffs[-1]), dtype=np.uint16)
    _level_fill(levels, bounds, width, fastlanes_order(16), woffs, out)
    return out.view(np.uint8), woffs * 2


@kernel
def _assemble(
    flat: U8, soffs: I64, nlevstreams: int, nlev: I64, logs: I64, large: bool, limit: int
) -> tuple[U8, I64, int]:  # pragma: no cover - compiled
    """Lay out every chunk: a header (u16 level count, a u16 size per level stream, a u16 (u32 when
    ``large``) size per value buffer, padded to 8), then each stream's bytes padded to 8 with
    ``PAD``. Returns (chunks, per chunk its metadata word, error: 0 or the first limit broken:
    1 = too many levels or level bytes for u16, 2 = a value buffer over u16, 3 = a chunk over
    ``limit`` bytes (0: no limit))."""
    ns = soffs.shape[0]
    nc = nlev.shape[0]
    szw = 4 if large else 2
    head = 2 + 2 * nlevstreams + szw * (ns - nlevstreams)
    head8 = (head + 7) // 8 * 8
    coffs = np.zeros(nc + 1, dtype=np.int64)
    for c in range(nc):
        size = head8
        for k in range(ns):
            size += (soffs[k, c + 1] - soffs[k, c] + 7) // 8 * 8
        coffs[c + 1] = coffs[c] + size
    out = np.full(coffs[nc], PAD, dtype=np.uint8)
    words = np.empty(nc, dtype=np.int64)
    err = 0
    for c in range(nc):
        p = coffs[c]
        if nlev[c] > 0xFFFF:
            err = 1
        out[p] = nlev[c] & 0xFF
        out[p + 1] = (nlev[c] >> 8) & 0xFF
        h = p + 2
        for k in range(ns):
            size = soffs[k, c + 1] - soffs[k, c]
            w = 2 if k < nlevstreams else szw
            if size >> (8 * w) != 0:
                err = 1 if k < nlevstreams else 2
            for b in range(w):
                out[h + b] = (size >> (8 * b)) & 0xFF
            h += w
        q = p + head8
        for k in range(ns):
            a = soffs[k, c]
            size = soffs[k, c + 1] - a
            copy_bytes(out, q, flat, a, size)
            q += (size + 7) // 8 * 8
        total = coffs[c + 1] - p
        if limit and total > limit:
            err = 3
        words[c] = ((total // 8 - 1) << 4) | logs[c]
        if err:
            return out, words, err
    return out, words, err


def assemble_chunks(
    levels: list[Stream], values: list[Stream], nlev: I64, logs: I64, large: bool, limit: int
) -> tuple[U8, I64, int]:
    """All chunks of a page back to back (see :func:`_assemble`), their metadata words, and an
    error code (0 = fits)."""
    streams = [*levels, *values]
    flat = np.concatenate([s[0] for s in streams]) if len(streams) > 1 else streams[0][0]
    shift = np.cumsum([0] + [len(s[0]) for s in streams[:-1]])
    soffs = np.stack([s[1] + d for s, d in zip(streams, shift.tolist(), strict=True)])
    return _assemble(
        np.ascontiguousarray(flat, dtype=np.uint8),
        np.ascontiguousarray(soffs, dtype=np.int64),
        len(levels),
        np.ascontiguousarray(nlev, dtype=np.int64),
        np.ascontiguousarray(logs, dtype=np.int64),
        large,
        limit,
    )


def warm_up() -> None:
    """Compile (or load) every kernel for the argument types the writers pass."""
    offs = np.array([0, 2, 5], dtype=np.int64)
    data = np.frombuffer(b"abcde", dtype=np.uint8).copy()
    for large in (False, True):
        warm(variable_chunks, offs, data, large, 4096, 4096, readonly=(1,))
    for t in (8, 16, 32, 64):
        warm(bitpack_chunks, np.arange(5, dtype=f"<u{t // 8}"), readonly=(0,))
        for large in (False, True):
            warm(bitpack_page, np.arange(5, dtype=f"<u{t // 8}"), large, readonly=(0,))
    for large in (False, True):
        warm(flat_page, np.zeros(16, dtype=np.uint8), 2, 64, 1, large, 0, readonly=(0,))
    lv = np.array([1, 0, 1], dtype=np.uint16)
    pack_level_chunks(lv, np.array([0, 3], dtype=np.int64), 1)
    s = (np.zeros(8, dtype=np.uint8), np.array([0, 8], dtype=np.int64))
    for large in (False, True):
        for nlevs in (0, 1):
            assemble_chunks([s] * nlevs, [s], np.array([1]), np.array([0]), large, 0)
