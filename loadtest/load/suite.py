"""The latency suite: ``python -m loadtest [--quick] [--target grpc://...] [--out DIR]``.

Steps of a run:

1. Without ``--target``, start ``lance-flight serve`` over a fresh local directory on free ports.
   Write the datasets through the server (``loadtest_main`` for reads, ``loadtest_mixed`` for the
   mixed workload, one dataset per writing scenario).
2. **Unloaded comparison**: each scenario that exists in-process runs closed-loop with one caller
   on every arm (``flight``, ``engine``, ``pylance``) on the same files.
3. Per scenario on the server: a closed-loop **max** run (all client processes, the scenario's
   threads each), then **open-loop** runs at fixed fractions of that maximum (or ``--rates``).
4. **Sweep**: batch takes closed-loop with 1, 2, ... client processes (throughput vs workers).
5. ``report.json``, ``report.md``, ``report.html`` and the SVG plots in ``--out``; the summary
   table on stdout. Exit status 1 when any request failed.

Settings: flag > environment variable (``LOADTEST_TARGET``, ``LOADTEST_OUT``, ``LOADTEST_TOKEN``,
``LOADTEST_PROCESSES``) > the suite's preset (``--quick`` or the default).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from loadtest.load.generator import RunSpec
from loadtest.load.pool import ClientPool, RunResult
from loadtest.load.report import run_record, summary_table, write_report
from loadtest.load.scenarios import (
    APPEND_ROWS,
    ARMS,
    MAIN_DATASET,
    MIXED_DATASET,
    SCENARIOS,
    ClientEnv,
    build_table,
    write_dataset_name,
)
from loadtest.load.server import MetricsScraper, ServerProcess, metrics_delta

__all__ = ["DEFAULT", "QUICK", "SuiteConfig", "main", "run_suite"]

#: Requests one client process keeps in flight at most in open-loop runs: well above what a
#: healthy server needs at the offered rates, so the client is not what queues requests.
OPEN_LOOP_THREADS = 8
#: Library each in-process arm loads (client processes import them while the server starts).
_ARM_MODULES = {"engine": "lance_format", "pylance": "lance"}
#: Files per dataset: several fragments, so full scans have several endpoints, as in real use.
FILES_PER_DATASET = 4


@dataclass(frozen=True)
class SuiteConfig:
    """Everything a suite run needs (the presets below, adjusted by flags)."""

    name: str
    rows: int
    processes: int
    duration_s: float
    warmup_s: float
    fractions: tuple[float, ...]
    sweep: tuple[int, ...]
    timeout_s: float
    scenarios: tuple[str, ...] = tuple(SCENARIOS)
    arms: tuple[str, ...] = ARMS
    rates: tuple[float, ...] = ()
    server_workers: int = 1
    #: ``--workers`` of the extra servers of the server sweep (batch takes, closed loop; only when
    #: the suite starts the server itself).
    server_sweep: tuple[int, ...] = ()
    #: Requests one client process keeps in flight at most in open-loop runs.
    open_threads: int = OPEN_LOOP_THREADS
    #: Scenarios of the unloaded arm comparison (``None``: every scenario with in-process arms).
    compare: tuple[str, ...] | None = None


#: Under a minute on a 2-core machine, server start and dataset writes included.
QUICK = SuiteConfig(
    name="quick",
    rows=20_000,
    processes=2,
    duration_s=0.6,
    warmup_s=0.15,
    fractions=(0.5,),
    sweep=(1, 2),
    timeout_s=15.0,
)
#: A few minutes: four load levels per scenario and a 1-2-4 process sweep.
DEFAULT = SuiteConfig(
    name="default",
    rows=200_000,
    processes=4,
    duration_s=3.0,
    warmup_s=0.5,
    fractions=(0.25, 0.5, 0.75, 0.9),
    sweep=(1, 2, 4),
    timeout_s=30.0,
    server_sweep=(1, 2),
)


def _setup_datasets(
    cfg: SuiteConfig, target: str, token: str | None, local_root: str, local_main: bool
) -> None:
    """Write the suite's datasets through the server (and the in-process arms' own)."""
    from flight_server.client import LanceFlightClient

    table = build_table(cfg.rows)
    per_file = max(1, -(-cfg.rows // FILES_PER_DATASET))
    seed_rows = build_table(APPEND_ROWS, seed=1)
    with LanceFlightClient(target, token, timeout=max(cfg.timeout_s, 120.0)) as client:
        for name in (MAIN_DATASET, MIXED_DATASET):
            client.write(name, table, mode="overwrite", max_rows_per_file=per_file)
        for scenario in ("append", "writers"):
            client.write(write_dataset_name(scenario, "flight"), seed_rows, mode="overwrite")
    import lance_format

    if local_main:  # a remote server: the in-process arms read a local copy of the same rows
        lance_format.write_dataset(
            table, f"{local_root}/{MAIN_DATASET}", mode="overwrite", max_rows_per_file=per_file
        )
    if any(name.startswith("sql_") for name in cfg.scenarios):
        # A zone map on id, so the SQL scenarios' filters prune as filtered scans do. Built on the
        # local files (the server's own root when the suite started it, else the local copy).
        lance_format.dataset(f"{local_root}/{MAIN_DATASET}").create_scalar_index("id", "ZONEMAP")
    if "append" in cfg.scenarios:
        if "engine" in cfg.arms:
            import lance_format

            lance_format.write_dataset(
                seed_rows, f"{local_root}/{write_dataset_name('append', 'engine')}", mode="create"
            )
        if "pylance" in cfg.arms:
            import lance

            lance.write_dataset(
                seed_rows, f"{local_root}/{write_dataset_name('append', 'pylance')}", mode="create"
            )


def _plan_unloaded(cfg: SuiteConfig) -> list[RunSpec]:
    specs = []
    for name in cfg.scenarios if cfg.compare is None else cfg.compare:
        sc = SCENARIOS[name]
        if len(sc.arms) < 2:
            continue  # flight-only scenarios have nothing to compare
        for arm in (a for a in sc.arms if a in cfg.arms):
            specs.append(
                RunSpec(
                    f"{name}/{arm}/unloaded", name, arm, "closed", 1, 1, 0.0, cfg.duration_s, cfg.warmup_s
                )
            )
    return specs


class _Phases:
    """Seconds each set-up step took, on stderr (where a slow suite spends its time)."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.t = time.monotonic()

    def mark(self, what: str) -> None:
        now = time.monotonic()
        if self.verbose:
            print(f"  [{now - self.t:5.1f}s] {what}", file=sys.stderr, flush=True)
        self.t = now


