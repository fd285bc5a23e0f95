"""Schema evolution: add columns (new data files per fragment, or none for all-null columns) and
drop columns; renames and casts are :mod:`lance_format.dataset.alter`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeAlias

import pyarrow as pa

from lance_format.core.errors import InvalidInputError, InvalidTypeError
from lance_format.core.types import LanceField, LanceSchema, check_column_names, fields_from_arrow
from lance_format.dataset.filters import ComputedValue, evaluate, parse_value
from lance_format.dataset.write import file_columns
from lance_format.file import LanceFileVersion, LanceFileWriter
from lance_format.table.commit import commit_transaction
from lance_format.table.model import DataFile, DataFragment, Manifest, Merge, Project, Transaction
from lance_format.table.naming import data_file_name

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["ColumnsToAdd", "add_columns", "add_null_columns", "drop_columns"]


def commit_schema_change(ds: Snapshot, op: Project | Merge) -> Manifest:
    """Commit a schema change (``Project``, or a ``Merge`` with new data files) on ``ds``."""
    txn = Transaction(ds.version, str(uuid.uuid4()), op)
    return commit_transaction(ds.store, txn, ds.manifest, ds.naming)


def drop_columns(ds: Snapshot, columns: list[str]) -> Manifest:
    """Commit a schema without ``columns``; a data file left with none of the schema's fields goes
    out of the manifest (see :mod:`lance_format.table.transaction`), files shared with kept columns
    stay as they are."""
    names = [f.name for f in ds.lance_schema.fields]
    kept = ds.lance_schema.fields
    if isinstance(columns, str | bytes | dict) or not isinstance(columns, Sequence):
        raise InvalidTypeError(f"columns to drop are a list of names, not {type(columns).__name__}")
    if not all(isinstance(c, str) for c in columns):
        raise InvalidTypeError(f"columns to drop are named by strings, got {list(columns)!r}")
    for c in columns:
        if c in names:
            kept = tuple(f for f in kept if f.name != c)
            continue
        # A struct member by path (``"s.x"``), as pylance drops it; a struct left with no member
        # goes too. Dropped already (a parent named too) is fine.
        parts = c.split(".")
        if len(parts) < 2 or not _has_path(ds.lance_schema.fields, parts):
            raise InvalidInputError(f"cannot drop {c!r}: no such column; columns are {names}")
        kept = _without_path(kept, parts)
    if not kept:
        raise InvalidInputError("cannot drop every column of a dataset")
    return commit_schema_change(ds, Project(LanceSchema(kept, dict(ds.lance_schema.metadata))))


def _has_path(fields: tuple[LanceField, ...], parts: list[str]) -> bool:
    """Whether ``parts`` names a field through struct members (never into a list)."""
    for f in fields:
        if f.name == parts[0]:
            return len(parts) == 1 or (f.logical_type == "struct" and _has_path(f.children, parts[1:]))
    return False


def _without_path(fields: tuple[LanceField, ...], parts: list[str]) -> tuple[LanceField, ...]:
    """``fields`` without the member at ``parts``; structs left empty are removed too."""
    out = []
    for f in fields:
        if f.name != parts[0]:
            out.append(f)
        elif len(parts) > 1:
            kids = _without_path(f.children, parts[1:])
            if kids:
                out.append(replace(f, children=kids))
    return tuple(out)


def renumber(f: LanceField, next_id: list[int], parent: int) -> LanceField:
    """``f`` and its children with ids from ``next_id[0]`` on (pre-order), under ``parent``."""
    fid = next_id[0]
    next_id[0] += 1
    kids = tuple(renumber(c, next_id, fid) for c in f.children)
    return replace(f, id=fid, parent_id=parent, children=kids)


def next_field_id(ds: Snapshot) -> int:
    """The first id after every id the schema or any data file holds."""
    in_files = (fid for frag in ds.manifest.fragments for df in frag.files for fid in df.fields)
    return max(ds.lance_schema.max_field_id, *in_files, -1) + 1


def _new_fields(ds: Snapshot, schema: pa.Schema) -> LanceSchema:
    """Lance fields for new columns, numbered after the dataset's largest field id."""
    # After every id any data file still holds (a dropped column's data can stay in a file that
    # keeps other columns): a reused id would read that old column's data, as pylance numbers too.
    counter = [next_field_id(ds)]
    return LanceSchema(tuple(renumber(f, counter, -1) for f in fields_from_arrow(schema).fields))


