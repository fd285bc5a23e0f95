"""Resolving "latest" on object-store roots: reused for ``cache.latestVersionSeconds``, renewed at
once after a write through the same process."""

from __future__ import annotations

import shutil
import uuid
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from flight_server import catalog as catalog_module
from flight_server.catalog import Catalog
from flight_server.client import LanceFlightClient
from flight_server.service import LanceFlightService
from flight_server.settings import ServerSettings

DATA = pa.table({"id": pa.array(range(10), pa.int64())})


class _Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_latest_is_reused_within_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(catalog_module.time, "monotonic", clock)
    root = f"memory://latest-{uuid.uuid4().hex}"
    cat = Catalog(root, latest_seconds=1.0)
    lance_format.write_dataset(DATA, f"{root}/ds")
    assert cat.open("ds").version == 1
    lance_format.write_dataset(DATA, f"{root}/ds", mode="append")  # another process's write
    clock.now += 0.5
    assert cat.open("ds").version == 1  # within the interval: no listing, the known version
    assert cat.open("ds", 2).version == 2  # a pinned version is always exact
    clock.now += 0.6
    assert cat.open("ds").version == 2  # interval over: listed again
    lance_format.write_dataset(DATA, f"{root}/ds", mode="append")
    cat.written("ds")  # a write through this process
    assert cat.open("ds").version == 3


def test_local_roots_and_zero_always_list(tmp_path: Path) -> None:
    local = Catalog(str(tmp_path), latest_seconds=5.0)
    assert local.latest_seconds == 0.0
    assert Catalog(f"memory://x-{uuid.uuid4().hex}", latest_seconds=0).latest_seconds == 0.0


def test_server_reads_its_own_writes_and_lists_once_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    root = f"memory://latest-{uuid.uuid4().hex}"
    settings = replace(ServerSettings(root=root, port=0, metrics_port=-1), latest_version_seconds=60.0)
    server = LanceFlightService(settings, location="grpc://127.0.0.1:0")
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", timeout=30)
    try:
        assert client.write("ds", DATA, mode="create") == 1
        assert client.take("ds", indices=[1]).num_rows == 1
        assert client.write("ds", DATA) == 2  # do_put through the server: seen at once
        assert client.scan("ds").num_rows == 20
        assert client.delete("ds", "id < 5") == 10  # a write action: seen at once
        assert client.scan("ds").num_rows == 10
        listings: list[str] = []
        real = catalog_module.open_dataset

        def counting_open(uri: str, **kw: object) -> lance_format.LanceDataset:
            listings.append(uri)
            return real(uri, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(catalog_module, "open_dataset", counting_open)
        for _ in range(5):
            assert client.take("ds", indices=[0]).num_rows == 1
        assert listings == []  # warm takes of "latest" resolved nothing again
    finally:
        client.close()
        server.shutdown()


def test_latest_reuses_the_open_handle_until_a_new_version_or_a_rewrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resolving "latest" lists ``_versions/`` once and reuses the handle open on that version:
    a wide dataset is not built from its manifest again on every plan and read."""
    opened: list[object] = []
    real = catalog_module.open_dataset

    def counting(*args: object, **kwargs: object) -> lance_format.LanceDataset:
        opened.append(kwargs.get("version"))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(catalog_module, "open_dataset", counting)
    cat = Catalog(str(tmp_path))
    lance_format.write_dataset(DATA, str(tmp_path / "ds"))
    first = cat.open("ds")
    assert cat.open("ds") is first
    assert len(opened) == 1
    lance_format.write_dataset(DATA, str(tmp_path / "ds"), mode="append")  # another process's write
    second = cat.open("ds")
    assert second.version == 2
    assert cat.open("ds") is second
    assert len(opened) == 2
    # Dropped and written again elsewhere: version 1 again, but another manifest file.
    shutil.rmtree(tmp_path / "ds")
    lance_format.write_dataset(pa.table({"id": pa.array([7], pa.int64())}), str(tmp_path / "ds"))
    third = cat.open("ds")
    assert third.version == 1
    assert third.count_rows() == 1
    assert len(opened) == 3
