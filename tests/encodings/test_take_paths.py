"""The take fast paths of 2.1/2.2 mini-block pages, against pylance and against the batch decoders.

Takes address single values instead of decoding whole chunks (``minitake``), read one row with
Python integers, and read pages that share a layout as one batch (FSST pages each with their own
symbol table). Each path must return exactly what pylance returns.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21.fastlanes import FL_BLOCK, fastlanes_unpack
from lance_format.encodings.v21.minitake import _fastlanes_one, _fastlanes_values
from lance_format.file.reader import LanceFileReader

VERSIONS = ("2.1", "2.2")
ROWS = 30_000


def _table(rng: np.random.Generator) -> pa.Table:
    suffix = rng.integers(0, 10**9, ROWS).astype(str)
    return pa.table(
        {
            "i": pa.array(rng.integers(-(2**40), 2**40, ROWS)),
            "small": pa.array(rng.integers(0, 7, ROWS).astype(np.int16)),
            "f": pa.array(rng.standard_normal(ROWS)),
            "opt": pa.array(rng.integers(0, 2**31, ROWS).astype(np.int32), mask=rng.random(ROWS) < 0.1),
            "s": pa.array([f"name-{x}" for x in suffix]),
            "vec": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.standard_normal(ROWS * 4).astype(np.float32)), 4
            ),
        }
    )


@pytest.fixture(scope="module", params=VERSIONS)
def written(request: Any, tmp_path_factory: Any) -> tuple[str, pa.Table]:
    pytest.importorskip("lance.file", reason="pylance (the test oracle) is not installed")
    from lance.file import LanceFileWriter

    table = _table(np.random.default_rng(11))
    path = os.fspath(tmp_path_factory.mktemp("takes") / f"t-{request.param}.lance")
    kw = {"max_page_bytes": 64 * 1024, "data_cache_bytes": 64 * 1024}  # several pages per column
    with LanceFileWriter(path, table.schema, version=request.param, **kw) as w:
        for batch in table.to_batches(max_chunksize=4096):
            w.write_batch(batch)
    return path, table


@pytest.mark.interop
def test_file_exercises_the_fast_paths(written: tuple[str, pa.Table]) -> None:
    reader = LanceFileReader(written[0])
    cols = reader.metadata().columns
    assert all(len(c.pages) > 1 for c in cols)
    compressions = {type(c.pages[0].encoding.value_compression) for c in cols}
    assert {m.Flat, m.InlineBitpacking, m.Fsst, m.FixedSizeList} <= compressions
    assert any(c.pages[0].encoding.def_compression is not None for c in cols)


@pytest.mark.interop
def test_one_row_takes_match(written: tuple[str, pa.Table]) -> None:
    path, table = written
    reader = LanceFileReader(path)
    rng = np.random.default_rng(5)
    rows = [0, 1, ROWS - 1, *rng.integers(0, ROWS, 60).tolist()]
    for row in rows:
        assert reader.take_rows([row]).to_table().equals(table.slice(row, 1)), row


@pytest.mark.interop
def test_takes_across_pages_match(written: tuple[str, pa.Table]) -> None:
    path, table = written
    reader = LanceFileReader(path)
    rng = np.random.default_rng(6)
    for k in (2, 10, 100, 1000):
        idx = np.unique(rng.integers(0, ROWS, k))
        got = reader.take_rows(idx).to_table()
        assert got.equals(table.take(pa.array(idx))), k
    # Runs that end exactly at and cross page and chunk boundaries.
    idx = np.concatenate([np.arange(4090, 4200), np.arange(ROWS - 1100, ROWS)])
    assert reader.take_rows(idx).to_table().equals(table.take(pa.array(idx)))


@pytest.mark.parametrize(("t", "width"), [(8, 3), (16, 9), (32, 17), (32, 32), (64, 63), (64, 64), (16, 0)])
def test_single_value_fastlanes_matches_unpack(t: int, width: int) -> None:
    rng = np.random.default_rng(t + width)
    words = FL_BLOCK * width // t
    dt = np.dtype(f"<u{t // 8}")
    packed = rng.integers(0, np.iinfo(dt).max, words, dtype=np.uint64, endpoint=True).astype(dt)
    want = fastlanes_unpack(packed, width, t, 1)[0]
    blob = np.frombuffer(packed.tobytes() + b"\0" * 8, dtype=np.uint8)
    idx = np.arange(FL_BLOCK, dtype=np.int64)
    many = _fastlanes_values(blob, np.zeros(FL_BLOCK, np.int64), np.full(FL_BLOCK, width), t, idx)
    assert (many == want.astype(np.uint64)).all()
    for i in (0, 1, 7, 8, 100, 513, 1023):
        assert _fastlanes_one(blob, 0, width, t, i) == int(want[i])
