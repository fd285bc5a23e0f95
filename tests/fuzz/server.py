"""The server under fuzz: ``lance-flight serve`` in a subprocess with a hard memory cap, and its data.

The process gets ``RLIMIT_AS`` (address space) so a request that makes memory grow without bound
fails inside the server instead of taking the machine down, and small caches so its resident size
says something about per-request memory. :func:`populate` writes the fixture datasets through the
protocol itself.
"""

from __future__ import annotations

import contextlib
import functools
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pyarrow.substrait as ps

from flight_server.client import LanceFlightClient
from loadtest.load.server import free_port
from tests.fuzz.generate import Context, DatasetInfo

__all__ = ["FuzzServer", "ServerLimits", "bound_datasets", "memory_report", "populate", "rss_bytes"]

#: Seconds ``serve`` may take to answer its first call on a loaded 2-core machine (its imports
#: alone took ~20 s with nine agents sharing two cores).
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ServerLimits:
    """Memory limits of the server under fuzz.

    ``address_space`` is the kernel cap (RLIMIT_AS): gRPC, Arrow and Python reserve far more virtual
    memory than they touch, so it sits well above ``rss_budget``, the resident size the checker
    holds the server to after every call.
    """

    address_space: int = 6 << 30
    rss_budget: int = 1536 << 20
    cache_bytes: int = 32 << 20


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


