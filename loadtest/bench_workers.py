"""Throughput of ``--workers 1`` vs ``--workers 2`` under small takes from several client processes.

Python Flight handlers hold the GIL, so one server process saturates one core; ``--workers N``
runs N processes on their own ports, all advertised (see :mod:`flight_server.workers`). This
benchmark starts the real supervisor with 1 and with 2 workers, and drives each in turn with
``--clients`` load-generator processes for ``--seconds``, over ``--rounds`` rounds that alternate
which goes first (so drifting machine load hits both; medians are reported). Client *i* talks to
worker ``i % workers``, as clients following the advertised endpoints do. Each call is a small take.

Servers (``--server``):

* ``bare``: a minimal Flight service answering ``do_get`` with ``table.take(indices)`` from memory:
  the serving machinery alone (middleware for auth-off, call log, metrics included);
* ``lance``: the real :class:`~flight_server.service.LanceFlightService` over a dataset written
  through it, takes via :class:`~flight_server.client.LanceFlightClient`.

The issue's reference: on this 2-core machine, with the load generator on the same cores, 2
processes gave 1.26x one. Figures are printed, not asserted: they depend on the machine's load.
Call logs are at WARNING here (``--log-level``), so per-call log lines do not flood the terminal.

Run: ``python -m loadtest workers [--server bare|lance|both] [--clients 4] [--seconds 5]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

from flight_server.settings import ServerSettings
from flight_server.workers import Supervisor, resolve_advertise, resolve_ports

__all__ = ["BareTakeService", "main"]

#: Rows in the served table: small enough to write in a moment, big enough for random takes.
ROWS = 100_000
#: Seconds each configuration runs before counting, so connections and caches are warm.
WARMUP_S = 1.0
START_TIMEOUT_S = 120.0


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "x": pa.array(rng.random(rows)),
            "name": pa.array([f"row-{i:08d}" for i in range(rows)]),
        }
    )


class BareTakeService(flight.FlightServerBase):  # type: ignore[misc]
    """Serves ``take`` tickets (comma-separated row indices) from an in-memory table."""

    def __init__(
        self,
        settings: ServerSettings,
        *,
        location: str,
        advertise: Sequence[str] = (),
        middleware: Mapping[str, flight.ServerMiddlewareFactory] | None = None,
        metrics: Any = None,
        **tls: Any,
    ) -> None:
        super().__init__(location, middleware=dict(middleware or {}), **tls)
        self.table = _table(ROWS)
        self.advertise = list(advertise)
        self.metrics = metrics

    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.RecordBatchStream:
        indices = np.array(ticket.ticket.split(b","), dtype=np.int64)
        out = self.table.take(indices)
        if self.metrics is not None:
            self.metrics.rows_served("take", out.num_rows, out.nbytes)
        return flight.RecordBatchStream(out)


def _bare_client(uri: str, take: int, seed: int) -> Iterator[None]:
    rng = np.random.default_rng(seed)
    with flight.FlightClient(uri) as client:
        while True:
            ticket = flight.Ticket(b",".join(str(i).encode() for i in rng.integers(0, ROWS, take)))
            client.do_get(ticket).read_all()
            yield None


def _lance_client(uri: str, take: int, seed: int) -> Iterator[None]:
    from flight_server.client import LanceFlightClient

    rng = np.random.default_rng(seed)
    client = LanceFlightClient(uri)
    while True:
        client.take("bench", indices=rng.integers(0, ROWS, take).tolist())
        yield None


def _load(kind: str, uri: str, take: int, seed: int, start: Any, stop_at: Any, out: Any) -> None:
    """One load-generator process: calls until ``stop_at``; counts calls after the warm-up."""
    calls = _bare_client(uri, take, seed) if kind == "bare" else _lance_client(uri, take, seed)
    start.wait()
    count_from = time.time() + WARMUP_S
    latencies: list[float] = []
    while True:
        t0 = time.perf_counter()
        next(calls)
        now = time.time()
        if now >= stop_at.value:
            break
        if now >= count_from:
            latencies.append(time.perf_counter() - t0)
    out.put(latencies)


def _serve(
    kind: str, workers: int, root: str, log_level: str
) -> tuple[Supervisor, threading.Event, threading.Thread, list[str]]:
    settings = ServerSettings(root=root, port=0, metrics_port=0, workers=workers, log_level=log_level)
    ports = resolve_ports(settings)
    factory = BareTakeService if kind == "bare" else None
    supervisor = Supervisor(settings, ports, resolve_advertise(settings, ports), factory)
    stop = threading.Event()
    ready = threading.Event()
    info: dict[str, Any] = {}

    def on_ready(i: Mapping[str, Any]) -> None:
        info.update(i)
        ready.set()

    thread = threading.Thread(target=supervisor.run, args=(stop, on_ready), daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready.wait(0.1):
        if not thread.is_alive() or time.monotonic() > deadline:
            stop.set()
            raise RuntimeError(f"{workers} worker(s) did not start serving (see the log above)")
    return supervisor, stop, thread, list(info["locations"])


def _phase(kind: str, locations: Sequence[str], clients: int, seconds: float, take: int) -> list[float]:
    """Drive one server with ``clients`` fresh load processes; the latencies of the counted calls."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    stop_at = ctx.Value("d", 0.0)
    procs = [
        ctx.Process(target=_load, args=(kind, locations[i % len(locations)], take, i, start, stop_at, out))
        for i in range(clients)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0)  # clients import pyarrow and connect before the clock starts
    stop_at.value = time.time() + WARMUP_S + seconds
    start.set()
    latencies: list[float] = []
    for _ in procs:
        latencies += out.get(timeout=START_TIMEOUT_S + seconds)
    for p in procs:
        p.join()
    return latencies


