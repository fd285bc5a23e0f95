"""Server start-up time: ``lance-flight serve`` to healthy and to ready, with an empty and a warm
kernel cache.

The server compiles the engine's kernels at start (:mod:`flight_server.workers`), so no request
pays the JIT time: ``/healthz`` answers while they compile, ``/readyz`` only once they are loaded.
Compiled code is cached on disk (``LANCE_FORMAT_KERNEL_CACHE_DIR``; the Helm chart points it at
the ``/tmp`` emptyDir), so the first start of a pod compiles and a restart loads.

Each round starts the real command line (``python -m flight_server.cli serve``) twice over one
fresh kernel cache directory: first empty (``cold``), then holding what the first start compiled
(``warm``), and prints for each the seconds from spawn to ``/healthz`` 200, to ``/readyz`` 200 and
to the first answered Flight call (the ``health`` action), and the compile time the server logged.
Rounds repeat because the machine's load moves the figures; the medians are printed last.

Run: ``python -m loadtest startup [--rounds 3] [--workers 1]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from flight_server.client import LanceFlightClient
from loadtest.load.server import free_port, serve_argv

__all__ = ["StartupTimes", "main", "start_once"]

#: Seconds a start may take: a cold compile on a loaded 2-core machine takes minutes.
START_TIMEOUT_S = 600.0
#: Seconds between polls of the side port (a finer poll would load the starting server).
POLL_S = 0.05


class StartupTimes(dict[str, float]):
    """Seconds from spawn to ``healthy``, ``ready`` and ``first_call``; ``compile`` as logged."""


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (urllib.error.URLError, OSError):
        return 0


def _logged_compile_seconds(log: Path) -> float:
    """The ``seconds`` of the server's ``kernels ready`` log line(s) (the largest, for workers)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if "kernels ready" not in line:
            continue
        try:
            found.append(float(json.loads(line)["seconds"]))
        except (ValueError, KeyError, TypeError):
            continue
    return max(found) if found else float("nan")


def start_once(root: str, cache_dir: str, log: Path, workers: int = 1) -> StartupTimes:
    """Start the server with kernel cache ``cache_dir``, time it to healthy, ready and a first
    call, and stop it (SIGTERM)."""
    port, metrics_port = free_port(workers), free_port()
    env = dict(os.environ, LANCE_FORMAT_KERNEL_CACHE_DIR=cache_dir)
    env.pop("NUMBA_CACHE_DIR", None)
    argv = serve_argv(root, port, metrics_port, workers, "INFO", ("--log-format", "json"))
    side = f"http://127.0.0.1:{metrics_port}"
    times = StartupTimes()
    with open(log, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            while "ready" not in times:
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited with {proc.returncode}; see {log}")
                if time.perf_counter() - start > START_TIMEOUT_S:
                    raise RuntimeError(f"server not ready after {START_TIMEOUT_S:.0f}s; see {log}")
                if "healthy" not in times and _status(side + "/healthz") == 200:
                    times["healthy"] = time.perf_counter() - start
                if "healthy" in times and _status(side + "/readyz") == 200:
                    times["ready"] = time.perf_counter() - start
                else:
                    time.sleep(POLL_S)
            client = LanceFlightClient(f"grpc://127.0.0.1:{port}", timeout=60)
            try:
                client.action("health", read=True)
            finally:
                client.close()
            times["first_call"] = time.perf_counter() - start
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    times["compile"] = _logged_compile_seconds(log)
    return times


def _row(label: str, t: StartupTimes) -> str:
    return (
        f"{label:6s} healthy {t['healthy']:7.2f} s  ready {t['ready']:7.2f} s  "
        f"first call {t['first_call']:7.2f} s  kernels compiled/loaded in {t['compile']:7.2f} s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest startup", description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="cold+warm pairs to run (default 3)")
    p.add_argument("--workers", type=int, default=1, help="--workers of the server (default 1)")
    args = p.parse_args(argv)
    results: dict[str, list[StartupTimes]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="lance-startup-") as tmp:
        root = os.path.join(tmp, "root")
        os.makedirs(root)
        for r in range(args.rounds):
            cache = os.path.join(tmp, f"kernels-{r}")  # empty: nothing compiled yet
            for label in ("cold", "warm"):
                t = start_once(root, cache, Path(tmp) / f"server-{r}-{label}.log", args.workers)
                results[label].append(t)
                print(f"round {r + 1}: {_row(label, t)}", flush=True)
    print(f"\nmedians over {args.rounds} rounds (--workers {args.workers}):")
    for label, runs in results.items():
        med = StartupTimes({k: statistics.median(t[k] for t in runs) for k in runs[0]})
        print(_row(label, med))
    return 0


if __name__ == "__main__":
    sys.exit(main())
