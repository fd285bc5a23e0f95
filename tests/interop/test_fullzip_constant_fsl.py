"""Vector columns whose items are all null, written by pylance at 2.1 and 2.2.

Lance stores such a full-zip fixed-size-list page with a ``Constant`` item encoding: each row holds
only its validity bitmaps and no item bytes. Our reader used to refuse these pages. Here pylance
writes them (small fragments, so several pages of each shape) and we read them cell by cell equal,
by full scans and by takes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from tests.interop.compare import assert_tables_equal

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.interop

ROWS = 85
ROWS_PER_FILE = 14


def _vectors(dim: int, shape: str) -> pa.FixedSizeListArray:
    """``dim``-wide float32 vectors; items all null, rows valid, null or mixed with real vectors."""
    items = pa.nulls(ROWS * dim, pa.float32())
    if shape == "all_null_items":
        return pa.FixedSizeListArray.from_arrays(items, dim)
    row_nulls = np.zeros(ROWS, dtype=bool)
    row_nulls[::3] = True
    if shape == "null_rows_too":
        return pa.FixedSizeListArray.from_arrays(items, dim, mask=pa.array(row_nulls))
    # Some fragments hold only null items, others real values with a few null items.
    vals = np.arange(ROWS * dim, dtype=np.float32)
    item_nulls = np.zeros(ROWS * dim, dtype=bool)
    item_nulls[: 2 * ROWS_PER_FILE * dim] = True
    item_nulls[2 * ROWS_PER_FILE * dim :: 7] = True
    mixed = pa.array(vals, mask=item_nulls)
    return pa.FixedSizeListArray.from_arrays(mixed, dim, mask=pa.array(row_nulls))


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("dim", [4, 128])
@pytest.mark.parametrize("shape", ["all_null_items", "null_rows_too", "mixed_fragments"])
def test_constant_items_in_fullzip_vectors(tmp_path: Path, version: str, dim: int, shape: str) -> None:
    table = pa.table(
        {
            "id": pa.array(np.arange(ROWS), pa.int64()),
            "f": pa.array(np.arange(ROWS, dtype=np.float32)),
            "i": pa.array((np.arange(ROWS) % 100).astype(np.int8)),
            "v": _vectors(dim, shape),
        }
    )
    path = str(tmp_path / "ds")
    lance.write_dataset(table, path, data_storage_version=version, max_rows_per_file=ROWS_PER_FILE)
    theirs, ours = lance.dataset(path), lance_format.dataset(path)
    context = f"{shape} dim={dim} v{version}"
    assert_tables_equal(ours.to_table(), theirs.to_table(), context=f"{context} scan")
    assert_tables_equal(
        ours.to_table(columns=["v"]), theirs.to_table(columns=["v"]), context=f"{context} scan v"
    )
    indices = [84, 0, 13, 14, 15, 3, 41, 42, 70, 3]
    assert_tables_equal(ours.take(indices), theirs.take(indices), context=f"{context} take")
    assert_tables_equal(
        ours.take(indices, columns=["v"]), theirs.take(indices, columns=["v"]), context=f"{context} take v"
    )
