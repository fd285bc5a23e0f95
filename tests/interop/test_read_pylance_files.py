"""Files pylance writes at 2.0, 2.1 and 2.2, read by our ``LanceFileReader``, compared cell by cell with
what pylance's own reader returns for the same file."""

from __future__ import annotations

import os
import zlib

import numpy as np
import pyarrow as pa
import pytest

from tests.interop.cases import ALL_VERSIONS, CASES, CASES_BY_NAME, Case, case_versions
from tests.interop.compare import assert_tables_equal
from tests.interop.helpers import FileCache, our_reader, pylance_reader, pylance_take, random_indices

pytestmark = pytest.mark.interop

PAIRS = case_versions()
IDS = [f"{c.name}-{v}" for c, v in PAIRS]


def _seed(case: Case, version: str) -> int:
    return zlib.crc32(f"{case.name}/{version}".encode())


def _ranges(n: int) -> list[tuple[int, int]]:
    """(start, num_rows) pairs: whole, first, last, middle third, empty, and across the 1024-row batch
    boundary and the 397-row write boundary of the multi-page case; clipped to the file."""
    wanted = [
        (0, n),
        (0, 1),
        (n - 1, 1),
        (n // 3, n // 3),
        (n // 2, 0),
        (n, 0),
        (1, n - 1),
        (1020, 10),
        (390, 20),
    ]
    out = []
    for start, num in wanted:
        start = min(max(start, 0), n)
        out.append((start, max(0, min(num, n - start))))
    return sorted(set(out))


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=IDS)
def test_read_all(case: Case, version: str, pylance_file: FileCache) -> None:
    path = pylance_file(case, version)
    theirs = pylance_reader(path).read_all().to_table()
    ours = our_reader(path).read_all().to_table()
    assert_tables_equal(ours, theirs, context=f"{case.name} v{version} read_all")


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=IDS)
def test_read_range(case: Case, version: str, pylance_file: FileCache) -> None:
    path = pylance_file(case, version)
    theirs, ours = pylance_reader(path), our_reader(path)
    for start, num in _ranges(theirs.num_rows()):
        expected = theirs.read_range(start, num).to_table()
        got = ours.read_range(start, num).to_table()
        assert_tables_equal(got, expected, context=f"{case.name} v{version} read_range({start}, {num})")


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=IDS)
def test_take_rows_any_order(case: Case, version: str, pylance_file: FileCache) -> None:
    path = pylance_file(case, version)
    theirs, ours = pylance_reader(path), our_reader(path)
    idx = random_indices(theirs.num_rows(), _seed(case, version))
    got = ours.take_rows(idx.tolist()).to_table()
    assert_tables_equal(
        got, pylance_take(theirs, idx), context=f"{case.name} v{version} take_rows{idx[:8]}..."
    )


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=IDS)
def test_take_rows_sorted(case: Case, version: str, pylance_file: FileCache) -> None:
    """Strictly increasing indices, the only form pylance takes: same call on both readers."""
    path = pylance_file(case, version)
    theirs, ours = pylance_reader(path), our_reader(path)
    n = theirs.num_rows()
    idx = np.unique(random_indices(n, _seed(case, version) + 1, count=min(n, 300)))
    for chosen in (idx, idx[:1], np.arange(min(n, 5)), np.arange(max(0, n - 3), n)):
        expected = theirs.take_rows(chosen.tolist()).to_table()
        got = ours.take_rows(chosen.tolist()).to_table()
        assert_tables_equal(got, expected, context=f"{case.name} v{version} take_rows(sorted, {len(chosen)})")
    # numpy arrays are accepted as well as lists.
    got = ours.take_rows(idx).to_table()
    assert_tables_equal(got, theirs.take_rows(idx.tolist()).to_table(), context="take_rows(np.ndarray)")


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=IDS)
def test_projection(case: Case, version: str, pylance_file: FileCache) -> None:
    path = pylance_file(case, version)
    names = case.table().schema.names
    columns = names[::-2] if len(names) > 1 else names  # a subset, in reverse order
    theirs, ours = pylance_reader(path, columns), our_reader(path, columns)
    got = ours.read_all().to_table()
    assert got.schema.names == columns
    assert_tables_equal(
        got, theirs.read_all().to_table(), context=f"{case.name} v{version} columns={columns}"
    )
    idx = random_indices(theirs.num_rows(), _seed(case, version) + 2, count=50)
    assert_tables_equal(
        ours.take_rows(idx).to_table(),
        pylance_take(theirs, idx),
        context=f"{case.name} v{version} projected take",
    )


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=IDS)
def test_to_batches(case: Case, version: str, pylance_file: FileCache) -> None:
    """``to_batches`` yields ``batch_size``-row batches (the last shorter), as pylance's does."""
    path = pylance_file(case, version)
    theirs, ours = pylance_reader(path), our_reader(path)
    for batch_size in (1024, 700):
        expected = list(theirs.read_all(batch_size=batch_size).to_batches())
        got = list(ours.read_all(batch_size=batch_size).to_batches())
        assert [b.num_rows for b in got] == [b.num_rows for b in expected]
        if got:
            assert_tables_equal(
                pa.Table.from_batches(got),
                pa.Table.from_batches(expected),
                context=f"{case.name} v{version} to_batches({batch_size})",
            )


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=IDS)
def test_metadata(case: Case, version: str, pylance_file: FileCache) -> None:
    path = pylance_file(case, version)
    theirs, ours = pylance_reader(path).metadata(), our_reader(path)
    assert ours.num_rows() == theirs.num_rows
    meta = ours.metadata()
    assert (meta.major_version, meta.minor_version) == (theirs.major_version, theirs.minor_version)
    assert meta.num_rows == theirs.num_rows
    assert meta.schema.equals(theirs.schema, check_metadata=True), f"{meta.schema}\n!=\n{theirs.schema}"
    assert meta.num_data_bytes == theirs.num_data_bytes
    assert meta.num_column_metadata_bytes == theirs.num_column_metadata_bytes
    assert meta.num_global_buffer_bytes == theirs.num_global_buffer_bytes
    assert [len(c.pages) for c in meta.columns] == [len(c.pages) for c in theirs.columns]


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_nested_projection(version: str, pylance_file: FileCache) -> None:
    """A dotted path selects one struct child, as in pylance (``st.b`` -> ``st: struct<b>``)."""
    path = pylance_file(CASES_BY_NAME["struct_flat"], version)
    columns = ["id", "st.b"]
    expected = pylance_reader(path, columns).read_all().to_table()
    assert_tables_equal(
        our_reader(path, columns).read_all().to_table(), expected, context=f"v{version} {columns}"
    )


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_open_costs_one_request(version: str, pylance_file: FileCache) -> None:
    """The footer, offset tables, schema and column metadata arrive in the first (tail) read."""
    for case in (CASES_BY_NAME["int_signed"], CASES_BY_NAME["lists"], CASES_BY_NAME["empty"]):
        path = pylance_file(case, version)
        meta = pylance_reader(path).metadata()
        size = os.path.getsize(path)
        assert size - meta.num_data_bytes <= 4096, "case chosen so its metadata fits any tail read"
        stats = our_reader(path).io_stats
        assert stats.requests == 1, f"{case.name} v{version}: opening took {stats.requests} requests"
        assert 0 < stats.bytes_read <= size


