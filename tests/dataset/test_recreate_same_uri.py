"""A dataset dropped and written again at the same URI reads as the new dataset, never the old.

Its manifests reuse the old names (``_versions/1.manifest`` ...) and can have the old sizes, so the
caches must tell the objects apart (the store's tag), and a local descriptor of the old file must
not be reused.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.io.store import store_for_uri


def _rewrite_locally(path: Path, table: pa.Table, by: str) -> None:
    shutil.rmtree(path)
    if by == "pylance":
        lance.write_dataset(table, str(path))
    else:
        lance_format.write_dataset(table, str(path))


@pytest.mark.parametrize("by", ["ours", "pylance"])
def test_local_dataset_recreated_outside_the_engine(tmp_path: Path, by: str) -> None:
    path = tmp_path / "ds"
    lance_format.write_dataset(pa.table({"a": [1, 2, 3]}), str(path))
    old = lance_format.dataset(str(path))
    assert old.to_table().column("a").to_pylist() == [1, 2, 3]
    assert old.take([2]).column("a").to_pylist() == [3]

    # Same row count width, same manifest size: only the bytes differ.
    _rewrite_locally(path, pa.table({"a": [7, 8, 9]}), by)
    new = lance_format.dataset(str(path))
    assert new.version == 1
    assert new.to_table().column("a").to_pylist() == [7, 8, 9]
    assert new.take([0, 2]).column("a").to_pylist() == [7, 9]

    _rewrite_locally(path, pa.table({"b": ["x", "y", "z", "w"]}), by)
    newer = lance_format.dataset(str(path))
    assert newer.schema.names == ["b"]
    assert newer.to_table().column("b").to_pylist() == ["x", "y", "z", "w"]
    assert newer.versions()[0]["version"] == 1


@pytest.mark.s3
def test_s3_dataset_dropped_and_recreated(s3_server, s3_uri: str) -> None:  # type: ignore[no-untyped-def]
    opts = s3_server.storage_options
    lance_format.write_dataset(pa.table({"a": [1, 2, 3]}), s3_uri, storage_options=opts)
    assert lance_format.dataset(s3_uri, storage_options=opts).to_table().column("a").to_pylist() == [1, 2, 3]
    store = store_for_uri(s3_uri, opts)
    for key in [k for prefix in ("_versions", "_transactions", "data") for k, _ in store.list(prefix)]:
        store.delete(key)
    lance_format.write_dataset(pa.table({"a": [7, 8, 9]}), s3_uri, storage_options=opts)
    again = lance_format.dataset(s3_uri, storage_options=opts)
    assert again.to_table().column("a").to_pylist() == [7, 8, 9]


def test_served_dataset_recreated_outside_the_server_and_dropped(tmp_path: Path) -> None:
    from flight_server.catalog import Catalog
    from lance_format.io.descriptors import DESCRIPTORS

    cat = Catalog(str(tmp_path / "root"))
    uri = cat.uri("ds")
    lance_format.write_dataset(pa.table({"a": [1, 2, 3]}), uri)
    assert cat.open("ds").to_table().column("a").to_pylist() == [1, 2, 3]
    _rewrite_locally(Path(uri), pa.table({"a": [4, 5, 6]}), "ours")  # another process
    assert cat.open("ds").to_table().column("a").to_pylist() == [4, 5, 6]
    assert DESCRIPTORS.count_under(uri) > 0
    cat.drop("ds")
    # The dropped dataset's files hold no descriptor, so their disk space comes back at once.
    assert DESCRIPTORS.count_under(uri) == 0
