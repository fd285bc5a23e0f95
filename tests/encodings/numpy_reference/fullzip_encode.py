"""Test oracle, the numpy code before the compiled kernels.

Full-zip and all-null pages.

Full-zip: per entry a control word (repetition in the high bits), then for variable width a u32
length and the bytes; fixed-width visible entries carry their bytes. Buffer 1 is the repetition
index (``rows + 1`` byte offsets, each in the fewest of 1/2/4/8 bytes that hold the largest).
Rows of fixed width without levels are a plain row-major buffer and need no index.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.encodings.base import expand_ranges
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21.encode.values import FixedVals, VarVals

__all__ = ["encode_all_null", "encode_fullzip"]

U16 = npt.NDArray[np.uint16]
I64 = npt.NDArray[np.int64]


def _cw_bytes(bits: int) -> int:
    return 0 if bits == 0 else 1 if bits <= 8 else 2 if bits <= 16 else 4


def _scatter_uint(out: npt.NDArray[np.uint8], pos: I64, vals: I64, nbytes: int) -> None:
    for b in range(nbytes):
        out[pos + b] = ((vals >> (8 * b)) & 0xFF).astype(np.uint8)


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
        assert v.bools is not None
        # Booleans of a row are a bitmap of the row, padded to whole bytes.
        parts.append(np.packbits(v.bools.reshape(n, items), axis=1, bitorder="little"))
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
) -> tuple[m.FullZipLayout, list[bytes]]:
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
        size = cw + np.where(carry, lb + lens, 0)
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
        size = cw + lens
        item_of = np.cumsum(visible) - 1
        src = np.where(visible, item_of * row_bytes, 0)
        bits_value = bits
    if cw == 0 and bits_value is not None:
        layout = m.FullZipLayout(0, 0, bits_value, None, nent, int(visible.sum()), comp, layers)
        return layout, [np.ascontiguousarray(data).tobytes()]
    starts = np.cumsum(size) - size
    total = int(size.sum())
    out = np.zeros(total, dtype=np.uint8)
    if cw:
        _scatter_uint(out, starts, word, cw)
    body = starts + cw
    if bits_value is None:
        _scatter_uint(out, starts[carry] + cw, lens[carry], lb)
        body = body + lb
    sel = np.flatnonzero(lens > 0)
    out[expand_ranges(body[sel], lens[sel])] = data[expand_ranges(src[sel], lens[sel])]
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
    return layout, [out.tobytes(), index.astype(f"<u{ib}").tobytes()]


def encode_all_null(
    rep: U16 | None, defs: U16 | None, layers: tuple[m.RepDefLayer, ...]
) -> tuple[m.AllNullLayout, list[bytes]]:
    """A page without values: levels (plain u16, rep then def) only when they say more than
    "every row is null at the leaf"."""
    # pylance reads levels-free all-null pages only for a single (item) layer.
    simple = rep is None and len(layers) == 1 and (defs is None or bool((defs == 1).all()))
    if simple:
        return m.AllNullLayout(layers), []
    rb = rep.astype("<u2").tobytes() if rep is not None else b""
    db = defs.astype("<u2").tobytes() if defs is not None else b""
    return m.AllNullLayout(layers), [rb, db]
