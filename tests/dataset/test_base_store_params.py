"""``base_store_params`` (object-store options by base path URI) compared with pylance 14.0.2, on a
dataset whose root is a local directory and whose data lives in a base on the loopback S3 server:
the top-level ``storage_options`` name an S3 endpoint that refuses connections, so only a base's
own entry reaches its files."""

from __future__ import annotations

import pickle
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
import lance_format.fragment
from lance_format.errors import InvalidTypeError
from tests.s3_server import BUCKET, S3Server

lance = pytest.importorskip("lance")

pytestmark = [pytest.mark.s3, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _refused(good: dict[str, str]) -> dict[str, str]:
    """The server's options, but an endpoint nothing listens on (and no retries)."""
    return dict(good, aws_endpoint="http://127.0.0.1:9", client_max_retries="0")


@pytest.fixture
def remote(s3_server: S3Server, tmp_path: Path) -> tuple[str, str, dict[str, str]]:
    """``(local root, S3 base URI, good options)`` of a dataset pylance wrote into the base."""
    good = dict(s3_server.storage_options)
    base = f"s3://{BUCKET}/bsp-{uuid.uuid4().hex[:12]}"
    root = str(tmp_path / "root")
    bases = [lance.DatasetBasePath(base, name="remote")]
    table = pa.table({"x": pa.array(range(6), pa.int64()), "s": [f"v{i}" for i in range(6)]})
    lance.write_dataset(
        table, root, initial_bases=bases, target_bases=["remote"], storage_options=good, max_rows_per_file=4
    )
    return root, base, good


def _open(mod: Any, root: str, **kwargs: Any) -> Any:
    return mod.dataset(root, session=mod.Session(), **kwargs)  # a fresh session: no cached files


def test_a_base_s_entry_replaces_the_storage_options(remote: tuple[str, str, dict[str, str]]) -> None:
    """Before: ours had no ``base_store_params`` (TypeError)."""
    root, base, good = remote
    kwargs = {"storage_options": _refused(good), "base_store_params": {base: good}}
    theirs = _open(lance, root, **kwargs).to_table()
    ours = _open(lance_format, root, **kwargs)
    assert ours.to_table().equals(theirs)
    assert ours.checkout_version(1).to_table().equals(theirs)
    assert pickle.loads(pickle.dumps(ours)).to_table().equals(theirs)
    assert ours.get_fragments()[1].to_table().equals(theirs.slice(4))


@pytest.mark.parametrize("entry", ["bad", "other", "slash"])
def test_without_a_usable_entry_the_base_is_not_reached(
    remote: tuple[str, str, dict[str, str]], entry: str
) -> None:
    """A base's entry wins over good ``storage_options``; an entry for another URI (or the base's
    with a trailing slash: matched exactly) leaves the base to the refused top-level options."""
    root, base, good = remote
    if entry == "bad":
        kwargs = {"storage_options": good, "base_store_params": {base: _refused(good)}}
    else:
        key = base + "/" if entry == "slash" else f"s3://{BUCKET}/elsewhere"
        kwargs = {"storage_options": _refused(good), "base_store_params": {key: good}}
    with pytest.raises(pa.ArrowInvalid, match=r"127\.0\.0\.1:9\b"):
        _open(lance, root, **kwargs).to_table()
    with pytest.raises(OSError, match=r"127\.0\.0\.1:9\b"):  # a TransientStorageError
        _open(lance_format, root, **kwargs).to_table()


def test_writes_to_a_base_use_its_entry(remote: tuple[str, str, dict[str, str]], tmp_path: Path) -> None:
    root, base, good = remote
    kwargs = {"storage_options": _refused(good), "base_store_params": {base: good}}
    more = pa.table({"x": pa.array([6], pa.int64()), "s": ["v6"]})
    ds = _open(lance_format, root, **kwargs)
    ds.insert(more, target_bases=["remote"])  # the handle's entries
    lance_format.write_dataset(more, ds, mode="append", target_bases=["remote"])
    # A new dataset written straight into a base, read back by pylance.
    other = f"s3://{BUCKET}/bsp-{uuid.uuid4().hex[:12]}"
    new_root = str(tmp_path / "new")
    written = lance_format.write_dataset(
        more,
        new_root,
        initial_bases=[lance_format.DatasetBasePath(other, name="remote")],
        target_bases=["remote"],
        session=lance_format.Session(),
        storage_options=_refused(good),
        base_store_params={other: good},
    )
    assert written.to_table().equals(more)
    assert (
        _open(lance, new_root, storage_options=_refused(good), base_store_params={other: good})
        .to_table()
        .equals(more)
    )
    theirs = _open(lance, root, **kwargs).to_table()
    assert theirs["x"].to_pylist() == [0, 1, 2, 3, 4, 5, 6, 6]
    assert _open(lance_format, root, **kwargs).to_table().equals(theirs)


@pytest.mark.parametrize("params", [[("s3://b/p", {})], {"s3://b/p": 1}, {1: {}}])
def test_base_store_params_must_map_uris_to_dicts(tmp_path: Path, params: Any) -> None:
    root = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"x": [1]}), root)
    with pytest.raises(TypeError):
        lance.dataset(root, base_store_params=params)
    with pytest.raises(InvalidTypeError):
        lance_format.dataset(root, base_store_params=params)


def test_distributed_writes_and_commits_take_them(remote: tuple[str, str, dict[str, str]]) -> None:
    """``write_fragments`` into a base and ``LanceDataset.commit`` of them, as pylance's."""
    root, base, good = remote
    kwargs = {"storage_options": _refused(good), "base_store_params": {base: good}}
    more = pa.table({"x": pa.array([7, 8], pa.int64()), "s": ["v7", "v8"]})
    frags = lance_format.fragment.write_fragments(more, root, target_bases=["remote"], **kwargs)
    assert all(f.files[0].base_id == 1 for f in frags)
    op = lance_format.LanceOperation.Append(frags)
    ds = lance_format.LanceDataset.commit(root, op, read_version=1, **kwargs)
    assert ds.to_table()["x"].to_pylist()[-2:] == [7, 8]  # the returned dataset reads the base
    assert _open(lance, root, **kwargs).to_table().equals(_open(lance_format, root, **kwargs).to_table())
