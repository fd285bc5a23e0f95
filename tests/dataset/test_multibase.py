"""Multi-base datasets against pylance: ``initial_bases=``, ``target_bases=``, ``add_bases``,
the manifest's ``base_paths``; written by either package, read and appended to by the other."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

import lance_format
import lance_format.fragment
from lance_format.core.errors import InvalidInputError

lance = pytest.importorskip("lance")

PAIRS = [(lance, lance_format), (lance_format, lance)]


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"a": pa.array(range(start, start + n), pa.int64())})


def _bases(mod: ModuleType, tmp: Path) -> list[Any]:
    return [
        mod.DatasetBasePath(str(tmp / "b1"), name="b1"),
        mod.DatasetBasePath(str(tmp / "b2"), name="b2", is_dataset_root=True),
    ]


def _layout(ds: Any) -> list[list[Any]]:
    return [[d.base_id for d in f.data_files()] for f in ds.get_fragments()]


def _paths(ds: Any) -> list[tuple[int, str | None, str, bool]]:
    return sorted((b.id, b.name, b.path, b.is_dataset_root) for b in ds.base_paths().values())


@pytest.mark.parametrize(("writer", "other"), PAIRS)
def test_written_by_one_read_and_appended_by_the_other(tmp_path: Path, writer: Any, other: Any) -> None:
    root = str(tmp_path / "root")
    writer.write_dataset(
        _table(10), root, initial_bases=_bases(writer, tmp_path), target_bases=["b1"], max_rows_per_file=4
    )
    other.write_dataset(_table(6, 100), root, mode="append", target_bases=["b2", "b1"], max_rows_per_file=2)
    writer.dataset(root).delete("a in (1, 101)")
    expected = _table(10).to_pydict()["a"] + _table(6, 100).to_pydict()["a"]
    expected = [x for x in expected if x not in (1, 101)]
    for mod in (lance, lance_format):
        ds = mod.dataset(root)
        assert ds.to_table().column("a").to_pylist() == expected
        assert _layout(ds) == [[1], [1], [1], [2], [1], [2]]
        assert _paths(ds) == [(1, "b1", str(tmp_path / "b1"), False), (2, "b2", str(tmp_path / "b2"), True)]
    assert len(list((tmp_path / "b1").iterdir())) == 4  # non-root base: files at its top
    assert len(list((tmp_path / "b2" / "data").iterdir())) == 2  # a dataset root: under data/
    assert not (tmp_path / "root" / "data").exists()


@pytest.mark.parametrize(("writer", "other"), PAIRS)
def test_add_bases_then_write_there(tmp_path: Path, writer: Any, other: Any) -> None:
    root = str(tmp_path / "root")
    writer.write_dataset(_table(3), root)
    ds = writer.dataset(root).add_bases([writer.DatasetBasePath(str(tmp_path / "b3"), name="b3")])
    assert ds.version == 2
    other.write_dataset(_table(2, 50), root, mode="append", target_bases=["b3"])
    for mod in (lance, lance_format):
        ds = mod.dataset(root)
        assert ds.to_table().column("a").to_pylist() == [0, 1, 2, 50, 51]
        assert _layout(ds) == [[None], [1]]
        assert _paths(ds) == [(1, "b3", str(tmp_path / "b3"), False)]


def test_unknown_target_and_duplicate_bases_are_refused(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    lance_format.write_dataset(_table(2), root, initial_bases=_bases(lance_format, tmp_path))
    with pytest.raises(InvalidInputError, match="nope"):
        lance_format.write_dataset(_table(1), root, mode="append", target_bases=["nope"])
    with pytest.raises(InvalidInputError, match="b1"):
        lance_format.dataset(root).add_bases([lance_format.DatasetBasePath(str(tmp_path / "x"), name="b1")])
    with pytest.raises(InvalidInputError, match="initial_bases"):
        lance_format.write_dataset(
            _table(1), root, mode="append", initial_bases=_bases(lance_format, tmp_path)
        )


def test_target_all_bases_and_distributed_writes(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    bases = _bases(lance_format, tmp_path)
    txn = lance_format.fragment.write_fragments(
        _table(4),
        root,
        initial_bases=bases,
        target_all_bases=True,
        max_rows_per_file=1,
        return_transaction=True,
    )
    ds = lance_format.LanceDataset.commit(root, txn)
    assert _layout(ds) == [[1], [2], [1], [2]]
    theirs = lance.dataset(root)
    assert theirs.to_table().column("a").to_pylist() == [0, 1, 2, 3]
    assert _paths(theirs) == _paths(ds)
