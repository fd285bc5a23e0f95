"""Range reads (scans) of 2.1/2.2 mini-block pages whose bounds fall inside chunks, against pylance.

A scan streams a file in fixed-size row ranges; a page boundary that is not a multiple of the
chunk size puts every later range's ends inside chunks. Such a range decodes its chunks whole and
slices them (a take would address each value alone: ~10x the CPU on a large scan). Each read must
return exactly what pylance returns.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lance_format.encodings.v21 import miniblock
from lance_format.file.reader import LanceFileReader

VERSIONS = ("2.1", "2.2")
ROWS = 50_001


def _table(rng: np.random.Generator) -> pa.Table:
    tags = pa.array([f"t{i:04d}" for i in range(300)])
    nulls = rng.random(ROWS) < 0.2
    return pa.table(
        {
            "id": pa.array(np.arange(ROWS, dtype=np.int64)),
            "value": pa.array(rng.random(ROWS)),
            "tag": tags.take(pa.array(rng.integers(0, len(tags), ROWS))),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(ROWS * 8, dtype=np.float32)), 8),
            "opt": pa.array(rng.integers(0, 2**31, ROWS).astype(np.int32), mask=nulls),
            "opt_tag": pa.array(tags.take(pa.array(rng.integers(0, 50, ROWS))).to_pylist(), mask=nulls),
            "none": pa.nulls(ROWS, pa.int64()),
            "flag": pa.array(rng.random(ROWS) < 0.5),
        }
    )


@pytest.fixture(scope="module", params=VERSIONS)
def written(request: Any, tmp_path_factory: Any) -> tuple[str, pa.Table]:
    pytest.importorskip("lance.file", reason="pylance (the test oracle) is not installed")
    from lance.file import LanceFileWriter

    table = _table(np.random.default_rng(3))
    path = os.fspath(tmp_path_factory.mktemp("scans") / f"s-{request.param}.lance")
    # Pages of odd row counts: ranges after the first page boundary start inside chunks.
    kw = {"max_page_bytes": 96 * 1024, "data_cache_bytes": 96 * 1024}
    with LanceFileWriter(path, table.schema, version=request.param, **kw) as w:
        for batch in table.to_batches(max_chunksize=7_001):
            w.write_batch(batch)
    return path, table


def _pylance_range(path: str, start: int, n: int) -> pa.Table:
    from lance.file import LanceFileReader as PylanceReader

    return PylanceReader(path).read_range(start, n).to_table()


def _ranges() -> list[tuple[int, int]]:
    return [
        (0, ROWS),
        (0, 1),
        (ROWS - 1, 1),
        (1, 1023),
        (1023, 2),
        (1024, 1024),
        (4_095, 4_098),
        (7_000, 7_002),
        (12_345, 20_000),
        (ROWS - 3_000, 3_000),
    ]


@pytest.mark.interop
def test_pages_end_inside_chunks(written: tuple[str, pa.Table]) -> None:
    cols = LanceFileReader(written[0]).metadata().columns
    assert sum(len(c.pages) > 1 for c in cols) >= 6
    assert any(c.pages[0].num_rows % 1024 for c in cols)


@pytest.mark.interop
@pytest.mark.parametrize(("start", "n"), _ranges())
def test_range_reads_match_pylance(written: tuple[str, pa.Table], start: int, n: int) -> None:
    path, table = written
    ours = LanceFileReader(path).read_range(start, n).to_table()
    theirs = _pylance_range(path, start, n)
    assert ours.equals(theirs)
    assert ours.equals(table.slice(start, n))


@pytest.mark.interop
def test_streamed_batches_match_pylance(written: tuple[str, pa.Table]) -> None:
    path, table = written
    batches = list(LanceFileReader(path).read_all(batch_size=5_000).to_batches())
    assert pa.Table.from_batches(batches).equals(_pylance_range(path, 0, ROWS))
    assert pa.Table.from_batches(batches).equals(table)


@pytest.mark.interop
def test_dense_ranges_decode_whole_chunks(written: tuple[str, pa.Table], monkeypatch: Any) -> None:
    """A range that covers most of the chunks it reads never addresses values one by one."""
    path, table = written

    def no_take(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dense range read took the per-value path")

    monkeypatch.setattr(miniblock, "decode_mini_take", no_take)
    reader = LanceFileReader(path)
    for start, n in [(1, 30_000), (12_345, 20_000), (ROWS - 9_999, 9_999)]:
        assert reader.read_range(start, n).to_table().equals(table.slice(start, n))


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_range_reads_of_our_files_match_pylance(tmp_path: Any, version: str) -> None:
    """The Spark benchmark's columns as this engine writes them (pages of odd row counts), read in
    ranges by both engines."""
    pytest.importorskip("lance.file", reason="pylance (the test oracle) is not installed")
    from lance_format.file import LanceFileWriter

    table = _table(np.random.default_rng(8))
    path = os.fspath(tmp_path / f"ours-{version}.lance")
    with LanceFileWriter(path, table.schema, version=version, max_page_bytes=64 * 1024) as w:
        for batch in table.to_batches(max_chunksize=9_999):
            w.write_batch(batch)
    assert any(len(c.pages) > 1 for c in LanceFileReader(path).metadata().columns)
    reader = LanceFileReader(path)
    for start, n in _ranges():
        ours = reader.read_range(start, n).to_table()
        assert ours.equals(_pylance_range(path, start, n)), (start, n)
        assert ours.equals(table.slice(start, n)), (start, n)