class FuzzServer:
    """``python -m flight_server.cli serve`` over a fresh temporary root, one worker."""

    def __init__(self, limits: ServerLimits, base: Path | None = None) -> None:
        self.limits = limits
        self.base = Path(tempfile.mkdtemp(prefix="lance-fuzz-", dir=base))
        self.root = self.base / "root"
        self.root.mkdir()
        # A file next to the root: no request may ever delete or reveal it.
        self.canary = self.base / "canary.lance"
        self.canary.write_bytes(b"canary")
        self.port = free_port()
        self.location = f"grpc://127.0.0.1:{self.port}"
        self.log_path = self.base / "server.log"
        cache = str(limits.cache_bytes)
        argv = [
            sys.executable,
            "-m",
            "flight_server.cli",
            "serve",
            "--root",
            str(self.root),
            "--port",
            str(self.port),
            "--metrics-port",
            "-1",
            "--workers",
            "1",
            "--log-level",
            "ERROR",
            "--page-cache-bytes",
            cache,
            "--metadata-cache-bytes",
            cache,
            "--decoded-cache-bytes",
            cache,
            "--batch-cache-bytes",
            cache,
        ]
        cap = limits.address_space

        def set_cap() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=set_cap, cwd=self.base
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        client = flight.FlightClient(self.location)
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_tail()}")
                try:
                    list(client.list_actions(flight.FlightCallOptions(timeout=2.0)))
                    return
                except flight.FlightError:
                    time.sleep(0.2)
        finally:
            client.close()
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"server not ready after {START_TIMEOUT_S:.0f}s:\n{tail}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_exit(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the process to exit (returns early if it does)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(seconds)

    def rss(self) -> int:
        return rss_bytes(self.proc.pid)

    def log_tail(self, n: int = 3000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-n:]

    def stop(self) -> None:
        """Stop the server and delete its root."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()
        shutil.rmtree(self.base, ignore_errors=True)


@functools.cache
def _fixture_tables() -> dict[str, list[pa.Table]]:
    rng = np.random.default_rng(14)

    def rows(lo: int, n: int) -> pa.Table:
        ids = np.arange(lo, lo + n, dtype=np.int64)
        return pa.table(
            {
                "id": ids,
                "s": pa.array([f"v{i % 50}" for i in range(lo, lo + n)]),
                "f": rng.random(n),
                "v": pa.array([[int(i), int(i) + 1] for i in ids], pa.list_(pa.int32())),
                "st": pa.StructArray.from_arrays(
                    [pa.array(ids.astype(np.int32)), pa.array([str(i) for i in ids])], names=["a", "b"]
                ),
            }
        )

    wide = pa.table({f"c{i}": np.arange(8, dtype=np.int32) + i for i in range(300)})
    return {
        "t0": [rows(0, 400), rows(400, 300), rows(700, 300)],
        "t1": [rows(0, 200), rows(200, 50)],
        "wide": [wide],
    }


#: Fragments a fixture dataset's latest version may reach before :func:`bound_datasets` rewrites
#: it: every append adds one (the ``wide`` one has 300 columns), and whole-dataset work (compaction,
#: scans) grows with fragments x columns; past ~20 fragments of ``wide`` a compaction needs more
#: than a fuzz call's 30 s on a loaded 2-core machine, which is the engine's speed, not a finding.
MAX_FIXTURE_FRAGMENTS = 16


def bound_datasets(location: str) -> int:
    """Rewrite each fixture dataset that drifted from what the generator knows; how many were.

    A dataset whose latest version has grown past :data:`MAX_FIXTURE_FRAGMENTS`, whose schema is
    no longer the fixture's (an overwrite with random columns) or that was dropped is written again
    with its fixture rows (overwrite keeps history and tags). Long runs append to the fixtures
    thousands of times, drop and replace them: this keeps them the small datasets the checker's
    per-call time limit assumes, and keeps the generator's columns and compiled filters meaningful,
    while the calls still see every kind of history.
    """
    rewritten = 0
    with LanceFlightClient(location, timeout=60.0) as client:
        for name, parts in _fixture_tables().items():
            mode = "overwrite"
            try:
                small = int(client.stats(name)["fragments"]) <= MAX_FIXTURE_FRAGMENTS
                if small and client.schema(name).equals(parts[0].schema):
                    continue
            except pa.ArrowKeyError:
                mode = "create"  # NOT_FOUND: dropped
            except (flight.FlightError, pa.ArrowException):
                pass  # unreadable: overwrite it
            try:
                client.write(name, pa.concat_tables(parts), mode=mode)
                rewritten += 1
            except (flight.FlightError, pa.ArrowException):
                pass  # e.g. a concurrent change: the next check tries again
    return rewritten


#: ``cache_stats`` counters :func:`memory_report` prints, in MiB when they are bytes.
_MEMORY_FIELDS = (
    ("metadata", "metadata_bytes"),
    ("page", "page_bytes"),
    ("decoded", "decoded_bytes"),
    ("batch", "batch_bytes"),
    ("plan", "plan_bytes"),
    ("arrow", "memory_arrow_bytes"),
    ("arrow_peak", "memory_arrow_peak_bytes"),
    ("heap", "memory_heap_bytes"),
    ("heap_free", "memory_heap_free_bytes"),
)


def memory_report(location: str) -> str:
    """What holds the server's memory, from its ``cache_stats`` action, on one line ("" when the
    server does not answer): a long run prints it with its progress so growth can be attributed."""
    try:
        with LanceFlightClient(location, timeout=20.0) as client:
            stats = client.cache_stats()
    except (flight.FlightError, pa.ArrowException, OSError):
        return ""
    parts = [f"{name}={stats.get(key, 0) / 2**20:.0f}MiB" for name, key in _MEMORY_FIELDS]
    parts += [
        f"decoded_entries={stats.get('decoded_entries', 0)}",
        f"handles={stats.get('memory_dataset_handles', 0)}",
        f"stores={stats.get('memory_object_stores', 0)}",
        f"files={stats.get('memory_open_files', 0)}",
        f"arenas={stats.get('memory_heap_arenas', 0)}",
    ]
    return "memory: " + " ".join(parts)


def populate(location: str, canary: str) -> Context:
    """Write the fixture datasets through ``location`` and describe them for the generator."""
    datasets: dict[str, DatasetInfo] = {}
    with LanceFlightClient(location, timeout=60.0) as client:
        for name, parts in _fixture_tables().items():
            for i, table in enumerate(parts):
                client.write(name, table, mode="create" if i == 0 else "append")
            schema = parts[0].schema
            tags: tuple[str, ...] = ()
            if name == "t0":
                client.delete(name, "id < 5")
                client.create_tag(name, "stable", 1)
                tags = ("stable",)
            staged = client.stage(name, parts[0].slice(0, 10))
            versions = len(client.versions(name))
            rows = int(client.stats(name)["rows"])
            frags = int(client.stats(name)["fragments"])
            full = schema.append(pa.field("_rowid", pa.uint64())).append(pa.field("_rowaddr", pa.uint64()))
            substrait = tuple(bytes(ps.serialize_expressions([e], ["f"], full)) for e in _filters(schema))
            datasets[name] = DatasetInfo(schema, versions, rows, frags, tags, substrait)
            staged_docs = staged.fragments
        client.create("empty", pa.schema([("id", pa.int64()), ("s", pa.string())]))
        datasets["empty"] = DatasetInfo(pa.schema([("id", pa.int64()), ("s", pa.string())]), 1, 0, 0)
        actions = tuple(a.type for a in flight.FlightClient(location).list_actions())
    ctx = Context(datasets, actions=actions, canary=canary)
    ctx.remember_staged(staged_docs)
    return ctx


def _filters(schema: pa.Schema) -> list[pc.Expression]:
    names = schema.names
    out = []
    if "id" in names:
        out += [pc.field("id") > 10, pc.field("id") == 3]
    if "s" in names:
        out += [pc.field("s") == "v1"]
        if "id" in names:
            out.append((pc.field("s") == "v1") & (pc.field("id") < 100))
    if "f" in names:
        out.append(pc.field("f") < 0.5)
    if "c0" in names:
        out.append(pc.field("c0") >= 3)
    out.append(pc.field("_rowid") < pa.scalar(20, pa.uint64()))
    return out
