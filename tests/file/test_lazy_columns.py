"""Opening a file parses a column's metadata only when a read (or ``metadata()``) asks for it.

Counts, not time: how often ``parse_column_metadata`` runs for an open, a projected read, a
repeated read and a full listing, for files of each version and for a dataset's cold take.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import CorruptFileError
from lance_format.file import LanceFileReader, LanceFileWriter, _serde
from lance_format.file.format import parse_footer, parse_offset_table
from lance_format.io.cache import METADATA_CACHE


def _table(n: int = 500) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "x": pa.array(np.arange(n, dtype=np.float64) / 2),
            "name": pa.array([f"n{i}" for i in range(n)]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.ones(4 * n, dtype=np.float32)), 4),
            "l": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int32())),
        }
    )


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The column index of every column metadata parse."""
    seen: list[int] = []
    real = _serde.parse_column_metadata

    def counted(data: bytes | memoryview, path: str, column: int) -> _serde.RawColumn:
        seen.append(column)
        return real(data, path, column)

    monkeypatch.setattr(_serde, "parse_column_metadata", counted)
    return seen


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_reads_parse_only_the_columns_they_decode(tmp_path: Path, version: str, parses: list[int]) -> None:
    path = str(tmp_path / "f.lance")
    table = _table()
    with LanceFileWriter(path, table.schema, version=version) as w:
        w.write_batch(table)
    reader = LanceFileReader(path, columns=["x"])
    assert parses == []  # the open parses footer, offsets and schema only
    got = reader.take_rows([3, 7]).to_table()
    assert got.column("x").to_pylist() == [1.5, 3.5]
    assert len(parses) == 1
    reader.take_rows([9]).to_table()
    assert len(parses) == 1  # parsed once per open file
    columns = reader.metadata().columns
    assert [c.index for c in columns] == list(range(len(columns)))
    assert len(parses) == len(columns)  # listing them parses the rest, once each
    assert LanceFileReader(path).read_all().to_table().equals(table)


def test_dataset_cold_take_of_one_column_parses_one(tmp_path: Path, parses: list[int]) -> None:
    uri = str(tmp_path / "d.lance")
    lance_format.write_dataset(_table(), uri, data_storage_version="2.1")
    METADATA_CACHE.clear()
    ds = lance_format.dataset(uri)
    assert ds.take([5], columns=["x"]).column("x").to_pylist() == [2.5]
    assert len(parses) == 1
    METADATA_CACHE.clear()
    assert ds.take([5]).num_columns == 5
    assert len(parses) == 1 + 5


def test_a_bad_column_fails_when_read(tmp_path: Path) -> None:
    """A column whose pages claim the wrong row count is caught when that column is parsed."""
    path = tmp_path / "f.lance"
    table = pa.table({"a": pa.array(np.arange(100, dtype=np.int64)), "b": pa.array(np.arange(100.0))})
    with LanceFileWriter(str(path), table.schema, version="2.1") as w:
        w.write_batch(table)
    meta = bytearray(path.read_bytes())
    footer = parse_footer(bytes(meta), len(meta), str(path))
    table_at = footer.column_meta_offsets_start
    offsets = parse_offset_table(
        bytes(meta[table_at : table_at + 16 * footer.num_columns]), footer.num_columns, len(meta), "c", ""
    )
    pos, length = (int(v) for v in offsets[1])
    raw = bytes(meta[pos : pos + length])
    # The page's length field (3) is a one-byte varint 100 (0x18 0x64): make it 99.
    at = raw.index(b"\x18\x64")
    meta[pos + at + 1] = 99
    path.write_bytes(bytes(meta))
    assert LanceFileReader(str(path), columns=["a"]).read_all().to_table().column("a").to_pylist()[:2] == [
        0,
        1,
    ]
    with pytest.raises(CorruptFileError, match="column 1 has 99 rows, file has 100"):
        LanceFileReader(str(path), columns=["b"]).read_all().to_table()


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_a_take_parses_the_layouts_of_the_pages_it_reads(
    tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of a many-page column: a one-row take parses that page's layout only."""
    from lance_format.encodings import v21

    layouts: list[int] = []
    real = v21.page_layout_from_raw

    def counted(raw: tuple[str, bytes], path: str) -> object:
        layouts.append(len(raw[1]))
        return real(raw, path)

    monkeypatch.setattr(v21, "page_layout_from_raw", counted)
    path = str(tmp_path / "f.lance")
    table = pa.table({"x": pa.array(np.arange(20_000, dtype=np.float64))})
    with LanceFileWriter(path, table.schema, version=version, max_page_bytes=8192) as w:
        for batch in table.to_batches(max_chunksize=1000):
            w.write_batch(batch)
    reader = LanceFileReader(path)
    assert reader.take_rows([12_345]).to_table().column("x").to_pylist() == [12_345.0]
    assert len(layouts) == 1
    pages = reader.metadata().columns[0].pages
    assert len(pages) > 10
    assert sum(p.num_rows for p in pages) == 20_000  # every page's layout parsed, once
    assert len(layouts) == len(pages)
    assert reader.read_all().to_table().equals(table)
    assert len(layouts) == len(pages)
