"""Full-zip and all-null pages.

Full-zip: per entry a control word (repetition in the high bits), then for variable width a u32
length and the bytes; fixed-width visible entries carry their bytes. Buffer 1 is the repetition
index (``rows + 1`` byte offsets, each in the fewest of 1/2/4/8 bytes that hold the largest).
Rows of fixed width without levels are a plain row-major buffer and need no index.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.core.jit import kernel, warm
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21.encode._chunks import copy_bytes
from lance_format.encodings.v21.encode.values import FixedVals, PageBuffers, VarVals

__all__ = ["encode_all_null", "encode_fullzip", "warm_up"]

U8 = npt.NDArray[np.uint8]
U16 = npt.NDArray[np.uint16]
I64 = npt.NDArray[np.int64]


def _cw_bytes(bits: int) -> int:
    return 0 if bits == 0 else 1 if bits <= 8 else 2 if bits <= 16 else 4


@kernel
def _zip(
    word: I64, cw: int, carry: npt.NDArray[np.bool_], lens: I64, src: I64, lb: int, data: U8
) -> tuple[U8, I64]:  # pragma: no cover - compiled
    """Per entry: its control word (``cw`` bytes), then when it carries a value, its length
    (``lb`` bytes, none for fixed width) and its ``lens`` bytes from ``data[src:]``. Returns the
    zipped bytes and each entry's start."""
    n = word.shape[0]
    starts = np.empty(n, dtype=np.int64)
    total = 0
    for e in range(n):
        starts[e] = total
        total += cw
        if carry[e]:
            total += lb + lens[e]
    out = np.empty(total, dtype=np.uint8)
    for e in range(n):
        p = starts[e]
        w = word[e]
        for b in range(cw):
            out[p + b] = (w >> (8 * b)) & 0xFF
        p += cw
        if carry[e]:
            ln = lens[e]
            for b in range(lb):
                out[p + b] = (ln >> (8 * b)) & 0xFF
            p += lb
            s = src[e]
            copy_bytes(out, p, data, s, ln)
    return out, starts


def warm_up() -> None:
    """Compile (or load) the zipping kernel (value bytes may be a read-only Arrow buffer)."""
    one = np.ones(1, dtype=np.int64)
    warm(_zip, one, 1, np.ones(1, np.bool_), one, one - 1, 4, np.zeros(2, np.uint8), readonly=(6,))


def _fixed_rows(v: FixedVals) -> tuple[npt.NDArray[np.uint8], int, m.CompressiveEncoding, int]:
    """Row-major bytes of each value, bytes per row, the compression and bits per value."""
    items = v.items
    n = v.n
    parts: list[npt.NDArray[np.uint8]] = []
    per = 1
    flags = []
    for d, valid in zip(v.dims, v.level_valid, strict=True):
        # Per row, one item bitmap per level with nulls (outermost first), then the items.
        per *= d
        flags.append(valid is not None)
        if valid is not None:
            parts.append(np.packbits(valid.reshape(n, per), axis=1, bitorder="little"))
    inner: m.CompressiveEncoding
    if v.width == 0:
        # Booleans of a row are a bitmap of the row, padded to whole bytes.
        parts.append(np.packbits(v.bits().reshape(n, items), axis=1, bitorder="little"))
        inner = m.Flat(1)
    else:
        parts.append(v.data.reshape(n, v.width * items))
        inner = m.Flat(v.width * 8)
    mat = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
    row = int(mat.shape[1])
    for d, flag in zip(reversed(v.dims), reversed(flags), strict=True):
        inner = m.FixedSizeList(d, inner, flag)
    return np.ascontiguousarray(mat).reshape(-1), row, inner, row * 8


def encode_fullzip(
    values: FixedVals | VarVals,
    rep: U16 | None,
    defs: U16 | None,
    visible: npt.NDArray[np.bool_],
    layers: tuple[m.RepDefLayer, ...],
    fsst_table: bytes | None = None,
) -> tuple[m.FullZipLayout, PageBuffers]:
    """Layout and buffers of one full-zip page (``visible``: per entry, carries a value;
    ``fsst_table``: the values are FSST codes of that table)."""
    nent = len(visible)
    max_rep = sum(1 for x in layers if x.is_list)
    bits_rep = max_rep.bit_length() if rep is not None else 0
    bits_def = int(defs.max()).bit_length() if defs is not None and len(defs) else 0
    if defs is not None and bits_def == 0:
        bits_def = 1
    cw = _cw_bytes(bits_rep + bits_def)
    word = np.zeros(nent, dtype=np.int64)
    if rep is not None:
        word |= rep.astype(np.int64) << bits_def
    if defs is not None:
        word |= defs.astype(np.int64)
    d = defs.astype(np.int64) if defs is not None else np.zeros(nent, dtype=np.int64)
    if isinstance(values, VarVals):
        lens_v = np.diff(values.offsets)
        carry = visible & (d == 0)
        lens = np.zeros(nent, dtype=np.int64)
        item_of = np.cumsum(visible) - 1
        lens[carry] = lens_v[item_of[carry]]
        lb = 8 if values.large else 4
        src = np.zeros(nent, dtype=np.int64)
        src[carry] = values.offsets[item_of[carry]]
        data, row_bytes = values.data, 0
        comp: m.CompressiveEncoding = m.Variable(m.Flat(8 * lb))
        if fsst_table is not None:
            comp = m.Fsst(fsst_table, comp)
        bits_value = None
    else:
        lb = 0
        data, row_bytes, comp, bits = _fixed_rows(values)
        carry = visible
        lens = np.where(visible, row_bytes, 0).astype(np.int64)
        item_of = np.cumsum(visible) - 1
        src = np.where(visible, item_of * row_bytes, 0)
        bits_value = bits
    if cw == 0 and bits_value is not None:
        layout = m.FullZipLayout(0, 0, bits_value, None, nent, int(visible.sum()), comp, layers)
        return layout, [np.ascontiguousarray(data)]
    out, starts = _zip(
        np.ascontiguousarray(word),
        cw,
        np.ascontiguousarray(carry, dtype=np.bool_),
        np.ascontiguousarray(lens, dtype=np.int64),
        np.ascontiguousarray(src, dtype=np.int64),
        lb if bits_value is None else 0,
        np.ascontiguousarray(data, dtype=np.uint8),
    )
    total = len(out)
    row_start = np.flatnonzero(rep == max_rep) if rep is not None else np.arange(nent)
    index = np.concatenate((starts[row_start], [total])).astype(np.int64)
    top = int(index[-1])
    ib = 1 if top < 1 << 8 else 2 if top < 1 << 16 else 4 if top < 1 << 32 else 8
    layout = m.FullZipLayout(
        bits_rep,
        bits_def,
        bits_value,
        8 * lb if bits_value is None else None,
        nent,
        int(visible.sum()),
        comp,
        layers,
    )
    return layout, [out, index.astype(f"<u{ib}")]


def encode_all_null(
    rep: U16 | None, defs: U16 | None, layers: tuple[m.RepDefLayer, ...]
) -> tuple[m.AllNullLayout, PageBuffers]:
    """A page without values: levels (plain u16, rep then def) only when they say more than
    "every row is null at the leaf"."""
    # pylance reads levels-free all-null pages only for a single (item) layer.
    simple = rep is None and len(layers) == 1 and (defs is None or bool((defs == 1).all()))
    if simple:
        return m.AllNullLayout(layers), []
    rb = rep.astype("<u2").tobytes() if rep is not None else b""
    db = defs.astype("<u2").tobytes() if defs is not None else b""
    return m.AllNullLayout(layers), [rb, db]
