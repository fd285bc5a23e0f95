"""The generic fsspec backend: routing, errors, stores without exclusive create, whole datasets.

The contract suite in ``test_store.py`` runs on it too (the ``fsspec`` parameter of its fixture).
Here, test-only subclasses of fsspec's in-memory filesystem stand in for cloud implementations under
schemes of their own, registered with fsspec for the duration of a test.
"""

from __future__ import annotations

import importlib.util
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import fsspec
import pyarrow as pa
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from fsspec.registry import _registry as fsspec_registry

import lance_format
from lance_format.core.errors import InvalidInputError, NotFoundError, NotSupportedError
from lance_format.dataset import stage_fragments
from lance_format.io.fsspec_store import FsspecStore
from lance_format.io.store import store_for_uri
from lance_format.table import (
    Append,
    CommitOptions,
    SqliteManifestStore,
    Transaction,
    commit_transaction,
    load_manifest,
    register_manifest_store,
    unregister_manifest_store,
)
from tests.table.test_external_store import _DiesAfterClaim

# Schemes no real implementation uses, so registering them cannot shadow one.
_SCHEME = "lancetestfs"
_NO_EXCLUSIVE_SCHEME = "lancetestnox"
_OPTIONS_SCHEME = "lancetestopt"


class _TestFS(MemoryFileSystem):  # type: ignore[misc]
    """fsspec's in-memory filesystem with objects of its own (not the shared ``memory://`` ones)."""

    store: ClassVar[dict[str, Any]] = {}
    pseudo_dirs: ClassVar[list[str]] = [""]


class _NoExclusiveFS(_TestFS):
    """A filesystem that cannot create exclusively, like many object-store implementations."""

    store: ClassVar[dict[str, Any]] = {}
    pseudo_dirs: ClassVar[list[str]] = [""]

    def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if "x" in mode:
            raise ValueError(f"mode {mode!r} is not supported")
        return super().open(path, mode, **kwargs)


class _OptionsFS(_TestFS):
    """Records the storage options it was built with."""

    def __init__(self, *args: Any, flavour: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flavour = flavour


@pytest.fixture
def schemes() -> Iterator[None]:
    registered = {_SCHEME: _TestFS, _NO_EXCLUSIVE_SCHEME: _NoExclusiveFS, _OPTIONS_SCHEME: _OptionsFS}
    try:
        for name, cls in registered.items():
            fsspec.register_implementation(name, cls, clobber=True)
        yield
    finally:
        for name in registered:
            # fsspec has no public unregister; fsspec.registry is a read-only view of this dict.
            fsspec_registry.pop(name, None)


def _bucket() -> str:
    return f"bucket-{uuid.uuid4().hex[:12]}"


def _table(start: int, n: int = 10) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"row-{i}" for i in ids])})


def test_registered_scheme_routes_to_fsspec(schemes: None) -> None:
    store = store_for_uri(f"{_SCHEME}://{_bucket()}/prefix/")
    assert isinstance(store, FsspecStore)
    assert isinstance(store.fs, _TestFS)
    assert store.uri.startswith(f"{_SCHEME}://bucket-")
    assert store.uri.endswith("/prefix")
    assert store.remote
    store.write("a/b", b"xyz")
    assert sorted(store.list("a")) == [("a/b", 3)]
    assert store.read_ranges("a/b", [(0, 1), (1, 1), (2, 3), (5, 9)]) == [b"x", b"", b"z", b""]


def test_unknown_scheme_is_not_supported() -> None:
    with pytest.raises(NotSupportedError, match="gopher"):
        store_for_uri("gopher://host/path")


@pytest.mark.skipif(importlib.util.find_spec("gcsfs") is not None, reason="gcsfs is installed")
def test_uninstalled_implementation_names_the_package() -> None:
    with pytest.raises(NotSupportedError, match=r"gs://.*gcsfs"):
        store_for_uri("gs://bucket/ds")


def test_malformed_uris_and_options_are_invalid_input(schemes: None) -> None:
    for uri in (f"{_SCHEME}://", f"{_SCHEME}:///"):
        with pytest.raises(InvalidInputError, match="scheme://bucket"):
            FsspecStore(uri)
    with pytest.raises(InvalidInputError, match="retry settings"):
        store_for_uri(f"{_SCHEME}://{_bucket()}", {"client_max_retries": "many"})


