"""Fixtures of the service tests: a real LanceFlightService in-process on a free port, and data."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.client import LanceFlightClient
from flight_server.service import LanceFlightService
from flight_server.settings import ServerSettings


@dataclass
class Served:
    """A running service, a raw Flight client and our client, all on one root."""

    server: LanceFlightService
    root: Path
    location: str
    raw: flight.FlightClient
    client: LanceFlightClient


@dataclass
class Recorder:
    """A metrics stand-in that records what the service reports."""

    served: list[tuple[str, int, int]]
    conflicts: int = 0
    streams: int = 0

    def rows_served(self, kind: str, rows: int, nbytes: int) -> None:
        self.served.append((kind, rows, nbytes))

    def commit_conflict(self) -> None:
        self.conflicts += 1

    def stream_started(self) -> None:
        self.streams += 1

    def stream_finished(self) -> None:
        self.streams -= 1


def start(root: Path, metrics: object = None, **overrides: object) -> Served:
    settings = replace(ServerSettings(root=str(root), port=0, metrics_port=-1), **overrides)  # type: ignore[arg-type]
    server = LanceFlightService(settings, location="grpc://127.0.0.1:0", metrics=metrics)
    location = f"grpc://127.0.0.1:{server.port}"
    return Served(server, root, location, flight.connect(location), LanceFlightClient(location, timeout=30))


def stop(served: Served) -> None:
    served.client.close()
    served.raw.close()
    served.server.shutdown()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder([])


@pytest.fixture
def served(tmp_path: Path, recorder: Recorder) -> Iterator[Served]:
    s = start(tmp_path / "root", recorder)
    try:
        yield s
    finally:
        stop(s)


def table(n: int, start: int = 0) -> pa.Table:
    """Rows with a few types: ids, floats with nulls, strings, lists."""
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "x": pa.array(ids * 0.5, mask=(ids % 7 == 0)),
            "s": pa.array([f"s{i % 13}" for i in ids.tolist()]),
            "l": pa.array([[i, i + 1] if i % 5 else None for i in ids.tolist()], pa.list_(pa.int32())),
        }
    )


def seed(served: Served, name: str = "ds", n: int = 1000, rows_per_file: int = 300) -> pa.Table:
    """Write ``n`` rows as several fragments; return them."""
    data = table(n)
    served.client.write(name, data, mode="create", max_rows_per_file=rows_per_file)
    return data
