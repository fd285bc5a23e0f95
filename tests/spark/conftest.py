"""Fixtures for the Spark tests: one local Spark session (one JVM) and one server per test session."""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (home and Path(home, "bin", "java").exists()))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """``local[2]`` session with the ``lance`` source registered and filter pushdown enabled."""
    if not _java_available():
        pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)")
    from flight_server.spark import local_session

    # Short test queries: the JVM's quick (C1) compiler and the serial collector start faster.
    fast_start = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    session = local_session("local[2]", "lance-flight-tests", fast_start)
    yield session
    session.stop()


class RowCounter:
    """A ``metrics`` object for the service that counts the rows its scans sent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: dict[str, int] = {}

    def rows_served(self, kind: str, rows: int, nbytes: int) -> None:
        with self.lock:
            self.rows[kind] = self.rows.get(kind, 0) + rows

    def commit_conflict(self) -> None:
        pass

    def stream_started(self) -> None:
        pass

    def stream_finished(self) -> None:
        pass


class Server:
    """The in-process ``LanceFlightService`` on a free port, with its root and scan counter."""

    def __init__(self, root: Path) -> None:
        from flight_server.service import LanceFlightService
        from flight_server.settings import ServerSettings

        self.root = root
        self.counter = RowCounter()
        self.service = LanceFlightService(
            ServerSettings(root=str(root)), location="grpc://127.0.0.1:0", metrics=self.counter
        )
        self.port = self.service.port

    @property
    def rows_served(self) -> int:
        """Rows sent by scans (do_get of scan tickets) so far."""
        return self.counter.rows.get("scan", 0)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("lance-root"))
    yield srv
    srv.service.shutdown()


@pytest.fixture(scope="session")
def uri(server: Any) -> str:
    return f"grpc://127.0.0.1:{server.port}"


@pytest.fixture
def name() -> str:
    """A fresh dataset name."""
    return f"ds_{uuid.uuid4().hex[:10]}"
