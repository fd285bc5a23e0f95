"""``alter_columns``: rename, change nullability, or cast columns and struct members, as pylance.

Renames and nullability changes are metadata only (a ``Project`` commit). A cast gives the field a
new id (and new ids to its children), writes one new data file per fragment holding the cast
values of every physical row, and commits a ``Merge``; the old values stay in their files under
the old id, which no schema field names any more, and a file left with no field of the new schema
leaves the fragment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError, InvalidTypeError
from lance_format.core.types import LanceField, LanceSchema, check_column_names, fields_from_arrow
from lance_format.dataset.evolve import commit_schema_change, next_field_id, renumber
from lance_format.dataset.indices import dataset_indices
from lance_format.dataset.scanner import LanceScanner
from lance_format.dataset.write import file_columns
from lance_format.file import LanceFileVersion, LanceFileWriter
from lance_format.table.model import DataFile, DataFragment, Manifest, Merge, Project
from lance_format.table.naming import data_file_name

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["alter_columns", "can_alter_type"]

_KEYS = frozenset({"path", "name", "nullable", "data_type"})


@dataclass(frozen=True)
class _Cast:
    old: LanceField
    new: LanceField


def _family(t: pa.DataType) -> str | None:
    """The kind of type a cast may stay within (pylance refuses e.g. int to float or to string)."""
    checks = (
        (pa.types.is_integer, "int"),
        (pa.types.is_floating, "float"),
        (pa.types.is_temporal, "time"),
        (pa.types.is_boolean, "bool"),
        (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "str"),
        (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), "bin"),
        (pa.types.is_decimal, "decimal"),
    )
    return next((name for check, name in checks if check(t)), None)


def _is_list(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t))


def can_alter_type(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether ``alter_columns`` may cast ``source`` to ``target``: within one kind of type
    (integers, floats, temporal, strings, binaries, decimals, booleans), through dictionaries and
    list items, as pylance allows; values that do not fit fail when the data is cast."""
    if pa.types.is_dictionary(source):
        return can_alter_type(source.value_type, target)
    if pa.types.is_dictionary(target):
        return can_alter_type(source, target.value_type)
    if _is_list(source):
        if not _is_list(target):
            return False
        both_fixed = pa.types.is_fixed_size_list(source) and pa.types.is_fixed_size_list(target)
        if both_fixed and source.list_size != target.list_size:
            return False
        return can_alter_type(source.value_type, target.value_type)
    kind = _family(source)
    return kind is not None and kind == _family(target)


