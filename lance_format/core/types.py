"""Arrow <-> Lance field trees.

Lance stores a schema as a flat list of fields in depth-first pre-order; each field names its parent
by id and carries a *logical type* string (``"int32"``, ``"timestamp:us:UTC"``, ``"list"``, ...).
:class:`LanceField` is that node as a tree; :func:`fields_from_arrow` and :func:`schema_to_arrow`
convert both ways.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute

from lance_format.core.errors import CorruptFileError, InvalidInputError, NotSupportedError
from lance_format.core.jsonb import (
    JSON_EXTENSION_NAME,
    decode_jsonb,
    encode_jsonb,
    is_json_type,
    json_arrow_type,
)
from lance_format.core.records import fast_init

__all__ = [
    "RESERVED_COLUMNS",
    "LanceField",
    "LanceSchema",
    "LegacyEncoding",
    "arrow_type_to_logical",
    "check_column_names",
    "empty_array",
    "fields_from_arrow",
    "json_from_storage",
    "json_to_storage",
    "logical_to_arrow_type",
    "utf8_metadata",
]


_EXTENSION_PREFIX = "ARROW:extension:"
_JSON_FIELD_METADATA = {"ARROW:extension:name": JSON_EXTENSION_NAME, "ARROW:extension:metadata": b""}


class LegacyEncoding:
    """``Field.encoding`` values pylance still writes (legacy, informational)."""

    NONE = 0
    PLAIN = 1
    VAR_BINARY = 2
    DICTIONARY = 3
    RLE = 4


_SIMPLE: dict[str, pa.DataType] = {
    "null": pa.null(),
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "uint8": pa.uint8(),
    "int16": pa.int16(),
    "uint16": pa.uint16(),
    "int32": pa.int32(),
    "uint32": pa.uint32(),
    "int64": pa.int64(),
    "uint64": pa.uint64(),
    "halffloat": pa.float16(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "large_string": pa.large_string(),
    "large_binary": pa.large_binary(),
    "json": pa.large_binary(),
    "date32:day": pa.date32(),
    "date64:ms": pa.date64(),
}
_SIMPLE_NAMES: dict[pa.DataType, str] = {v: k for k, v in _SIMPLE.items() if k != "json"}


def arrow_type_to_logical(t: pa.DataType) -> str:
    """Lance logical type string of an Arrow type (the node itself, not its children)."""
    if is_json_type(t):
        return "json"
    name = _SIMPLE_NAMES.get(t)
    if name is not None:
        return name
    if pa.types.is_decimal128(t):
        return f"decimal:128:{t.precision}:{t.scale}"
    if pa.types.is_decimal256(t):
        return f"decimal:256:{t.precision}:{t.scale}"
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        return f"time{t.bit_width}:{t.unit}"
    if pa.types.is_timestamp(t):
        return f"timestamp:{t.unit}:{t.tz if t.tz is not None else '-'}"
    if pa.types.is_duration(t):
        return f"duration:{t.unit}"
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_large_list(t):
        return "large_list.struct" if pa.types.is_struct(t.value_type) else "large_list"
    if pa.types.is_list(t):
        return "list.struct" if pa.types.is_struct(t.value_type) else "list"
    if pa.types.is_fixed_size_list(t):
        return f"fixed_size_list:{arrow_type_to_logical(t.value_type)}:{t.list_size}"
    if pa.types.is_fixed_size_binary(t):
        return f"fixed_size_binary:{t.byte_width}"
    if pa.types.is_dictionary(t):
        value = arrow_type_to_logical(t.value_type)
        if ":" in value:
            # "dict:{value}:{index}:false" must split back into four parts; pylance refuses too.
            raise NotSupportedError(
                f"cannot store dictionary type {t}: Lance's logical type for its values ({value!r}) "
                "does not fit a dictionary type; store the values without dictionary encoding"
            )
        return f"dict:{value}:{arrow_type_to_logical(t.index_type)}:false"
    raise NotSupportedError(f"Arrow type {t} has no Lance logical type")


def _unit(s: str, allowed: tuple[str, ...], lt: str) -> str:
    if s not in allowed:
        raise ValueError(f"bad time unit in logical type {lt!r}")
    return s


def logical_to_arrow_type(lt: str, children: Sequence[pa.Field] = ()) -> pa.DataType:
    """Arrow type of a Lance logical type string; ``children`` are the Arrow child fields.

    Raises ``ValueError`` for an unknown or malformed string.
    """
    simple = _SIMPLE.get(lt)
    if simple is not None:
        return simple
    parts = lt.split(":")
    head = parts[0]
    if head == "decimal" and len(parts) == 4:
        p, s = int(parts[2]), int(parts[3])
        return pa.decimal128(p, s) if parts[1] == "128" else pa.decimal256(p, s)
    if head == "time32" and len(parts) == 2:
        return pa.time32(_unit(parts[1], ("s", "ms"), lt))
    if head == "time64" and len(parts) == 2:
        return pa.time64(_unit(parts[1], ("us", "ns"), lt))
    if head == "timestamp" and len(parts) >= 3:
        tz = ":".join(parts[2:])  # a tz such as "+05:30" contains a colon
        return pa.timestamp(_unit(parts[1], ("s", "ms", "us", "ns"), lt), None if tz == "-" else tz)
    if head == "duration" and len(parts) == 2:
        return pa.duration(_unit(parts[1], ("s", "ms", "us", "ns"), lt))
    if lt == "struct":
        return pa.struct(list(children))
    if lt in ("list", "list.struct", "large_list", "large_list.struct"):
        if len(children) != 1:
            raise ValueError(f"{lt} field needs exactly one child, has {len(children)}")
        return pa.large_list(children[0]) if lt.startswith("large") else pa.list_(children[0])
    if head == "fixed_size_list" and len(parts) >= 3:
        item_lt = ":".join(parts[1:-1])
        if item_lt == "lance.bfloat16":
            raise NotSupportedError("bfloat16 vectors are not supported")
        item = pa.field("item", logical_to_arrow_type(item_lt), nullable=True)
        return pa.list_(item, int(parts[-1]))
    if head == "fixed_size_binary" and len(parts) == 2:
        return pa.binary(int(parts[1]))
    if head == "dict" and len(parts) == 4:
        return pa.dictionary(logical_to_arrow_type(parts[2]), logical_to_arrow_type(parts[1]))
    raise ValueError(f"unknown logical type {lt!r}")


@fast_init
@dataclass(frozen=True)
class LanceField:
    """One node of a Lance schema.

    Attributes
    ----------
    id, parent_id:
        Field ids; ``parent_id`` is -1 at the top level.
    name:
        The field's own name (not a dotted path).
    logical_type:
        Lance logical type string.
    nullable:
        Whether nulls are allowed.
    metadata:
        Arrow field metadata.
    children:
        Child fields (struct members, or the single list item).
    """

    id: int
    parent_id: int
    name: str
    logical_type: str
    nullable: bool = True
    metadata: dict[str, bytes] = field(default_factory=dict)
    children: tuple[LanceField, ...] = ()
    encoding: int = LegacyEncoding.NONE

    @property
    def arrow_type(self) -> pa.DataType:
        return logical_to_arrow_type(self.logical_type, [c.to_arrow() for c in self.children])

    def to_arrow(self) -> pa.Field:
        """This field as an Arrow field (children included)."""
        # Memoized: takes convert the same fields on every call. The dataclass is frozen (a
        # changed field is a new object), so the entry cannot go stale; __dict__ bypasses frozen.
        cached: pa.Field | None = self.__dict__.get("_arrow_field")
        if cached is None:
            cached = pa.field(self.name, self.arrow_type, self.nullable, self.metadata or None)
            self.__dict__["_arrow_field"] = cached
        return cached

    @property
    def has_json(self) -> bool:
        """Whether this field or a descendant is Lance's JSON type (JSONB bytes on disk)."""
        # Memoized like to_arrow: every decoded column asks, one-row takes included.
        known: bool | None = self.__dict__.get("_has_json")
        if known is None:
            # A leaf (most fields) without the walk: every decoded column asks on a new field.
            known = (
                any(f.logical_type == "json" for f in self.walk())
                if self.children
                else self.logical_type == "json"
            )
            self.__dict__["_has_json"] = known
        return known

    def to_logical_arrow(self) -> pa.Field:
        """This field as users see it: :meth:`to_arrow`, except that JSON fields are ``pa.json_()``
        text (stored as JSONB ``large_binary``, see :mod:`lance_format.core.jsonb`)."""
        if not self.has_json:
            return self.to_arrow()
        cached: pa.Field | None = self.__dict__.get("_logical_field")
        if cached is None:
            meta = {k: v for k, v in self.metadata.items() if not k.startswith(_EXTENSION_PREFIX)}
            if self.logical_type == "json":
                typ = json_arrow_type()
            else:
                typ = logical_to_arrow_type(self.logical_type, [c.to_logical_arrow() for c in self.children])
            cached = pa.field(self.name, typ, self.nullable, meta or None)
            self.__dict__["_logical_field"] = cached
        return cached

    def walk(self) -> Iterator[LanceField]:
        """This field and its descendants, depth-first pre-order."""
        yield self
        for c in self.children:
            yield from c.walk()

    @property
    def is_leaf(self) -> bool:
        """No children: a value column, or an empty struct (2.1+ files give it a column too)."""
        return not self.children

    @property
    def is_empty_struct(self) -> bool:
        """A ``struct<>``: rows but no values."""
        return not self.children and self.logical_type == "struct"


