"""Files our ``LanceFileWriter`` writes at 2.0, read by pylance and compared cell by cell with the source.

The expected table is the source as pylance returns it (``Case.expected``: fixed-size-list items
become nullable ``item``; dictionaries compare logically).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tests.interop.cases import CASES, CASES_BY_NAME, Case
from tests.interop.compare import assert_tables_equal
from tests.interop.helpers import FileCache, pylance_reader, pylance_take, random_indices, write_with_ours

pytestmark = pytest.mark.interop

WRITABLE = [c for c in CASES if "2.0" in c.versions]


@pytest.mark.parametrize("case", WRITABLE, ids=str)
def test_pylance_reads_all(case: Case, our_file: FileCache) -> None:
    reader = pylance_reader(our_file(case, "2.0"))
    meta = reader.metadata()
    assert (meta.major_version, meta.minor_version) == (0, 3), "2.0 files say 0.3 in the footer"
    assert reader.num_rows() == case.table().num_rows
    assert_tables_equal(
        reader.read_all().to_table(), case.expected(), context=f"pylance reads our {case.name}"
    )
    if case.min_pages > 1:
        pages = max(len(col.pages) for col in meta.columns)
        assert pages >= case.min_pages, f"our writer made {pages} pages; the page budget was not honoured"


@pytest.mark.parametrize("case", WRITABLE, ids=str)
def test_pylance_takes_and_ranges(case: Case, our_file: FileCache) -> None:
    reader = pylance_reader(our_file(case, "2.0"))
    expected = case.expected()
    n = expected.num_rows
    idx = random_indices(n, zlib.crc32(case.name.encode()))
    assert_tables_equal(
        pylance_take(reader, idx),
        expected.take(pa.array(idx)),
        context=f"pylance take_rows on our {case.name}",
    )
    for start, num in {(0, min(n, 10)), (n // 2, n - n // 2), (max(0, n - 1), min(n, 1))}:
        assert_tables_equal(
            reader.read_range(start, num).to_table(),
            expected.slice(start, num),
            context=f"pylance read_range({start}, {num}) on our {case.name}",
        )


@pytest.mark.parametrize("case", [c for c in WRITABLE if len(c.table().schema) > 1], ids=str)
def test_pylance_projection(case: Case, our_file: FileCache) -> None:
    columns = case.table().schema.names[::-2]
    got = pylance_reader(our_file(case, "2.0"), columns).read_all().to_table()
    assert_tables_equal(
        got, case.expected().select(columns), context=f"pylance columns={columns} on our {case.name}"
    )


def test_written_in_many_small_batches(tmp_path: Path) -> None:
    """Many one-to-seven-row batches (and empty ones) make one file equal to their concatenation."""
    from lance_format.file import LanceFileWriter

    table = CASES_BY_NAME["lists"].table().slice(0, 500)
    path = tmp_path / "small-batches.lance"
    rng = np.random.default_rng(7)
    with LanceFileWriter(str(path), table.schema) as writer:
        start = 0
        while start < table.num_rows:
            k = int(rng.integers(0, 8))
            writer.write_batch(table.slice(start, k).to_batches()[0] if k else table.slice(0, 0))
            start += k
    got = pylance_reader(str(path)).read_all().to_table()
    assert_tables_equal(got, CASES_BY_NAME["lists"].expected().slice(0, 500), context="small batches")


@pytest.mark.parametrize("name", ["struct_nulls", "list_struct_nulls"])
def test_struct_nulls_refused_at_2_0(name: str, tmp_path: Path) -> None:
    """Like pylance: 2.0 cannot store struct validity, so the writer refuses instead of losing it."""
    from lance_format.core.errors import InvalidInputError, NotSupportedError

    with pytest.raises((InvalidInputError, NotSupportedError), match="struct"):
        write_with_ours(tmp_path / "refused.lance", CASES_BY_NAME[name], "2.0")
