"""Resolving "latest": on object-store roots reused for ``cache.latestVersionSeconds``, on local
roots while ``_versions/`` has the same stat; renewed at once after a write through the same
process."""

from __future__ import annotations

import os
import shutil
import time
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


def test_zero_always_lists_and_local_roots_go_by_the_versions_folder(tmp_path: Path) -> None:
    local = Catalog(str(tmp_path), latest_seconds=5.0)
    assert (local.latest_seconds, local.stat_latest) == (0.0, True)
    assert Catalog(str(tmp_path), latest_seconds=0).stat_latest is False
    memory = Catalog(f"memory://x-{uuid.uuid4().hex}", latest_seconds=0)
    assert (memory.latest_seconds, memory.stat_latest) == (0.0, False)


def _counting_listings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    listings: list[int] = []
    real = catalog_module.VersionInfo

    def counting(store: object) -> object:
        listings.append(1)
        return real(store)  # type: ignore[arg-type]

    monkeypatch.setattr(catalog_module, "VersionInfo", counting)
    return listings


def _settle(folder: Path) -> None:
    """Date ``folder``'s last change back beyond the settling time (as if written a while ago)."""
    past = time.time_ns() - 2 * catalog_module.STAMP_SETTLE_NS
    os.utime(folder, ns=(past, past))


def test_local_latest_is_listed_again_only_when_the_versions_folder_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = Catalog(str(tmp_path), latest_seconds=1.0)
    lance_format.write_dataset(DATA, str(tmp_path / "ds"))
    _settle(tmp_path / "ds" / "_versions")
    listings = _counting_listings(monkeypatch)
    assert cat.open("ds").version == 1
    assert [cat.open("ds").version for _ in range(5)] == [1] * 5
    assert len(listings) == 1  # one listing, then a stat per call
    lance_format.write_dataset(DATA, str(tmp_path / "ds"), mode="append")  # another process's commit
    assert cat.open("ds").version == 2  # the folder changed: listed again, the new version seen
    assert cat.open("ds").version == 2
    assert len(listings) == 3  # changed within the settling time: each call lists until it settles
    _settle(tmp_path / "ds" / "_versions")
    assert [cat.open("ds").version for _ in range(3)] == [2] * 3
    assert len(listings) == 4
    shutil.rmtree(tmp_path / "ds")  # dropped and written again by another process
    lance_format.write_dataset(DATA.slice(0, 3), str(tmp_path / "ds"))
    assert cat.open("ds").count_rows() == 3


def test_local_latest_lists_every_call_when_the_setting_is_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = Catalog(str(tmp_path), latest_seconds=0.0)
    lance_format.write_dataset(DATA, str(tmp_path / "ds"))
    _settle(tmp_path / "ds" / "_versions")
    listings = _counting_listings(monkeypatch)
    assert [cat.open("ds").version for _ in range(3)] == [1] * 3
    assert len(listings) == 3


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