class _Runner:
    """Runs specs on the pool with metric snapshots around them; collects the records."""

    def __init__(self, pool: ClientPool, scraper: MetricsScraper, verbose: bool) -> None:
        self.pool = pool
        self.scraper = scraper
        self.verbose = verbose
        self.records: list[dict[str, Any]] = []

    def run(self, spec: RunSpec, label: str, **extra: Any) -> RunResult:
        before = self.scraper.snapshot()
        result = self.pool.run(spec)
        record = run_record(result, metrics_delta(before, self.scraper.snapshot()), label)
        record.update(extra)
        self.records.append(record)
        if self.verbose:
            errs = f" errors {result.errors}" if result.errors else ""
            print(
                f"  {spec.run_id:34s} {result.throughput:8.1f}/s p50 {record['p50_ms'] or 0:8.2f} ms "
                f"p99 {record['p99_ms'] or 0:8.2f} ms{errs}",
                file=sys.stderr,
                flush=True,
            )
        return result


def run_suite(
    cfg: SuiteConfig,
    out_dir: Path,
    *,
    target: str | None = None,
    token: str | None = None,
    metrics_url: str | None = None,
    verbose: bool = True,
) -> dict[str, Any]:
    """Run the suite; write the report into ``out_dir``; return the ``report.json`` document."""
    started = dt.datetime.now(dt.UTC)
    phases = _Phases(verbose)
    t_start = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    pool_size = max(cfg.processes, *cfg.sweep) if cfg.sweep else cfg.processes
    preload = ["flight_server.client", *(m for a, m in _ARM_MODULES.items() if a in cfg.arms)]
    with tempfile.TemporaryDirectory(prefix="loadtest-") as tmp, ClientPool(pool_size, preload) as pool:
        server: ServerProcess | None = None
        if target is None:
            server = ServerProcess(f"{tmp}/root", workers=cfg.server_workers, log_path=out_dir / "server.log")
            phases.mark("server started")
            target, metrics_url = server.location, server.metrics_url
            local_root = server.root  # the in-process arms read the server's own files
        else:
            local_root = f"{tmp}/local"
        try:
            _setup_datasets(cfg, target, token, local_root, local_main=server is None)
            phases.mark("datasets written")
            env = ClientEnv(target, token, cfg.rows, local_root, cfg.timeout_s)
            pool.start(env)
            phases.mark("client processes ready")
            runner = _Runner(pool, MetricsScraper(metrics_url), verbose)
            _run_all(cfg, runner)
            phases.mark(f"{len(runner.records)} runs")
            if server is not None and cfg.server_sweep and "batch_take" in cfg.scenarios:
                _server_sweep(cfg, runner, env, server.root, out_dir)
                phases.mark("server-workers sweep")
            records = runner.records
            scrape_failures = runner.scraper.failures
        finally:
            pool.close()  # first: open client streams would hold up the server's drain
            server_exit = server.stop() if server is not None else None
            phases.mark("server stopped")
    meta = {
        "started": started.isoformat(timespec="seconds"),
        "elapsed_s": round(time.monotonic() - t_start, 1),
        "suite": cfg.name,
        "target": target if server is None else f"{target} (started here)",
        "server": f"lance-flight serve --workers {cfg.server_workers}, local directory"
        if server is not None
        else "external",
        "server_exit_status": server_exit,
        "metrics_url": metrics_url,
        "metrics_scrape_failures": scrape_failures,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "client_processes": cfg.processes,
        "dataset_rows": cfg.rows,
        "duration_s": cfg.duration_s,
        "warmup_s": cfg.warmup_s,
    }
    from loadtest.load.plots import write_plots

    plots = write_plots(out_dir, records)
    doc = write_report(out_dir, meta, records, plots)
    phases.mark("report written")
    return doc


