"""Per-chunk overheads of a scan that do not show in its answers: what a chunk is measured by,
the final cast of ``to_table``, and the chunk selection of a mini-block range read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset import scanner
from lance_format.dataset.session import Session
from lance_format.io.reader import io_stats


def test_a_chunk_is_measured_by_the_buffers_it_holds() -> None:
    # The read-ahead budget counts memory held; a slice holds its whole buffers.
    table = pa.table({"x": np.arange(100_000, dtype=np.int64)}).slice(10, 100)
    assert scanner._table_bytes(table) == table.get_total_buffer_size() == 800_000


def test_to_table_keeps_a_table_that_has_the_schema_already() -> None:
    schema = pa.schema([pa.field("x", pa.int64())], metadata={b"k": b"v"})
    table = pa.table({"x": [1, 2]}, schema=schema)
    assert scanner.conform_schema(table, schema) is table
    other = pa.schema([pa.field("x", pa.int32())])
    assert scanner.conform_schema(table, other).schema == other


def test_a_range_read_selects_its_chunks_without_sorting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A scan chunk is one run of rows: its mini-block chunks are one arange, not np.unique of an
    # expansion (a sort per column per chunk).
    n = 300_000
    table = pa.table({"id": np.arange(n, dtype=np.int64), "name": pa.array([f"n{i}" for i in range(n)])})
    uri = str(tmp_path / "d.lance")
    lance_format.write_dataset(table, uri)
    ds = lance_format.dataset(uri, session=Session(page_cache_bytes=0, decoded_cache_bytes=0))
    ds.take([0])  # chunk metadata cached

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("np.unique called by a range read")

    monkeypatch.setattr(np, "unique", refuse)
    assert ds.to_table().equals(table)


def test_a_scan_reads_256k_rows_of_a_column_per_request(tmp_path: Path) -> None:
    # Per-chunk costs (planning, a request per column, hand-offs) are paid per 256K rows.
    n = 256 * 1024
    table = pa.table({"x": np.arange(n, dtype=np.float64)})
    uri = str(tmp_path / "d.lance")
    lance_format.write_dataset(table, uri)
    ds = lance_format.dataset(uri, session=Session(page_cache_bytes=0, decoded_cache_bytes=0))
    ds.take([0])  # chunk metadata cached
    before = io_stats()
    assert ds.to_table().equals(table)
    assert (io_stats() - before).requests == 1
