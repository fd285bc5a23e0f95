"""Columns of a fragment put together from its data files by field id.

A column usually lives in one data file, but a struct's members can be spread over several: a
cast of ``s.x`` (``alter_columns``) or a new member added to ``s`` writes only that member into a
new file. Members are matched by field id, never by name or position, so a renamed member, a
dropped one still stored in an old file, or a dropped-and-re-added name reads as pylance reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.records import fast_init
from lance_format.core.types import LanceField, LanceSchema

__all__ = ["LeafPaths", "Placement", "assemble_column", "held_leaves", "leaf_ids", "place_fields"]

#: Dataset leaf field id -> positional path (child indexes) of its column under the file's
#: top-level field.
LeafPaths = dict[int, tuple[int, ...]]


@fast_init
@dataclass(frozen=True)
class Placement:
    """Where one file holds (some of) a dataset top-level field."""

    field: LanceField  # the dataset's top-level field
    file_field: LanceField  # the file's own top-level field holding it
    paths: LeafPaths


def leaf_ids(field: LanceField) -> frozenset[int]:
    """Ids of ``field``'s leaves: the fields that own a column in every file version."""
    cached: frozenset[int] | None = field.__dict__.get("_leaf_ids")
    if cached is None:
        # A leaf (most columns) without the walk: a cold take asks for every field it reads.
        cached = (
            frozenset(x.id for x in field.walk() if not x.children)
            if field.children
            else frozenset((field.id,))
        )
        field.__dict__["_leaf_ids"] = cached  # frozen dataclass: a changed field is a new object
    return cached


def _paths(top: LanceField) -> dict[int, tuple[int, ...]]:
    out: dict[int, tuple[int, ...]] = {}
    _walk_paths(top, (), out)
    return out


# Recursive walks are module functions, not closures: a closure that calls itself is a reference
# cycle, garbage only the cycle collector frees (cold takes made ~150 such objects each, a
# collection every ~5 takes and a full one every few hundred).
def _walk_paths(f: LanceField, path: tuple[int, ...], out: dict[int, tuple[int, ...]]) -> None:
    out[f.id] = path
    for i, c in enumerate(f.children):
        _walk_paths(c, (*path, i), out)


def place_fields(
    wanted: Sequence[LanceField],
    col_of: Mapping[int, int],
    file_schema: LanceSchema,
    file_field_of_column: Mapping[int, int],
    covered: dict[int, set[int]],
) -> list[Placement]:
    """The dataset fields ``wanted`` that this file holds leaves of (not already ``covered`` by an
    earlier file), each with the file's field and the path of every leaf in it.

    ``col_of`` maps dataset field ids to the file's column indexes (the data file's ``fields`` /
    ``column_indices``), ``file_field_of_column`` the file's columns to its own field ids.
    """
    tops: dict[int, tuple[LanceField, tuple[int, ...]]] = {}
    for top in file_schema.fields:
        for fid, path in _paths(top).items():
            tops[fid] = (top, path)
    out = []
    for f in wanted:
        done = covered.setdefault(f.id, set())
        file_top: LanceField | None = None
        paths: LeafPaths = {}
        for lid, (owner, rel) in held_leaves(f, col_of).items():
            if lid in done:
                continue
            hit = tops.get(file_field_of_column.get(col_of[owner], -1))
            if hit is None:
                continue
            top, path = hit
            if file_top is not None and top.id != file_top.id:
                continue  # one file gives one top-level field per dataset field
            file_top = top
            paths[lid] = path + rel
        if file_top is None:
            continue
        done.update(paths)
        out.append(Placement(f, file_top, paths))
    return out


def held_leaves(field: LanceField, col_of: Mapping[int, int]) -> dict[int, tuple[int, tuple[int, ...]]]:
    """``field``'s leaves a data file holds: leaf id -> (the field owning the column, the leaf's
    path under it). A leaf owns its column, except under a packed struct, whose one column holds
    all its members (its leaves have none)."""
    out: dict[int, tuple[int, tuple[int, ...]]] = {}
    _walk_held(field, col_of, out)
    return out


