"""Flight takes and scans of the real service against their floors, in one run.

* **Take**: ``k`` random rows (``k`` = 1 and 100) by ``LanceFlightClient.take`` from a
  :class:`~flight_server.service.LanceFlightService` in its own process, against pylance's
  in-process ``LanceDataset.take`` on the same dataset files (p50 / p99 over ``--take-reps`` row
  sets; engines interleaved per row set so machine noise hits both). Target: Flight k=100 p50
  within 1.0x of pylance in-process.
* **Scan**: a full scan through the service (``get_flight_info`` + ``do_get`` per endpoint)
  against a bare Flight server streaming the same table from memory (median of ``--scan-reps``).
  Target: at least 0.8x the bare stream's rows/s. Printed three ways: ``cold`` (the first scan of
  a fresh server: decoded from the files), ``warm`` (repeated scans, served from the server's
  decoded-batch cache, ``cache.batchBytes``) and ``nocache`` (a second server with its decoded
  caches off, so every scan decodes: the engine's steady-state scan speed).

Scans run first. The take arms then: ``flight`` (the server with its default settings: the scans
and warm-up takes have filled its decoded-block cache, ``cache.decodedBytes``, so rows are copied
out of decoded blocks), ``nocache`` (decoded caches off: every take decodes its rows from the page
cache's bytes) and ``pylance`` in-process.

Servers run in child processes (as in production; a server in the client's process would share
its GIL). Figures are printed, not asserted: they depend on the machine.

Run: ``python -m loadtest flight [--rows 1000000] [--take-reps 200] [--scan-reps 5]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

__all__ = ["BareStreamServer", "main"]

#: Rows per data file: several fragments, so the scan has several endpoints as in real use.
ROWS_PER_FILE = 256 * 1024
#: Rows per batch of the bare stream: the engine's default scan batch, so both send alike.
BARE_BATCH_ROWS = 8192
START_TIMEOUT_S = 120.0


def build_table(rows: int, seed: int = 0) -> pa.Table:
    """Ids, floats, short strings and a small vector: a typical feature table."""
    rng = np.random.default_rng(seed)
    vec = rng.random(rows * 8, dtype=np.float32)
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "x": pa.array(rng.random(rows)),
            "name": pa.array(np.char.add("row-", np.arange(rows).astype(str)).astype(object)),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vec), 8),
        }
    )


class BareStreamServer(flight.FlightServerBase):  # type: ignore[misc]
    """The floor: streams one in-memory table for any ticket."""

    def __init__(self, table: pa.Table, location: str = "grpc://127.0.0.1:0") -> None:
        super().__init__(location)
        self.table = table

    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.RecordBatchStream:
        return flight.RecordBatchStream(pa.Table.from_batches(self.table.to_batches(BARE_BATCH_ROWS)))


def _serve_lance(root: str, cached: bool, port_out: Any) -> None:
    """A service with the default settings, or (``cached=False``) with its decoded caches off:
    no scan batches, no decoded blocks; every read decodes."""
    from flight_server.service import LanceFlightService
    from flight_server.settings import ServerSettings
    from lance_format.io import configure_caches

    settings = ServerSettings(root=root, port=0, metrics_port=-1)
    if not cached:
        settings = dataclasses.replace(settings, batch_cache_bytes=0, decoded_cache_bytes=0)
    configure_caches(settings.metadata_cache_bytes, settings.page_cache_bytes, settings.decoded_cache_bytes)
    server = LanceFlightService(settings, location="grpc://127.0.0.1:0")
    port_out.put(server.port)
    server.serve()


def _serve_bare(rows: int, port_out: Any) -> None:
    server = BareStreamServer(build_table(rows))
    port_out.put(server.port)
    server.serve()


def _start(target: Callable[..., None], *args: Any) -> tuple[multiprocessing.process.BaseProcess, int]:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue), daemon=True)
    proc.start()
    return proc, int(queue.get(timeout=START_TIMEOUT_S))


@dataclass
class Stat:
    """Latencies (seconds) of one engine and row count."""

    samples: list[float]

    def q(self, quantile: float) -> float:
        return float(np.quantile(np.array(self.samples), quantile))


#: Untimed takes per take size before timing: the connections open and the server's decoded-block
#: cache admits what the random rows keep touching (at most 8 blocks a take; the default 1M-row
#: table has 64 blocks), as on a server that has been serving a while.
WARMUP_TAKES = 20


def bench_take(
    client: Any, nocache: Any, pylance_ds: Any, rows: int, reps: int, ks: Sequence[int]
) -> dict[tuple[str, int], Stat]:
    """Interleaved Flight (default server, and one with its decoded caches off) and pylance
    in-process takes of the same random row sets."""
    rng = np.random.default_rng(1)
    out: dict[tuple[str, int], Stat] = {}
    arms: dict[str, Callable[[np.ndarray], Any]] = {
        "flight": lambda idx: client.take("bench", indices=idx),
        "nocache": lambda idx: nocache.take("bench", indices=idx),
        "pylance": lambda idx: pylance_ds.take(idx),
    }
    for k in ks:
        for _ in range(WARMUP_TAKES):
            idx = rng.integers(0, rows, k)
            for run in arms.values():
                run(idx)
        times: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(reps):
            idx = rng.integers(0, rows, k)
            for name, run in arms.items():
                t0 = time.perf_counter()
                run(idx)
                times[name].append(time.perf_counter() - t0)
        for name, samples in times.items():
            out[(name, k)] = Stat(samples)
    return out


def bench_scan(client: Any, nocache: Any, bare: flight.FlightClient, reps: int) -> dict[str, float]:
    """Seconds of a full scan (medians, interleaved): cold, warm and uncached service, bare server.

    ``client``'s server must not have scanned yet: its first scan is the cold one.
    """
    t0 = time.perf_counter()
    rows = {"cold": client.scan("bench").num_rows}
    cold = time.perf_counter() - t0
    times: dict[str, list[float]] = {"warm": [], "nocache": [], "bare": []}
    runs: dict[str, Callable[[], int]] = {
        "warm": lambda: int(client.scan("bench").num_rows),
        "nocache": lambda: int(nocache.scan("bench").num_rows),
        "bare": lambda: int(bare.do_get(flight.Ticket(b"all")).read_all().num_rows),
    }
    for _ in range(reps):
        for name, run in runs.items():
            t0 = time.perf_counter()
            rows[name] = run()
            times[name].append(time.perf_counter() - t0)
    if len(set(rows.values())) != 1:
        raise RuntimeError(f"scans disagree on the row count: {rows}")
    out = {name: statistics.median(ts) for name, ts in times.items()}
    return {**out, "cold": cold, "rows": float(rows["bare"])}


def report(takes: dict[tuple[str, int], Stat], scan: dict[str, float], nbytes: int) -> str:
    lines = ["", "take (ms)          p50      p99"]
    for (engine, k), stat in sorted(takes.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        lines.append(f"  {engine:8s} k={k:<4d} {stat.q(0.5) * 1e3:7.3f}  {stat.q(0.99) * 1e3:7.3f}")
    for k in sorted({k for _, k in takes}):
        ratio = takes[("flight", k)].q(0.5) / takes[("pylance", k)].q(0.5)
        lines.append(f"  flight/pylance p50 k={k}: {ratio:.2f}x" + ("  (target <= 1.0x)" if k == 100 else ""))
        ratio = takes[("nocache", k)].q(0.5) / takes[("pylance", k)].q(0.5)
        lines.append(f"  nocache/pylance p50 k={k}: {ratio:.2f}x  (decoded caches off: every take decodes)")
    rows = scan["rows"]
    lines.append("")
    lines.append("scan               s      Mrows/s   MB/s")
    for engine in ("cold", "warm", "nocache", "bare"):
        secs = scan[engine]
        lines.append(f"  {engine:8s}   {secs:7.3f}  {rows / secs / 1e6:7.2f}  {nbytes / secs / 1e6:7.1f}")
    for engine in ("warm", "cold", "nocache"):
        target = "  (target >= 0.8x)" if engine == "warm" else ""
        lines.append(f"  flight service {engine} / bare stream: {scan['bare'] / scan[engine]:.2f}x{target}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loadtest flight", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="rows in the dataset (default 1M)")
    p.add_argument("--take-reps", type=int, default=200, help="row sets per take size (default 200)")
    p.add_argument("--scan-reps", type=int, default=5, help="full scans per server (default 5)")
    p.add_argument("--dir", default=None, help="server root (default: a temporary directory)")
    return p.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args([] if argv is None else argv)
    import lance  # the oracle: test/benchmark-only

    from flight_server.client import LanceFlightClient
    from lance_format import write_dataset

    with tempfile.TemporaryDirectory(prefix="bench-flight-") as tmp:
        root = Path(args.dir or tmp)
        table = build_table(args.rows)
        t0 = time.perf_counter()
        write_dataset(table, str(root / "bench"), mode="overwrite", max_rows_per_file=ROWS_PER_FILE)
        print(f"wrote {args.rows} rows ({table.nbytes / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f}s")
        lance_proc, lance_port = _start(_serve_lance, str(root), True)
        nocache_proc, nocache_port = _start(_serve_lance, str(root), False)
        bare_proc, bare_port = _start(_serve_bare, args.rows)
        try:
            client = LanceFlightClient(f"grpc://127.0.0.1:{lance_port}", timeout=600)
            nocache = LanceFlightClient(f"grpc://127.0.0.1:{nocache_port}", timeout=600)
            bare = flight.connect(f"grpc://127.0.0.1:{bare_port}")
            pylance_ds = lance.dataset(str(root / "bench"))
            # Scans first, so "cold" is the first read of a fresh server.
            scan = bench_scan(client, nocache, bare, args.scan_reps)
            takes = bench_take(client, nocache, pylance_ds, args.rows, args.take_reps, (1, 100))
            print(report(takes, scan, table.nbytes))
            client.close()
            nocache.close()
            bare.close()
        finally:
            for proc in (lance_proc, nocache_proc, bare_proc):
                proc.terminate()
                proc.join(10)
    return 0
