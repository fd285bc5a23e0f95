"""Reading the selected values out of 2.0 page buffers: flat values, bitmaps and end offsets.

Every function here is a decoder generator (see :mod:`lance_format.encodings.base`) that asks only
for the bytes the selected rows need: a run of rows of a flat buffer is one range, a run of a bitmap
is its covering bytes, a run of end offsets also fetches the offset before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import CorruptFileError, NotSupportedError
from lance_format.encodings.base import (
    DecodeContext,
    IOGen,
    PageInfo,
    Range,
    RowRuns,
    expand_ranges,
    fetch,
    join_buffers,
    pair_columns,
)
from lance_format.encodings.buffer_compression import decompress
from lance_format.encodings.v20 import model as m

__all__ = [
    "Offsets",
    "and_validity",
    "bitmap",
    "check_runs",
    "flat_bytes",
    "page_buffer",
    "read_bits",
    "read_end_offsets",
    "run_spans",
]

U64 = np.dtype("<u8")
Bools = npt.NDArray[np.bool_]
I64 = npt.NDArray[np.int64]
#: ``(starts, ends, null)`` of selected rows, page-local positions in the bytes or items.
Offsets = tuple[I64, I64, Bools]


def page_buffer(ctx: DecodeContext, page: PageInfo, ref: m.Buffer) -> Range:
    """``(offset, size)`` in the file of the buffer ``ref`` names.

    Raises
    ------
    CorruptFileError
        The index is out of range.
    NotSupportedError
        A column or file buffer (pylance never writes those into 2.0 pages).
    """
    if ref.kind != m.BufferKind.PAGE:
        raise NotSupportedError(f"{ctx.path}: 2.0 pages naming column or file buffers are not supported")
    if ref.index >= len(page.buffer_offsets):
        raise CorruptFileError(
            ctx.path, f"page encoding names buffer {ref.index} of {len(page.buffer_offsets)}"
        )
    return page.buffer(ref.index)


def check_runs(ctx: DecodeContext, runs: RowRuns, limit: int, what: str) -> None:
    """Refuse runs that reach past the ``limit`` values a buffer holds."""
    if len(runs) and int(runs[-1, 1]) > limit:
        raise CorruptFileError(
            ctx.path, f"{what} has {limit} values but rows up to {int(runs[-1, 1])} were asked"
        )


def _compression(flat: m.Flat) -> str | None:
    c = flat.compression
    if c is None or c.scheme in ("", "none"):
        return None
    return c.scheme


def _whole_buffer(ctx: DecodeContext, page: PageInfo, flat: m.Flat, key: tuple[Any, ...]) -> IOGen[bytes]:
    """A compressed flat buffer, fetched and decompressed once per reader (cached under ``key``)."""
    cached = ctx.cache.get(key)
    if cached is not None:
        return bytes(cached)
    scheme = _compression(flat)
    assert scheme is not None
    (raw,) = yield from fetch([page_buffer(ctx, page, flat.buffer)])
    data = decompress(scheme, raw, ctx.path)
    ctx.cache[key] = data
    return data


def flat_bytes(
    ctx: DecodeContext, page: PageInfo, flat: m.Flat, runs: RowRuns, width: int, key: tuple[Any, ...]
) -> IOGen[bytes | memoryview]:
    """The bytes of the selected values of a byte-aligned flat buffer, run after run.

    Parameters
    ----------
    ctx, page:
        The file and the page.
    flat:
        The flat node naming the buffer.
    runs:
        Page-local runs of values.
    width:
        Bytes per value.
    key:
        Cache key of this node (a compressed buffer is decompressed once and cached).
    """
    off, size = page_buffer(ctx, page, flat.buffer)
    if len(runs) == 0:
        return b""
    if _compression(flat) is not None:
        whole = yield from _whole_buffer(ctx, page, flat, (*key, "whole"))
        check_runs(ctx, runs, len(whole) // width, "a compressed buffer")
        if len(runs) == 1:
            return memoryview(whole)[int(runs[0, 0]) * width : int(runs[0, 1]) * width]
        arr = np.frombuffer(whole, dtype=np.uint8, count=len(whole) // width * width).reshape(-1, width)
        return arr[expand_ranges(runs[:, 0], runs[:, 1] - runs[:, 0])].tobytes()
    check_runs(ctx, runs, size // width, "a flat buffer")
    if len(runs) == 1:
        # One run (takes of one row, full reads): plain integers.
        start, stop = runs[0].tolist()
        (buf,) = yield from fetch([(off + start * width, (stop - start) * width)])
        return buf
    starts = off + runs[:, 0] * width
    lengths = (runs[:, 1] - runs[:, 0]) * width
    bufs = yield from fetch(list(zip(starts.tolist(), lengths.tolist(), strict=True)))
    return join_buffers(bufs)


def read_bits(
    ctx: DecodeContext, page: PageInfo, flat: m.Flat, runs: RowRuns, key: tuple[Any, ...]
) -> IOGen[Bools]:
    """The selected bits of an LSB-first bitmap, as booleans (fetches only the covering bytes)."""
    if flat.bits != 1:
        raise CorruptFileError(ctx.path, f"expected a 1-bit buffer, found {flat.bits} bits per value")
    if len(runs) == 0:
        return np.zeros(0, dtype=bool)
    lengths = runs[:, 1] - runs[:, 0]
    if _compression(flat) is not None:
        whole = yield from _whole_buffer(ctx, page, flat, (*key, "whole"))
        bits = np.unpackbits(np.frombuffer(whole, dtype=np.uint8), bitorder="little")
        check_runs(ctx, runs, len(bits), "a bitmap")
        return bits[expand_ranges(runs[:, 0], lengths)].astype(bool)
    off, size = page_buffer(ctx, page, flat.buffer)
    check_runs(ctx, runs, size * 8, "a bitmap")
    if len(runs) == 1:
        start, stop = runs[0].tolist()
        (buf,) = yield from fetch([(off + start // 8, (stop + 7) // 8 - start // 8)])
        bits = np.unpackbits(np.frombuffer(buf, dtype=np.uint8), bitorder="little")
        return bits[start % 8 : start % 8 + stop - start].astype(bool)
    first = runs[:, 0] // 8
    last = (runs[:, 1] + 7) // 8
    bufs = yield from fetch(list(zip((off + first).tolist(), (last - first).tolist(), strict=True)))
    bits = np.unpackbits(np.frombuffer(join_buffers(bufs), dtype=np.uint8), bitorder="little")
    byte_start = np.cumsum(last - first) - (last - first)
    return bits[expand_ranges(byte_start * 8 + runs[:, 0] % 8, lengths)].astype(bool)


def bitmap(valid: Bools) -> pa.Buffer | None:
    """An Arrow validity buffer for ``valid`` (``None`` when everything is valid)."""
    if valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _offsets_flat(ctx: DecodeContext, enc: m.ArrayEncoding) -> m.Flat:
    while isinstance(enc, m.NoNull):
        enc = enc.values
    if not isinstance(enc, m.Flat) or enc.bits != 64:
        raise NotSupportedError(f"{ctx.path}: offsets encoded as {enc} (expected 64-bit flat values)")
    return enc


def read_end_offsets(
    ctx: DecodeContext,
    page: PageInfo,
    enc: m.ArrayEncoding,
    adjustment: int,
    runs: RowRuns,
    key: tuple[Any, ...],
) -> IOGen[Offsets]:
    """Page-local ``(starts, ends, null)`` of the selected rows from u64 end offsets.

    Each row stores its end offset; a null row stores ``end + adjustment``. A row starts where the
    previous row ends (0 for the page's first row), so every run also fetches the offset before it.
    """
    flat = _offsets_flat(ctx, enc)
    if len(runs) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(0, dtype=bool)
    if adjustment <= 0:
        raise CorruptFileError(ctx.path, "offsets page has rows but no null adjustment")
    has_prev = runs[:, 0] > 0
    first = runs[:, 0] - has_prev
    fetched_runs = pair_columns(first, runs[:, 1])
    data = yield from flat_bytes(ctx, page, flat, fetched_runs, 8, (*key, "offsets"))
    fetched = np.frombuffer(data, dtype=U64)
    if fetched.size and int(fetched.max()) >= 2**63:
        raise CorruptFileError(ctx.path, "offset out of range")
    raw = fetched.astype(np.int64)
    lengths = runs[:, 1] - runs[:, 0]
    if len(runs) == 1:
        seg = raw if has_prev[0] else np.concatenate((np.zeros(1, dtype=np.int64), raw))
        prev_raw, ends_raw = seg[:-1], seg[1:]
    else:
        # Give every run a leading "previous end": the fetched one, or 0 at the page start.
        seg_len = runs[:, 1] - first
        seg_start = np.cumsum(seg_len) - seg_len
        raw = np.insert(raw, seg_start[~has_prev], 0)
        head = np.cumsum(lengths + 1) - (lengths + 1)
        is_head = np.zeros(len(raw), dtype=bool)
        is_head[head] = True
        is_tail = np.zeros(len(raw), dtype=bool)
        is_tail[head + lengths] = True
        ends_raw = raw[~is_head]
        prev_raw = raw[~is_tail]
    if int(ends_raw.max(initial=0)) < adjustment and int(prev_raw.max(initial=0)) < adjustment:
        # No null rows among these (and none before them): skip the modulo.
        starts, ends, null = prev_raw, ends_raw, np.zeros(len(ends_raw), dtype=bool)
    else:
        null = ends_raw >= adjustment
        starts = prev_raw % adjustment
        ends = ends_raw % adjustment
    if (ends < starts).any():
        raise CorruptFileError(ctx.path, "offsets decrease")
    return starts, ends, null


def run_spans(runs: RowRuns, starts: I64, ends: I64) -> tuple[I64, I64]:
    """For each run, ``[start of its first row, end of its last row)`` (rows in run order)."""
    lengths = runs[:, 1] - runs[:, 0]
    first = np.cumsum(lengths) - lengths
    return starts[first], ends[first + lengths - 1]


def and_validity(arr: pa.Array, valid: Bools) -> pa.Array:
    """``arr`` with rows where ``valid`` is false made null (existing nulls stay null)."""
    if valid.all():
        return arr
    if pa.types.is_dictionary(arr.type):
        return pa.DictionaryArray.from_arrays(and_validity(arr.indices, valid), arr.dictionary)
    if arr.null_count:
        valid = valid & np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if arr.offset != 0:
        arr = pa.concat_arrays([arr])  # from_buffers below needs offset 0
    t = arr.type
    children: list[pa.Array] | None = None
    if pa.types.is_struct(t):
        children = [arr.field(i) for i in range(t.num_fields)]
    elif pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        children = [arr.values]
    bufs = arr.buffers()[: t.num_buffers]
    return pa.Array.from_buffers(t, len(arr), [bitmap(valid), *bufs[1:]], children=children)