def test_storage_options_reach_the_filesystem(schemes: None) -> None:
    store = store_for_uri(
        f"{_OPTIONS_SCHEME}://{_bucket()}",
        {"flavour": "mint", "unset": None, "client_max_retries": "2"},  # type: ignore[dict-item]
    )
    assert isinstance(store, FsspecStore)
    assert store.fs.flavour == "mint"
    assert store.retry.max_attempts == 3  # our retries, not passed to the filesystem


def test_missing_object_is_not_found_with_its_uri() -> None:
    store = FsspecStore(f"memory-fsspec://{_bucket()}/root", fs=fsspec.filesystem("memory"))
    for call in (
        lambda: store.size("v/nope"),
        lambda: store.read_all("v/nope"),
        lambda: store.read_range("v/nope", 0, 4),
    ):
        with pytest.raises(NotFoundError, match=re.escape(f"{store.uri}/v/nope")):
            call()
    with pytest.raises(FileNotFoundError):
        store.read_tail("v/nope", 8)
    store.write("v/dir/obj", b"1")
    assert not store.exists("v/dir")  # a folder is not an object
    assert list(store.list("v/dir/obj")) == []  # nor is an object a folder


def test_no_exclusive_create_is_not_supported(schemes: None) -> None:
    store = store_for_uri(f"{_NO_EXCLUSIVE_SCHEME}://{_bucket()}")
    store.write("k", b"plain writes work")
    with pytest.raises(NotSupportedError, match="register_manifest_store"):
        store.put_if_not_exists("v/1", b"x")
    assert not store.exists("v/1")


def test_dataset_round_trip(schemes: None) -> None:
    uri = f"{_SCHEME}://{_bucket()}/ds"
    lance_format.write_dataset(_table(0), uri)
    lance_format.write_dataset(_table(10), uri, mode="append")
    ds = lance_format.dataset(uri)
    assert isinstance(ds.store, FsspecStore)
    assert ds.version == 2
    assert ds.to_table().sort_by("id").equals(pa.concat_tables([_table(0), _table(10)]))
    assert ds.take([3, 15], columns=["id"])["id"].to_pylist() == [3, 15]
    assert lance_format.dataset(uri, version=1).count_rows() == 10


def test_dataset_without_exclusive_create_needs_an_external_store(schemes: None, tmp_path: Path) -> None:
    prefix = f"{_NO_EXCLUSIVE_SCHEME}://{_bucket()}"
    uri = f"{prefix}/ds"
    with pytest.raises(NotSupportedError, match="register_manifest_store"):
        lance_format.write_dataset(_table(0), uri)
    kv = SqliteManifestStore(tmp_path / "manifests.db")
    register_manifest_store(prefix, kv)
    try:
        lance_format.write_dataset(_table(0), uri)
        lance_format.write_dataset(_table(10), uri, mode="append")
        ds = lance_format.dataset(uri)
        assert ds.version == 2
        assert ds.to_table().sort_by("id").equals(pa.concat_tables([_table(0), _table(10)]))
        assert ds.take([0, 19], columns=["id"])["id"].to_pylist() == [0, 19]
        assert kv.latest(ds.store.uri) == (2, "_versions/18446744073709551613.manifest")
        # Published under final names, no staged copies left behind.
        assert all("manifest-" not in key for key, _ in ds.store.list("_versions"))
    finally:
        unregister_manifest_store(prefix)
        kv.close()


def test_reader_repairs_a_claimed_version_without_exclusive_create(schemes: None, tmp_path: Path) -> None:
    prefix = f"{_NO_EXCLUSIVE_SCHEME}://{_bucket()}"
    uri = f"{prefix}/ds"
    kv = SqliteManifestStore(tmp_path / "manifests.db")
    register_manifest_store(prefix, kv)
    try:
        store = lance_format.write_dataset(_table(0), uri).store
        base, naming = load_manifest(store)
        txn = Transaction(base.version, "dead-writer", Append(tuple(stage_fragments(_table(10), uri))))
        with pytest.raises(KeyboardInterrupt):
            commit_transaction(store, txn, base, naming, CommitOptions(committer=_DiesAfterClaim(kv)))
        assert not store.exists("_versions/18446744073709551613.manifest")
        ds = lance_format.dataset(uri)  # finishes the dead writer's copy
        assert (ds.version, ds.count_rows()) == (2, 20)
        assert store.exists("_versions/18446744073709551613.manifest")
        assert kv.latest(store.uri) == (2, "_versions/18446744073709551613.manifest")
    finally:
        unregister_manifest_store(prefix)
        kv.close()
