"""Metrics: RPC counts by status, latency, rows served, in-flight, engine counters, the side port."""

from __future__ import annotations

import os
import platform
import re
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from prometheus_client import CollectorRegistry

import lance_format
from flight_server.client import LanceFlightClient
from flight_server.metrics import Metrics, ProcessTreeCollector, status_of
from flight_server.settings import ServerSettings, Token
from flight_server.sideport import RootProbe, SidePort
from lance_format.dataset.session import Session
from lance_format.io.cache import METADATA_CACHE
from tests.server.helpers import bearer, http_get, location, standin_server


def _value(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_rpc_counts_latency_rows_and_conflicts() -> None:
    metrics = Metrics()
    with standin_server(ServerSettings(), metrics) as server, flight.FlightClient(location(server)) as c:
        list(c.list_flights())
        list(c.list_flights())
        assert c.do_get(flight.Ticket(b"all")).read_all().num_rows == 100
        with pytest.raises(flight.FlightServerError):
            list(c.do_action(flight.Action("conflict", b"")))
        with pytest.raises(flight.FlightServerError):
            list(c.do_action(flight.Action("nope", b"")))
    assert _value(metrics, "lance_flight_rpcs_total", method="list_flights", status="OK") == 2
    assert _value(metrics, "lance_flight_rpcs_total", method="do_get", status="OK") == 1
    assert _value(metrics, "lance_flight_rpcs_total", method="do_action", status="UNKNOWN") == 2
    assert _value(metrics, "lance_flight_rpc_duration_seconds_count", method="list_flights") == 2
    assert _value(metrics, "lance_flight_rpc_duration_seconds_sum", method="do_get") > 0
    assert _value(metrics, "lance_flight_rows_served_total", kind="scan") == 100
    assert _value(metrics, "lance_flight_served_bytes_total", kind="scan") > 0
    assert _value(metrics, "lance_flight_commit_conflicts_total") == 1
    assert _value(metrics, "lance_flight_calls_in_flight") == 0


def test_refused_calls_are_counted_and_in_flight_tracks_open_calls() -> None:
    metrics = Metrics()
    settings = ServerSettings(tokens=(Token("t"),))
    with standin_server(settings, metrics) as server, flight.FlightClient(location(server)) as c:
        with pytest.raises(flight.FlightUnauthenticatedError):
            list(c.list_flights())
        assert (
            _value(metrics, "lance_flight_rpcs_total", method="list_flights", status="UNAUTHENTICATED") == 1
        )
        thread = threading.Thread(
            target=lambda: list(c.do_action(flight.Action("sleep", b"0.5"), bearer("t")))
        )
        thread.start()
        for _ in range(100):
            if _value(metrics, "lance_flight_calls_in_flight") == 1:
                break
            threading.Event().wait(0.01)
        assert _value(metrics, "lance_flight_calls_in_flight") == 1
        thread.join()
    assert _value(metrics, "lance_flight_calls_in_flight") == 0
    assert _value(metrics, "lance_flight_rpcs_total", method="do_action", status="OK") == 1


def test_engine_counters_are_polled() -> None:
    metrics = Metrics()
    metrics.poll_engine()
    before_hits = _value(metrics, "lance_flight_cache_hits_total", cache="metadata")
    before_misses = _value(metrics, "lance_flight_cache_misses_total", cache="metadata")
    METADATA_CACHE.put(("server-ops-test", 1), b"x", 1)
    METADATA_CACHE.get(("server-ops-test", 1))
    METADATA_CACHE.get(("server-ops-test", 2))
    metrics.poll_engine()
    assert _value(metrics, "lance_flight_cache_hits_total", cache="metadata") == before_hits + 1
    assert _value(metrics, "lance_flight_cache_misses_total", cache="metadata") == before_misses + 1
    assert 0 < _value(metrics, "lance_flight_cache_hit_ratio", cache="metadata") <= 1
    METADATA_CACHE.pop(("server-ops-test", 1))


def test_engine_counters_come_from_the_servers_session() -> None:
    """The metrics poll the session they watch (the server's, as the cache_stats action reads it),
    not the process-wide caches."""
    session = Session(metadata_cache_bytes=1 << 20)
    metrics = Metrics(session=session)
    metrics.poll_engine()
    hits = _value(metrics, "lance_flight_cache_hits_total", cache="metadata")
    session.metadata_cache.put(("metrics-session-test", 1), b"x", 1)
    for _ in range(3):
        session.metadata_cache.get(("metrics-session-test", 1))
    METADATA_CACHE.get(("metrics-session-test", 2))  # another session's miss: not counted here
    misses = _value(metrics, "lance_flight_cache_misses_total", cache="metadata")
    metrics.poll_engine()
    assert _value(metrics, "lance_flight_cache_hits_total", cache="metadata") == hits + 3
    assert _value(metrics, "lance_flight_cache_misses_total", cache="metadata") == misses
    assert (
        _value(metrics, "lance_flight_cache_bytes", cache="metadata")
        == session.metadata_cache.counters().bytes
    )
    other = Session()
    metrics.watch(other)
    metrics.poll_engine()
    assert metrics.session is other
    session.close()
    other.close()


def test_engine_object_store_counters_move(tmp_path: pytest.TempPathFactory) -> None:
    import pyarrow as pa

    from lance_format.dataset import dataset, write_dataset

    metrics = Metrics()
    metrics.poll_engine()
    before = _value(metrics, "lance_flight_object_store_requests_total")
    write_dataset(pa.table({"x": list(range(10))}), str(tmp_path) + "/d.lance")
    assert dataset(str(tmp_path) + "/d.lance").to_table().num_rows == 10
    metrics.poll_engine()
    assert _value(metrics, "lance_flight_object_store_requests_total") > before
    assert _value(metrics, "lance_flight_object_store_bytes_total") > 0


def test_status_names() -> None:
    assert status_of(None) == "OK"
    assert status_of(flight.FlightUnauthorizedError("x")) == "PERMISSION_DENIED"
    assert status_of(KeyError("x")) == "NOT_FOUND"
    assert status_of(ValueError("x")) == "INVALID_ARGUMENT"
    assert status_of(RuntimeError("x")) == "UNKNOWN"


def test_side_port_serves_metrics_health_and_readiness(tmp_path: pytest.TempPathFactory) -> None:
    metrics = Metrics()
    metrics.rows_served("take", 7, 70)
    ready = [True]
    polled = []
    side = SidePort(
        "127.0.0.1", 0, metrics.registry, lambda: ready[0], before_scrape=lambda: polled.append(1)
    )
    try:
        base = f"http://127.0.0.1:{side.port}"
        status, body = http_get(f"{base}/metrics")
        assert status == 200
        assert 'lance_flight_rows_served_total{kind="take"} 7.0' in body
        assert "# TYPE lance_flight_rpc_duration_seconds histogram" in body
        assert polled
        assert http_get(f"{base}/healthz")[0] == 200
        assert http_get(f"{base}/readyz")[0] == 200
        ready[0] = False
        assert http_get(f"{base}/readyz")[0] == 503
        assert http_get(f"{base}/healthz")[0] == 200
        assert http_get(f"{base}/other")[0] == 404
    finally:
        side.close()


def test_root_probe(tmp_path: pytest.TempPathFactory) -> None:
    assert RootProbe(str(tmp_path))()
    assert not RootProbe(str(tmp_path) + "/missing")()
    assert RootProbe("memory://probe")()


def _by_status(metrics: Metrics, status: str) -> float:
    methods = ("get_flight_info", "get_schema", "do_get", "do_action", "do_exchange")
    return sum(_value(metrics, "lance_flight_rpcs_total", method=m, status=status) for m in methods)


def test_metrics_and_load_generator_count_each_failure_under_one_status(tmp_path: Path) -> None:
    """The server's status label and the load generator's classification of what the client got
    come from one table (flight_server.errors)."""
    from unittest import mock

    import lance_format
    from flight_server.service import LanceFlightService
    from lance_format.io import forget_dataset

    # The load generator is not part of the minimum-versions job's install (no loadtest extra).
    client_status = pytest.importorskip("loadtest.load.generator").status_of
    from tests.server.service_fixtures import table

    metrics = Metrics()
    settings = ServerSettings(root=str(tmp_path / "root"), port=0, metrics_port=-1)
    server = LanceFlightService(
        settings, location="grpc://127.0.0.1:0", middleware={"metrics": metrics.middleware()}, metrics=metrics
    )
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", timeout=30)
    try:
        client.write("ds", table(600), mode="create", max_rows_per_file=300)
        last = lance_format.dataset(str(tmp_path / "root" / "ds")).manifest.fragments[-1].files[0].path
        data = tmp_path / "root" / "ds" / "data" / last
        raw = bytearray(data.read_bytes())
        for i in range(0, len(raw) // 2, 7):  # page bytes garbled, footer intact
            raw[i] ^= 0xFF
        data.write_bytes(bytes(raw))
        forget_dataset(str(tmp_path / "root" / "ds"))
        calls = {
            "INVALID_ARGUMENT": lambda: client.scan("ds", columns=["nope"]),
            "NOT_FOUND": lambda: client.scan("ds", version=99),
            "INTERNAL": lambda: client.stats("ds"),
            "UNKNOWN": lambda: client.take("ds", indices=[599]),
        }
        seen = {}
        for expected, call in calls.items():
            before = {s: _by_status(metrics, s) for s in calls}
            with (
                mock.patch("flight_server.service.run_action", side_effect=KeyError("bug")),
                pytest.raises((flight.FlightError, pa.ArrowException)) as info,
            ):
                call()
            seen[expected] = client_status(info.value)
            after = {s: _by_status(metrics, s) for s in calls}
            assert after[expected] == before[expected] + 1, (expected, before, after)
        assert seen == {k: k for k in calls}
    finally:
        client.close()
        server.shutdown()


def test_process_and_build_info_metrics_are_exported() -> None:
    metrics = Metrics()
    # A private registry has no default collectors of its own: process_* must be added explicitly.
    assert _value(metrics, "process_resident_memory_bytes") > 0
    assert _value(metrics, "process_cpu_seconds_total") > 0
    assert metrics.registry.get_sample_value("python_info", _python_info_labels()) == 1
    labels = {
        "version": lance_format.__version__,
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
    }
    assert metrics.registry.get_sample_value("lance_flight_build_info", labels) == 1
    metrics.rows_served("scan", 3, 24)
    names = {m.name for m in metrics.registry.collect()}
    assert "lance_flight_served_bytes" in names  # exposed as lance_flight_served_bytes_total
    assert "lance_flight_bytes_served" not in names


def _python_info_labels() -> dict[str, str]:
    info = platform.python_version_tuple()
    return {
        "implementation": platform.python_implementation(),
        "major": info[0],
        "minor": info[1],
        "patchlevel": info[2],
        "version": platform.python_version(),
    }


def test_process_tree_sums_its_processes() -> None:
    own = Metrics().registry.get_sample_value("process_resident_memory_bytes") or 0.0
    registry = CollectorRegistry()
    registry.register(ProcessTreeCollector(lambda: [os.getpid(), os.getpid()]))
    assert registry.get_sample_value("process_resident_memory_bytes") == pytest.approx(2 * own, rel=0.2)
    assert registry.get_sample_value("process_max_fds") > 0


def _doc_cache_labels() -> set[str]:
    text = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    match = re.search(r"\(`cache` = ([^)]*)\)", text)
    assert match, "docs/configuration.md lists the cache label values as (`cache` = ...)"
    return set(re.findall(r"`(\w+)`", match.group(1)))


def test_documented_cache_labels_are_the_exported_ones() -> None:
    metrics = Metrics()
    metrics.poll_engine()
    exported = {
        sample.labels["cache"]
        for family in metrics.registry.collect()
        if family.name == "lance_flight_cache_hits"
        for sample in family.samples
    }
    assert exported
    assert _doc_cache_labels() == exported
