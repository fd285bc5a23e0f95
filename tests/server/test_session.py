"""The server builds its engine session from its settings and opens every dataset in it."""

from __future__ import annotations

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
