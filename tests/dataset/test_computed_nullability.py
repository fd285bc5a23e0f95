"""Computed columns (``columns={"name": "sql"}``) are ``not null`` exactly where pylance's are.

pylance types a computed column from its expression: ``id * 2`` over a non-null ``id`` is
``int64 not null``, ``id + n`` over a nullable ``n`` is nullable, ``upper(s)`` always is (see
:mod:`lance_format.dataset.nullability`). Scans, takes, fragment reads and ``add_columns`` must
give the same field, so a schema checked against pylance's (Spark's, a writer's) matches.

The generated test reuses the expression fuzz test's value generator over its table, with half of
the columns declared non-null.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import assume, given

import lance_format
from tests.dataset import test_expression_fuzz as fuzz
from tests.dataset.test_filter_interop import cells

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop

#: Columns of the fuzz table declared non-null here, with the value their NULLs become.
NON_NULL: dict[str, Any] = {
    "id": 0,
    "i8": 0,
    "i32": 0,
    "f": 0.0,
    "s": "",
    "dec": Decimal("0"),
    "bin": b"",
    "d": dt.date(2000, 1, 1),
}


def _table() -> pa.Table:
    columns, fields = [], []
    for field, column in zip(fuzz.TABLE.schema, fuzz.TABLE.columns, strict=True):
        if field.name in NON_NULL:
            column = pc.fill_null(column, pa.scalar(NON_NULL[field.name], field.type))
            field = field.with_nullable(False)
        columns.append(column)
        fields.append(field)
    # Members of a non-null struct follow their own nullability; a nullable struct makes all nullable.
    st = pa.StructArray.from_arrays(
        [pa.array([1, 2] * 6, pa.int32()), pa.array([None, 2] * 6, pa.int32())],
        fields=[pa.field("a", pa.int32(), False), pa.field("c", pa.int32())],
    )
    sn = pa.StructArray.from_arrays(
        [pa.array([1] * 12, pa.int32())],
        fields=[pa.field("a", pa.int32(), False)],
        mask=pa.array([False, True] * 6),
    )
    columns += [st, sn, pa.array([[1], [2, 3]] * 6, pa.list_(pa.int32()))]
    fields += [
        pa.field("st", st.type, False),
        pa.field("sn", sn.type),
        pa.field("l", pa.list_(pa.int32()), False),
    ]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("nullability") / "d")
    lance.write_dataset(_table(), path, max_rows_per_file=5)
    return path


def _field(run: Any) -> tuple[str, Any]:
    """``("field", (field, cells))`` of the computed column ``v``, or ``("error", exception)``."""
    kind, got = fuzz._answer(run)
    if kind == "error":
        return kind, got
    return kind, (got.schema.field("v"), cells(got.select(["v"])))


#: Expressions whose nullability pylance 14.0.2 decides by each of its rules.
CASES = [
    "id",
    "t",
    "id + 1",
    "id + i64",
    "-id",
    "f / 0",
    "NOT (id > 1)",
    "id > 1 AND i64 IS NULL",
    "id > 1 OR b",
    "s IS NULL AND i64 > 1",
    "s IS NOT NULL OR i64 > 1",
    "NOT (s IS NULL) AND i64 > 1",
    "t IS NULL AND i64 > 1",
    "(s IS NULL OR i64 > 1) AND b",
    "(i8 = NULL) OR (i8 = i8)",
    "i8 <> i8 AND b",
    "NOT (i8 = i8) AND b",
    "(i8 > 0) AND ((ts = ts) OR (i8 > 0))",
    "(i8 > 0) OR ((ts = ts) AND (i8 > 0))",
    "i8 > 0 AND (ts = ts OR i8 > 1)",
    "(s LIKE 'a%') AND ((ts = ts) OR (s LIKE '%'))",
    "s LIKE '%%' OR t > 'a'",
    "t LIKE '%' OR s > 'a'",
    "i64 IS NOT NULL",
    "(id > 1) IS TRUE",
    "b IS NOT FALSE",
    "id IN (1, 2)",
    "id IN (1, NULL)",
    "i64 IN (1, 2)",
    "id BETWEEN 1 AND 2",
    "id BETWEEN i64 AND 2",
    "s LIKE 'a%'",
    "s NOT LIKE 'a%'",
    "t ILIKE 'a%'",
    "CAST(id AS DOUBLE)",
    "CAST(i64 AS DOUBLE)",
    "TRY_CAST(id AS TINYINT)",
    "TRY_CAST(id AS BIGINT)",
    "TRY_CAST(f AS DOUBLE)",
    "coalesce(i64, 1)",
    "coalesce(i64, NULL)",
    "coalesce(id, i64)",
    "coalesce(i64, i8)",
    # the type every argument meets in, integer literals as Int64 (values agree either way)
    "coalesce(i8, 1)",
    "coalesce(u64, 1)",
    "coalesce(u64, i8)",
    "coalesce(dec, 1)",
    "coalesce(dec, 1.5)",
    "coalesce(f32, 1.5)",
    "coalesce(u64, 18446744073709551615)",
    "upper(s)",
    "length(s)",
    "strpos(s, 'a')",
    "strpos(s, t)",
    "strpos(ls, 'a')",
    "strpos(t, '')",
    "concat(s, s)",
    "s || s",
    "s || t",
    "replace(s, 'a', 'b')",
    "rtrim(s, 'a')",
    "starts_with(s, 'a')",
    "starts_with(s, s)",
    "ends_with(s, 'a')",
    "contains(s, 'a')",
    "regexp_like(s, 'a')",
    "regexp_like(s, 'a', 'i')",
    "abs(id)",
    "round(f, 1)",
    "round(id)",
    "trunc(f)",
    "sqrt(f)",
    "isnan(f)",
    "isnan(f) IS NULL",
    "array_length(l)",
    "array_has(l, 1)",
    "l[1]",
    "st.a",
    "st.c",
    "sn.a",
    "st.a + 1",
    "s IS DISTINCT FROM 'a'",
    "s IS NOT DISTINCT FROM 'a'",
    "i64 IS DISTINCT FROM 1",
    "coalesce(i64, 1) IS DISTINCT FROM 1",
    "dec + 1",
    "bin || X'01'",
    "CAST(d AS STRING)",
    "d = current_date()",
    "_rowid",
    # a NaN compared with NULL is NULL, not ordered as a NaN
    "f32 BETWEEN 127 AND NULL",
    # the least integer % -1 is 0 (its quotient by -1 wraps)
    "i8 % -1",
    "i32 % -1",
    "i64 % (0 - 1)",
    "i64 % (i32 * 0 - 1)",
    "f > NULL OR f32 < NULL",
]


@pytest.mark.parametrize("sql", CASES)
def test_a_computed_column_is_not_null_where_pylances_is(uri: str, sql: str) -> None:
    columns = {"v": sql, "id": "id"}
    want = _field(lambda: lance.dataset(uri).to_table(columns=columns))
    assert want[0] != "error", want
    assert _field(lambda: lance_format.dataset(uri).to_table(columns=columns)) == want, sql
    assert _field(lambda: lance_format.dataset(uri).take([0, 3, 7], columns=columns)) == _field(
        lambda: lance.dataset(uri).take([0, 3, 7], columns=columns)
    ), sql


@pytest.mark.parametrize("sql", ["id * 2", "coalesce(i64, 0)", "i64 * 2"])
def test_every_read_types_a_computed_column_as_pylance(uri: str, tmp_path: Any, sql: str) -> None:
    """Scanner schemas, batches, fragment reads, head, sample and add_columns agree too."""
    columns = {"v": sql}

    def reads(ds: Any) -> list[pa.Field]:
        frag = ds.get_fragments()[1]
        return [
            ds.scanner(columns=columns).projected_schema.field("v"),
            next(iter(ds.to_batches(columns=columns))).schema.field("v"),
            frag.to_table(columns=columns).schema.field("v"),
            ds.head(2, columns=columns).schema.field("v"),
            ds.sample(2, columns=columns).schema.field("v"),
        ]

    assert reads(lance_format.dataset(uri)) == reads(lance.dataset(uri))
    added = []
    for engine in (lance, lance_format):
        path = str(tmp_path / engine.__name__)
        ds = engine.write_dataset(_table(), path)
        ds.add_columns({"v": sql})
        added.append(engine.dataset(path).schema.field("v"))
    assert added[0] == added[1]


@fuzz._SETTINGS
@given(fuzz.values)
def test_generated_computed_columns_are_typed_as_pylance(uri: str, sql: str) -> None:
    assume(sql.count(" IN (") < 2)
    columns = {"v": sql, "id": "id"}
    mine = _field(lambda: lance_format.dataset(uri).to_table(columns=columns))
    want = _field(lambda: lance.dataset(uri).to_table(columns=columns))
    # DataFusion skips the side of an AND / OR its other side decides, batch by batch, so an
    # integer division by zero there fails here and not in pylance (docs/filters.md)
    assume(not (mine[0] == "error" and want[0] != "error" and "divide by zero" in str(mine[1])))
    # Types are compared by the cases above; here nullability and values.
    fuzz._check(_nullability(mine), _nullability(want), f"value {sql}")


def _nullability(answer: tuple[str, Any]) -> tuple[str, Any]:
    kind, got = answer
    return (kind, (got[0].nullable, got[1])) if kind != "error" else answer


@pytest.mark.parametrize("sql", ["-(coalesce(u64, u64))", "-u64"])
def test_negating_an_unsigned_value_is_refused_as_pylance(uri: str, sql: str) -> None:
    columns = {"v": sql, "id": "id"}
    mine = _field(lambda: lance_format.dataset(uri).to_table(columns=columns))
    want = _field(lambda: lance.dataset(uri).to_table(columns=columns))
    assert want[0] == "error"
    fuzz._check(mine, want, sql)
