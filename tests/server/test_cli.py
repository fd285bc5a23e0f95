"""``lance-flight serve`` as a subprocess: serving, probes, metrics, auth, workers, SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from loadtest.load.server import free_port, port_is_free
from tests.server.helpers import http_get

LANCE_FLIGHT = Path(sys.executable).parent / "lance-flight"
#: A cold start imports pyarrow and the engine; generous so a loaded machine does not flake.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
SERVING = re.compile(r"msg=serving .*?locations=(\S+) metrics=(\S+)")


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    log: Path
    locations: list[str]
    metrics: str  # http://host:port/metrics or "off"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def url(self, path: str) -> str:
        return self.metrics.removesuffix("/metrics") + path

    def terminate(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(STOP_TIMEOUT_S)


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANCE_FLIGHT_", "PROMETHEUS_"))}
    env.update(extra or {})
    return env


@pytest.fixture
def start(tmp_path: Path) -> Iterator[object]:
    started: list[subprocess.Popen[bytes]] = []

    def run(args: list[str], env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Server:
        log = tmp_path / f"server-{len(started)}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [str(LANCE_FLIGHT), "serve", *args],
                env=_env(env),
                cwd=cwd or tmp_path,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        started.append(process)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            match = SERVING.search(log.read_text(errors="replace"))
            if match:
                return Server(process, log, match.group(1).split(","), match.group(2))
            if process.poll() is not None:
                raise AssertionError(f"exited {process.returncode}:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)
        raise AssertionError(f"not serving after {START_TIMEOUT_S}s:\n{log.read_text(errors='replace')}")

    yield run
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def _put(uri: str, name: str, table: pa.Table, options: flight.FlightCallOptions | None = None) -> None:
    with flight.FlightClient(uri) as client:
        writer, _ = client.do_put(flight.FlightDescriptor.for_path(name), table.schema, options=options)
        writer.write_table(table)
        writer.close()


def test_serve_on_free_ports_answers_flight_and_probes_then_stops_on_sigterm(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "data"
    server = start(["--port", "0", "--metrics-port", "0", "--root", str(root)])
    assert root.is_dir()
    (uri,) = server.locations
    assert re.fullmatch(r"grpc://127\.0\.0\.1:\d+", uri)
    with flight.FlightClient(uri) as client:
        list(client.list_flights())
    assert http_get(server.url("/healthz"))[0] == 200
    assert http_get(server.url("/readyz"))[0] == 200
    status, body = http_get(server.url("/metrics"))
    assert status == 200
    assert 'lance_flight_rpcs_total{method="list_flights",status="OK"} 1.0' in body
    assert "lance_flight_cache_hit_ratio" in body
    assert "msg=call" in server.output()  # the call log
    assert server.terminate() == 0, server.output()
    assert "drained" in server.output()


def test_sigterm_after_reads_and_writes_closes_the_session_and_exits_cleanly(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A server that wrote, scanned and took (so its I/O, decode and encode threads ran) drains on
    SIGTERM, closes its engine session (the drain log counts no engine thread left) and exits 0
    with no traceback or thread noise in its log."""
    from flight_server.client import LanceFlightClient

    server = start(["--port", "0", "--metrics-port", "-1", "--root", str(tmp_path / "data")])
    (uri,) = server.locations
    table = pa.table({"a": list(range(60_000)), "s": [f"value-{i % 5000}" for i in range(60_000)]})
    with LanceFlightClient(uri, timeout=60) as client:
        client.write("t", table, mode="create")
        assert client.scan("t").num_rows == 60_000
        assert client.take("t", indices=[0, 59_999]).column("a").to_pylist() == [0, 59_999]
    assert server.terminate() == 0, server.output()
    out = server.output()
    assert re.search(r"msg=drained .*engine_threads=0", out), out
    for noise in ("Traceback", "Exception ignored", "Error in atexit", "Fatal Python error"):
        assert noise not in out, out


