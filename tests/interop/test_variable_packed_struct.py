"""Structs marked ``lance-encoding:packed`` with variable-width fields, written by pylance at 2.2.

pylance 14 stores such a struct as one full-zip column whose rows pack every field (fixed ones as
their bytes, variable ones as a length and the bytes, each in its own per-value encoding: FSST,
plain), described by a ``VariablePackedStruct`` message. It refuses the marker at 2.1 (so 2.1 has
no such pages). Our reader used to refuse these pages; here we read them cell by cell equal to
pylance, by file and dataset scans and by takes, with null structs and several pages.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.encodings.v21 import model as m
from lance_format.file import LanceFileReader
from tests.interop.compare import assert_tables_equal

lance = pytest.importorskip("lance")
from lance.file import LanceFileReader as PyLanceFileReader  # noqa: E402
from lance.file import LanceFileWriter as PyLanceFileWriter  # noqa: E402

pytestmark = pytest.mark.interop

ROWS = 3000


def _table(nullable_rows: bool) -> pa.Table:
    rng = np.random.default_rng(7)
    words = np.array(["", "a", "lance", "packed struct value", "ünïcödé", "x" * 300])
    strings = pa.array([f"{w}-{i}" if i % 5 else str(w) for i, w in enumerate(rng.choice(words, ROWS))])
    blobs = pa.array([bytes(rng.integers(0, 256, i % 13, dtype=np.uint8)) for i in range(ROWS)], pa.binary())
    mask = pa.array(np.arange(ROWS) % 7 == 3) if nullable_rows else None
    st = pa.StructArray.from_arrays(
        [
            pa.array(np.arange(ROWS, dtype=np.int32) * 3),
            strings,
            pa.array(rng.random(ROWS)),
            blobs,
            pa.array((np.arange(ROWS) % 100).astype(np.int8)),
        ],
        ["i", "s", "f", "b", "t"],
        mask=mask,
    )
    field = pa.field("st", st.type, metadata={"lance-encoding:packed": "true"})
    ids = pa.field("id", pa.int64())
    return pa.table([pa.array(np.arange(ROWS, dtype=np.int64)), st], schema=pa.schema([ids, field]))


@pytest.mark.parametrize("nullable_rows", [False, True], ids=["valid", "null_structs"])
def test_file_reader_decodes_variable_packed_structs(tmp_path: Path, nullable_rows: bool) -> None:
    table = _table(nullable_rows)
    path = str(tmp_path / "f.lance")
    with PyLanceFileWriter(path, table.schema, version="2.2") as w:
        for batch in table.to_batches(max_chunksize=1000):
            w.write_batch(batch)
    ours = LanceFileReader(path)
    encodings = [p.encoding for c in ours.metadata().columns for p in c.pages]
    vps = m.VariablePackedStruct
    packed = [e for e in encodings if isinstance(getattr(e, "value_compression", None), vps)]
    assert packed  # the case under test
    theirs = PyLanceFileReader(path)
    assert_tables_equal(ours.read_all().to_table(), theirs.read_all().to_table())
    idx = np.array([0, 1, 3, 5, 17, 999, 1000, 1499, 2998, 2999])
    assert_tables_equal(ours.take_rows(idx).to_table(), theirs.take_rows(idx).to_table())
    assert_tables_equal(ours.read_range(700, 900).to_table(), theirs.read_range(700, 900).to_table())


def test_dataset_reads_variable_packed_structs(tmp_path: Path) -> None:
    table = _table(True)
    path = str(tmp_path / "ds")
    lance.write_dataset(table, path, data_storage_version="2.2", max_rows_per_file=1000)
    theirs, ours = lance.dataset(path), lance_format.dataset(path)
    assert_tables_equal(ours.to_table(), theirs.to_table())
    idx = [2999, 0, 1000, 1001, 42]
    assert_tables_equal(ours.take(idx), theirs.take(idx))
    assert_tables_equal(ours.to_table(columns=["st"]), theirs.to_table(columns=["st"]))