@fast_init
@dataclass(frozen=True)
class LanceSchema:
    """Top-level fields plus schema metadata."""

    fields: tuple[LanceField, ...]
    metadata: dict[str, bytes] = field(default_factory=dict)

    def to_arrow(self) -> pa.Schema:
        # Memoized like LanceField.to_arrow (frozen, so never stale).
        cached: pa.Schema | None = self.__dict__.get("_arrow_schema")
        if cached is None:
            # As users see it: JSON fields are pa.json_() (their storage type is only in the files).
            cached = pa.schema([f.to_logical_arrow() for f in self.fields], metadata=self.metadata or None)
            self.__dict__["_arrow_schema"] = cached
        return cached

    def to_pyarrow(self) -> pa.Schema:
        """The Arrow schema (pylance's ``LanceSchema.to_pyarrow``; same as :meth:`to_arrow`)."""
        return self.to_arrow()

    def walk(self) -> Iterator[LanceField]:
        for f in self.fields:
            yield from f.walk()

    def flat(self) -> list[LanceField]:
        """All fields, depth-first pre-order (the order Lance stores them in)."""
        return list(self.walk())

    def field_by_name(self, name: str) -> LanceField:
        # A dict built once (frozen, so never stale): lookups of every column stay linear in all.
        by_name: dict[str, LanceField] | None = self.__dict__.get("_by_name")
        if by_name is None:
            by_name = {}
            for f in self.fields:
                by_name.setdefault(f.name, f)  # the first of a name, as the scan always found
            self.__dict__["_by_name"] = by_name
        return by_name[name]

    def field_by_path(self, path: str) -> LanceField:
        """The field at ``path``: a top-level name, else ``a.b`` down through the children (struct
        members, ``item`` of a list). Raises ``KeyError`` when there is none."""
        with contextlib.suppress(KeyError):
            return self.field_by_name(path)
        level, found = self.fields, None
        for part in path.split("."):
            found = next((f for f in level if f.name == part), None)
            if found is None:
                raise KeyError(path)
            level = found.children
        assert found is not None  # split() gives one part at least
        return found

    @property
    def max_field_id(self) -> int:
        return max((f.id for f in self.walk()), default=-1)

    @staticmethod
    def from_flat(
        fields: Sequence[LanceField], metadata: dict[str, bytes] | None = None, path: str = "<schema>"
    ) -> LanceSchema:
        """Rebuild the tree from a flat list; each parent must come before its children."""
        children: dict[int, list[LanceField]] = {}
        order: list[LanceField] = []
        seen: set[int] = set()
        for f in fields:
            if f.id in seen:
                raise CorruptFileError(path, f"duplicate field id {f.id}")
            if f.parent_id != -1 and f.parent_id not in seen:
                raise CorruptFileError(
                    path, f"field {f.name!r} (id {f.id}) names unknown parent {f.parent_id}"
                )
            seen.add(f.id)
            children.setdefault(f.parent_id, []).append(f)
            order.append(f)

        return LanceSchema(tuple(_build(f, children) for f in children.get(-1, [])), dict(metadata or {}))