def _run_all(cfg: SuiteConfig, runner: _Runner) -> None:
    for spec in _plan_unloaded(cfg):
        runner.run(spec, "unloaded")
    max_tput: dict[str, float] = {}
    for name in cfg.scenarios:
        if "flight" not in cfg.arms:
            break
        sc = SCENARIOS[name]
        base = RunSpec(
            f"{name}/flight/max",
            name,
            "flight",
            "closed",
            cfg.processes,
            sc.threads,
            0.0,
            cfg.duration_s,
            cfg.warmup_s,
        )
        result = runner.run(base, "max")
        max_tput[name] = result.throughput
        rates = list(cfg.rates) or [f * result.throughput for f in cfg.fractions]
        for rate in rates:
            if rate <= 0:
                continue
            spec = replace(
                base,
                run_id=f"{name}/flight/open@{rate:.0f}",
                mode="open",
                rate=rate,
                threads=cfg.open_threads,
            )
            label = (
                f"{rate / result.throughput:.0%} of max" if not cfg.rates and result.throughput else "open"
            )
            runner.run(spec, label)
        runner.pool.release(name, "flight")  # e.g. open do_exchange streams
    if "batch_take" in cfg.scenarios and "flight" in cfg.arms:
        threads = SCENARIOS["batch_take"].threads
        for procs in cfg.sweep:
            if procs == cfg.processes:
                continue  # the max run already measured this
            spec = RunSpec(
                f"batch_take/flight/sweep{procs}",
                "batch_take",
                "flight",
                "closed",
                procs,
                threads,
                0.0,
                cfg.duration_s,
                cfg.warmup_s,
            )
            runner.run(spec, "sweep")


def _server_sweep(cfg: SuiteConfig, runner: _Runner, env: ClientEnv, root: str, out_dir: Path) -> None:
    """Batch takes, closed loop, against fresh servers with 1, 2, ... worker processes on the same
    files; client process ``i`` talks to worker ``i % workers`` (as endpoint-following clients do)."""
    main_scraper = runner.scraper
    spec = RunSpec(
        "",
        "batch_take",
        "flight",
        "closed",
        cfg.processes,
        SCENARIOS["batch_take"].threads,
        0.0,
        cfg.duration_s,
        cfg.warmup_s,
    )
    try:
        for workers in cfg.server_sweep:
            server = ServerProcess(root, workers=workers, log_path=out_dir / f"server-workers{workers}.log")
            try:
                runner.pool.release("batch_take", "flight")
                runner.pool.set_env(replace(env, target=server.location, targets=server.locations))
                runner.scraper = MetricsScraper(server.metrics_url)
                run = replace(spec, run_id=f"batch_take/flight/server-workers{workers}")
                runner.run(run, f"server x{workers}", server_workers=workers)
            finally:
                runner.pool.release("batch_take", "flight")
                server.stop()
    finally:
        runner.scraper = main_scraper
        runner.pool.set_env(env)


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(",") if x.strip())


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _names(text: str, known: Sequence[str], what: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [n for n in names if n not in known]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(bad)}; known: {', '.join(known)}")
    return names


