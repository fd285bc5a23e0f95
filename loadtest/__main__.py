"""``python -m loadtest [<benchmark>] [options]``: dispatch to one benchmark module (default: ``latency``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

#: Benchmark name -> (module with a ``main(argv) -> int``, what it measures). Modules are imported
#: only when run, so one benchmark's optional dependencies (PySpark, matplotlib) do not burden another.
BENCHMARKS: dict[str, tuple[str, str]] = {
    "latency": (
        "loadtest.load.suite",
        "the default: latency suite (open/closed loop, HDR percentiles, report + plots)",
    ),
    "file": (
        "loadtest.bench_file",
        "Lance file reader: read-all throughput and take latency, ours vs pylance",
    ),
    "spark": (
        "loadtest.bench_spark",
        "Spark data source: rows/s read and written, vs a bare-Flight floor and Parquet",
    ),
    "scancpu": (
        "loadtest.bench_scan_cpu",
        "server CPU ns/row of a cold (nocache) full Flight scan of the Spark table (holds when busy)",
    ),
    "dataset": (
        "loadtest.bench_dataset",
        "Dataset takes, scans, cold opens on local disk and loopback S3, vs pylance",
    ),
    "write": (
        "loadtest.bench_write",
        "Lance file writer at 2.1/2.2: file sizes and write throughput, ours vs pylance",
    ),
    "flight": (
        "loadtest.bench_flight",
        "Flight take 1/100 vs pylance in-process, Flight scan vs a bare Flight stream",
    ),
    "workers": (
        "loadtest.bench_workers",
        "Flight server throughput with --workers 1 vs 2 under small takes",
    ),
    "startup": (
        "loadtest.bench_startup",
        "server start-up to healthy / ready / first call, empty vs warm kernel cache",
    ),
    "attack": (
        "loadtest.bench_attack",
        "a victim's small-take p50/p99 under each attack (unread streams, big takes, ...) vs alone",
    ),
}


def _run(name: str, argv: Sequence[str]) -> int:
    module = importlib.import_module(BENCHMARKS[name][0])
    return int(module.main(argv))


def usage() -> str:
    lines = ["usage: python -m loadtest [<benchmark>] [options]", "", "benchmarks:"]
    lines += [f"  {name:8s} {doc}" for name, (_, doc) in BENCHMARKS.items()]
    lines += ["", "`python -m loadtest <benchmark> --help` lists a benchmark's options."]
    lines += [
        "Without a benchmark (`python -m loadtest [--quick] [--target URI] [--out DIR]`) the latency",
        "suite runs against a server it starts itself; `python -m loadtest latency --help` lists its flags.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(usage())
        return 0
    if not args or args[0].startswith("-"):
        args = ["latency", *args]  # no benchmark named: the default latency suite
    name, rest = args[0], args[1:]
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    return _run(name, rest)


if __name__ == "__main__":
    sys.exit(main())