def _cast_values(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast as pylance's Arrow cast with errors on: integers that do not fit and timestamp
    overflows fail, time units truncate, decimals round half away from zero."""
    if pa.types.is_dictionary(target):
        values = _cast_values(arr, target.value_type)
        encoded = pc.dictionary_encode(values)
        indices = encoded.indices.cast(target.index_type)  # fails if the index type is too small
        return pa.DictionaryArray.from_arrays(indices, encoded.dictionary)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    source = arr.type
    if _is_list(source) and _is_list(target):
        # Items first (with these rules), then the container, which then converts no value.
        mask = arr.is_null() if arr.null_count else None
        if pa.types.is_fixed_size_list(source):
            n = source.list_size
            values = _cast_values(arr.values.slice(arr.offset * n, len(arr) * n), target.value_type)
            rebuilt: pa.Array = pa.FixedSizeListArray.from_arrays(values, n, mask=mask)
        else:
            values = _cast_values(arr.values, target.value_type)
            cls = pa.LargeListArray if pa.types.is_large_list(source) else pa.ListArray
            rebuilt = cls.from_arrays(arr.offsets, values, mask=mask)
        return pc.cast(rebuilt, target)
    if pa.types.is_decimal(source) and pa.types.is_decimal(target) and target.scale < source.scale:
        arr = pc.round(arr, ndigits=target.scale, round_mode="half_towards_infinity")
    options = pc.CastOptions(target, allow_time_truncate=True, allow_float_truncate=False)
    try:
        return pc.cast(arr, options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise InvalidInputError(f"cannot cast values from {source} to {target}: {e}") from e


def _resolve(schema: LanceSchema, path: str) -> list[LanceField]:
    """The fields from the top level down to ``path`` (a column name, or ``a.b`` into structs)."""
    top = {f.name: f for f in schema.fields}
    if path in top:
        return [top[path]]
    parts = path.split(".")
    chain: list[LanceField] = []
    level = schema.fields
    for part in parts:
        found = next((f for f in level if f.name == part), None)
        if found is None:
            raise InvalidInputError(f'Column "{path}" does not exist in the dataset')
        chain.append(found)
        level = found.children
    return chain


def _replace_in(fields: tuple[LanceField, ...], fid: int, new: LanceField) -> tuple[LanceField, ...]:
    out = []
    for f in fields:
        if f.id == fid:
            out.append(new)
        elif any(c.id == fid for c in f.walk()):
            out.append(replace(f, children=_replace_in(f.children, fid, new)))
        else:
            out.append(f)
    return tuple(out)


def _check_no_nulls(ds: Snapshot, chain: list[LanceField], path: str) -> None:
    column = LanceScanner(ds, columns=[chain[0].name]).to_table().column(0)
    for f in chain[1:]:
        column = pc.struct_field(column, [f.name])
    if column.null_count:
        raise InvalidInputError(f'Column "{path}" contains NULL values and cannot be made non-nullable')


def alter_columns(ds: Snapshot, alterations: list[dict[str, Any]]) -> Manifest:
    """Commit renames, nullability changes and casts of columns or struct members.

    Each alteration is ``{"path": name, "name": new_name, "nullable": bool, "data_type":
    pa.DataType}`` with all but ``path`` optional; ``path`` may name a struct member as ``a.b``.
    Making a field non-nullable is refused while it holds a null; a cast must stay within one kind
    of type (see :func:`can_alter_type`), is refused on an indexed column, and fails (committing
    nothing) when a value does not fit the new type.
    """
    schema = ds.lance_schema
    counter = [next_field_id(ds)]
    casts: list[_Cast] = []
    for alt in alterations:
        if not isinstance(alt, dict) or not isinstance(alt.get("path"), str):
            raise InvalidTypeError(f"an alteration is a dict with a 'path' string, got {alt!r}")
        if set(alt) - _KEYS:
            raise InvalidInputError(
                f"unknown alteration keys {sorted(set(alt) - _KEYS)}; allowed: {sorted(_KEYS)}"
            )
        path = alt["path"]
        original = _resolve(ds.lance_schema, path)
        field, siblings = _by_id(schema, original[-1].id, path)
        if "name" in alt:
            new = alt["name"]
            if (
                not isinstance(new, str)
                or not new
                or any(s.name == new and s.id != field.id for s in siblings)
            ):
                raise InvalidInputError(f"cannot rename {path!r} to {new!r}")
            check_column_names([new])
            field = replace(field, name=new)
        if "nullable" in alt:
            nullable = alt["nullable"]
            if not isinstance(nullable, bool):
                raise InvalidInputError(f"nullable must be a bool, got {nullable!r}")
            if not nullable and original[-1].nullable:
                _check_no_nulls(ds, original, path)
            field = replace(field, nullable=nullable)
        if alt.get("data_type") is not None:
            target = alt["data_type"]
            if not isinstance(target, pa.DataType):
                raise InvalidInputError(f"data_type must be a pyarrow DataType, got {target!r}")
            source = original[-1].to_arrow().type
            if not can_alter_type(source, target):
                raise InvalidInputError(f'Cannot cast column "{path}" from {source} to {target}')
            if any(not pa.types.is_struct(a.to_arrow().type) for a in original[:-1]):
                raise InvalidInputError(
                    f'Cannot cast "{path}": only top-level columns and struct members can be cast'
                )
            shaped = fields_from_arrow(
                pa.schema([pa.field(field.name, target, field.nullable, field.metadata or None)])
            )
            field = renumber(shaped.fields[0], counter, field.parent_id)
            casts.append(_Cast(original[-1], field))
        schema = LanceSchema(_replace_in(schema.fields, original[-1].id, field), dict(schema.metadata))
    if not casts:
        return commit_schema_change(ds, Project(schema))
    _refuse_indexed(ds, casts)
    return commit_schema_change(ds, Merge(_rewrite(ds, schema, casts), schema))


def _by_id(schema: LanceSchema, fid: int, path: str) -> tuple[LanceField, tuple[LanceField, ...]]:
    """The field ``fid`` of the schema being built, and its siblings (for name clashes)."""

    def find(level: tuple[LanceField, ...]) -> tuple[LanceField, tuple[LanceField, ...]] | None:
        for f in level:
            if f.id == fid:
                return f, level
            hit = find(f.children)
            if hit is not None:
                return hit
        return None

    hit = find(schema.fields)
    if hit is None:  # an earlier alteration of this call cast it (and so renumbered it)
        raise InvalidInputError(f"cannot alter {path!r} again after casting it in the same call")
    return hit


def _refuse_indexed(ds: Snapshot, casts: list[_Cast]) -> None:
    old_ids = {c.old.id: c.old.name for c in casts}
    hit = [i for i in dataset_indices(ds) if set(i.fields) & set(old_ids)]
    if hit:
        cols = sorted({old_ids[f] for i in hit for f in i.fields if f in old_ids})
        raise InvalidInputError(
            f"Cannot cast column(s) [{', '.join(cols)}] to a new type: they have {len(hit)} index(es) "
            f"attached: [{', '.join(i.name for i in hit)}]. Drop the index(es) with drop_index() "
            "before altering, then recreate them after the cast completes."
        )


def _projection(schema: LanceSchema, keep: set[int]) -> LanceSchema:
    """``schema`` cut down to the fields in ``keep`` (whole subtrees) and their ancestors."""

    def cut(f: LanceField) -> LanceField | None:
        if f.id in keep:
            return f
        kids = tuple(k for k in (cut(c) for c in f.children) if k is not None)
        return replace(f, children=kids) if kids else None

    kept = tuple(k for k in (cut(f) for f in schema.fields) if k is not None)
    return LanceSchema(kept, {})


def _values(
    column: pa.Array, projected: LanceField, by_new: dict[int, _Cast], old: LanceField, validity: bool
) -> pa.Array:
    """The array of ``projected`` (a cast field, or a struct holding some) from ``column``, the
    stored values of the old field ``old``."""
    cast = by_new.get(projected.id)
    if cast is not None:
        return _cast_values(column, projected.to_arrow().type)
    children = []
    for child in projected.children:
        old_child_id = by_new[child.id].old.id if child.id in by_new else child.id
        old_child = next(c for c in old.children if c.id == old_child_id)
        inner = pc.struct_field(column, [old_child.name])
        children.append(_values(inner, child, by_new, old_child, validity))
    names = [c.name for c in projected.children]
    # 2.0 files have no struct validity (the writer refuses it): the members carry the nulls.
    mask = column.is_null() if validity and column.null_count else None
    return pa.StructArray.from_arrays(children, names=names, mask=mask)


def _rewrite(ds: Snapshot, schema: LanceSchema, casts: list[_Cast]) -> tuple[DataFragment, ...]:
    by_new = {c.new.id: c for c in casts}
    projected = _projection(schema, {c.new.id for c in casts})
    stored_tops = {f.id: f for f in ds.lance_schema.fields}
    tops = [by_new[p.id].old if p.id in by_new else stored_tops[p.id] for p in projected.fields]
    arrow = pa.schema([f.to_arrow() for f in projected.fields])
    version = ds.data_storage_version
    fields, indices = file_columns(projected, LanceFileVersion(version))
    major, minor = LanceFileVersion(version).manifest
    keep_ids = {f.id for f in schema.walk()}
    frags: list[DataFragment] = []
    for frag in ds.manifest.fragments:
        reader = ds.fragment_reader(frag)
        # Every physical row, so the new file lines up with the old ones; a deleted row's slot
        # holds a copy of a live row's value, as pylance writes it (not a null: the field may be
        # non-nullable; not the deleted value: one that would not cast must not fail the cast).
        stored = reader.read_range([t.name for t in tops], 0, frag.physical_rows)
        sources = reader.slot_sources()
        if sources is not None:
            stored = stored.take(pa.array(sources))
        columns = [
            _values(stored.column(i).combine_chunks(), p, by_new, old, version != "2.0")
            for i, (p, old) in enumerate(zip(projected.fields, tops, strict=True))
        ]
        name = data_file_name()
        writer = LanceFileWriter(f"data/{name}", arrow, version=version, store=ds.store)
        writer.write_batch(pa.Table.from_arrays(columns, schema=arrow))
        writer.close()
        new_file = DataFile(name, fields, indices, major, minor, writer.size)
        kept = tuple(df for df in frag.files if any(fid in keep_ids for fid in df.fields))
        frags.append(replace(frag, files=(*kept, new_file)))
    return tuple(frags)