@pytest.mark.parametrize("version", ALL_VERSIONS)
@pytest.mark.parametrize("name", ["embeddings_large", "multipage", "long_strings"])
def test_take_one_row_reads_little(name: str, version: str, pylance_file: FileCache) -> None:
    """A one-row take reads a small part of a large file, not the whole column."""
    path = pylance_file(CASES_BY_NAME[name], version)
    reader = our_reader(path)
    size = os.path.getsize(path)
    before = reader.io_stats
    n = reader.num_rows()
    reader.take_rows([n // 2]).to_table()
    after = reader.io_stats
    used = after.bytes_read - before.bytes_read
    assert after.requests > before.requests
    assert used <= size // 8, f"take of one row read {used} of {size} bytes"


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_bad_arguments_raise_like_pylance(version: str, pylance_file: FileCache) -> None:
    path = pylance_file(CASES_BY_NAME["int_signed"], version)
    reader = our_reader(path)
    n = reader.num_rows()
    with pytest.raises(ValueError, match=r"\d"):
        reader.take_rows([0, n])
    with pytest.raises(ValueError, match=str(n)):
        reader.read_range(n - 5, 10)
    with pytest.raises((ValueError, OverflowError)):
        reader.take_rows([-1])
    with pytest.raises((ValueError, OverflowError)):
        reader.read_range(-1, 2)
    assert reader.take_rows([]).to_table().num_rows == 0
    assert reader.read_range(n, 0).to_table().num_rows == 0


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_unknown_column_is_a_typed_error(version: str, pylance_file: FileCache) -> None:
    from lance_format.core.errors import LanceError

    path = pylance_file(CASES_BY_NAME["int_signed"], version)
    with pytest.raises(LanceError, match="no_such_column"):
        our_reader(path, ["i8", "no_such_column"])


def test_every_case_is_read_at_each_version_it_supports() -> None:
    """The catalogue itself: every type of the brief appears, and no case is silently skipped."""
    for case in CASES:
        assert case.versions, case.name
        assert set(case.versions) <= set(ALL_VERSIONS), case.name
        assert set(case.versions) >= {"2.1", "2.2"}, f"{case.name}: every case must be read at 2.1 and 2.2"
        if "2.0" not in case.versions:
            assert case.note, f"{case.name}: say why 2.0 is left out"
    assert len(PAIRS) == sum(len(c.versions) for c in CASES)
    kinds = set()
    for case in CASES:
        for f in case.table().schema:
            kinds.add(str(f.type).split("<")[0].split("[")[0].split("(")[0])
    for wanted in (
        "bool",
        "int8",
        "uint64",
        "halffloat",
        "float",
        "double",
        "decimal128",
        "date32",
        "date64",
        "time32",
        "time64",
        "timestamp",
        "duration",
        "string",
        "large_string",
        "binary",
        "large_binary",
        "fixed_size_binary",
        "fixed_size_list",
        "list",
        "large_list",
        "struct",
        "dictionary",
        "null",
    ):
        assert wanted in kinds, wanted