def test_auth_from_the_environment(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = start(["--port", "0", "--metrics-port", "-1"], env={"LANCE_FLIGHT_TOKENS": "w,r:ro"})
    assert server.metrics == "off"
    (uri,) = server.locations
    table = pa.table({"x": pa.array([1, 2, 3], pa.int64())})
    with flight.FlightClient(uri) as client:
        with pytest.raises(flight.FlightUnauthenticatedError):
            list(client.list_flights())
        headers = [client.authenticate_basic_token("anyone", "w")]
        list(client.list_flights(options=flight.FlightCallOptions(headers=headers)))
    reader = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer r")])
    with pytest.raises(flight.FlightUnauthorizedError):
        _put(uri, "t", table, reader)
    _put(uri, "t", table, flight.FlightCallOptions(headers=[(b"authorization", b"Bearer w")]))
    assert server.terminate() == 0


def test_two_workers_serve_on_two_ports_and_advertise_both(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = free_port(3)
    config = tmp_path / "config.yaml"
    config.write_text(f"root: {tmp_path / 'data'}\nport: {base}\nmetricsPort: {base + 2}\n")
    server = start(["--config", str(config), "--workers", "2"])
    expected = [f"grpc://127.0.0.1:{base}", f"grpc://127.0.0.1:{base + 1}"]
    assert server.locations == expected
    _put(expected[0], "t", pa.table({"x": pa.array(range(10), pa.int64())}))
    for uri in expected:
        with flight.FlightClient(uri) as client:
            info = client.get_flight_info(flight.FlightDescriptor.for_path("t"))
            advertised = {loc.uri.decode() for ep in info.endpoints for loc in ep.locations}
            assert advertised == set(expected)
    assert http_get(server.url("/readyz"))[0] == 200
    assert server.terminate() == 0, server.output()
    # Each worker drained, then closed its engine session: no engine thread left in either.
    drained = re.findall(r"msg=drained .*who=\"?worker (\d).*engine_threads=(\d+)", server.output())
    assert sorted(drained) == [("0", "0"), ("1", "0")], server.output()
    for uri in expected:  # both workers are gone
        with pytest.raises(flight.FlightUnavailableError), flight.FlightClient(uri) as client:
            list(client.list_flights(options=flight.FlightCallOptions(timeout=2)))


def test_no_arguments_serves_lance_data_on_localhost_8815(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if not (port_is_free(8815) and port_is_free(9090)):
        pytest.skip("ports 8815/9090 are in use on this machine")
    server = start([], cwd=tmp_path)
    assert server.locations == ["grpc://127.0.0.1:8815"]
    assert server.metrics == "http://127.0.0.1:9090/metrics"
    assert (tmp_path / "lance-data").is_dir()
    with flight.FlightClient("grpc://127.0.0.1:8815") as client:
        list(client.list_flights())
    assert server.terminate() == 0


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--port", "nope"], {}, "port from flag --port"),
        ([], {"LANCE_FLIGHT_WORKERS": "0"}, "workers from environment variable LANCE_FLIGHT_WORKERS"),
        (["--bogus"], {}, "unrecognized arguments: --bogus"),
    ],
)
def test_bad_settings_exit_2_with_a_message(args: list[str], env: dict[str, str], message: str) -> None:
    result = subprocess.run(
        [str(LANCE_FLIGHT), "serve", *args], env=_env(env), capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert message in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()


def test_usage() -> None:
    result = subprocess.run([str(LANCE_FLIGHT)], capture_output=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "serve" in result.stdout.decode()
    result = subprocess.run(
        [str(LANCE_FLIGHT), "serve", "--help"], capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0
    assert "--metrics-port" in result.stdout.decode()


def test_a_taken_port_is_a_clean_error(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = start(["--port", "0", "--metrics-port", "-1"])
    port = first.locations[0].rsplit(":", 1)[1]
    result = subprocess.run(
        [str(LANCE_FLIGHT), "serve", "--port", port, "--metrics-port", "-1"],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert f"cannot serve on grpc://127.0.0.1:{port}" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()
    assert first.terminate() == 0