#: What ``add_columns`` takes: SQL expressions by name, or the fields of all-null columns.
ColumnsToAdd: TypeAlias = "dict[str, str] | pa.Field | list[pa.Field] | pa.Schema"


def add_null_columns(ds: Snapshot, fields: pa.Schema) -> Manifest:
    """Commit all-null columns as a metadata-only change, as pylance does: the schema grows, no
    data file is written, and readers return nulls for fields no data file holds."""
    check_column_names(fields.names)
    for f in fields:
        if f.name in ds.schema.names:
            raise InvalidInputError(f"column {f.name!r} already exists in the dataset")
        if not f.nullable:
            raise InvalidInputError(f"all-null columns must be nullable, but field {f.name!r} is not")
    new = _new_fields(ds, fields)
    schema = LanceSchema(ds.lance_schema.fields + new.fields, dict(ds.lance_schema.metadata))
    return commit_schema_change(ds, Merge(ds.manifest.fragments, schema))


def add_columns(ds: Snapshot, transforms: ColumnsToAdd) -> Manifest:
    """Commit new columns: SQL expressions over existing ones (one new file per fragment), or
    all-null columns given as a ``pa.Field``, a list of them or a ``pa.Schema`` (no data files)."""
    if isinstance(transforms, pa.Field):
        transforms = [transforms]
    if isinstance(transforms, list) and all(isinstance(f, pa.Field) for f in transforms):
        transforms = pa.schema(transforms)
    if isinstance(transforms, pa.Schema):
        if not len(transforms):
            raise InvalidInputError("add_columns needs at least one column")
        return add_null_columns(ds, transforms)
    if not isinstance(transforms, dict):
        raise InvalidInputError(
            "add_columns takes {name: SQL expression}, a pyarrow Field, a list of Fields or a Schema; "
            f"got {type(transforms).__name__}"
        )
    if not transforms:
        raise InvalidInputError("add_columns needs at least one column")
    arrow = ds.schema
    check_column_names(transforms)
    for name in transforms:
        if name in arrow.names:
            raise InvalidInputError(f"column {name!r} already exists")
    exprs = {}
    needed: set[str] = set()
    for name, sql in transforms.items():
        value = exprs[name] = _sql_value(sql, arrow)
        needed |= value.columns
    read = [c for c in arrow.names if c in needed]
    version = ds.data_storage_version
    frags: list[DataFragment] = []
    new_arrow: pa.Schema | None = None
    new_lance: LanceSchema | None = None
    for frag in ds.manifest.fragments:
        reader = ds.fragment_reader(frag)
        # Every physical row (deleted ones too): the new file must line up with the old ones. A
        # deleted row's slot is computed from a copy of a live row, as pylance fills it: the
        # expressions never see deleted values (one failing there must not fail the write).
        stored = reader.read_range(read, 0, frag.physical_rows)
        sources = reader.slot_sources()
        if sources is not None and stored.num_columns:  # (a take of no columns keeps no rows)
            stored = stored.take(pa.array(sources))
        values = evaluate(stored, exprs)
        if new_arrow is None:
            new_arrow = values.schema
            new_lance = _new_fields(ds, new_arrow)
        assert new_lance is not None
        name = data_file_name()
        writer = LanceFileWriter(f"data/{name}", new_arrow, version=version, store=ds.store)
        writer.write_batch(values.cast(new_arrow))
        writer.close()
        fields, indices = file_columns(new_lance, LanceFileVersion(version))
        major, minor = LanceFileVersion(version).manifest
        data_file = DataFile(name, fields, indices, major, minor, writer.size)
        frags.append(replace(frag, files=(*frag.files, data_file)))
    if new_lance is None:  # no fragments: only the schema changes
        empty = pa.schema([arrow.field(c) for c in read]).empty_table()
        new_lance = _new_fields(ds, evaluate(empty, exprs).schema)
    schema = LanceSchema(ds.lance_schema.fields + new_lance.fields, dict(ds.lance_schema.metadata))
    return commit_schema_change(ds, Merge(tuple(frags), schema))


def _sql_value(sql: str, schema: pa.Schema) -> ComputedValue:
    if not isinstance(sql, str):
        raise InvalidTypeError("add_columns takes SQL expression strings")
    return parse_value(sql, schema)
