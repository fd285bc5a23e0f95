"""A defect found by the differential machine (session 12, seed 912009): a nullable struct holding
a list of nullable items, with a null struct row and a null item, was written by ours so that
pylance 14.0.2 could not read it back ("Structural validity has 4 entries for an array with 3
values"), in file versions 2.1 and 2.2: the list layer said "all valid" where pylance pushes the
struct's null down into the list (its layer is then nullable), as it does for item layers.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance")

_TYPE = pa.struct([pa.field("a", pa.list_(pa.field("item", pa.int32()))), pa.field("b", pa.float64())])


def _rows() -> pa.Table:
    items = pa.ListArray.from_arrays(pa.array([0, 3, 3], pa.int32()), pa.array([39, None, 38], pa.int32()))
    sl = pa.StructArray.from_arrays(
        [items, pa.array([1.0, 2.0])], fields=list(_TYPE), mask=pa.array([False, True])
    )
    return pa.table({"sl": sl})


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_ours_reads_its_own_struct_of_list_with_nulls(tmp_path: Path, version: str) -> None:
    lance_format.write_dataset(_rows(), str(tmp_path / "t"), data_storage_version=version)
    assert lance_format.dataset(str(tmp_path / "t")).to_table().equals(_rows())


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_reads_our_struct_of_list_with_nulls(tmp_path: Path, version: str) -> None:
    lance_format.write_dataset(_rows(), str(tmp_path / "t"), data_storage_version=version)
    assert lance.dataset(str(tmp_path / "t")).to_table().equals(_rows())
    lance.write_dataset(_rows(), str(tmp_path / "p"), data_storage_version=version)
    assert _layers(tmp_path / "t") == _layers(tmp_path / "p")  # the list layer: NULLABLE_LIST


def _layers(path: Path) -> list[tuple[object, ...]]:
    from lance_format.file import LanceFileReader

    (data,) = (path / "data").glob("*.lance")
    return [p.encoding.layers for c in LanceFileReader(str(data)).metadata().columns for p in c.pages]
