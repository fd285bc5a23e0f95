"""A cold scan (caches off) reuses its buffers: no fresh pages and no per-row numpy temporaries.

Each batch of a scan reads and decodes megabytes. Fresh ``bytes``/``np.empty`` buffers that large
are ``mmap``-ed and unmapped by glibc per batch, so every 4 KiB of every batch took a page fault and
a zeroed page (about half the CPU of a cold float64 scan). These tests count what a steady-state
scan allocates outside Arrow's pool (tracemalloc sees ``bytes`` and numpy buffers, not the pool).
Page faults themselves are not asserted: whether glibc maps fresh pages depends on the process's
allocation history (its ``mmap`` threshold adapts), so a fault count did not fail reliably before.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset import write_dataset
from lance_format.dataset.session import Session

ROWS = 1_000_000
BATCH = 131_072


@pytest.fixture(scope="module")
def dataset_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    rng = np.random.default_rng(12)
    table = pa.table(
        {
            "id": np.arange(ROWS, dtype=np.int64),
            "value": rng.random(ROWS),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(ROWS * 8, dtype=np.float32)), 8),
        }
    )
    uri = str(tmp_path_factory.mktemp("fresh") / "t")
    write_dataset(table, uri)
    return uri


def _scan(uri: str, column: str) -> int:
    ds = lance_format.dataset(uri, session=Session(page_cache_bytes=0, decoded_cache_bytes=0))
    return sum(b.nbytes for b in ds.to_batches(columns=[column], batch_size=BATCH))


@pytest.mark.parametrize("column", ["id", "value", "vec"])
def test_scan_allocates_no_per_row_python_memory(dataset_uri: str, column: str) -> None:
    # Before: the read ``bytes``, the gathered values and the unused row offsets of every chunk
    # (1-4 MiB each) were Python/numpy allocations; now they come from Arrow's pool.
    _scan(dataset_uri, column)  # warm: kernels, metadata
    tracemalloc.start()
    try:
        nbytes = _scan(dataset_uri, column)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert nbytes >= 8 * ROWS
    assert peak < 1024 * 1024, f"{peak} bytes traced while scanning {nbytes}"
