"""Server CPU per row of a cold (nocache) full scan: a figure that holds on a busy machine.

The Spark benchmark's table (:func:`loadtest.bench_spark.build_table`: ``id`` int64, ``value``
float64, ``tag`` string, ``vec`` 8 x float32) is written as a Lance dataset of ``--partitions``
fragments and served by a :class:`~flight_server.service.LanceFlightService` in a child process
with its decoded-batch cache off (every read decodes; the engine session's decoded-block cache is
off by default; footers and manifests stay cached after the untimed warm-up scan, as in the Spark
benchmark's ``lance-nocache`` arm). This process reads every endpoint through
:class:`~flight_server.client.LanceFlightClient`, one reader thread per partition, as Spark's
executors do. The figure is the child's CPU time (user + system, from ``/proc/PID/stat``) per row
read: the server's decode, IPC encode and Flight send, without the client's work and without the
wall clock another process on the machine stretches. ``par`` (server CPU / wall) tells how many
cores the server kept busy; ``faults`` are the child's minor page faults per run (each a page the
kernel zeroed: fresh memory the allocators took); ``sys %`` the share of the CPU spent in the
kernel; ``rss MiB`` the child's resident size after the run (a steady size with faults every run
means memory handed back to the OS and taken again).

Run: ``python -m loadtest scancpu [--rows 10000000] [--reps 5] [--warmup 1]`` (best and median
of the reps).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from flight_server.entry import POOL_ENVIRONMENT

__all__ = ["main", "server_cpu"]

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Seconds the child may take to import and listen before the benchmark gives up.
START_TIMEOUT_S = 60.0
#: The child's program: a server on the root in argv[1], batch cache off, the settings of the JSON
#: object in argv[2] (``--set``); prints its port, serves until its stdin closes.
_CHILD = """
import json, sys
from flight_server.service import LanceFlightService
from flight_server.settings import ServerSettings
settings = ServerSettings(root=sys.argv[1], batch_cache_bytes=0, **json.loads(sys.argv[2]))
svc = LanceFlightService(settings, location="grpc://127.0.0.1:0")
print(svc.port, flush=True)
sys.stdin.read()
svc.shutdown()
"""


def server_cpu(pid: int) -> tuple[float, int]:
    """CPU seconds (user + system) and minor faults of process ``pid`` so far (``/proc/PID/stat``)."""
    user, system, faults, _ = _proc_stat(pid)
    return user + system, faults


def _proc_stat(pid: int) -> tuple[float, float, int, int]:
    """User and system CPU seconds, minor faults and resident bytes of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command's closing parenthesis: fields[7] minflt, fields[11] utime, fields[12]
    # stime, fields[21] rss (pages).
    ticks = os.sysconf("SC_CLK_TCK")
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    return int(fields[11]) / ticks, int(fields[12]) / ticks, int(fields[7]), rss


def _overrides(pairs: Sequence[str]) -> dict[str, object]:
    """``NAME=VALUE`` pairs as :class:`~flight_server.settings.ServerSettings` fields (numbers as
    numbers), so a run can try a tunable (``--set bulk_nice=0``); an unknown name is refused."""
    from flight_server.settings import ServerSettings

    fields = {f.name for f in dataclasses.fields(ServerSettings)}
    out: dict[str, object] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or name not in fields:
            raise SystemExit(f"--set {pair!r}: expected NAME=VALUE with NAME a ServerSettings field")
        value: object = text
        for kind in (int, float):
            try:
                value = kind(text)
                break
            except ValueError:
                continue
        out[name] = value
    return out


