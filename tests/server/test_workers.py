"""--workers N: N processes on their own ports, all advertised; supervision; drain on stop."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.flight as flight
import pytest

from flight_server.settings import ServerSettings
from flight_server.workers import Supervisor, resolve_advertise, resolve_ports, serve
from loadtest.load.server import free_port
from tests.server.helpers import http_get
from tests.server.standin import StandInService

START_TIMEOUT_S = 60.0


class Running:
    def __init__(self, target: Any, stop: threading.Event) -> None:
        self.stop = stop
        self.info: dict[str, Any] = {}
        self.ready = threading.Event()
        self.status: int | None = None
        self.thread = threading.Thread(target=self._run, args=(target,), daemon=True)
        self.thread.start()
        if not self.ready.wait(START_TIMEOUT_S):
            stop.set()
            raise AssertionError(f"not serving within {START_TIMEOUT_S}s (status {self.status})")

    def _run(self, target: Any) -> None:
        try:
            self.status = target(self._on_ready)
        finally:
            self.ready.set()

    def _on_ready(self, info: Mapping[str, Any]) -> None:
        self.info = dict(info)
        self.ready.set()

    def finish(self, timeout: float = 60.0) -> int | None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "did not stop"
        return self.status


def _pid(uri: str) -> int:
    with flight.FlightClient(uri) as client:
        (result,) = client.do_action(flight.Action("pid", b""), flight.FlightCallOptions(timeout=10))
        return int(result.body.to_pybytes())


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[Supervisor, Running]]:
    base = free_port(3)
    settings = ServerSettings(
        root=str(tmp_path), port=base, metrics_port=base + 2, workers=2, shutdown_grace_seconds=10
    )
    ports = resolve_ports(settings)
    supervisor = Supervisor(settings, ports, resolve_advertise(settings, ports), StandInService)
    stop = threading.Event()
    running = Running(lambda on_ready: supervisor.run(stop, on_ready), stop)
    try:
        yield supervisor, running
    finally:
        stop.set()
        running.thread.join(60)


def test_two_workers_on_two_ports_all_advertised(two_workers: tuple[Supervisor, Running]) -> None:
    supervisor, running = two_workers
    base = supervisor.ports[0]
    locations = [f"grpc://127.0.0.1:{base}", f"grpc://127.0.0.1:{base + 1}"]
    assert running.info["locations"] == locations
    pids = {_pid(uri) for uri in locations}
    assert len(pids) == 2
    assert os.getpid() not in pids
    for uri in locations:
        with flight.FlightClient(uri) as client:
            info = client.get_flight_info(flight.FlightDescriptor.for_path("t"))
            assert [loc.uri.decode() for ep in info.endpoints for loc in ep.locations] == locations
            assert client.do_get(flight.Ticket(b"all")).read_all().num_rows == 100
    # The supervisor's side port: ready, and metrics summed over both workers.
    side = f"http://127.0.0.1:{running.info['metrics_port']}"
    assert http_get(f"{side}/healthz")[0] == 200
    assert http_get(f"{side}/readyz")[0] == 200
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        body = http_get(f"{side}/metrics")[1]
        if 'lance_flight_rows_served_total{kind="scan"} 200.0' in body:
            break
        time.sleep(0.1)
    assert 'lance_flight_rows_served_total{kind="scan"} 200.0' in body
    assert 'lance_flight_rpcs_total{method="do_get",status="OK"} 2.0' in body
    # process_* of the whole tree (supervisor + 2 workers) and one build_info, not one per worker.
    rss = [line for line in body.splitlines() if line.startswith("process_resident_memory_bytes ")]
    assert len(rss) == 1
    assert float(rss[0].split()[1]) > 3 * 10_000_000  # three Python processes with pyarrow loaded
    assert body.count("lance_flight_build_info{") == 1


def test_a_dead_worker_is_restarted(two_workers: tuple[Supervisor, Running]) -> None:
    _supervisor, running = two_workers
    uri = running.info["locations"][1]
    old = _pid(uri)
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + START_TIMEOUT_S
    new = None
    while time.monotonic() < deadline:
        try:
            new = _pid(uri)
            if new != old:
                break
        except flight.FlightError:
            pass
        time.sleep(0.2)
    assert new is not None
    assert new != old
    assert running.finish() == 0


def test_stop_drains_in_flight_calls_then_exits_0(two_workers: tuple[Supervisor, Running]) -> None:
    supervisor, running = two_workers
    results: list[bytes] = []

    def slow_call() -> None:
        with flight.FlightClient(running.info["locations"][1]) as client:
            for r in client.do_action(flight.Action("sleep", b"1.5"), flight.FlightCallOptions(timeout=30)):
                results.append(r.body.to_pybytes())

    caller = threading.Thread(target=slow_call)
    caller.start()
    time.sleep(0.5)  # the call is in its handler
    started = time.monotonic()
    assert running.finish() == 0
    caller.join(10)
    assert results == [b"slept"]  # the in-flight call finished, it was not cut off
    assert time.monotonic() - started >= 0.5
    assert [p.exitcode for p in supervisor.procs.values()] == [0, 0]
    # Nothing listens any more.
    with pytest.raises(flight.FlightUnavailableError), flight.FlightClient(running.info["locations"][0]) as c:
        list(c.list_flights(options=flight.FlightCallOptions(timeout=2)))


def test_a_worker_that_cannot_bind_stops_the_supervisor(tmp_path: Path) -> None:
    base = free_port(2)
    blocker = StandInService(ServerSettings(), location=f"grpc://127.0.0.1:{base + 1}")
    try:
        settings = ServerSettings(root=str(tmp_path), port=base, metrics_port=-1, workers=2)
        ports = resolve_ports(settings)
        supervisor = Supervisor(settings, ports, resolve_advertise(settings, ports), StandInService)
        started = time.monotonic()
        assert supervisor.run(threading.Event()) == 1
        assert time.monotonic() - started < START_TIMEOUT_S
    finally:
        blocker.shutdown()


def test_single_process_serve_drains_and_returns_0(tmp_path: Path) -> None:
    settings = ServerSettings(
        root=str(tmp_path / "new-root"), port=0, metrics_port=0, shutdown_grace_seconds=10
    )
    stop = threading.Event()
    running = Running(lambda on_ready: serve(settings, StandInService, stop, on_ready), stop)
    assert (tmp_path / "new-root").is_dir()  # created
    (uri,) = running.info["locations"]
    side = f"http://127.0.0.1:{running.info['metrics_port']}"
    assert http_get(f"{side}/readyz")[0] == 200
    results: list[bytes] = []

    def slow_call() -> None:
        with flight.FlightClient(uri) as client:
            for r in client.do_action(flight.Action("sleep", b"1"), flight.FlightCallOptions(timeout=30)):
                results.append(r.body.to_pybytes())

    caller = threading.Thread(target=slow_call)
    caller.start()
    time.sleep(0.3)
    assert running.finish() == 0
    caller.join(10)
    assert results == [b"slept"]


def test_ports_and_advertise() -> None:
    s = ServerSettings(port=9000, workers=3)
    assert resolve_ports(s) == [9000, 9001, 9002]
    assert resolve_advertise(s, [9000, 9001]) == ("grpc://127.0.0.1:9000", "grpc://127.0.0.1:9001")
    assert resolve_advertise(replace(s, advertise=("grpc://x:1",)), [9000]) == ("grpc://x:1",)
    zero = resolve_ports(replace(s, port=0))
    assert len(set(zero)) == 3
    assert all(p > 0 for p in zero)
    wild = resolve_advertise(replace(s, host="0.0.0.0"), [9000])
    assert "0.0.0.0" not in wild[0]


def test_a_serving_process_pays_pyarrows_lazy_imports_before_its_first_call(tmp_path: Path) -> None:
    """pyarrow imports pandas on its first conversion (~0.3 s): build_server does that up front, so
    no request (a take converting row positions) pays it."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("pandas") is None:
        pytest.skip("pandas is not installed: pyarrow has nothing to import lazily")
    code = (
        "import sys\n"
        "from flight_server.settings import ServerSettings\n"
        "from flight_server.workers import build_server\n"
        f"s = ServerSettings(root={str(tmp_path)!r}, port=0, metrics_port=-1)\n"
        "before = 'pandas' in sys.modules\n"
        "server = build_server(s, 0, (), None)\n"
        "print(before, 'pandas' in sys.modules)\n"
        "server.shutdown()\n"
    )
    argv = [sys.executable, "-c", code]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    # pandas may already be loaded before build_server: LanceDataset subclasses
    # pyarrow.dataset.Dataset, and importing pyarrow.dataset loads pyarrow.pandas_compat.
    assert out.stdout.split()[1:] == ["True"], out.stderr


