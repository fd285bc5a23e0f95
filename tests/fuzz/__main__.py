"""``python -m tests.fuzz [--calls N] [--seed S] [--minutes M]``: the long fuzz run.

Prints each distinct failure when found (status, message, the call as a readable message and as
Python that resends it), shrinks them at the end on a fresh server, and exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tests.fuzz.runner import run_fuzz
from tests.fuzz.server import ServerLimits


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--calls", type=int, default=100_000, help="calls to send (default 100000)")
    parser.add_argument("--seed", type=int, default=14, help="generator seed (default 14)")
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long")
    parser.add_argument(
        "--rss-mib", type=int, default=ServerLimits.rss_budget >> 20, help="server RSS budget"
    )
    parser.add_argument("--as-gib", type=float, default=ServerLimits.address_space / 2**30, help="RLIMIT_AS")
    parser.add_argument("--no-shrink", action="store_true", help="report failures as found, unshrunk")
    args = parser.parse_args(argv)
    if args.calls <= 0:
        parser.error("--calls must be positive")
    limits = ServerLimits(address_space=int(args.as_gib * 2**30), rss_budget=args.rss_mib << 20)
    report = run_fuzz(
        args.calls,
        args.seed,
        limits=limits,
        max_seconds=args.minutes * 60 if args.minutes else None,
        shrink_failures=not args.no_shrink,
    )
    print(report.summary())
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