def _scan(uri: str, parts: int, batch_rows: int) -> int:
    """Read every endpoint of a full scan of ``bench``, one thread each; the rows read."""
    from flight_server.client import LanceFlightClient

    client = LanceFlightClient(uri)
    try:
        endpoints = client.scan_endpoints("bench", batch_size=batch_rows, min_endpoints=parts)
        counts = [0] * len(endpoints)

        def read(i: int) -> None:
            with LanceFlightClient(uri) as own:
                counts[i] = sum(b.num_rows for b in own.read_endpoint(endpoints[i], i))

        threads = [threading.Thread(target=read, args=(i,)) for i in range(len(endpoints))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(counts)
    finally:
        client.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m loadtest scancpu``."""
    ap = argparse.ArgumentParser(prog="python -m loadtest scancpu", description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="table rows (default 10M, as Spark's)")
    ap.add_argument("--partitions", type=int, default=0, help="fragments and readers (default: cores)")
    ap.add_argument("--batch-rows", type=int, default=65536, help="rows per batch served (as Spark's)")
    ap.add_argument("--reps", type=int, default=5, help="timed scans after the untimed warm-up")
    ap.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="untimed scans first (the server's heap grows over the first ~6 of 10M rows; more"
        " warm-up measures the steady state)",
    )
    ap.add_argument("--root", help="reuse (or create) the dataset under this directory")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a ServerSettings field of the server (repeatable), e.g. bulk_nice=0",
    )
    args = ap.parse_args(argv)
    overrides = _overrides(args.set)
    parts = args.partitions or os.cpu_count() or 1
    from lance_format.dataset import write_dataset
    from loadtest.bench_spark import build_table

    tmp = None if args.root else Path(tempfile.mkdtemp(prefix="bench-scancpu-"))
    root = Path(args.root) if args.root else tmp
    assert root is not None
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for name, value in POOL_ENVIRONMENT.items():
        env.setdefault(name, value)
    try:
        if not (root / "bench").exists():
            root.mkdir(parents=True, exist_ok=True)
            write_dataset(
                build_table(args.rows), str(root / "bench"), max_rows_per_file=-(-args.rows // parts)
            )
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(root), json.dumps(overrides)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdin is not None
            line = child.stdout.readline()
            if not line.strip().isdigit():
                raise RuntimeError("the server child did not start (see its output above)")
            uri = f"grpc://127.0.0.1:{int(line)}"
            rows = _scan(uri, parts, args.batch_rows)  # warm-up: kernels, metadata, connections
            for _ in range(args.warmup - 1):
                _scan(uri, parts, args.batch_rows)
            figures: list[tuple[float, float, int, float, int]] = []
            for _ in range(args.reps):
                u0, s0, f0, _ = _proc_stat(child.pid)
                t0 = time.perf_counter()
                got = _scan(uri, parts, args.batch_rows)
                wall = time.perf_counter() - t0
                u1, s1, f1, rss = _proc_stat(child.pid)
                if got != rows:
                    raise RuntimeError(f"scan read {got} rows, the warm-up {rows}")
                cpu = (u1 - u0) + (s1 - s0)
                figures.append((cpu, wall, f1 - f0, (s1 - s0) / cpu if cpu else 0.0, rss))
        finally:
            if child.stdin is not None:
                child.stdin.close()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        ns = sorted(cpu / rows * 1e9 for cpu, *_ in figures)
        print(
            f"# {rows:,} rows, {parts} partitions, batch {args.batch_rows}, {args.reps} reps"
            f" after {max(1, args.warmup)} warm-up" + "".join(f", {p}" for p in args.set)
        )
        print(f"{'run':>4s} {'srv ns/row':>11s} {'par':>5s} {'faults':>8s} {'sys %':>6s} {'rss MiB':>8s}")
        for k, (cpu, wall, faults, sys_share, rss) in enumerate(figures):
            print(
                f"{k:4d} {cpu / rows * 1e9:11.1f} {cpu / wall:5.2f} {faults:8d} "
                f"{sys_share * 100:6.1f} {rss / 2**20:8.0f}"
            )
        print(f"server CPU ns/row: best {ns[0]:.1f}, median {ns[len(ns) // 2]:.1f}")
        return 0
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
