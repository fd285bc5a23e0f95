"""Projections that name struct members by path (``"ss.in.z"``), as pylance accepts them.

A scan returns such a member as a flat column named by its path (null where any parent is null);
a take returns the member's top-level struct with only the requested members (a parent named
too keeps all of its members). Both read the whole top-level column: a struct's data file
columns are not read member by member here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError, InvalidTypeError

__all__ = ["MemberPath", "check_names", "flatten_member", "member_path", "prune_structs", "take_columns"]


@dataclass(frozen=True)
class MemberPath:
    """A struct member named by a dotted path: its top-level column and child indices below it."""

    name: str
    root: str
    indices: tuple[int, ...]
    field: pa.Field


def _no_column(name: str, schema: pa.Schema) -> InvalidInputError:
    return InvalidInputError(f"no column {name!r} in the dataset; columns are {schema.names}")


def member_path(schema: pa.Schema, name: str) -> MemberPath:
    """Resolve ``name`` (``"s.x"``, ``"ss.in.z"``) to a struct member of ``schema``.

    The output field is named by the path, has the member's type and metadata, and is nullable
    when the member or any struct above it is (pylance's flat column).

    Raises
    ------
    InvalidInputError
        When a part of the path names no struct member.
    """
    parts = name.split(".")
    if len(parts) < 2 or parts[0] not in schema.names:
        raise _no_column(name, schema)
    field = schema.field(parts[0])
    nullable = field.nullable
    indices: list[int] = []
    for part in parts[1:]:
        ftype = field.type
        if not pa.types.is_struct(ftype):
            raise _no_column(name, schema)
        idx = ftype.get_field_index(part)
        if idx < 0:
            raise _no_column(name, schema)
        indices.append(idx)
        field = ftype.field(idx)
        nullable = nullable or field.nullable
    out = pa.field(name, field.type, nullable=nullable, metadata=field.metadata)
    return MemberPath(name, parts[0], tuple(indices), out)


def flatten_member(column: pa.ChunkedArray | pa.Array, path: MemberPath) -> pa.ChunkedArray | pa.Array:
    """The member at ``path`` of its top-level ``column``; null where a parent struct is null."""
    return pc.struct_field(column, list(path.indices))


@dataclass(frozen=True)
class TakeColumns:
    """A take's projection: top-level columns to read, and the struct members to keep of some."""

    #: Top-level columns in the order first named (each once).
    roots: list[str]
    #: For a root named only through members: the member index paths to keep.
    members: dict[str, list[tuple[int, ...]]]


def check_names(columns: object) -> list[str]:
    """``columns`` as a list of names; anything but a sequence of strings is a
    :class:`~lance_format.errors.InvalidTypeError` (pylance's ``TypeError``)."""
    if isinstance(columns, str | bytes) or not isinstance(columns, Sequence):
        raise InvalidTypeError(f"columns must be a list of column names, not {type(columns).__name__}")
    names = list(columns)
    for c in names:
        if not isinstance(c, str):
            raise InvalidTypeError(f"column names are strings, got {c!r}")
    return names


def take_columns(schema: pa.Schema, columns: Sequence[str], named_order: bool = False) -> TakeColumns:
    """Split a take's ``columns`` into top-level columns and member paths (pylance's take keeps a
    pruned struct where a scan would return a flat column). With ``named_order`` a struct named
    whole after some of its members keeps those first (pylance's fragment take)."""
    columns = check_names(columns)
    known = set(schema.names)
    roots: dict[str, None] = {}
    whole: set[str] = set()
    members: dict[str, list[tuple[int, ...]]] = {}
    for c in columns:
        if c in known:
            roots[c] = None
            whole.add(c)
            if c in members:
                members[c].append(())  # every member, after those already named
            continue
        path = member_path(schema, c)
        roots[path.root] = None
        members.setdefault(path.root, []).append(path.indices)
    if named_order:
        # Named whole before any member: its schema order (the paths after it add nothing).
        return TakeColumns(list(roots), {r: p for r, p in members.items() if r not in whole or () in p})
    return TakeColumns(list(roots), {r: p for r, p in members.items() if r not in whole})


def _kept(
    ftype: pa.StructType, paths: list[tuple[int, ...]], named_order: bool
) -> list[tuple[int, list[tuple[int, ...]]]]:
    """The children of ``ftype`` that ``paths`` keep, each with the paths below it (``()``: the
    whole child). In schema order (a dataset's take), or as first named (a fragment's take, where
    naming the struct itself appends its other members at that point)."""
    below: dict[int, list[tuple[int, ...]]] = {}
    for p in paths:
        for i in range(ftype.num_fields) if not p else (p[0],):
            below.setdefault(i, []).append(p[1:] if p else ())
    order = list(below) if named_order else sorted(below)
    return [(i, below[i]) for i in order]


def _pruned_type(ftype: pa.StructType, paths: list[tuple[int, ...]], named_order: bool) -> pa.StructType:
    """The struct type keeping the members at ``paths``."""
    fields = []
    for i, sub in _kept(ftype, paths, named_order):
        child = ftype.field(i)
        if pa.types.is_struct(child.type):  # a whole child too: its members' order may change
            child = child.with_type(_pruned_type(child.type, sub, named_order))
        fields.append(child)
    return pa.struct(fields)


def _prune_array(arr: pa.StructArray, paths: list[tuple[int, ...]], named_order: bool) -> pa.StructArray:
    ftype = _pruned_type(arr.type, paths, named_order)
    if ftype == arr.type:
        return arr
    children = []
    for i, sub in _kept(arr.type, paths, named_order):
        child = arr.field(i)  # the child's own values and validity, offset applied
        if pa.types.is_struct(child.type):
            child = _prune_array(child, sub, named_order)
        children.append(child)
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(ftype), mask=mask)


def pruned_field(field: pa.Field, paths: list[tuple[int, ...]], named_order: bool = False) -> pa.Field:
    """``field`` (a struct) keeping only the members at ``paths`` (in schema order, or in the order
    first named)."""
    return field.with_type(_pruned_type(field.type, paths, named_order))


def prune_structs(
    table: pa.Table, members: dict[str, list[tuple[int, ...]]], named_order: bool = False
) -> pa.Table:
    """``table`` with each struct column of ``members`` reduced to the listed member paths."""
    for root, paths in members.items():
        i = table.schema.get_field_index(root)
        col = table.column(i)
        chunks = [_prune_array(chunk, paths, named_order) for chunk in col.chunks]
        field = pruned_field(table.schema.field(i), paths, named_order)
        table = table.set_column(i, field, pa.chunked_array(chunks, field.type))
    return table
