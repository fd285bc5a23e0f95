"""Prometheus metrics of one server process, and the middleware that times every RPC.

:class:`Metrics` owns a private registry (so tests can build many) holding:

* ``lance_flight_rpc_duration_seconds{method}``: latency histogram of every call (a stream's
  latency runs to its last batch), and ``lance_flight_rpcs_total{method,status}``;
* ``lance_flight_calls_in_flight`` and ``lance_flight_streams_in_flight``;
* ``lance_flight_rows_served_total{kind}`` / ``lance_flight_served_bytes_total{kind}``;
* ``lance_flight_commit_conflicts_total``;
* the engine's counters, polled from the server's session
  (:meth:`lance_format.dataset.session.Session.cache_stats`, as the ``cache_stats`` action reads
  them) and :func:`lance_format.io.io_stats`: ``lance_flight_cache_{hits,misses,evictions}_total{cache}``,
  ``lance_flight_cache_hit_ratio{cache}``, ``lance_flight_cache_bytes{cache}``,
  ``lance_flight_object_store_requests_total``, ``lance_flight_object_store_bytes_total``,
  ``lance_flight_object_store_retries_total``;
* ``lance_flight_build_info{version,python,pyarrow}`` (always 1) and, unless the registry is shared,
  prometheus-client's default ``process_*``, ``python_info`` and ``python_gc_*`` collectors.

With several worker processes the values live in prometheus-client's multiprocess directory
(``PROMETHEUS_MULTIPROC_DIR``, set by the supervisor) and the supervisor's side port sums them.
"""

from __future__ import annotations

import contextlib
import platform
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

import lance_format
from flight_server import callinfo
from flight_server.errors import status_of
from lance_format.dataset.session import Session
from lance_format.io import io_stats, retry_count

__all__ = [
    "ENGINE_POLL_S",
    "LATENCY_BUCKETS",
    "Metrics",
    "MetricsMiddleware",
    "MetricsMiddlewareFactory",
    "ProcessTreeCollector",
    "method_name",
    "status_of",
]

#: From a warm 1-row take (~100 us) to a long scan stream (a minute).
LATENCY_BUCKETS = (
    0.0002,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
)
#: Seconds between polls of the engine's cache and I/O counters: well under a scrape interval.
ENGINE_POLL_S = 2.0


def method_name(info: flight.CallInfo) -> str:
    """``do_get``, ``list_flights``, ... for a call."""
    return str(info.method.name).lower()


