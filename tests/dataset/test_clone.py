"""``shallow_clone`` and ``deep_clone`` against pylance 14.0.2: the same manifest structure (base
paths, which files name which base, indices), the same ``Clone`` transaction, the same rows; each
engine's clone read by the other, and written to afterwards."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import DatasetAlreadyExistsError, NotSupportedError, VersionNotFoundError

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop

TABLE = pa.table({"a": pa.array(range(10), pa.int64()), "b": [f"v{i}" for i in range(10)]})


def _source(engine: Any, root: Path) -> Any:
    """Version 1 and 2 appends, 3 a delete (deletion files), 4 a BTREE index; tag t1 -> 3."""
    uri = str(root / "src.lance")
    engine.write_dataset(TABLE, uri, enable_stable_row_ids=True)
    engine.write_dataset(TABLE, uri, mode="append")
    ds = engine.dataset(uri)
    ds.delete("a = 3")
    ds.create_scalar_index("a", "BTREE")
    ds.tags.create("t1", 3)
    return engine.dataset(uri)


def _structure(uri: str, source: str) -> tuple[Any, ...]:
    """What a clone's manifest says, with the source's own paths and uuids taken out."""
    m = lance_format.dataset(uri).manifest
    bases = [(b.id, b.name, b.is_dataset_root, b.path == source) for b in m.base_paths]
    files = [
        (
            f.id,
            f.physical_rows,
            [(d.fields, d.base_id) for d in f.files],
            None if f.deletion_file is None else (f.deletion_file.num_deleted_rows, f.deletion_file.base_id),
            f.row_ids,
        )
        for f in m.fragments
    ]
    read = lance.dataset(uri)
    indices = [(d.name, [s.base_id for s in d.segments]) for d in read.describe_indices()]
    op = read.read_transaction(read.version).operation
    return (
        m.version,
        m.max_fragment_id,
        m.next_row_id,
        m.reader_feature_flags,
        bases,
        files,
        indices,
        (type(op).__name__, op.is_shallow, op.ref_name, op.ref_version, op.ref_path == source),
        read.to_table().to_pylist(),
        read.to_table(filter="a = 5").to_pylist(),
    )


@pytest.mark.parametrize("reference", [4, "t1", (None, 2), ("main", None)])
@pytest.mark.parametrize("shallow", [True, False])
def test_clone_matches_pylance(tmp_path: Path, reference: Any, shallow: bool) -> None:
    seen = []
    for engine in (lance, lance_format):
        root = tmp_path / engine.__name__
        ds = _source(engine, root)
        target = root / "clone.lance"
        clone = (ds.shallow_clone if shallow else ds.deep_clone)(target, reference)
        assert type(clone).__module__.split(".")[0] == engine.__name__
        seen.append(_structure(str(target), ds.uri))
        assert lance_format.dataset(str(target)).to_table() == lance.dataset(str(target)).to_table()
        if not shallow:  # self-contained: the source can go
            lance.LanceDataset.drop(ds.uri)
            assert lance.dataset(str(target)).to_table().to_pylist() == seen[-1][-2]
    assert seen[0] == seen[1]


def test_writes_to_a_shallow_clone_stay_in_its_root(tmp_path: Path) -> None:
    ds = _source(lance_format, tmp_path)
    target = str(tmp_path / "clone.lance")
    ds.shallow_clone(target, 4)
    before = sorted(os.listdir(os.path.join(ds.uri, "data")))
    lance_format.write_dataset(TABLE, target, mode="append")
    lance_format.dataset(target).delete("a = 1")
    assert sorted(os.listdir(os.path.join(ds.uri, "data"))) == before
    assert lance_format.dataset(ds.uri).count_rows() == 18  # the source is unchanged
    got = lance.dataset(target).to_table(filter="a = 1")
    assert got.num_rows == 0
    assert lance.dataset(target).count_rows() == 18 + 10 - 3  # a=1 in both fragments and the append


def test_clone_refusals(tmp_path: Path) -> None:
    ds = _source(lance_format, tmp_path)
    target = str(tmp_path / "clone.lance")
    ds.shallow_clone(target, 4)
    with pytest.raises(DatasetAlreadyExistsError):
        ds.shallow_clone(target, 2)
    with pytest.raises(DatasetAlreadyExistsError):
        ds.deep_clone(ds.uri, 2)
    with pytest.raises(VersionNotFoundError):
        ds.deep_clone(str(tmp_path / "c2"), 9)
    with pytest.raises(VersionNotFoundError, match="nope"):
        ds.deep_clone(str(tmp_path / "c3"), "nope")
    with pytest.raises(NotSupportedError):
        ds.deep_clone(str(tmp_path / "c4"), ("dev", 1))
    assert not os.path.exists(str(tmp_path / "c2" / "_versions"))


@pytest.mark.s3
def test_deep_clone_between_object_stores(s3_server: Any, s3_uri: str, tmp_path: Path) -> None:
    ds = _source(lance_format, tmp_path)
    opts = s3_server.storage_options
    clone = ds.deep_clone(f"{s3_uri}/clone.lance", "t1", storage_options=opts)
    assert clone.to_table() == lance.dataset(ds.uri, version=3).to_table()
    assert lance.dataset(f"{s3_uri}/clone.lance", storage_options=opts).to_table() == clone.to_table()
