"""One page of a top-level field -> one encoded page per leaf column (2.1/2.2)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pyarrow as pa

from lance_format.core.concurrency import LazyPool
from lance_format.core.errors import InvalidInputError
from lance_format.core.types import LanceField
from lance_format.encodings.base import EncodedPage, expand_ranges
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21.encode._dict import dictionary_strings
from lance_format.encodings.v21.encode._serde import page_layout_bytes
from lance_format.encodings.v21.encode.fsst import fsst_compress
from lance_format.encodings.v21.encode.fullzip import encode_all_null, encode_fullzip
from lance_format.encodings.v21.encode.levels import LeafLevels, leaf_levels
from lance_format.encodings.v21.encode.miniblock import TooLarge, encode_miniblock
from lance_format.encodings.v21.encode.values import FixedVals, PageBuffers, VarVals, extract, longest_value

__all__ = ["FULLZIP_MIN_VALUE_BYTES", "EncodeJob", "encode_field", "encode_jobs", "has_blobs"]

#: Values of at least this many bytes (on average, or per fixed-width row) go full-zip, as pylance
#: does: a random read then fetches one value instead of a whole chunk.
FULLZIP_MIN_VALUE_BYTES = 256
#: A single variable value this large does not fit a mini-block chunk comfortably.
FULLZIP_MAX_MINI_VALUE = 8 * 1024

_STRUCTURAL = "lance-encoding:structural-encoding"
_COMPRESSION = "lance-encoding:compression"
_LEVEL = "lance-encoding:compression-level"
_BLOB = "lance-encoding:blob"
#: Blob bytes start at multiples of this, as pylance places them.
_BLOB_ALIGN = 64

WriteExternal = Callable[[memoryview], int]
#: Strings are dictionary-encoded when fewer than one in this many values is distinct (pylance's
#: ``lance-encoding:dict-divisor`` default) and the dictionary form is smaller.
DICT_DIVISOR = 2


def _choose_fullzip(leaf: LanceField, vals: FixedVals | VarVals) -> bool:
    forced = leaf.metadata.get(_STRUCTURAL)
    if forced is not None:
        want = forced.decode(errors="replace")
        if want.lower() == "fullzip":
            return True
        if want.lower() == "miniblock":
            return False
    if isinstance(vals, VarVals):
        if vals.n == 0:
            return False
        mean = int(vals.offsets[-1] - vals.offsets[0]) / vals.n
        return mean >= FULLZIP_MIN_VALUE_BYTES or longest_value(vals.offsets) > FULLZIP_MAX_MINI_VALUE
    row = (vals.width or 1) * vals.items if vals.width else -(-vals.items // 8)
    return row >= FULLZIP_MIN_VALUE_BYTES


def _dictionary(
    arr: pa.Array, vals: FixedVals | VarVals, index_bits: int | None, split: LazyPool | None = None
) -> tuple[FixedVals, FixedVals | VarVals] | None:
    """Indices and dictionary of low-cardinality strings when that is smaller, or of a dictionary
    field of any value type (``index_bits`` set): pylance stores those this way whatever the size,
    and reads a dictionary field back only from a page that has a dictionary."""
    if vals.n == 0:
        return None
    if index_bits is None:
        if not isinstance(vals, VarVals):
            return None
        # A compiled hash build that stops once the values are too many to pay.
        valid = None
        if arr.null_count:
            valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        built = dictionary_strings(vals.data, vals.offsets, valid, vals.n // DICT_DIVISOR, split)
        if built is None:
            return None
        idx32, firsts = built
        lens = vals.offsets[firsts + 1] - vals.offsets[firsts]
        item_offs = np.zeros(len(firsts) + 1, dtype=np.int64)
        np.cumsum(lens, out=item_offs[1:])
        items: FixedVals | VarVals = VarVals(
            item_offs, vals.data[expand_ranges(vals.offsets[firsts], lens)], vals.large
        )
        u = len(firsts)
        plain = len(vals.data) + 4 * vals.n
        as_dict = int(item_offs[-1]) + 4 * u + vals.n * max(1, u.bit_length()) // 8
        if as_dict >= plain:
            return None
        idx = idx32.astype("<u4", copy=False)
        return FixedVals(idx.view(np.uint8), 4, vals.n, int_bits=32), items
    enc = arr.dictionary_encode()
    items = extract(enc.dictionary)
    # Indices as wide as a dictionary field's key type (pylance checks).
    bits = index_bits
    idx = enc.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(f"<u{bits // 8}")
    return FixedVals(idx.view(np.uint8), bits // 8, vals.n, int_bits=bits), items


def _general(field: LanceField, compression: str) -> m.BufferCompression | None:
    """The general-purpose codec ``lance-encoding:compression`` asks for (LZ4 or ZSTD)."""
    if compression not in ("zstd", "lz4"):
        return None
    level = field.metadata.get(_LEVEL)
    try:
        lvl = int(level) if level is not None else None
    except ValueError:
        raise InvalidInputError(f"field {field.name!r}: {_LEVEL} must be an integer, got {level!r}") from None
    return m.BufferCompression(compression, lvl)


def _is_blob(field: LanceField) -> bool:
    flag = field.metadata.get(_BLOB, b"").decode(errors="replace").lower()
    return field.logical_type == "large_binary" and flag in ("true", "1")


def has_blobs(field: LanceField) -> bool:
    """Whether a field stores blob bytes out of line (its encoding then writes to the file)."""
    return any(_is_blob(f) for f in field.walk())


def _encode_blob(
    ll: LeafLevels, vals: VarVals, large: bool, write_external: WriteExternal
) -> tuple[m.PageLayout, PageBuffers]:
    """A blob page: the bytes out of line (one write, each blob 64-byte aligned as pylance lays
    them out), and (position, size) descriptions in a mini-block packed struct. A null or empty
    blob has size 0 and position ``def << 16`` (0 = empty)."""
    n = vals.n
    lens = np.diff(vals.offsets)
    d = ll.defs.astype(np.int64) if ll.defs is not None else np.zeros(n, dtype=np.int64)
    real = (d == 0) & (lens > 0)
    padded = np.where(real, (lens + _BLOB_ALIGN - 1) // _BLOB_ALIGN * _BLOB_ALIGN, 0)
    local = np.cumsum(padded) - padded
    total = int(padded.sum())
    base = 0
    if total:
        out = np.zeros(total, dtype=np.uint8)
        sel = np.flatnonzero(real)
        out[expand_ranges(local[sel], lens[sel])] = vals.data[expand_ranges(vals.offsets[sel], lens[sel])]
        base = write_external(memoryview(out.data))
    pos = np.where(real, base + local, d << 16).astype("<u8")
    size = np.where(real, lens, 0).astype("<u8")
    rows = np.stack((pos, size), axis=1)
    desc = FixedVals(np.ascontiguousarray(rows).view(np.uint8).reshape(-1), 16, n, packed_bits=(64, 64))
    inner, bufs = encode_miniblock(desc, None, None, None, (m.RepDefLayer.ALL_VALID_ITEM,), large)
    return m.BlobLayout(inner, ll.layers), bufs


def _encode_empty_struct(ll: LeafLevels) -> tuple[m.PageLayout, PageBuffers]:
    """A ``struct<>`` column: pylance writes a page without levels or values (every row is ``{}``)
    and refuses nulls in such a struct or above it, and lists of them: so do we."""
    if ll.rep is not None or (ll.defs is not None and bool(ll.defs.any())):
        raise InvalidInputError(
            f"field {ll.field.name!r} is an empty struct with nulls (or inside a list): Lance cannot "
            "store that (pylance refuses it too); give the struct a child or drop the nulls"
        )
    return m.AllNullLayout((m.RepDefLayer.NULLABLE_ITEM, *ll.layers[1:])), []


def _encode_leaf(
    ll: LeafLevels, large: bool, write_external: WriteExternal | None = None, split: LazyPool | None = None
) -> tuple[m.PageLayout, PageBuffers]:
    if ll.field.is_empty_struct:
        return _encode_empty_struct(ll)
    taken = ll.visible_values()
    if len(taken) == 0 or taken.null_count == len(taken):
        return encode_all_null(ll.rep, ll.defs, ll.layers)
    vals = extract(taken)
    if write_external is not None and ll.rep is None and isinstance(vals, VarVals) and _is_blob(ll.field):
        return _encode_blob(ll, vals, large, write_external)
    visible = ll.visible_mask()
    compression = ll.field.metadata.get(_COMPRESSION, b"").decode(errors="replace").lower()
    general = _general(ll.field, compression)
    plain = compression == "none"
    # Dictionary fields are always mini-block: pylance reads dictionaries only there.
    # Packed structs too: only mini-block decoders unpack them.
    is_packed = isinstance(vals, FixedVals) and bool(vals.packed_bits)
    full = ll.index_bits is None and not is_packed and _choose_fullzip(ll.field, vals)
    stored: FixedVals | VarVals = vals
    dictionary = fsst_table = None
    if isinstance(vals, FixedVals) and ll.index_bits is not None and not vals.dims:
        picked = _dictionary(taken, vals, ll.index_bits)
        if picked is not None:
            stored, dictionary = picked
    if isinstance(vals, VarVals):
        if ll.index_bits is not None or (not full and not plain and compression != "fsst" and not vals.large):
            picked = _dictionary(taken, vals, ll.index_bits, split)
            if picked is not None:
                stored, dictionary = picked
        if dictionary is None and not plain and (general is None or full):
            coded = fsst_compress(vals.data, vals.offsets, split)
            if coded is not None:
                fsst_table, offs, codes = coded
                stored = VarVals(offs, codes, vals.large)
    if not full:
        try:
            return encode_miniblock(
                stored,
                ll.rep,
                ll.defs,
                visible,
                ll.layers,
                large,
                dictionary=dictionary,
                fsst_table=fsst_table,
                general=general,
                bitpack=not plain,
            )
        except TooLarge:
            pass
    if dictionary is not None:
        stored = vals
    vis_mask = visible if visible is not None else np.ones(ll.num_entries, dtype=bool)
    return encode_fullzip(stored, ll.rep, ll.defs, vis_mask, ll.layers, fsst_table)


def encode_field(
    field: LanceField,
    arr: pa.Array,
    columns_of: dict[int, int],
    first_row: int,
    large: bool,
    write_external: WriteExternal | None = None,
    split: LazyPool | None = None,
) -> list[EncodedPage]:
    """Encode rows of a top-level field as one page per leaf column.

    Parameters
    ----------
    field:
        A top-level field.
    arr:
        Its rows for this page.
    columns_of:
        Column index by field id.
    first_row:
        Row number of the page's first row (the page priority, as pylance sets it).
    large:
        Write 2.2 mini-block chunks (u32 sizes).
    write_external:
        Stores bytes out of line and returns their file position (blob columns need it; without
        it blobs are written inline like other binaries).
    split:
        Threads a large string page's dictionary build and FSST coding are split over: the
        writing session's :attr:`~lance_format.io.runtime.IORuntime.split_pool` (None: this thread).
    """
    return [
        _leaf_page(ll, columns_of, first_row, large, write_external, split)
        for ll in leaf_levels(field, arr, columns_of)
    ]


def _leaf_page(
    ll: LeafLevels,
    columns_of: dict[int, int],
    first_row: int,
    large: bool,
    write_external: WriteExternal | None = None,
    split: LazyPool | None = None,
) -> EncodedPage:
    layout, bufs = _encode_leaf(ll, large, write_external, split)
    return EncodedPage(columns_of[ll.field.id], bufs, ll.num_rows, page_layout_bytes(layout), first_row)


EncodeJob = Callable[[], list[EncodedPage]]


def encode_jobs(
    field: LanceField,
    arr: pa.Array,
    columns_of: dict[int, int],
    first_row: int,
    large: bool,
    split: LazyPool | None = None,
) -> list[EncodeJob]:
    """:func:`encode_field` cut into jobs to run side by side (on a pool), in column order.

    A field with one column is one job (its level walk included). A field with several (a
    struct) has its levels walked now and each column encoded by a job of its own, so the leaves
    of one wide struct encode on every core. The pages are the ones :func:`encode_field` makes.
    """
    if sum(1 for f in field.walk() if f.id in columns_of) <= 1:
        return [partial(encode_field, field, arr, columns_of, first_row, large, split=split)]
    return [
        partial(_page_list, ll, columns_of, first_row, large, split)
        for ll in leaf_levels(field, arr, columns_of)
    ]


def _page_list(
    ll: LeafLevels, columns_of: dict[int, int], first_row: int, large: bool, split: LazyPool | None
) -> list[EncodedPage]:
    return [_leaf_page(ll, columns_of, first_row, large, split=split)]