class Metrics:
    """Counters, gauges and histograms of one server process.

    Parameters
    ----------
    registry:
        Where to register; a fresh private registry when omitted, which also gets the default
        process, platform and GC collectors (a private registry has none of them).
    session:
        The engine session whose cache counters are polled (:meth:`watch` sets it later; the
        process's default session until then).
    """

    def __init__(self, registry: CollectorRegistry | None = None, session: Session | None = None) -> None:
        self.session = session
        self.registry = CollectorRegistry(auto_describe=True) if registry is None else registry
        r = self.registry
        if registry is None:
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                r.register(collector)
        self.build_info = Gauge(
            "lance_flight_build_info",
            "Always 1; the labels say which lance-flight, Python and pyarrow serve.",
            ["version", "python", "pyarrow"],
            registry=r,
            multiprocess_mode="max",
        )
        self.build_info.labels(lance_format.__version__, platform.python_version(), pa.__version__).set(1)
        self.rpc_seconds = Histogram(
            "lance_flight_rpc_duration_seconds",
            "Latency of Flight calls (streams: until the last message).",
            ["method"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.rpcs = Counter(
            "lance_flight_rpcs", "Flight calls by method and final status.", ["method", "status"], registry=r
        )
        self.calls_in_flight = Gauge(
            "lance_flight_calls_in_flight", "Calls being served now.", registry=r, multiprocess_mode="livesum"
        )
        self.streams_in_flight = Gauge(
            "lance_flight_streams_in_flight",
            "do_get / do_put / do_exchange streams open now.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.rows = Counter(
            "lance_flight_rows_served", "Rows sent to or received from clients.", ["kind"], registry=r
        )
        self.bytes = Counter(
            "lance_flight_served_bytes", "Arrow bytes sent or received.", ["kind"], registry=r
        )
        self.conflicts = Counter("lance_flight_commit_conflicts", "Commits that lost a race.", registry=r)
        self.cache_hits = Counter("lance_flight_cache_hits", "Engine cache hits.", ["cache"], registry=r)
        self.cache_misses = Counter(
            "lance_flight_cache_misses", "Engine cache misses.", ["cache"], registry=r
        )
        self.cache_evictions = Counter(
            "lance_flight_cache_evictions", "Engine cache evictions.", ["cache"], registry=r
        )
        self.cache_ratio = Gauge(
            "lance_flight_cache_hit_ratio",
            "Hits over lookups since the process started.",
            ["cache"],
            registry=r,
            multiprocess_mode="liveall",
        )
        self.cache_bytes = Gauge(
            "lance_flight_cache_bytes",
            "Bytes held by the engine caches.",
            ["cache"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self.store_requests = Counter(
            "lance_flight_object_store_requests", "Object-store read requests issued.", registry=r
        )
        self.store_bytes = Counter("lance_flight_object_store_bytes", "Object-store bytes read.", registry=r)
        self.store_retries = Counter(
            "lance_flight_object_store_retries", "Object-store requests retried.", registry=r
        )
        # Last polled engine totals; the counters advance by the difference.
        self._seen: dict[str, float] = {}
        self._poll_lock = threading.Lock()
        self._poller: threading.Thread | None = None
        self._stop = threading.Event()

    # --- called by the service's handlers -------------------------------------------------------
    def rows_served(self, kind: str, rows: int, nbytes: int) -> None:
        """Count rows and Arrow bytes of one response or request (``kind``: scan, take, put, ...)."""
        self.rows.labels(kind).inc(rows)
        self.bytes.labels(kind).inc(nbytes)
        callinfo.add_counts(rows, nbytes)

    def commit_conflict(self) -> None:
        """Count a commit that lost a race (retried or not)."""
        self.conflicts.inc()

    def stream_started(self) -> None:
        """A data stream opened."""
        self.streams_in_flight.inc()

    def stream_finished(self) -> None:
        """A data stream closed (however it ended)."""
        self.streams_in_flight.dec()

    @contextlib.contextmanager
    def stream(self) -> Iterator[None]:
        """``with metrics.stream(): ...`` around a stream's body."""
        self.stream_started()
        try:
            yield
        finally:
            self.stream_finished()

    # --- engine counters ------------------------------------------------------------------------
    def _advance(self, counter: Any, name: str, total: float) -> None:
        delta = total - self._seen.get(name, 0.0)
        # A counter reset (tests calling reset_stats) restarts the baseline instead of going back.
        if delta > 0:
            counter.inc(delta)
        self._seen[name] = total

    def watch(self, session: Session) -> None:
        """Poll ``session``'s caches from now on (the server's, once it is built)."""
        self.session = session

    def poll_engine(self) -> None:
        """Copy the session's cache counters and the engine's object-store counters into the metrics."""
        stats = (self.session or Session.default()).cache_stats()
        io = io_stats()
        with self._poll_lock:
            for name in ("metadata", "page", "decoded"):
                c = stats[name]
                self._advance(self.cache_hits.labels(name), f"{name}.hits", c.hits)
                self._advance(self.cache_misses.labels(name), f"{name}.misses", c.misses)
                self._advance(self.cache_evictions.labels(name), f"{name}.evictions", c.evictions)
                self.cache_ratio.labels(name).set(c.hit_ratio)
                self.cache_bytes.labels(name).set(c.bytes)
            self._advance(self.store_requests, "io.requests", io.requests)
            self._advance(self.store_bytes, "io.bytes", io.bytes_read)
            self._advance(self.store_retries, "io.retries", retry_count())

    def start_polling(self, interval: float = ENGINE_POLL_S) -> None:
        """Poll the engine every ``interval`` seconds in a daemon thread (worker processes)."""
        if self._poller is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval):
                self.poll_engine()

        self.poll_engine()
        self._poller = threading.Thread(target=loop, name="metrics-poller", daemon=True)
        self._poller.start()

    def stop_polling(self) -> None:
        """Stop the poller thread (after one last poll)."""
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=ENGINE_POLL_S * 2)
            self._poller = None
        self.poll_engine()

    def middleware(self) -> MetricsMiddlewareFactory:
        """The factory to register under the key ``"metrics"``."""
        return MetricsMiddlewareFactory(self)


class MetricsMiddleware(flight.ServerMiddleware):  # type: ignore[misc]
    """Times one call and counts its final status."""

    def __init__(self, metrics: Metrics, method: str) -> None:
        self._metrics = metrics
        self._method = method
        self._start = time.perf_counter()
        metrics.calls_in_flight.inc()

    def call_completed(self, exception: BaseException | None) -> None:
        m = self._metrics
        m.calls_in_flight.dec()
        m.rpc_seconds.labels(self._method).observe(time.perf_counter() - self._start)
        m.rpcs.labels(self._method, status_of(exception)).inc()


class MetricsMiddlewareFactory(flight.ServerMiddlewareFactory):  # type: ignore[misc]
    """Starts a :class:`MetricsMiddleware` for every call."""

    def __init__(self, metrics: Metrics) -> None:
        super().__init__()
        self.metrics = metrics

    def start_call(self, info: flight.CallInfo, headers: Mapping[str, Any]) -> MetricsMiddleware:
        return MetricsMiddleware(self.metrics, method_name(info))


class ProcessTreeCollector:
    """``process_*`` of a server made of several processes (the supervisor and its workers).

    CPU seconds, memory and open descriptors are summed over the processes (what a pod's limits
    count), the start time is the oldest one's, the descriptor limit the supervisor's.

    Parameters
    ----------
    pids:
        The processes to add up, asked at every scrape (workers restart with new pids).
    """

    _SUMMED = ("process_virtual_memory_bytes", "process_resident_memory_bytes", "process_open_fds")

    def __init__(self, pids: Callable[[], Iterable[int]]) -> None:
        self._pids = pids

    def collect(self) -> Iterator[Metric]:
        totals: dict[str, float] = {}
        docs: dict[str, str] = {}
        for pid in self._pids():
            collector = ProcessCollector(pid=_constant(pid), registry=None)
            for family in collector.collect():
                for sample in family.samples:
                    name = sample.name
                    docs[family.name] = family.documentation
                    if name == "process_start_time_seconds":
                        totals[name] = min(totals.get(name, sample.value), sample.value)
                    elif name == "process_max_fds":
                        totals.setdefault(name, sample.value)
                    else:
                        totals[name] = totals.get(name, 0.0) + sample.value
        for name, value in totals.items():
            if name == "process_cpu_seconds_total":
                counter = "process_cpu_seconds"
                yield CounterMetricFamily(counter, docs.get(counter, ""), value=value)
            else:
                yield GaugeMetricFamily(name, docs.get(name, ""), value=value)


def _constant(value: int) -> Callable[[], int]:
    return lambda: value
