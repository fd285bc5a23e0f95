"""``python -m loadtest <benchmark> [options]``: dispatch to one benchmark module."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence


def _file(argv: Sequence[str]) -> int:
    from loadtest.bench_file import main

    return main(argv)


BENCHMARKS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "file": (_file, "Lance file reader: read-all throughput and take latency, ours vs pylance"),
}


def usage() -> str:
    lines = ["usage: python -m loadtest <benchmark> [options]", "", "benchmarks:"]
    lines += [f"  {name:8s} {doc}" for name, (_, doc) in BENCHMARKS.items()]
    lines += ["", "`python -m loadtest <benchmark> --help` lists a benchmark's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    return BENCHMARKS[name][0](rest)


if __name__ == "__main__":
    sys.exit(main())