def build_parser() -> argparse.ArgumentParser:
    """The suite's command-line flags."""
    p = argparse.ArgumentParser(
        prog="python -m loadtest",
        description="Latency load test of the lance-flight server (open and closed loop, HDR percentiles).",
    )
    p.add_argument("--quick", action="store_true", help="the quick preset (under a minute)")
    p.add_argument(
        "--target",
        default=os.environ.get("LOADTEST_TARGET"),
        help="grpc://host:port of a running server (default: start one here)",
    )
    p.add_argument("--token", default=os.environ.get("LOADTEST_TOKEN"), help="bearer token for --target")
    p.add_argument(
        "--metrics-url",
        default=None,
        help="the target's /metrics URL (default: scrape only a server started here)",
    )
    p.add_argument(
        "--out",
        default=os.environ.get("LOADTEST_OUT", "loadtest-results"),
        help="directory for report.json, report.md/html and plots (default ./loadtest-results)",
    )
    env_procs = os.environ.get("LOADTEST_PROCESSES")
    p.add_argument(
        "--processes",
        type=int,
        default=int(env_procs) if env_procs else None,
        help="client processes (quick 2, default 4)",
    )
    p.add_argument("--rows", type=int, default=None, help="rows of the datasets")
    p.add_argument("--duration", type=float, default=None, help="recorded seconds per run")
    p.add_argument("--warmup", type=float, default=None, help="unrecorded warm-up seconds per run")
    p.add_argument(
        "--fractions",
        type=_floats,
        default=None,
        help="open-loop rates as fractions of each scenario's closed-loop max, e.g. 0.5,0.9",
    )
    p.add_argument(
        "--rates",
        type=_floats,
        default=None,
        help="fixed open-loop rates (requests/s) for every scenario, instead of --fractions",
    )
    p.add_argument(
        "--sweep", type=_ints, default=None, help="client processes of the throughput sweep, e.g. 1,2,4"
    )
    p.add_argument(
        "--scenarios",
        type=lambda t: _names(t, list(SCENARIOS), "scenario"),
        default=None,
        help=f"subset of {','.join(SCENARIOS)}",
    )
    p.add_argument(
        "--arms", type=lambda t: _names(t, ARMS, "arm"), default=None, help=f"subset of {','.join(ARMS)}"
    )
    p.add_argument(
        "--compare",
        type=lambda t: _names(t, list(SCENARIOS), "scenario"),
        default=None,
        help="scenarios of the unloaded flight/engine/pylance comparison (default: all that have arms)",
    )
    p.add_argument(
        "--server-sweep",
        type=_ints,
        default=None,
        help="--workers of extra servers for the batch-take throughput sweep, e.g. 1,2 ('' = none)",
    )
    p.add_argument("--server-workers", type=int, default=None, help="--workers of the server started here")
    p.add_argument("--timeout", type=float, default=None, help="seconds per Flight call")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-run progress lines on stderr")
    return p


def config_from_args(args: argparse.Namespace) -> SuiteConfig:
    """The preset named by ``--quick`` with the flags given applied."""
    cfg = QUICK if args.quick else DEFAULT
    changes: dict[str, Any] = {}
    for flag, fld in (
        ("processes", "processes"),
        ("rows", "rows"),
        ("duration", "duration_s"),
        ("warmup", "warmup_s"),
        ("fractions", "fractions"),
        ("rates", "rates"),
        ("sweep", "sweep"),
        ("scenarios", "scenarios"),
        ("arms", "arms"),
        ("server_workers", "server_workers"),
        ("compare", "compare"),
        ("server_sweep", "server_sweep"),
        ("timeout", "timeout_s"),
    ):
        value = getattr(args, flag)
        if value is not None:
            changes[fld] = value
    cfg = replace(cfg, **changes)
    if cfg.processes < 1 or cfg.rows < 1000 or cfg.duration_s <= 0 or cfg.warmup_s < 0:
        raise SystemExit("need --processes >= 1, --rows >= 1000, --duration > 0, --warmup >= 0")
    if any(f <= 0 for f in cfg.fractions) or any(s < 1 for s in cfg.sweep):
        raise SystemExit("--fractions must be positive and --sweep process counts >= 1")
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite from the command line; print the summary table; 1 if any request failed."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    cfg = config_from_args(args)
    out = Path(args.out)
    if not args.quiet:
        where = args.target or "a server started here (lance-flight serve, local directory)"
        print(
            f"latency suite {cfg.name!r} against {where}; {cfg.processes} client processes, "
            f"{cfg.rows} rows; report -> {out}/",
            file=sys.stderr,
            flush=True,
        )
    doc = run_suite(
        cfg, out, target=args.target, token=args.token, metrics_url=args.metrics_url, verbose=not args.quiet
    )
    runs = [r for s in doc["scenarios"].values() for r in s["runs"]]
    print(summary_table(runs))
    errors = sum(r["error_count"] for r in runs)
    print(f"\n{len(runs)} runs in {doc['meta']['elapsed_s']}s; errors: {errors}; report: {out / 'report.md'}")
    return 1 if errors else 0