def test_probes_answer_while_kernels_compile_and_readiness_waits_for_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold kernel compile (tens of seconds on a busy node) must not fail the startup probe:
    /healthz answers at once, /readyz says 503 until the kernels are compiled, then 200."""
    import flight_server.workers as workers

    release = threading.Event()
    compiling = threading.Event()

    def slow_compile(who: str) -> None:
        compiling.set()
        release.wait(60)

    monkeypatch.setattr(workers, "_compile_kernels", slow_compile)
    port = free_port(1)
    settings = ServerSettings(root=str(tmp_path), port=0, metrics_port=port, shutdown_grace_seconds=5)
    stop = threading.Event()
    announced = threading.Event()
    thread = threading.Thread(
        target=serve, args=(settings, StandInService, stop, lambda info: announced.set()), daemon=True
    )
    thread.start()
    try:
        assert compiling.wait(30)
        side = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while (status := http_get(f"{side}/healthz")[0]) is None:
            assert time.monotonic() < deadline, "side port never answered"
            time.sleep(0.1)
        assert status == 200
        assert http_get(f"{side}/readyz")[0] == 503
        assert not announced.is_set()
        release.set()
        assert announced.wait(30)
        assert http_get(f"{side}/readyz")[0] == 200
    finally:
        release.set()
        stop.set()
        thread.join(30)


def test_a_server_process_freezes_its_start_up_heap_once_its_kernels_are_in(tmp_path: Path) -> None:
    """A full collection walks every tracked object (60-100 ms at start-up's ~150k): the serving
    process freezes what start-up left before it reports ready; an in-process serve (given a stop
    event, its host's heap) does not."""
    import subprocess
    import sys

    code = (
        "import gc, os, signal, threading\n"
        "from flight_server.settings import ServerSettings\n"
        "from flight_server.workers import serve\n"
        f"s = ServerSettings(root={str(tmp_path)!r}, port=0, metrics_port=-1)\n"
        "hosted = threading.Event()\n"
        "serve(s, stop=hosted, on_ready=lambda info: hosted.set())\n"
        "print('hosted', gc.get_freeze_count(), flush=True)\n"
        "def ready(info):\n"
        "    print('owned', gc.get_freeze_count(), flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "raise SystemExit(serve(s, on_ready=ready))\n"
    )
    argv = [sys.executable, "-c", code]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    counts = dict(line.split() for line in out.stdout.splitlines())
    assert int(counts["hosted"]) == 0, out.stderr
    assert int(counts["owned"]) > 10_000, out.stderr
