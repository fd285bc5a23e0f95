"""Spark benchmark: the ``lance`` data source against its floor and against local Parquet, in one run.

One table (``--rows``, default 10M): ``id`` int64, ``value`` float64, ``tag`` string (~6 B, 1000
distinct), ``vec`` an 8-d float32 embedding (a ``fixed_size_list`` in the Lance dataset, an array in
Spark and Parquet). It is stored three ways, split into ``--partitions`` pieces each:

* ``lance``: a Lance dataset in the root of an in-process ``LanceFlightService``, read and written
  through the ``lance`` data source (``flight_server.spark``); the server's decoded-batch cache is
  sized to hold the table, so repeated reads stream from memory as the floor does (``lance``), and
  ``lance-nocache`` reads the same root through a server with that cache off (every read decodes:
  the in-process servers run on the default engine session, whose decoded-block cache is off too;
  footers and manifests stay cached, as a pylance session keeps them, so no ticket re-reads them);
* ``floor``: the same table in memory behind a bare pyarrow Flight server, read and written by the
  least a Python data source can do (``loadtest.bare_flight``): the floor of this design;
* ``parquet``: Parquet files read and written by Spark's own (JVM) Parquet source.

Reads run ``spark.read....load().write.format("noop")`` (every column of every row reaches the JVM,
nothing is written). Writes take the Parquet copy as their input (so each write figure includes the
Parquet read) and write it to the sink: the ``lance`` source in overwrite mode, the bare server
(which counts and drops the rows), or Parquet files. Each arm runs ``--reps`` times after one
untimed warm-up, arms interleaved; the best run counts. The issue's target: ``lance`` reads at
least 0.9x of the floor. Column ``drv ns/row`` is the CPU the driver process spent per row (least
over the runs): the work of the in-process servers, which wall clock on a shared machine hides.
The driver sets up Arrow's allocator as the server image does (:data:`SERVER_ENV`) unless
``--allocator-defaults`` is given.

Run: ``python -m loadtest spark [--rows N]`` (Spark needs Java 17+).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flight_server.entry import POOL_ENVIRONMENT

__all__ = ["build_table", "main"]

DIM = 8
# Distinct tags: a realistic low-cardinality string column.
TAGS = 1000
# Target read ratio lance / floor, from the Spark issue.
TARGET_READ_VS_FLOOR = 0.9
REPO_ROOT = Path(__file__).resolve().parent.parent
#: The allocator setting of a serving process (``lance-flight`` and deploy/Dockerfile set it), for
#: the driver that hosts the in-process servers: Arrow's pool keeps the pages it freed (server CPU
#: of the nocache scan -10 to -20%). mimalloc reads it once, when libarrow loads, so the benchmark
#: re-executes itself with it set.
SERVER_ENV = dict(POOL_ENVIRONMENT)
#: Set in the re-executed benchmark: the variables of SERVER_ENV it added (Spark does not get them).
_ADDED_ENV = "LOADTEST_SPARK_ADDED_ENV"


def build_table(rows: int, seed: int = 0) -> pa.Table:
    """The benchmark table (deterministic); ``vec`` is a fixed-size list (a vector)."""
    rng = np.random.default_rng(seed)
    tags = pa.array([f"t{i:04d}" for i in range(TAGS)])
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * DIM, dtype=np.float32)), DIM)
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "value": pa.array(rng.random(rows)),
            "tag": tags.take(pa.array(rng.integers(0, TAGS, rows))),
            "vec": vec,
        }
    )


def spark_native(table: pa.Table) -> pa.Table:
    """The table as Spark holds it: the vector as a variable-size list."""
    i = table.schema.get_field_index("vec")
    return table.set_column(i, "vec", table.column("vec").cast(pa.list_(pa.float32())))


def _cpu_s() -> float:
    """CPU seconds of this (the driver's) process so far: the in-process servers' work."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds of ``fn()``."""
    t0, c0 = time.perf_counter(), _cpu_s()
    fn()
    return time.perf_counter() - t0, _cpu_s() - c0


def _write_parquet(table: pa.Table, path: Path, pieces: int) -> None:
    path.mkdir(parents=True)
    step = -(-table.num_rows // pieces)
    for k, lo in enumerate(range(0, table.num_rows, step)):
        pq.write_table(table.slice(lo, step), path / f"part-{k:05d}.parquet")


def _start_lance(root: Path, batch_cache_bytes: int) -> Any:
    """An in-process LanceFlightService on a free port (None when the server cannot be imported)."""
    try:
        from flight_server.service import LanceFlightService
        from flight_server.settings import ServerSettings
    except ImportError as e:
        print(f"# lance arms skipped: {e}", file=sys.stderr)
        return None
    settings = ServerSettings(root=str(root), batch_cache_bytes=batch_cache_bytes)
    return LanceFlightService(settings, location="grpc://127.0.0.1:0")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m loadtest spark``."""
    ap = argparse.ArgumentParser(prog="python -m loadtest spark", description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="table rows (default 10M)")
    ap.add_argument(
        "--partitions", type=int, default=0, help="pieces/endpoints/files (default: one per core)"
    )
    ap.add_argument(
        "--batch-rows", type=int, default=65536, help="rows per Arrow batch served (floor and lance alike)"
    )
    ap.add_argument("--reps", type=int, default=2, help="timed runs per arm after a warm-up")
    ap.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--arms", default="floor,parquet,lance", help="subset of floor,parquet,lance")
    ap.add_argument(
        "--batch-cache-bytes",
        type=int,
        default=None,
        help="the lance server's decoded-batch cache (default: twice the table, as a server sized for"
        " its hot set; the lance-nocache arm always runs with it off)",
    )
    ap.add_argument("--no-writes", action="store_true", help="reads only")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument(
        "--allocator-defaults",
        action="store_true",
        help="leave Arrow's allocator in the driver at its defaults (not as a serving process sets it)",
    )
    args = ap.parse_args(argv)
    if not args.allocator_defaults and _ADDED_ENV not in os.environ:
        missing = {k: v for k, v in SERVER_ENV.items() if k not in os.environ}
        if missing:
            env = {**os.environ, **missing, _ADDED_ENV: ",".join(missing)}
            rest = list(sys.argv[1:] if argv is None else argv)
            os.execve(sys.executable, [sys.executable, "-m", "loadtest", "spark", *rest], env)
    # The servers' process has its allocator now; Spark's JVM and Python workers keep their own.
    for name in filter(None, os.environ.pop(_ADDED_ENV, "").split(",")):
        os.environ.pop(name, None)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    cores = os.cpu_count() or 1
    parts = args.partitions or cores

    # Spark's Python workers import loadtest.bare_flight and flight_server from this checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    from flight_server.spark import local_session
    from loadtest.bare_flight import BareFlightServer, BareFlightSource

    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    servers: list[Any] = []
    try:
        t0 = time.perf_counter()
        table = build_table(args.rows)
        # Both Flight arms stream batches of the same size (a single huge batch per partition
        # would make the floor measure Spark's handling of giant batches instead).
        native = pa.Table.from_batches(spark_native(table).to_batches(max_chunksize=args.batch_rows))
        src = work / "parquet-src"
        _write_parquet(native, src, parts)
        bare = BareFlightServer(native, parts)
        servers.append(bare)
        lance = lance_cold = None
        if "lance" in arms:
            from lance_format.dataset import write_dataset

            root = work / "lance-root"
            root.mkdir()
            write_dataset(table, str(root / "bench"), max_rows_per_file=-(-args.rows // parts))
            cache_bytes = args.batch_cache_bytes
            if cache_bytes is None:
                cache_bytes = 2 * table.nbytes
            lance = _start_lance(root, cache_bytes)
            # The same root behind a server without the batch cache: every read decodes.
            lance_cold = _start_lance(root, 0)
            servers.extend(s for s in (lance, lance_cold) if s is not None)
        # The driver now hosts the servers: freeze its heap as a serving process does once ready
        # (flight_server.workers.freeze_heap), so full collections do not walk the set-up's objects.
        from flight_server.workers import freeze_heap

        freeze_heap()
        print(
            f"# {args.rows:,} rows, {parts} partitions, {cores} cores; set-up {time.perf_counter() - t0:.1f}s"
        )

        spark = local_session(
            args.master,
            "bench-spark",
            {"spark.driver.memory": args.driver_memory, "spark.sql.files.maxPartitionBytes": "1g"},
        )
        spark.dataSource.register(BareFlightSource)
        bare_uri = f"grpc://127.0.0.1:{bare.port}"

        def noop(df: Any) -> None:
            df.write.format("noop").mode("overwrite").save()

        reads: dict[str, Callable[[], None]] = {}
        writes: dict[str, Callable[[], None]] = {}
        if "floor" in arms:
            reads["floor"] = lambda: noop(spark.read.format("bareflight").option("uri", bare_uri).load())
            writes["floor"] = lambda: (
                spark.read.parquet(str(src))
                .write.format("bareflight")
                .option("uri", bare_uri)
                .mode("append")
                .save()
            )
        if "parquet" in arms:
            out = work / "parquet-out"
            reads["parquet"] = lambda: noop(spark.read.parquet(str(src)))
            writes["parquet"] = lambda: spark.read.parquet(str(src)).write.mode("overwrite").parquet(str(out))
        if lance is not None:
            lance_uri = f"grpc://127.0.0.1:{lance.port}"

            def read_lance(uri: str) -> None:
                noop(
                    spark.read.format("lance_flight")
                    .option("uri", uri)
                    .option("min_partitions", parts)
                    .option("batch_size", args.batch_rows)
                    .load("bench")
                )

            reads["lance"] = lambda: read_lance(lance_uri)
            if lance_cold is not None:
                cold_uri = f"grpc://127.0.0.1:{lance_cold.port}"
                reads["lance-nocache"] = lambda: read_lance(cold_uri)
            writes["lance"] = lambda: (
                spark.read.parquet(str(src))
                .write.format("lance_flight")
                .option("uri", lance_uri)
                .option("vector_columns", f"vec:{DIM}")
                .mode("overwrite")
                .save("written")
            )

        results: dict[str, dict[str, float]] = {"read": {}, "write": {}}
        # Driver-process CPU per row of each arm (least over the runs): the in-process servers'
        # work (Spark's JVM and Python workers are other processes). Unlike wall clock it holds on
        # a busy machine, so it shows what an arm's serving path costs.
        cpu_ns: dict[str, dict[str, float]] = {"read": {}, "write": {}}
        for kind, fns in (("read", reads), ("write", {} if args.no_writes else writes)):
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
            for fn in fns.values():  # warm-up: JIT, Python workers, connections
                fn()
            for _ in range(args.reps):
                for name, fn in fns.items():
                    times[name].append(_timed(fn))
            for name, ts in times.items():
                results[kind][name] = args.rows / min(wall for wall, _ in ts)
                cpu_ns[kind][name] = min(cpu for _, cpu in ts) / args.rows * 1e9
        _report(results, args.rows, cpu_ns)
        if args.json:
            figures = {"rows": args.rows, "rows_per_s": results, "driver_cpu_ns_per_row": cpu_ns}
            Path(args.json).write_text(json.dumps(figures, indent=2))
        spark.stop()
        return 0
    finally:
        for s in servers:
            s.shutdown()
        shutil.rmtree(work, ignore_errors=True)


def _report(
    results: dict[str, dict[str, float]], rows: int, cpu_ns: dict[str, dict[str, float]] | None = None
) -> None:
    cpu_ns = cpu_ns or {}
    print(f"{'':6s} {'arm':13s} {'Mrows/s':>9s} {'vs floor':>9s} {'vs parquet':>11s} {'drv ns/row':>11s}")
    for kind, figures in results.items():
        floor, parquet = figures.get("floor"), figures.get("parquet")
        for name, rate in figures.items():
            vf = f"{rate / floor:.2f}x" if floor else "-"
            vp = f"{rate / parquet:.2f}x" if parquet else "-"
            ns = cpu_ns.get(kind, {}).get(name)
            cpu = f"{ns:.0f}" if ns is not None else "-"
            print(f"{kind:6s} {name:13s} {rate / 1e6:9.2f} {vf:>9s} {vp:>11s} {cpu:>11s}")
    lance, floor = results["read"].get("lance"), results["read"].get("floor")
    if lance and floor:
        verdict = "met" if lance >= TARGET_READ_VS_FLOOR * floor else "NOT met"
        print(f"target: lance read >= {TARGET_READ_VS_FLOOR}x floor: {verdict} ({lance / floor:.2f}x)")