def _build(f: LanceField, children: dict[int, list[LanceField]]) -> LanceField:
    """``f`` with its subtree from ``children`` (by parent id). A module function, not a closure
    calling itself: that is a reference cycle, left to the cycle collector on every schema read."""
    kids = children.get(f.id)
    if not kids and not f.children:
        return f  # a leaf as given: a copy would cost a dataclass rebuild per field
    return replace(f, children=tuple(_build(c, children) for c in kids or ()))


def _legacy_encoding(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return LegacyEncoding.NONE
    if pa.types.is_dictionary(t):
        return LegacyEncoding.DICTIONARY
    if is_json_type(t):
        return LegacyEncoding.VAR_BINARY
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return LegacyEncoding.VAR_BINARY
    return LegacyEncoding.PLAIN


#: Names of the columns a scan or take adds itself (row ids, addresses, offsets, row versions):
#: a dataset column of one of these names could not be told apart from them, so pylance refuses
#: them in a dataset and so do we.
RESERVED_COLUMNS = frozenset(
    {"_rowid", "_rowaddr", "_rowoffset", "_row_created_at_version", "_row_last_updated_at_version"}
)


def check_column_names(names: Iterable[str]) -> None:
    """Refuse top-level dataset column names in :data:`RESERVED_COLUMNS` (:class:`InvalidInputError`)."""
    for name in names:
        if name in RESERVED_COLUMNS:
            raise InvalidInputError(
                f"the column {name} is a reserved name and cannot be used in a Lance dataset"
            )


def fields_from_arrow(schema: pa.Schema, first_id: int = 0) -> LanceSchema:
    """Assign Lance field ids depth-first from ``first_id`` and build the tree."""
    next_id = first_id

    def convert(f: pa.Field, parent: int) -> LanceField:
        nonlocal next_id
        fid = next_id
        next_id += 1
        t = f.type
        if pa.types.is_map(t) or pa.types.is_union(t) or pa.types.is_list_view(t):
            raise NotSupportedError(f"field {f.name!r}: Arrow type {t} is not supported by Lance")
        logical = arrow_type_to_logical(t)
        kids: list[LanceField] = []
        if pa.types.is_struct(t):
            kids = [convert(t.field(i), fid) for i in range(t.num_fields)]
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            kids = [convert(t.value_field, fid)]
        meta = utf8_metadata(f.metadata, f"field {f.name!r}")
        if logical == "json":  # the extension metadata pylance stores with a JSON field
            meta.update(_JSON_FIELD_METADATA)
        return LanceField(fid, parent, f.name, logical, f.nullable, meta, tuple(kids), _legacy_encoding(t))

    seen: set[str] = set()
    for name in schema.names:
        # As pylance: a second top-level column of one name could never be projected or read back.
        if name in seen:
            raise InvalidInputError(f"duplicate field name {name!r} in schema")
        seen.add(name)
    fields = tuple(convert(f, -1) for f in schema)
    return LanceSchema(fields, utf8_metadata(schema.metadata, "schema"))


def utf8_metadata(
    metadata: Mapping[bytes, bytes] | Mapping[str, bytes] | None, where: str
) -> dict[str, bytes]:
    """Arrow metadata as Lance stores it, refusing keys or values that are not UTF-8.

    Lance keeps metadata as strings; pylance refuses non-UTF-8 bytes with a ``ValueError`` rather
    than storing replacement characters, and so do we (:class:`InvalidInputError` is one).
    """
    out: dict[str, bytes] = {}
    for k, v in (metadata or {}).items():
        try:
            key = k.decode() if isinstance(k, bytes) else k
            if isinstance(v, bytes):
                v.decode()
        except UnicodeDecodeError:
            raise InvalidInputError(
                f"{where} metadata entry {k!r} is not valid UTF-8 (Lance stores metadata as text; "
                "base64-encode binary metadata)"
            ) from None
        out[key] = v if isinstance(v, bytes) else str(v).encode()
    return out


def _rebuild(arr: pa.Array, typ: pa.DataType, convert: Any) -> pa.Array:
    """``arr`` with its JSON descendants converted (struct and list nesting)."""
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(arr.type):
        kids = convert(arr)
        return pa.StructArray.from_arrays(kids, fields=list(typ), mask=mask)
    offsets = arr.offsets
    first = offsets[0].as_py()
    values = arr.values.slice(first, offsets[-1].as_py() - first)
    rebased = pa.compute.subtract(offsets, pa.scalar(first, offsets.type))
    builder = pa.LargeListArray if pa.types.is_large_list(arr.type) else pa.ListArray
    return builder.from_arrays(rebased, convert(values), type=typ, mask=mask)


def _convert_json(field: LanceField, arr: pa.Array | pa.ChunkedArray, to_storage: bool, path: str) -> Any:
    if not field.has_json:
        return arr
    if isinstance(arr, pa.ChunkedArray):
        chunks = [_convert_json(field, c, to_storage, path) for c in arr.chunks]
        typ = field.to_arrow().type if to_storage else field.to_logical_arrow().type
        return pa.chunked_array(chunks, type=typ)
    if field.logical_type == "json":
        return encode_jsonb(arr) if to_storage else decode_jsonb(arr, path)
    typ = field.to_arrow().type if to_storage else field.to_logical_arrow().type
    if pa.types.is_struct(arr.type):
        return _rebuild(
            arr,
            typ,
            lambda a: [_convert_json(c, a.field(i), to_storage, path) for i, c in enumerate(field.children)],
        )
    return _rebuild(arr, typ, lambda values: _convert_json(field.children[0], values, to_storage, path))


def json_to_storage(field: LanceField, arr: pa.Array | pa.ChunkedArray) -> Any:
    """Rows of ``field`` as stored: its JSON values (at any depth) become JSONB bytes.

    Raises
    ------
    InvalidInputError
        A JSON value does not parse.
    """
    return _convert_json(field, arr, True, "<json>")


def json_from_storage(field: LanceField, arr: pa.Array | pa.ChunkedArray, path: str) -> Any:
    """Decoded rows of ``field`` as users see them: JSONB bytes become ``pa.json_()`` text."""
    return _convert_json(field, arr, False, path)


def empty_array(t: pa.DataType) -> pa.Array:
    """An empty array of type ``t`` (its dictionary empty too, for dictionary types).

    ``pa.array([], type=t)`` has no converter for some dictionary types on pyarrow 18-21
    (``dictionary<large_string>``), and ``pa.nulls(0, t)`` gives a dictionary holding a null, which
    later concatenations cannot unify.
    """
    try:
        return pa.array([], type=t)
    except pa.ArrowNotImplementedError:
        pass
    if pa.types.is_dictionary(t):
        return pa.DictionaryArray.from_arrays(
            pa.array([], type=t.index_type), empty_array(t.value_type), ordered=t.ordered
        )
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([empty_array(f.type) for f in t], fields=list(t))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        offsets = pa.array([0], pa.int64() if pa.types.is_large_list(t) else pa.int32())
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return cls.from_arrays(offsets, empty_array(t.value_type), type=t)
    if pa.types.is_fixed_size_list(t):
        return pa.FixedSizeListArray.from_arrays(empty_array(t.value_type), type=t)
    return pa.nulls(0, t)