def _walk_held(x: LanceField, col_of: Mapping[int, int], out: dict[int, tuple[int, tuple[int, ...]]]) -> None:
    if x.id in col_of and (not x.children or not any(i in col_of for i in leaf_ids(x))):
        out.update((lid, (x.id, rel)) for lid, rel in _dataset_paths(x).items())
        return
    for c in x.children:
        _walk_held(c, col_of, out)


def _dataset_paths(field: LanceField) -> LeafPaths:
    cached: LeafPaths | None = field.__dict__.get("_leaf_paths")
    if cached is None:
        if not field.children:
            cached = {field.id: ()}  # a leaf: itself, at the top
        else:
            ids = leaf_ids(field)
            cached = {fid: p for fid, p in _paths(field).items() if fid in ids}
        field.__dict__["_leaf_paths"] = cached
    return cached


def assemble_column(
    field: LanceField, sources: Sequence[tuple[pa.ChunkedArray, LeafPaths]], n: int
) -> pa.ChunkedArray | pa.Array:
    """``field``'s column from the files' arrays that hold its leaves; members no file holds
    read as nulls."""
    target = field.to_arrow().type
    if not sources:
        return pa.nulls(n, target)
    if len(sources) == 1 and sources[0][1] == _dataset_paths(field):
        col = sources[0][0]  # laid out as the dataset says: only names may differ ...
        if col.type.equals(target):
            return col
        if _same_members(col.type, target):
            return _relabel(col, target)
        # ... unless the file's struct still holds members the dataset dropped: a cast matches
        # members by name, so a renamed one read as nulls. Taken by position below.
    if not pa.types.is_struct(target) or not field.children:
        return _relabel(sources[0][0], target)
    return _struct(
        field, [(a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a, p) for a, p in sources], n
    )


def _same_members(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether every struct in ``want`` has as many members as the one at its place in ``have``
    (names aside): then :func:`_relabel` can map them by position."""
    if not pa.types.is_struct(want):
        return True
    if not pa.types.is_struct(have) or have.num_fields != want.num_fields:
        return False
    return all(_same_members(have.field(i).type, want.field(i).type) for i in range(want.num_fields))


def _struct(field: LanceField, sources: Sequence[tuple[pa.Array, LeafPaths]], n: int) -> pa.Array:
    children = []
    for child in field.children:
        ids = leaf_ids(child)
        picked = []
        for arr, paths in sources:
            sub = {lid: p for lid, p in paths.items() if lid in ids}
            if sub:
                index = next(iter(sub.values()))[0]
                inner = pc.struct_field(arr, [index])
                picked.append((inner, {lid: p[1:] for lid, p in sub.items()}))
        children.append(_member(child, picked, n))
    parent = sources[0][0]
    mask = parent.is_null() if parent.null_count else None
    return pa.StructArray.from_arrays(children, fields=[c.to_arrow() for c in field.children], mask=mask)


def _member(field: LanceField, sources: Sequence[tuple[pa.Array, LeafPaths]], n: int) -> pa.Array:
    target = field.to_arrow().type
    if not sources:
        return pa.nulls(n, target)
    if pa.types.is_struct(target) and field.children:
        return _struct(field, sources, n)
    return _relabel(sources[0][0], target)


def _relabel(arr: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``arr`` as ``target`` when only field names differ (a renamed member): structs rebuilt by
    position, since a cast matches struct members by name."""
    if arr.type.equals(target):
        return arr
    if (
        pa.types.is_struct(target)
        and pa.types.is_struct(arr.type)
        and arr.type.num_fields == target.num_fields
    ):
        if isinstance(arr, pa.ChunkedArray):
            return pa.chunked_array([_relabel(c, target) for c in arr.chunks], target)
        kids = [_relabel(pc.struct_field(arr, [i]), target.field(i).type) for i in range(target.num_fields)]
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(kids, fields=list(target), mask=mask)
    return arr.cast(target)
