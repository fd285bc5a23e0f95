"""The server under test: ``lance-flight serve`` started by the load test, and its ``/metrics``.

Without ``--target`` the suite starts the real command line (``python -m flight_server.cli serve``,
what the ``lance-flight`` console script runs) on free ports over a local directory, the embedded
default, waits until ``/readyz`` answers 200, and stops it with SIGTERM (its graceful drain).

:class:`MetricsScraper` reads the Prometheus text of ``/metrics`` before and after each run; the
differences give the server's side of the run: calls by status, cache hits and misses (hit ratio),
object-store requests and bytes, commit conflicts.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["MetricsScraper", "ServerProcess", "free_port", "metrics_delta", "port_is_free", "serve_argv"]

#: Seconds the server may take to start (imports, first root probe) on a loaded machine.
START_TIMEOUT_S = 60.0
#: Seconds SIGTERM's drain may take before the server is killed.
STOP_TIMEOUT_S = 15.0
#: Seconds one scrape of /metrics may take (a scrape must never stall the run's bookkeeping).
SCRAPE_TIMEOUT_S = 5.0


def free_port(count: int = 1) -> int:
    """The first of ``count`` consecutive TCP ports free on loopback right now."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = int(s.getsockname()[1])
        if first + count - 1 <= 65535 and all(port_is_free(first + k) for k in range(1, count)):
            return first
    raise RuntimeError(f"found no {count} consecutive free ports")


def serve_argv(
    root: str, port: int, metrics_port: int, workers: int, log_level: str, extra_args: Sequence[str] = ()
) -> list[str]:
    """The command line of ``lance-flight serve`` (as the console script runs it) on loopback ports."""
    return [
        sys.executable,
        "-m",
        "flight_server.cli",
        "serve",
        "--root",
        root,
        "--port",
        str(port),
        "--metrics-port",
        str(metrics_port),
        "--workers",
        str(workers),
        "--log-level",
        log_level,
        *extra_args,
    ]


def port_is_free(port: int) -> bool:
    """Whether ``port`` can be bound on loopback right now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class ServerProcess:
    """``lance-flight serve`` in a child process.

    Parameters
    ----------
    root:
        The directory it serves (created if missing).
    workers:
        ``--workers``.
    log_path:
        Where its output goes (per-call logs are at WARNING, so mostly start and stop lines).
    extra_args:
        More flags for ``serve``.
    address_space:
        Bytes of virtual memory the server may map (``RLIMIT_AS``), for runs that attack it.
    """

    def __init__(
        self,
        root: str,
        *,
        workers: int = 1,
        log_path: Path,
        extra_args: Sequence[str] = (),
        address_space: int | None = None,
    ) -> None:
        self.root = root
        self.port = free_port(workers)  # worker k listens on port + k
        self.metrics_port = free_port()
        self.location = f"grpc://127.0.0.1:{self.port}"
        self.locations = tuple(f"grpc://127.0.0.1:{self.port + k}" for k in range(workers))
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        argv = serve_argv(root, self.port, self.metrics_port, workers, "WARNING", extra_args)
        self._log: IO[bytes] = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
            preexec_fn=None if address_space is None else _address_space_cap(address_space),
        )
        self.log_path = log_path
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        url = f"http://127.0.0.1:{self.metrics_port}/readyz"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"lance-flight serve exited with {self.proc.returncode}; log:\n{self._tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=1.0) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"lance-flight serve not ready after {START_TIMEOUT_S:.0f}s; log:\n{self._tail()}")

    def _tail(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-2000:]

    def stop(self) -> int | None:
        """SIGTERM (graceful drain), then SIGKILL if it lingers; the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode


def _address_space_cap(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _parse(text: str) -> dict[str, float]:
    """``name{label="v",...}`` -> value of every sample (``_created`` timestamps dropped)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return out


class MetricsScraper:
    """Snapshots of a server's ``/metrics`` (``url`` ``None``: scraping off, snapshots empty)."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.failures = 0

    def snapshot(self) -> dict[str, float]:
        """Every sample now; empty when scraping is off or the scrape failed (counted)."""
        if not self.url:
            return {}
        try:
            with urllib.request.urlopen(self.url, timeout=SCRAPE_TIMEOUT_S) as r:
                return _parse(r.read().decode())
        except (urllib.error.URLError, OSError, ValueError):
            self.failures += 1
            return {}


def _sum(d: dict[str, float], prefix: str, label: str = "") -> float:
    return sum(v for k, v in d.items() if k.startswith(prefix) and label in k)


def metrics_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The server's side of a run from two snapshots: empty when either is missing.

    Returns
    -------
    dict
        ``cache_hit_ratio`` (per cache, over the run's lookups; ``None`` with no lookups),
        ``cache_hits`` / ``cache_misses``, ``object_store_requests``, ``object_store_bytes``,
        ``commit_conflicts``, ``rpcs`` (calls by ``method/status``), ``rows_served``.
    """
    if not before or not after:
        return {}

    def delta(prefix: str, label: str = "") -> float:
        return _sum(after, prefix, label) - _sum(before, prefix, label)

    caches = sorted(
        {k.split('cache="')[1].split('"')[0] for k in after if k.startswith("lance_flight_cache_hits_total")}
    )
    ratio: dict[str, float | None] = {}
    hits: dict[str, int] = {}
    misses: dict[str, int] = {}
    for cache in caches:
        label = f'cache="{cache}"'
        h = delta("lance_flight_cache_hits_total", label)
        m = delta("lance_flight_cache_misses_total", label)
        hits[cache], misses[cache] = int(h), int(m)
        ratio[cache] = h / (h + m) if h + m > 0 else None
    rpcs: dict[str, int] = {}
    for key, value in after.items():
        if key.startswith("lance_flight_rpcs_total{"):
            n = int(value - before.get(key, 0.0))
            if n:
                labels = dict(part.split("=", 1) for part in key[key.index("{") + 1 : -1].split(","))
                rpcs[f"{labels['method'].strip(chr(34))}/{labels['status'].strip(chr(34))}"] = n
    return {
        "cache_hit_ratio": ratio,
        "cache_hits": hits,
        "cache_misses": misses,
        "object_store_requests": int(delta("lance_flight_object_store_requests_total")),
        "object_store_bytes": int(delta("lance_flight_object_store_bytes_total")),
        "commit_conflicts": int(delta("lance_flight_commit_conflicts_total")),
        "rows_served": int(delta("lance_flight_rows_served_total")),
        "rpcs": rpcs,
    }
