"""``add_columns`` with a UDF, a reader, fields and SQL, against pylance cell by cell.

Both packages run the same steps on copies of one pylance-written dataset with deletions (so the
new files must line up with physical rows while UDFs and readers see live rows only).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance")

MODULES = [lance_format, lance]  # _both returns (ours, theirs)


def _base(tmp_path: Path) -> Path:
    path = tmp_path / "base"
    t = pa.table({"id": pa.array(range(12), pa.int64()), "x": [float(i) / 2 for i in range(12)]})
    lance.write_dataset(t, str(path), max_rows_per_file=5)
    lance.dataset(str(path)).delete("id in (2, 5, 6, 11)")  # a whole file's tail, a file's head
    return path


def _both(tmp_path: Path, steps: Callable[[ModuleType, str], Any]) -> list[Any]:
    base = _base(tmp_path)
    out = []
    for mod in MODULES:
        uri = tmp_path / mod.__name__
        shutil.copytree(base, uri)
        out.append(steps(mod, str(uri)))
    return out


def test_udf_with_read_columns_and_row_address(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        ds = mod.dataset(uri)
        seen: list[int] = []

        def triple(batch: pa.RecordBatch) -> pa.RecordBatch:
            seen.append(batch.num_rows)
            assert batch.schema.names == ["id"]
            return pa.record_batch({"tripled": pa.compute.multiply(batch["id"], 3)})

        ds.add_columns(triple, read_columns=["id"], batch_size=3)

        def where(batch: pa.RecordBatch) -> pa.RecordBatch:
            return pa.record_batch({"addr": batch["_rowaddr"], "xx": batch["x"]})

        ds.add_columns(where, read_columns=["x", "_rowaddr"])
        return ds.version, ds.to_table().to_pydict(), sum(seen[1:])  # seen[0]: the schema sample

    ours, theirs = _both(tmp_path, steps)
    assert ours == theirs
    assert ours[2] == 8  # live rows only


def test_batch_udf_with_output_schema_and_pandas_result(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")

    def steps(mod: ModuleType, uri: str) -> Any:
        ds = mod.dataset(uri)
        schema = pa.schema([pa.field("label", pa.string())])

        @mod.batch_udf(output_schema=schema)
        def label(batch: pa.RecordBatch) -> Any:
            return pd.DataFrame({"label": [f"row{i}" for i in batch["id"].to_pylist()]})

        ds.add_columns(label, read_columns=["id"])
        return ds.schema.field("label").type, ds.to_table().to_pydict()

    ours, theirs = _both(tmp_path, steps)
    assert ours == theirs


def test_reader_supplies_live_rows_in_order(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        ds = mod.dataset(uri)
        values = pa.table({"r": pa.array([100 + i for i in range(8)], pa.int32())})
        ds.add_columns(values.to_reader())
        too_many = pa.table({"s": list(range(9))})
        with pytest.raises(Exception, match=r"(?i)more"):
            mod.dataset(uri).add_columns(too_many)
        too_few = pa.table({"s": list(range(7))})
        with pytest.raises(Exception, match=r"(?i)fewer|ended before"):
            mod.dataset(uri).add_columns(too_few)
        return mod.dataset(uri).to_table().to_pydict()

    ours, theirs = _both(tmp_path, steps)
    assert ours == theirs


def test_null_fields_and_sql_still_work(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        ds = mod.dataset(uri)
        ds.add_columns(pa.field("empty", pa.string()))
        ds.add_columns({"y": "x * 2"})
        return ds.to_table().to_pydict(), [len(f.data_files()) for f in ds.get_fragments()]

    ours, theirs = _both(tmp_path, steps)
    assert ours == theirs


def test_udf_result_read_by_pylance(tmp_path: Path) -> None:
    base = _base(tmp_path)
    ds = lance_format.dataset(str(base))
    ds.add_columns(lambda b: pa.record_batch({"neg": pa.compute.negate(b["id"])}), read_columns=["id"])
    theirs = lance.dataset(str(base)).to_table()
    assert theirs.to_pydict() == ds.to_table().to_pydict()
    assert theirs.column("neg").to_pylist() == [-i for i in theirs.column("id").to_pylist()]


def test_checkpoint_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(lance_format.core.errors.NotSupportedError, match="checkpoint"):
        lance_format.batch_udf(checkpoint_file=str(tmp_path / "cp.sqlite"))(lambda b: b)
