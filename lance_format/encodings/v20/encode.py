"""Encoding a field's rows as 2.0 pages, the way pylance 14 writes them.

Every field owns a column (see ``file.reader.assign_columns``):

* a struct writes a ``SimpleStruct`` page that only counts rows (the file writer folds these into one
  page per column, as pylance does) and its children write their own pages; a struct with null rows
  is refused, like pylance does at 2.0;
* a list writes page-local u64 end offsets (``List``) and its items go to the item column;
* a packed struct (field metadata) and a fixed-size list are one column of values;
* a blob field (``lance-encoding:blob``, large_binary) stores its bytes out of line through the
  writer and pages of (position, size) descriptions (``PackedStruct`` of two u64).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lance_format.core.errors import NotSupportedError
from lance_format.core.types import LanceField
from lance_format.encodings.base import EncodedPage
from lance_format.encodings.v20 import model as m
from lance_format.encodings.v20._serde import RawEncoding, array_encoding_to_bytes, column_encoding_to_bytes
from lance_format.encodings.v20.leaves import (
    DICT_ENCODING_THRESHOLD,
    PageBuffers,
    encode_values,
    is_binary_like,
    packed_child_width,
)

__all__ = ["BLOB_KEY", "check_writable", "column_encoding_for", "encode_field", "is_packed_struct"]

#: Field metadata that makes a large_binary field a blob column (any value, as in pylance).
BLOB_KEY = "lance-encoding:blob"

_LISTS = ("list", "list.struct", "large_list", "large_list.struct")

# Descriptions of null and empty blobs: (position, size).
_NULL_BLOB = (1, 0)

#: Writes one buffer out of line (before the pages that refer to it) and returns its file position.
ExternalWriter = Callable[[memoryview], int]


def is_packed_struct(field: LanceField) -> bool:
    """Whether a 2.0 file stores this struct packed (one column, children row-major in it).

    pylance's 2.0 writer decides by field metadata: the legacy ``packed`` key when present (exactly
    ``"true"``), otherwise the mere presence of ``lance-encoding:packed``.
    """
    if field.logical_type != "struct":
        return False
    legacy = field.metadata.get("packed")
    if legacy is not None:
        return legacy == b"true"
    return "lance-encoding:packed" in field.metadata


def _is_packed_struct(field: LanceField, columns_of: dict[int, int]) -> bool:
    # The column layout decides: a packed struct owns a column and its children own none.
    return (
        field.logical_type == "struct"
        and bool(field.children)
        and field.id in columns_of
        and all(c.id not in columns_of for c in field.children)
    )


def _is_blob(field: LanceField) -> bool:
    return BLOB_KEY in field.metadata


def check_writable(field: LanceField) -> None:
    """Refuse, before any data is written, a field a 2.0 file cannot hold.

    Parameters
    ----------
    field:
        A field of the schema (called for every node of the tree).

    Raises
    ------
    NotSupportedError
        Fixed-size lists of anything but fixed-width values, dictionaries whose value type Lance
        cannot name, packed structs of children that do not pack, blob metadata on anything but
        large_binary.
    """
    try:
        t = field.to_arrow().type
    except ValueError as e:
        raise NotSupportedError(f"field {field.name!r}: Lance cannot store this type ({e})") from None
    if pa.types.is_fixed_size_list(t):
        vt = t.value_type
        while pa.types.is_fixed_size_list(vt):
            vt = vt.value_type
        if not (
            pa.types.is_integer(vt)
            or pa.types.is_floating(vt)
            or pa.types.is_boolean(vt)
            or pa.types.is_fixed_size_binary(vt)
            or pa.types.is_decimal(vt)
            or pa.types.is_temporal(vt)
        ):
            raise NotSupportedError(f"field {field.name!r}: fixed-size lists of {vt} are not supported")
    if pa.types.is_dictionary(t) and not (
        is_binary_like(t.value_type)
        or pa.types.is_integer(t.value_type)
        or pa.types.is_floating(t.value_type)
        or pa.types.is_boolean(t.value_type)
    ):
        raise NotSupportedError(f"field {field.name!r}: dictionaries of {t.value_type} are not supported")
    if is_packed_struct(field) and not (
        field.children and all(packed_child_width(c.to_arrow().type) for c in field.children)
    ):
        raise NotSupportedError(
            f"field {field.name!r}: a packed struct needs fixed-width children of whole bytes "
            "(no bool, no strings)"
        )
    if _is_blob(field) and is_binary_like(t) and not pa.types.is_large_binary(t):
        raise NotSupportedError(f"field {field.name!r}: blob columns must be large_binary, not {t}")


def column_encoding_for(field: LanceField) -> RawEncoding:
    """The column-level encoding of ``field``'s column: plain values, or blob descriptions.

    Parameters
    ----------
    field:
        A field that owns a column.

    Returns
    -------
    RawEncoding
        ``("lance.encodings.ColumnEncoding", bytes)``.
    """
    if _is_blob(field) and field.logical_type == "large_binary":
        return column_encoding_to_bytes(m.Blob(m.Values()))
    return column_encoding_to_bytes(m.Values())


def encode_field(
    field: LanceField,
    array: pa.Array,
    columns_of: dict[int, int],
    *,
    write_external: ExternalWriter | None = None,
    dict_threshold: int = DICT_ENCODING_THRESHOLD,
) -> list[EncodedPage]:
    """Pages of every column of ``field`` for one chunk of rows.

    Parameters
    ----------
    field:
        A top-level field.
    array:
        Its rows for this page (any offset). No rows means "the file has no rows": only the struct
        columns get a (0-row) page then, as pylance writes them.
    columns_of:
        Column index of every field that owns a column, by field id.
    write_external:
        Stores a buffer out of line and returns its file position (needed by blob fields).
    dict_threshold:
        A string page with fewer distinct values is dictionary-encoded (setting
        ``dict_encoding_threshold`` of the writer's session).

    Returns
    -------
    list of EncodedPage
        One page per column of the field (and its descendants).

    Raises
    ------
    NotSupportedError
        Struct null rows, blobs without an out-of-line writer, types 2.0 cannot hold.
    """
    out: list[EncodedPage] = []
    if len(array) == 0:
        _empty_file_pages(field, columns_of, out)
    else:
        _encode(field, array, columns_of, out, write_external, dict_threshold)
    return out


def _page(
    column: int, enc: m.ArrayEncoding, bufs: PageBuffers, n: int, accumulate: bool = False
) -> EncodedPage:
    return EncodedPage(column, bufs.items, n, array_encoding_to_bytes(enc), accumulate=accumulate)


def _struct_page(column: int, n: int) -> EncodedPage:
    return _page(column, m.SimpleStruct(), PageBuffers(), n, accumulate=True)


def _empty_file_pages(field: LanceField, columns_of: dict[int, int], out: list[EncodedPage]) -> None:
    if field.logical_type == "struct" and not _is_packed_struct(field, columns_of):
        out.append(_struct_page(columns_of[field.id], 0))
    for child in field.children:
        if field.id in columns_of and not _is_packed_struct(field, columns_of):
            _empty_file_pages(child, columns_of, out)


def _encode(
    field: LanceField,
    arr: pa.Array,
    columns_of: dict[int, int],
    out: list[EncodedPage],
    write_external: ExternalWriter | None,
    dict_threshold: int = DICT_ENCODING_THRESHOLD,
) -> None:
    n = len(arr)
    column = columns_of[field.id]
    if pa.types.is_struct(arr.type) and not _is_packed_struct(field, columns_of):
        if arr.null_count:
            raise NotSupportedError(
                f"field {field.name!r}: Lance file version 2.0 does not encode struct validity; "
                "use file version 2.1 or later"
            )
        out.append(_struct_page(column, n))
        for i, child in enumerate(field.children):
            _encode(child, arr.field(i), columns_of, out, write_external, dict_threshold)
        return
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        offs = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        start, end = int(offs[0]), int(offs[-1])
        ends = (offs[1:] - start).astype(np.uint64)
        adjustment = end - start + 1
        if arr.null_count:
            valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            ends[~valid] += np.uint64(adjustment)
        bufs = PageBuffers()
        ref = bufs.add(ends.astype("<u8").tobytes())
        out.append(_page(column, m.List(m.NoNull(m.Flat(64, ref)), adjustment, end - start), bufs, n))
        _encode(
            field.children[0],
            arr.values.slice(start, end - start),
            columns_of,
            out,
            write_external,
            dict_threshold,
        )
        return
    bufs = PageBuffers()
    if _is_blob(field) and pa.types.is_large_binary(arr.type):
        enc = _encode_blob(field, arr, bufs, write_external)
    else:
        enc = encode_values(arr, bufs, field.metadata, field.name, dict_threshold=dict_threshold)
    out.append(_page(column, enc, bufs, n))


def _encode_blob(
    field: LanceField, arr: pa.Array, bufs: PageBuffers, write_external: ExternalWriter | None
) -> m.ArrayEncoding:
    """Store the bytes out of line (one buffer for the page) and describe each row by position and size."""
    n = len(arr)
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    start, end = int(offs[0]), int(offs[-1])
    sizes = np.diff(offs).astype(np.uint64)
    positions = np.zeros(n, dtype=np.uint64)
    if end > start:
        if write_external is None:
            raise NotSupportedError(
                f"field {field.name!r}: blob columns need a writer that stores out-of-line data"
            )
        data = arr.buffers()[2]
        base = write_external(memoryview(data)[start:end])
        positions = (offs[:-1] - start + base).astype(np.uint64)
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    positions[sizes == 0] = 0
    positions[~valid] = _NULL_BLOB[0]
    sizes[~valid] = _NULL_BLOB[1]
    rows = np.stack([positions, sizes], axis=1).astype("<u8")
    ref = bufs.add(rows.tobytes())
    word = m.NoNull(m.Flat(64, m.Buffer(0)))
    return m.PackedStruct((word, word), ref)
