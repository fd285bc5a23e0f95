"""The server builds its engine session from its settings and opens every dataset in it."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from flight_server.client import LanceFlightClient
from flight_server.metrics import Metrics
from flight_server.settings import ServerSettings
from flight_server.workers import build_server
from lance_format.dataset.session import Session
from lance_format.io.cache import PAGE_CACHE


def test_the_server_session_comes_from_its_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The server's own setting is an argument to the session: it wins over LANCE_FORMAT_*.
    monkeypatch.setenv("LANCE_FORMAT_PAGE_CACHE_BYTES", "1234")
    monkeypatch.setenv("LANCE_FORMAT_DATASET_THREADS", "3")
    settings = ServerSettings(root=str(tmp_path / "root"), port=0, metrics_port=-1, page_cache_bytes=8 << 20)
    metrics = Metrics()
    server = build_server(settings, 0, (), metrics)
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", timeout=30)
    try:
        session = server.session  # type: ignore[attr-defined]
        assert session is Session.default()
        assert session.config.page_cache_bytes == 8 << 20 == PAGE_CACHE.capacity
        assert session.config.dataset_threads == 3  # not a server setting: the environment's
        client.write("ds", pa.table({"a": [1, 2, 3]}), mode="create")
        ds = server.catalog.open("ds")  # type: ignore[attr-defined]
        assert ds.session is session
        assert ds.store is server.catalog.open("ds", shared=False).store  # the session's registry
        assert ds.store.runtime is session.runtime  # reads and writes through its gate and pools
        assert session.dataset_pool()._max_workers == 3
        assert client.cache_stats()["page_capacity"] == session.page_cache.capacity
        assert metrics.session is session  # the metrics poll what the cache_stats action reports
    finally:
        client.close()
        server.shutdown()


def _new_threads(before: set[int]) -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.ident not in before and t.is_alive())


def test_shutdown_closes_the_services_session(tmp_path: Path) -> None:
    """``server.shutdown()`` drains the calls, then closes the engine session it was given: it
    is closed and none of its threads (I/O, decode, encode, split, read-ahead) is left."""
    from flight_server.service import LanceFlightService

    before = {t.ident for t in threading.enumerate()}
    session = Session(decode_threads=2, encode_threads=2, dataset_threads=2, io_parallelism=2)
    settings = ServerSettings(root=str(tmp_path / "root"), port=0, metrics_port=-1)
    server = LanceFlightService(settings, location="grpc://127.0.0.1:0", session=session)
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", timeout=30)
    table = pa.table({"a": list(range(50_000)), "s": [f"v{i % 977}" for i in range(50_000)]})
    try:
        client.write("ds", table, mode="create")
        assert client.scan("ds").num_rows == 50_000
        assert client.take("ds", indices=[0, 49_999]).column("a").to_pylist() == [0, 49_999]
        for pool in session.runtime.pools:  # whatever the sizes decided, each pool has run
            assert pool().submit(threading.current_thread).result() is not None
        assert any(name.startswith("lance-") for name in _new_threads(before))
    finally:
        client.close()
        server.shutdown()
    assert session.closed
    assert [n for n in _new_threads(before) if n.startswith("lance-")] == []


def test_build_server_shutdown_stops_every_engine_thread(tmp_path: Path) -> None:
    """The server ``build_server`` makes (its session is the process's) leaves no engine thread
    once shut down; the process's default session still serves plain calls afterwards."""
    import lance_format
    from flight_server.workers import engine_threads

    before = {t.ident for t in threading.enumerate()}
    settings = ServerSettings(root=str(tmp_path / "root"), port=0, metrics_port=-1)
    server = build_server(settings, 0, (), None)
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", timeout=30)
    try:
        client.write("ds", pa.table({"a": list(range(1000))}), mode="create")
        assert client.scan("ds").num_rows == 1000
        for pool in Session.default().runtime.pools:
            assert pool().submit(threading.current_thread).result() is not None
    finally:
        client.close()
        server.shutdown()
    assert [n for n in _new_threads(before) if n.startswith("lance-")] == []
    assert not [n for n in engine_threads() if n in _new_threads(before)]
    assert lance_format.dataset(str(tmp_path / "root" / "ds")).count_rows() == 1000


@pytest.mark.parametrize("ms", [0.7, 0.0])
def test_build_server_sets_the_gil_switch_interval(tmp_path: Path, ms: float) -> None:
    """Every serving process (build_server runs in the single server and in each worker) hands the
    GIL over every ``limits.gilSwitchMs``; 0 leaves the interval the process had."""
    old = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.004)
        settings = ServerSettings(root=str(tmp_path / "root"), port=0, metrics_port=-1, gil_switch_ms=ms)
        server = build_server(settings, 0, (), None)
        try:
            assert sys.getswitchinterval() == pytest.approx(ms / 1000 if ms else 0.004)
        finally:
            server.shutdown()
    finally:
        sys.setswitchinterval(old)
