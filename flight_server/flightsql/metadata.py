"""Answers to Flight SQL metadata commands, with the exact result schemas the protocol requires.

One catalog (``lance``) holds one schema (``main``) holding every dataset as a ``TABLE``.
Primary keys are the fields Lance marks ``lance-schema:unenforced-primary-key``; Lance has no
foreign keys, so the key commands answer no rows. Transactions are not supported (SqlInfo says so).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from flight_server.flightsql.engine import CATALOG_NAME, SCHEMA_NAME

__all__ = [
    "KEYS_SCHEMA",
    "SQL_INFO_SCHEMA",
    "TABLE_TYPE",
    "catalogs",
    "db_schemas",
    "keys",
    "primary_keys",
    "sql_info",
    "table_types",
    "tables",
    "tables_schema",
    "xdbc_type_info",
]

TABLE_TYPE = "TABLE"
#: Field metadata pylance writes on a primary-key column (Lance's unenforced primary key).
_PK_METADATA = b"lance-schema:unenforced-primary-key"


def _s(name: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, pa.utf8(), nullable=nullable)


CATALOGS_SCHEMA = pa.schema([_s("catalog_name", False)])
DB_SCHEMAS_SCHEMA = pa.schema([_s("catalog_name"), _s("db_schema_name", False)])
_TABLES_FIELDS = [_s("catalog_name"), _s("db_schema_name"), _s("table_name", False), _s("table_type", False)]
TABLE_TYPES_SCHEMA = pa.schema([_s("table_type", False)])
PRIMARY_KEYS_SCHEMA = pa.schema(
    [
        _s("catalog_name"),
        _s("db_schema_name"),
        _s("table_name", False),
        _s("column_name", False),
        _s("key_name"),
        pa.field("key_sequence", pa.int32(), nullable=False),
    ]
)
KEYS_SCHEMA = pa.schema(
    [
        _s("pk_catalog_name"),
        _s("pk_db_schema_name"),
        _s("pk_table_name", False),
        _s("pk_column_name", False),
        _s("fk_catalog_name"),
        _s("fk_db_schema_name"),
        _s("fk_table_name", False),
        _s("fk_column_name", False),
        pa.field("key_sequence", pa.int32(), nullable=False),
        _s("fk_key_name"),
        _s("pk_key_name"),
        pa.field("update_rule", pa.uint8(), nullable=False),
        pa.field("delete_rule", pa.uint8(), nullable=False),
    ]
)
_SQL_INFO_VALUE = pa.dense_union(
    [
        pa.field("string_value", pa.utf8()),
        pa.field("bool_value", pa.bool_()),
        pa.field("bigint_value", pa.int64()),
        pa.field("int32_bitmask", pa.int32()),
        pa.field("string_list", pa.list_(pa.field("item", pa.utf8()))),
        pa.field(
            "int32_to_int32_list_map",
            pa.map_(pa.int32(), pa.list_(pa.field("item", pa.int32()))),
        ),
    ]
)
SQL_INFO_SCHEMA = pa.schema(
    [pa.field("info_name", pa.uint32(), nullable=False), pa.field("value", _SQL_INFO_VALUE, nullable=False)]
)
XDBC_TYPE_INFO_SCHEMA = pa.schema(
    [
        _s("type_name", False),
        pa.field("data_type", pa.int32(), nullable=False),
        pa.field("column_size", pa.int32()),
        _s("literal_prefix"),
        _s("literal_suffix"),
        pa.field("create_params", pa.list_(pa.field("item", pa.utf8(), nullable=False))),
        pa.field("nullable", pa.int32(), nullable=False),
        pa.field("case_sensitive", pa.bool_(), nullable=False),
        pa.field("searchable", pa.int32(), nullable=False),
        pa.field("unsigned_attribute", pa.bool_()),
        pa.field("fixed_prec_scale", pa.bool_(), nullable=False),
        pa.field("auto_increment", pa.bool_()),
        _s("local_type_name"),
        pa.field("minimum_scale", pa.int32()),
        pa.field("maximum_scale", pa.int32()),
        pa.field("sql_data_type", pa.int32(), nullable=False),
        pa.field("datetime_subcode", pa.int32()),
        pa.field("num_prec_radix", pa.int32()),
        pa.field("interval_precision", pa.int32()),
    ]
)


def _like(pattern: str | None) -> re.Pattern[str] | None:
    """A Flight SQL filter pattern (``%`` any run, ``_`` one character) as a regex."""
    if pattern is None:
        return None
    parts = ("." if c == "_" else ".*" if c == "%" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.S)


def _catalog_matches(catalog: str | None) -> bool:
    return catalog is None or catalog == CATALOG_NAME


def catalogs() -> pa.Table:
    """``CommandGetCatalogs``."""
    return pa.table([pa.array([CATALOG_NAME])], schema=CATALOGS_SCHEMA)


def db_schemas(catalog: str | None, pattern: str | None) -> pa.Table:
    """``CommandGetDbSchemas``."""
    regex = _like(pattern)
    hit = _catalog_matches(catalog) and (regex is None or regex.fullmatch(SCHEMA_NAME) is not None)
    rows = [[CATALOG_NAME], [SCHEMA_NAME]] if hit else [[], []]
    return pa.table([pa.array(c, pa.utf8()) for c in rows], schema=DB_SCHEMAS_SCHEMA)


def tables_schema(include_schema: bool) -> pa.Schema:
    """The result schema of ``CommandGetTables``."""
    extra = [pa.field("table_schema", pa.binary(), nullable=False)] if include_schema else []
    return pa.schema(_TABLES_FIELDS + extra)


def matching_tables(
    names: Sequence[str],
    catalog: str | None,
    schema_pattern: str | None,
    table_pattern: str | None,
    table_types: Sequence[str],
) -> list[str]:
    """The dataset names a ``CommandGetTables`` selects, sorted."""
    schema_re, table_re = _like(schema_pattern), _like(table_pattern)
    if not _catalog_matches(catalog) or (schema_re is not None and not schema_re.fullmatch(SCHEMA_NAME)):
        return []
    if table_types and TABLE_TYPE not in table_types:
        return []
    return sorted(n for n in names if table_re is None or table_re.fullmatch(n))


def tables(names: Sequence[str], schemas: Sequence[pa.Schema] | None) -> pa.Table:
    """``CommandGetTables`` rows for ``names`` (with their IPC schemas when ``schemas`` is given)."""
    n = len(names)
    cols: list[Any] = [[CATALOG_NAME] * n, [SCHEMA_NAME] * n, list(names), [TABLE_TYPE] * n]
    if schemas is not None:
        cols.append(
            [_annotated(name, s).serialize().to_pybytes() for name, s in zip(names, schemas, strict=True)]
        )
    schema = tables_schema(schemas is not None)
    return pa.table([pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)], schema=schema)


def _annotated(table: str, schema: pa.Schema) -> pa.Schema:
    """``schema`` with the Flight SQL column metadata clients show (catalog, schema, table names)."""
    meta = {
        "ARROW:FLIGHT:SQL:CATALOG_NAME": CATALOG_NAME,
        "ARROW:FLIGHT:SQL:DB_SCHEMA_NAME": SCHEMA_NAME,
        "ARROW:FLIGHT:SQL:TABLE_NAME": table,
    }
    return pa.schema(
        [f.with_metadata({**(f.metadata or {}), **meta}) for f in schema], metadata=schema.metadata
    )


def table_types() -> pa.Table:
    """``CommandGetTableTypes``."""
    return pa.table([pa.array([TABLE_TYPE])], schema=TABLE_TYPES_SCHEMA)


def primary_keys(table: str, schema: pa.Schema | None) -> pa.Table:
    """``CommandGetPrimaryKeys``: the columns Lance marks as the (unenforced) primary key."""
    cols = (
        [] if schema is None else [f.name for f in schema if (f.metadata or {}).get(_PK_METADATA) == b"true"]
    )
    n = len(cols)
    data = [[CATALOG_NAME] * n, [SCHEMA_NAME] * n, [table] * n, cols, [None] * n, list(range(1, n + 1))]
    return pa.table(
        [pa.array(c, f.type) for c, f in zip(data, PRIMARY_KEYS_SCHEMA, strict=True)],
        schema=PRIMARY_KEYS_SCHEMA,
    )


def keys() -> pa.Table:
    """Exported / imported keys and cross references: Lance has no foreign keys."""
    return KEYS_SCHEMA.empty_table()


def sql_info(info: Sequence[int], values: dict[int, Any]) -> pa.Table:
    """``CommandGetSqlInfo`` rows for the ids asked (every known id when ``info`` is empty)."""
    ids = [i for i in (info or sorted(values)) if i in values]
    kinds: list[int] = []
    offsets: list[int] = []
    children: list[list[Any]] = [[] for _ in range(6)]
    for i in ids:
        value = values[i]
        kind = (
            1
            if isinstance(value, bool)
            else 0
            if isinstance(value, str)
            else 4
            if isinstance(value, list)
            else 2
        )
        if kind == 2 and isinstance(value, _Bitmask):
            kind, value = 3, int(value)
        kinds.append(kind)
        offsets.append(len(children[kind]))
        children[kind].append(value)
    arrays = [pa.array(children[k], f.type) for k, f in enumerate(_SQL_INFO_VALUE)]
    union = pa.UnionArray.from_dense(
        pa.array(kinds, pa.int8()),
        pa.array(offsets, pa.int32()),
        arrays,
        [f.name for f in _SQL_INFO_VALUE],
    )
    return pa.table([pa.array(ids, pa.uint32()), union], schema=SQL_INFO_SCHEMA)


class _Bitmask(int):
    """An int32 SqlInfo value sent as ``int32_bitmask`` (enum ordinals are sent that way too)."""


def int32(value: int) -> int:
    """Mark ``value`` as an int32 SqlInfo value (not a bigint)."""
    return _Bitmask(value)


# (type name, XDBC data type, column size, literal prefix/suffix, case sensitive, unsigned,
#  fixed precision/scale, num_prec_radix): the Arrow types Lance stores, by their SQL names.
_XDBC_TYPES: list[tuple[str, int, int | None, str | None, bool, bool | None, bool, int | None]] = [
    ("BIGINT", -5, 19, None, False, False, True, 10),
    ("BOOLEAN", -7, 1, None, False, None, False, None),
    ("BYTEA", -3, None, "'", False, None, False, None),
    ("DATE", 91, 10, "'", False, None, False, None),
    ("DECIMAL", 3, 38, None, False, False, True, 10),
    ("DOUBLE", 8, 53, None, False, False, False, 2),
    ("INTEGER", 4, 10, None, False, False, True, 10),
    ("REAL", 7, 24, None, False, False, False, 2),
    ("SMALLINT", 5, 5, None, False, False, True, 10),
    ("TIMESTAMP", 93, 29, "'", False, None, False, None),
    ("TINYINT", -6, 3, None, False, False, True, 10),
    ("VARCHAR", 12, None, "'", True, None, False, None),
]


def xdbc_type_info(data_type: int | None) -> pa.Table:
    """``CommandGetXdbcTypeInfo``: the SQL types of our columns, ordered by data type then name."""
    rows = sorted(
        (t for t in _XDBC_TYPES if data_type is None or t[1] == data_type), key=lambda t: (t[1], t[0])
    )
    n = len(rows)
    cols: list[list[Any]] = [
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        [r[3] for r in rows],
        [r[3] for r in rows],
        [None] * n,
        [1] * n,  # NULLABILITY_NULLABLE
        [r[4] for r in rows],
        [3] * n,  # SEARCHABLE_FULL
        [r[5] for r in rows],
        [r[6] for r in rows],
        [False if r[5] is not None else None for r in rows],
        [None] * n,
        [None] * n,
        [None] * n,
        [r[1] for r in rows],
        [None] * n,
        [r[7] for r in rows],
        [None] * n,
    ]
    return pa.table(
        [pa.array(c, f.type) for c, f in zip(cols, XDBC_TYPE_INFO_SCHEMA, strict=True)],
        schema=XDBC_TYPE_INFO_SCHEMA,
    )
