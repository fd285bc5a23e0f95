"""Table-layer interop with pylance 14.0.2: its manifests, deletion files and tags, and ours read by it.

These tests need no data files of ours: pylance writes the data, we read manifests and commit.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.io.store import LocalStore
from lance_format.table import _serde
from lance_format.table.commit import commit_transaction
from lance_format.table.deletion import read_deletion_file, write_deletion_file
from lance_format.table.manifest_file import encode_manifest_file
from lance_format.table.model import (
    Append,
    DataFile,
    DataFragment,
    Delete,
    DeletionFileType,
    Restore,
    Transaction,
)
from lance_format.table.naming import list_versions, manifest_key
from lance_format.table.tags import create_tag, list_tags
from lance_format.table.versions import load_manifest, read_transaction

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop


def _pylance_dataset(path: Path, rows: int = 40, per_file: int = 10) -> None:
    table = pa.table({"a": np.arange(rows, dtype=np.int64), "s": [f"r{i}" for i in range(rows)]})
    lance.write_dataset(table, str(path), data_storage_version="2.0", max_rows_per_file=per_file)


def test_pylance_manifests_roundtrip_byte_identical(tmp_path: Path) -> None:
    _pylance_dataset(tmp_path)
    ds = lance.dataset(str(tmp_path))
    ds.delete("a < 3")
    ds.delete("a >= 30")  # removes a whole fragment
    lance.write_dataset(pa.table({"a": [1], "s": ["x"]}), str(tmp_path), mode="append")
    store = LocalStore(str(tmp_path))
    found, naming = list_versions(store)
    assert naming is not None
    assert sorted(found) == [1, 2, 3, 4]
    for v, (key, _) in found.items():
        manifest, _ = load_manifest(store, v)
        txn = read_transaction(store, manifest, naming)
        assert encode_manifest_file(manifest, txn) == store.read_all(key), f"version {v}"
    m3, _ = load_manifest(store, 3)
    t3 = read_transaction(store, m3, naming)
    assert t3 is not None
    assert isinstance(t3.operation, Delete)
    assert t3.operation.deleted_fragment_ids == (3,)


def test_read_pylance_deletion_files(tmp_path: Path) -> None:
    _pylance_dataset(tmp_path, rows=20_000, per_file=10_000)
    ds = lance.dataset(str(tmp_path))
    ds.delete("a % 3 = 0 AND a < 9000")  # 3000 rows of fragment 0 -> .arrow
    ds.delete("a >= 10000 AND a % 10 <> 0")  # 9000 rows of fragment 1 -> .bin
    store = LocalStore(str(tmp_path))
    m, _ = load_manifest(store)
    f0, f1 = m.fragments
    assert f0.deletion_file is not None
    assert f0.deletion_file.file_type is DeletionFileType.ARROW_ARRAY
    assert f1.deletion_file is not None
    assert f1.deletion_file.file_type is DeletionFileType.BITMAP
    assert read_deletion_file(store, 0, f0.deletion_file).tolist() == list(range(0, 9000, 3))
    expected = [i for i in range(10_000) if i % 10 != 0]
    assert read_deletion_file(store, 1, f1.deletion_file).tolist() == expected
    assert m.reader_feature_flags & 1
    assert m.writer_feature_flags & 1


@pytest.mark.parametrize("count", [7, 6001])
def test_pylance_reads_our_delete_and_restore(tmp_path: Path, count: int) -> None:
    _pylance_dataset(tmp_path, rows=20_000, per_file=10_000)
    store = LocalStore(str(tmp_path))
    base, naming = load_manifest(store)
    offsets = np.arange(count) * 1
    frag = base.fragments[1]
    d = write_deletion_file(store, frag.id, base.version, offsets)
    op = Delete((replace(frag, deletion_file=d),), (0,), "ours")
    m2 = commit_transaction(store, Transaction(1, str(uuid.uuid4()), op), base, naming)
    ds = lance.dataset(str(tmp_path))
    assert ds.version == 2 == m2.version
    assert ds.count_rows() == 10_000 - count
    got = ds.to_table()["a"].to_numpy()
    np.testing.assert_array_equal(got, np.arange(10_000 + count, 20_000))
    assert ds.take([0])["a"].to_pylist() == [10_000 + count]
    m3 = commit_transaction(store, Transaction(2, str(uuid.uuid4()), Restore(1)), m2, naming)
    ds = lance.dataset(str(tmp_path))
    assert (ds.version, ds.count_rows(), m3.version) == (3, 20_000, 3)
    assert json.loads(store.read_all("_versions/latest_version_hint.json")) == {"version": 3}


def test_pylance_reads_our_append_of_its_fragments(tmp_path: Path) -> None:
    _pylance_dataset(tmp_path)
    staged = lance.fragment.write_fragments(
        pa.table({"a": np.arange(100, 105, dtype=np.int64), "s": list("vwxyz")}), str(tmp_path)
    )
    frags = []
    for meta in staged:
        raw = meta.to_json()
        doc = json.loads(raw) if isinstance(raw, str) else raw
        files = tuple(
            DataFile(
                f["path"],
                tuple(f["fields"]),
                tuple(f["column_indices"]),
                f["file_major_version"],
                f["file_minor_version"],
                f.get("file_size_bytes") or 0,
            )
            for f in doc["files"]
        )
        frags.append(DataFragment(0, files, doc["physical_rows"]))
    store = LocalStore(str(tmp_path))
    base, naming = load_manifest(store)
    commit_transaction(store, Transaction(1, str(uuid.uuid4()), Append(tuple(frags))), base, naming)
    ds = lance.dataset(str(tmp_path))
    assert ds.version == 2
    assert [f.fragment_id for f in ds.get_fragments()] == [0, 1, 2, 3, 4]
    assert ds.to_table()["a"].to_pylist()[-6:] == [39, 100, 101, 102, 103, 104]
    # pylance appends on top of our commit; we read its manifest back.
    lance.write_dataset(pa.table({"a": [7], "s": ["q"]}), str(tmp_path), mode="append")
    m3, _ = load_manifest(store)
    assert m3.version == 3
    assert m3.num_rows == 46
    assert m3.fragments[-1].id == 5


def test_tags_both_ways(tmp_path: Path) -> None:
    _pylance_dataset(tmp_path)
    lance.write_dataset(pa.table({"a": [1], "s": ["x"]}), str(tmp_path), mode="append")
    store = LocalStore(str(tmp_path))
    create_tag(store, "ours", 1, store.size(manifest_key(1)))
    ds = lance.dataset(str(tmp_path))
    assert ds.tags.list()["ours"]["version"] == 1
    assert lance.dataset(str(tmp_path), version="ours").count_rows() == 40
    ds.tags.create("theirs", 2)
    assert list_tags(store)["theirs"]["version"] == 2


def test_stable_row_ids_match_pylance(tmp_path: Path) -> None:
    table = pa.table({"a": np.arange(100, dtype=np.int64)})
    lance.write_dataset(table, str(tmp_path), data_storage_version="2.0", enable_stable_row_ids=True)
    lance.write_dataset(table.slice(0, 50), str(tmp_path), mode="append")
    store = LocalStore(str(tmp_path))
    m, _ = load_manifest(store)
    assert m.next_row_id == 150
    assert m.reader_feature_flags & 2
    ids = _serde.decode_row_ids(m.fragments[1].row_ids, "x")  # type: ignore[arg-type]
    assert ids.tolist() == list(range(100, 150))


def test_v1_naming_kept(tmp_path: Path) -> None:
    table = pa.table({"a": np.arange(10, dtype=np.int64)})
    lance.write_dataset(table, str(tmp_path), data_storage_version="2.0", enable_v2_manifest_paths=False)
    store = LocalStore(str(tmp_path))
    base, naming = load_manifest(store)
    frag = base.fragments[0]
    d = write_deletion_file(store, frag.id, 1, np.array([0, 9]))
    op = Delete((replace(frag, deletion_file=d),), (), "a in (0, 9)")
    commit_transaction(store, Transaction(1, str(uuid.uuid4()), op), base, naming)
    assert store.exists("_versions/2.manifest")
    ds = lance.dataset(str(tmp_path))
    assert ds.version == 2
    assert ds.to_table()["a"].to_pylist() == list(range(1, 9))


def test_indices_survive_our_commits(tmp_path: Path) -> None:
    uri = str(tmp_path)
    _pylance_dataset(tmp_path)
    ds = lance.dataset(uri)
    ds.create_scalar_index("a", "BTREE")
    store = LocalStore(uri)
    base, naming = load_manifest(store)
    assert base.index_section is not None
    frag = base.fragments[0]
    d = write_deletion_file(store, frag.id, base.version, np.array([1, 2]))
    op = Delete((replace(frag, deletion_file=d),), (), "a in (1, 2)")
    m = commit_transaction(store, Transaction(base.version, str(uuid.uuid4()), op), base, naming)
    assert m.index_section == 0
    theirs = lance.dataset(uri)
    assert [i.name for i in theirs.describe_indices()] == ["a_idx"]
    assert theirs.to_table(filter="a = 5")["a"].to_pylist() == [5]
    assert theirs.to_table(filter="a = 2").num_rows == 0
    m2 = commit_transaction(store, Transaction(m.version, str(uuid.uuid4()), Restore(1)), m, naming)
    assert m2.index_section is None
    m3 = commit_transaction(store, Transaction(m2.version, str(uuid.uuid4()), Restore(2)), m2, naming)
    assert m3.index_section == 0
    assert [i.name for i in lance.dataset(uri).describe_indices()] == ["a_idx"]
