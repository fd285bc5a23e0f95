"""Requests of a cold open and a first take: a dataset opened with nothing cached costs what
pylance's open costs (one listing, one manifest read), and its first one-row take one tail read of
the data file, one chunk-metadata read and one data read per column -- locally and over S3."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.dataset import write_dataset
from lance_format.dataset.dataset import LanceDataset
from lance_format.io.cache import DECODED_CACHE, METADATA_CACHE, PAGE_CACHE
from lance_format.io.store import LocalStore, ObjectStore, store_for_uri
from lance_format.table.naming import manifest_key
from tests.io.counting import Call, CountingStore
from tests.s3_server import S3Server

N = 20_000


def table(n: int = N) -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "x": rng.random(n),
            "name": pa.array([f"name-{i}" for i in rng.integers(0, 10**9, n)]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16, dtype=np.float32)), 16),
        }
    )


@pytest.fixture(autouse=True)
def cold_caches() -> Iterator[None]:
    for cache in (METADATA_CACHE, PAGE_CACHE, DECODED_CACHE):
        cache.clear()
    yield
    for cache in (METADATA_CACHE, PAGE_CACHE, DECODED_CACHE):
        cache.clear()


def _open_calls(ds: LanceDataset, version: int, inner: ObjectStore) -> list[Call]:
    key = manifest_key(version, ds.manifest_naming)
    return [Call("list", "_versions"), Call("read_range", key, 0, inner.size(key))]


def _check_cold_open_and_take(uri: str, inner: ObjectStore, version: int = 1) -> None:
    """Local files: exactly pylance's requests. Object stores may merge neighbouring ranges
    (latency dominates there), so they issue at most as many."""
    store = CountingStore(inner)
    ds = LanceDataset(uri, store=store)
    assert ds.version == version
    assert store.calls == _open_calls(ds, version, inner)
    store.reset()
    row = 12_345
    got = ds.take([row])
    assert got.column("id").to_pylist() == [row]
    (frag,) = ds.manifest.fragments
    data_key = f"data/{frag.files[0].path}"
    calls = store.calls
    assert {c.key for c in calls} == {data_key}
    assert {c.op for c in calls} == {"read_range"}
    # The file's tail (footer, offsets, column metadata, schema) in one read, then per column its
    # page's chunk metadata, then the chunk that holds the row: 1 + 4 + 4, as pylance reads it.
    ncols = len(ds.schema)
    if inner.remote:
        assert 1 < len(calls) <= 1 + 2 * ncols, calls
    else:
        assert len(calls) == 1 + 2 * ncols, calls
    assert calls[0].end == frag.files[0].file_size_bytes  # the tail comes first
    assert len({(c.start, c.end) for c in calls}) == len(calls)  # nothing read twice
    # Reopened in the same process: one listing; the manifest and the open file are cached.
    store.reset()
    again = LanceDataset(uri, store=store)
    assert store.calls == [Call("list", "_versions")]
    store.reset()
    assert again.take([row]).equals(got)
    assert 0 < len(store.calls) <= ncols  # data only; the chunk metadata is known


def test_cold_open_and_first_take_of_a_pylance_dataset(tmp_path: Path) -> None:
    import lance

    root = tmp_path / "ds"
    lance.write_dataset(table(), str(root), max_rows_per_file=N)
    _check_cold_open_and_take(str(root), LocalStore(str(root)))


def test_cold_open_and_first_take_of_our_dataset(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_dataset(table(), str(root), max_rows_per_file=N)
    _check_cold_open_and_take(str(root), LocalStore(str(root)))


def test_open_by_version_and_by_tag(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_dataset(table(100), str(root))
    write_dataset(table(50), str(root), mode="append")
    LanceDataset(str(root)).tags.create("first", 1)
    METADATA_CACHE.clear()
    store = CountingStore(LocalStore(str(root)))
    v1 = LanceDataset(str(root), version=1, store=store)
    assert (v1.version, v1.count_rows()) == (1, 100)
    assert store.calls == _open_calls(v1, 1, store.inner)
    METADATA_CACHE.clear()
    store.reset()
    tagged = LanceDataset(str(root), version="first", store=store)
    assert (tagged.version, tagged.count_rows()) == (1, 100)
    # The tag file, then what opening version 1 costs.
    assert [c.op for c in store.calls] == ["read_all", *(c.op for c in _open_calls(v1, 1, store.inner))]
    assert store.calls[0].key == "_refs/tags/first.json"
    METADATA_CACHE.clear()
    store.reset()
    latest = LanceDataset(str(root), store=store)
    assert (latest.version, latest.count_rows()) == (2, 150)
    assert store.calls == _open_calls(latest, 2, store.inner)


@pytest.mark.s3
def test_cold_open_and_first_take_over_s3(s3_server: S3Server, s3_uri: str) -> None:
    opts = s3_server.storage_options
    write_dataset(table(), s3_uri, max_rows_per_file=N, storage_options=opts)
    _check_cold_open_and_take(s3_uri, store_for_uri(s3_uri, opts))
