"""Property-based round trips over random schemas and data (nulls included, nesting up to 3 levels).

* our writer -> our reader (2.0): every example;
* our writer -> pylance's reader (marked ``interop``): fewer examples, since each one crosses into Rust.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.interop.cases import expected_table
from tests.interop.compare import assert_tables_equal
from tests.strategies import TableSpec, schemas, table_specs


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


_counter = itertools.count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("roundtrip")


@st.composite
def write_plans(draw: st.DrawFn, max_rows: int = 300) -> tuple[TableSpec, int | None, int | None]:
    """A table spec, the rows per ``write_batch`` call (None: all at once) and a page budget."""
    spec = draw(table_specs(max_rows=max_rows))
    rows = draw(st.one_of(st.none(), st.integers(1, max(1, spec.num_rows))))
    budget = draw(st.sampled_from([None, None, 64, 4096]))
    return spec, rows, budget


def _write_ours(path: str, table: pa.Table, rows: int | None, budget: int | None) -> None:
    from lance_format.file import LanceFileWriter

    kwargs = {} if budget is None else {"data_cache_bytes": budget}
    with LanceFileWriter(path, table.schema, version="2.0", **kwargs) as writer:
        if rows is None or table.num_rows == 0:
            writer.write_batch(table)
        else:
            for start in range(0, table.num_rows, rows):
                writer.write_batch(table.slice(start, rows))


def _indices(data: st.DataObject, n: int) -> list[int]:
    if n == 0:
        return []
    return data.draw(st.lists(st.integers(0, n - 1), max_size=40), label="indices")


@_settings(60)
@given(plan=write_plans(), data=st.data())
def test_ours_roundtrip(
    workdir: Path, plan: tuple[TableSpec, int | None, int | None], data: st.DataObject
) -> None:
    from lance_format.file import LanceFileReader

    spec, rows, budget = plan
    table = spec.build()
    path = str(workdir / f"rt-{next(_counter)}.lance")
    try:
        _write_ours(path, table, rows, budget)
        reader = LanceFileReader(path)
        assert reader.num_rows() == table.num_rows
        assert_tables_equal(reader.read_all().to_table(), table, context="read_all")
        idx = _indices(data, table.num_rows)
        got = reader.take_rows(idx).to_table()
        assert_tables_equal(got, table.take(pa.array(idx, pa.int64())), context=f"take_rows({idx})")
        start = data.draw(st.integers(0, table.num_rows), label="start")
        num = data.draw(st.integers(0, table.num_rows - start), label="num")
        assert_tables_equal(
            reader.read_range(start, num).to_table(), table.slice(start, num), context="read_range"
        )
        columns = data.draw(st.permutations(table.schema.names), label="columns")[
            : max(1, len(table.schema) // 2)
        ]
        projected = LanceFileReader(path, columns=columns).read_all().to_table()
        assert_tables_equal(projected, table.select(columns), context=f"columns={columns}")
    finally:
        if os.path.exists(path):
            os.remove(path)


@pytest.mark.interop
@_settings(25)
@given(plan=write_plans(max_rows=200), data=st.data())
def test_pylance_reads_ours(
    workdir: Path, plan: tuple[TableSpec, int | None, int | None], data: st.DataObject
) -> None:
    lance_file = pytest.importorskip("lance.file")

    spec, rows, budget = plan
    table = spec.build()
    path = str(workdir / f"interop-{next(_counter)}.lance")
    try:
        _write_ours(path, table, rows, budget)
        reader = lance_file.LanceFileReader(path)
        expected = expected_table(table)
        assert_tables_equal(reader.read_all().to_table(), expected, context="pylance read_all")
        idx = sorted(set(_indices(data, table.num_rows)))  # pylance takes strictly increasing indices only
        got = reader.take_rows(idx).to_table()
        assert_tables_equal(
            got, expected.take(pa.array(idx, pa.int64())), context=f"pylance take_rows({idx})"
        )
    finally:
        if os.path.exists(path):
            os.remove(path)


@_settings(40)
@given(spec=table_specs(schema=schemas(max_columns=3), max_rows=50))
def test_generated_tables_are_valid_arrow(spec: TableSpec) -> None:
    """The strategies themselves: data matches the schema, nullability holds, no struct nulls at 2.0."""
    table = spec.build()
    assert table.num_rows == spec.num_rows
    table.validate(full=True)
    for f, col in zip(table.schema, table.columns, strict=True):
        if not f.nullable:
            assert col.null_count == 0, f.name
        _assert_no_struct_nulls(col.combine_chunks() if col.num_chunks else pa.array([], col.type))
    assert np.all([len(c) == table.num_rows for c in table.columns])


def _assert_no_struct_nulls(a: pa.Array) -> None:
    t = a.type
    if pa.types.is_struct(t):
        assert a.null_count == 0
        for child in a.flatten():
            _assert_no_struct_nulls(child)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        _assert_no_struct_nulls(a.flatten())
