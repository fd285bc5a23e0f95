"""Cell-by-cell comparison of Arrow tables, with messages that say where they differ.

``assert_tables_equal(ours, theirs)`` checks the schema (names, types, nullability, metadata) and then
every column, recursing through structs, lists and fixed-size lists. On the first difference it fails
with the column, the nested path, the first differing top-level row and both values of that row.

Equality is *logical*, as a reader of the data would see it:

* chunking is ignored (pylance returns one chunk per 1024-row batch);
* floats compare bit for bit (so ``-0.0 != 0.0``), except that any NaN equals any NaN;
* a dictionary array compares by its decoded values (its type, i.e. index and value type, must still
  match). pylance itself returns different dictionaries for the same data depending on the file
  version (2.0 appends a null item), so the dictionary's physical contents are not part of the contract;
* values hidden under a null (child slots of a null struct, items under a null fixed-size list row)
  are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "Difference",
    "assert_arrays_equal",
    "assert_tables_equal",
    "described_indices",
    "first_difference",
    "has_dictionary",
]

_MAX_REPR = 300


@dataclass(frozen=True)
class Difference:
    """Where two arrays first differ: ``index`` in the array compared, ``path`` below it."""

    index: int
    path: str
    what: str


def _value(a: pa.Array, i: int) -> object:
    """Row ``i`` as a Python object, or its Arrow text when Python cannot hold it (year 40000)."""
    try:
        return a[i].as_py()
    except (ValueError, OverflowError, pa.ArrowException):
        return str(a.slice(i, 1).to_string())


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[:_MAX_REPR] + f"... ({len(text)} chars)"


def _undict_type(t: pa.DataType, nullable: bool = False) -> pa.DataType:
    """``t`` with every dictionary type replaced by its value type (and every nested field made
    nullable when ``nullable``: a non-nullable child holds nulls under a null struct row, which a
    cast to a non-nullable field refuses)."""

    def field(f: pa.Field) -> pa.Field:
        g = f.with_type(_undict_type(f.type, nullable))
        return g.with_nullable(True) if nullable else g

    if pa.types.is_dictionary(t):
        return _undict_type(t.value_type, nullable)
    if pa.types.is_struct(t):
        return pa.struct([field(f) for f in t])
    if pa.types.is_large_list(t):
        return pa.large_list(field(t.value_field))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(field(t.value_field), t.list_size)
    if pa.types.is_list(t):
        return pa.list_(field(t.value_field))
    return t


def _has_dict(t: pa.DataType) -> bool:
    return _undict_type(t) != t


def _to_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array with dictionaries decoded (chunk by chunk, so dictionaries may differ)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    target = _undict_type(column.type)
    if target != column.type:
        target = _undict_type(column.type, nullable=True)
        chunks = [c.cast(target) for c in chunks]
    if not chunks:
        return pa.array([], type=target)
    if len(chunks) == 1:
        return chunks[0]
    return pa.concat_arrays(chunks)


def _validity(a: pa.Array) -> np.ndarray:
    if a.null_count == 0:
        return np.ones(len(a), dtype=bool)
    return np.asarray(a.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _first_true(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else None


def _float_bits(a: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    width = a.type.bit_width
    dtype = {16: np.float16, 32: np.float32, 64: np.float64}[width]
    ints = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
    # Null slots may hold anything; fill them so the view below is defined.
    buf = a.buffers()[1]
    values = np.frombuffer(buf, dtype=dtype, count=len(a) + a.offset)[a.offset :] if buf else None
    if values is None:
        values = np.zeros(len(a), dtype=dtype)
    return values, values.view(ints)


def _diff_leaf(a: pa.Array, b: pa.Array, valid: np.ndarray) -> int | None:
    """First index (among valid slots) where two same-typed leaf arrays differ."""
    t = a.type
    if pa.types.is_null(t):
        return None
    if pa.types.is_floating(t):
        va, ba = _float_bits(a)
        vb, bb = _float_bits(b)
        both_nan = np.isnan(va) & np.isnan(vb)
        return _first_true(valid & (ba != bb) & ~both_nan)
    try:
        eq = pc.equal(a, b)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        la, lb = a.to_pylist(), b.to_pylist()
        return next((i for i in range(len(a)) if valid[i] and la[i] != lb[i]), None)
    same = np.asarray(eq.fill_null(True).to_numpy(zero_copy_only=False), dtype=bool)
    return _first_true(valid & ~same)


def _list_parts(a: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Per-row lengths (0 for null rows) and the items of the valid rows, in order."""
    lengths = a.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return lengths, a.flatten()