def _bench(kind: str, args: argparse.Namespace) -> None:
    """Both servers up at once; rounds alternate which is driven first, so drifting load hits both."""
    servers = []
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as root:
        try:
            for workers in (1, 2):
                servers.append(_serve(kind, workers, root, args.log_level))
            if kind == "lance":
                from flight_server.client import LanceFlightClient

                LanceFlightClient(servers[0][3][0]).write("bench", _table(ROWS), mode="create")
            rates: dict[int, list[float]] = {1: [], 2: []}
            latencies: dict[int, list[float]] = {1: [], 2: []}
            for round_ in range(args.rounds):
                for workers in (1, 2) if round_ % 2 == 0 else (2, 1):
                    lat = _phase(kind, servers[workers - 1][3], args.clients, args.seconds, args.take)
                    rates[workers].append(len(lat) / args.seconds)
                    latencies[workers] += lat
            base = statistics.median(rates[1])
            for workers in (1, 2):
                lat = latencies[workers]
                rate = statistics.median(rates[workers])
                p50 = statistics.median(lat) * 1000 if lat else float("nan")
                p99 = float(np.percentile(lat, 99)) * 1000 if lat else float("nan")
                per_round = " ".join(f"{r:.0f}" for r in rates[workers])
                # No call finished in the one-worker phases (a machine too loaded): no ratio to print.
                ratio = f"{rate / base:5.2f}x" if base > 0 else "    -"
                print(
                    f"{kind:8s} {workers:7d} {rate:10.0f} {p50:8.2f} {p99:8.2f} {ratio}   rounds: {per_round}"
                )
        finally:
            for _, stop, thread, _ in servers:
                stop.set()
                thread.join(START_TIMEOUT_S)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest workers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=("bare", "lance", "both"), default="both")
    parser.add_argument("--clients", type=int, default=4, help="load-generator processes")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per configuration")
    parser.add_argument("--take", type=int, default=10, help="rows per take")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians are reported")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(list(argv or []))
    kinds = ("bare", "lance") if args.server == "both" else (args.server,)
    print(
        f"workers benchmark: {args.clients} client processes, take {args.take} random rows of {ROWS}, "
        f"{args.rounds} rounds of {args.seconds:.0f}s per configuration (median), "
        f"{multiprocessing.cpu_count()} cores"
    )
    print(f"{'server':8s} {'workers':>7s} {'calls/s':>10s} {'p50 ms':>8s} {'p99 ms':>8s} {'vs 1':>6s}")
    for kind in kinds:
        _bench(kind, args)
    print("reference (issue 5): 2 workers = 1.26x one on this machine, load generator on the same cores")
    return 0