def first_difference(a: pa.Array, b: pa.Array, path: str = "") -> Difference | None:
    """The first difference between two arrays of equal type (dictionaries already decoded)."""
    if a.type != b.type:
        return Difference(0, path, f"types differ: {a.type} vs {b.type}")
    if len(a) != len(b):
        return Difference(min(len(a), len(b)), path, f"lengths differ: {len(a)} vs {len(b)}")
    t = a.type
    if pa.types.is_null(t):
        return None
    if isinstance(t, pa.ExtensionType):
        return first_difference(a.storage, b.storage, path)
    va, vb = _validity(a), _validity(b)
    i = _first_true(va != vb)
    if i is not None:
        return Difference(i, path, f"validity differs (ours valid={bool(va[i])}, theirs valid={bool(vb[i])})")
    if pa.types.is_struct(t):
        fa, fb = a.flatten(), b.flatten()
        for k, f in enumerate(t):
            d = first_difference(fa[k], fb[k], f"{path}.{f.name}")
            if d is not None:
                return d
        return None
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        if pa.types.is_fixed_size_list(t):
            size = t.list_size
            lengths = np.where(va, size, 0).astype(np.int64)
            items_a, items_b = a.flatten(), b.flatten()
        else:
            lengths, items_a = _list_parts(a)
            lengths_b, items_b = _list_parts(b)
            i = _first_true(lengths != lengths_b)
            if i is not None:
                return Difference(i, path, f"list lengths differ: {lengths[i]} vs {lengths_b[i]}")
        d = first_difference(items_a, items_b, f"{path}[]")
        if d is None:
            return None
        ends = np.cumsum(lengths)
        row = int(np.searchsorted(ends, d.index, side="right"))
        item = d.index - (int(ends[row - 1]) if row else 0)
        return Difference(row, f"{path}[{item}]{d.path[len(path) + 2 :]}", d.what)
    if pa.types.is_map(t) or pa.types.is_union(t):
        la, lb = a.to_pylist(), b.to_pylist()
        i = next((k for k in range(len(a)) if la[k] != lb[k]), None)
        return None if i is None else Difference(i, path, "values differ")
    i = _diff_leaf(a, b, va)
    if i is None:
        return None
    return Difference(i, path, f"values differ: ours={_short(_value(a, i))}, theirs={_short(_value(b, i))}")


def assert_arrays_equal(
    ours: pa.Array | pa.ChunkedArray, theirs: pa.Array | pa.ChunkedArray, name: str = "<array>"
) -> None:
    """Fail with the first differing row of two (chunked) arrays, compared logically."""
    if ours.type != theirs.type:
        raise AssertionError(f"column {name!r}: type {ours.type} != {theirs.type}")
    a, b = _to_array(ours), _to_array(theirs)
    d = first_difference(a, b, "")
    if d is None:
        return
    where = f"{name}{d.path}" if d.path else name
    if d.index < min(len(a), len(b)):
        rows = (
            f"\n  ours  [{d.index}] = {_short(_value(a, d.index))}"
            f"\n  theirs[{d.index}] = {_short(_value(b, d.index))}"
        )
    else:
        rows = ""
    raise AssertionError(f"column {name!r}, at {where!r}, first differing row {d.index}: {d.what}{rows}")


def _schema_diff(ours: pa.Schema, theirs: pa.Schema, check_metadata: bool) -> str | None:
    if ours.names != theirs.names:
        return f"column names differ: {ours.names} vs {theirs.names}"
    for fa, fb in zip(ours, theirs, strict=True):
        if fa.type != fb.type:
            return f"column {fa.name!r}: type {fa.type} != {fb.type}"
        if not fa.equals(fb, check_metadata=check_metadata):
            return f"column {fa.name!r}: field {fa} != {fb} (metadata {fa.metadata} vs {fb.metadata})"
    if check_metadata and (ours.metadata or {}) != (theirs.metadata or {}):
        return f"schema metadata differs: {ours.metadata} vs {theirs.metadata}"
    return None


def assert_tables_equal(
    ours: pa.Table | pa.RecordBatch,
    theirs: pa.Table | pa.RecordBatch,
    *,
    check_metadata: bool = True,
    context: str = "",
) -> None:
    """Assert that two tables hold the same schema and the same cells.

    ``context`` (e.g. ``"case=lists version=2.1 take_rows"``) prefixes the failure message.
    """
    prefix = f"[{context}] " if context else ""
    msg = _schema_diff(ours.schema, theirs.schema, check_metadata)
    if msg:
        raise AssertionError(prefix + "schemas differ: " + msg)
    if ours.num_rows != theirs.num_rows:
        raise AssertionError(prefix + f"row counts differ: ours {ours.num_rows}, theirs {theirs.num_rows}")
    for name, ca, cb in zip(ours.schema.names, ours.columns, theirs.columns, strict=True):
        try:
            assert_arrays_equal(ca, cb, name)
        except AssertionError as e:
            raise AssertionError(prefix + str(e)) from None


def has_dictionary(t: pa.DataType) -> bool:
    """Whether ``t`` contains a dictionary type anywhere."""
    return _has_dict(t)


def described_indices(ds: Any) -> list[tuple[Any, ...]]:
    """``describe_indices()`` of either engine, cell by cell: each index and its segments
    (fragment ids as a sorted list)."""
    return [
        (
            (d.name, d.type_url, d.index_type, d.num_rows_indexed, list(d.fields), list(d.field_names)),
            (len(d.segments), d.total_size_bytes, d.details),
            [
                (
                    *(s.uuid, sorted(s.fragment_ids), s.dataset_version_at_last_update, s.index_version),
                    *(s.created_at, s.base_id, s.size_bytes, list(s.covering_fields)),
                )
                for s in d.segments
            ],
        )
        for d in ds.describe_indices()
    ]
