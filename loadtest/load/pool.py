"""Client processes that run the load, and the merge of what they measured.

Python Flight calls hold the GIL for their (de)serialisation, so one client process cannot offer
much load: the pool spreads each run over several processes (``spawn``ed, so no forked gRPC
state). The processes live for the whole suite and keep their sessions (connections, open
datasets) between runs; a run is prepared everywhere first (sessions opened) and then started at
one shared wall-clock instant, so slow set-up never eats into the measured window.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from loadtest.load.generator import ProcessResult, RunSpec, merge_errors, run_threads
from loadtest.load.hdr import LatencyHistogram
from loadtest.load.scenarios import ClientEnv, Session, open_session

__all__ = ["ClientPool", "RunResult"]

#: Seconds a client process may take to start (spawn + import pyarrow) or to open its sessions.
START_TIMEOUT_S = 120.0
#: Lead between "go" and the shared start instant: every process is waiting on it by then.
START_LEAD_S = 0.1
#: What client processes import at start: the Flight client and the in-process arms' engines.
PRELOAD = ("flight_server.client", "lance_format", "lance")
#: How often a wait for the clients checks that none has died.
_POLL_S = 1.0


@dataclass
class RunResult:
    """A run's merged measurements over all its processes."""

    spec: RunSpec
    hist: LatencyHistogram
    ok: int = 0
    rows: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    unsent: int = 0
    error_samples: list[str] = field(default_factory=list)

    @property
    def error_count(self) -> int:
        """Failed requests (all statuses)."""
        return sum(self.errors.values())

    @property
    def throughput(self) -> float:
        """Successful requests per second over the recorded window."""
        return self.ok / self.spec.duration_s

    @property
    def rows_per_s(self) -> float:
        """Rows read or written per second over the recorded window."""
        return self.rows / self.spec.duration_s

    @property
    def offered_rate(self) -> float | None:
        """Requests per second offered (open loop); ``None`` for closed loop."""
        return self.spec.rate if self.spec.mode == "open" else None


def _client_main(index: int, preload: tuple[str, ...], inbox: Any, outbox: Any) -> None:
    """A client process: import, learn the environment, then prepare sessions, run, report."""
    import importlib

    for module in preload:  # while the coordinator starts the server and writes the datasets
        with contextlib.suppress(ImportError):  # a missing arm fails in its runs, with a reason
            importlib.import_module(module)
    sessions: dict[tuple[str, str], list[Session]] = {}
    outbox.put(("started", index, None))
    env: ClientEnv | None = None
    while True:
        msg = inbox.get()
        if msg[0] == "stop":
            break
        if msg[0] == "env":
            env = msg[1].for_process(index)
            continue
        if msg[0] == "release":
            _close_all(sessions.pop(msg[1], []))
            continue
        spec: RunSpec = msg[1]
        key = (spec.scenario, spec.arm)
        if msg[0] == "prepare":
            try:
                if env is None:
                    raise RuntimeError("no environment: ClientPool.start(env) first")
                have = sessions.setdefault(key, [])
                fresh = [open_session(spec.scenario, spec.arm, env) for _ in range(spec.threads - len(have))]
                _prime(fresh)
                have += fresh
                outbox.put(("prepared", index, None))
            except Exception as exc:
                outbox.put(("prepared", index, f"{type(exc).__name__}: {exc}"))
        elif msg[0] == "go":
            seed = zlib.crc32(f"{spec.run_id}/{index}".encode())
            result = run_threads(spec, index, sessions[key][: spec.threads], seed=seed, start_at=msg[2])
            outbox.put(("result", index, asdict(result)))
    for group in sessions.values():
        _close_all(group)


def _prime(sessions: Sequence[Session]) -> None:
    """One call per new session, all at once: connections, imports and opened datasets are set up
    here, not in the first (possibly short) measured window."""

    def call(i: int) -> None:
        with contextlib.suppress(Exception):  # a failing call fails in the run too, and is counted
            sessions[i].call(np.random.default_rng(i))

    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(len(sessions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _close_all(sessions: Sequence[Session]) -> None:
    for s in sessions:
        with contextlib.suppress(Exception):  # closing: nothing left to report a failure to
            s.close()


class ClientPool:
    """``processes`` client processes serving runs.

    Parameters
    ----------
    processes:
        How many processes (a run may use fewer).
    preload:
        Modules the processes import as soon as they start (the arms' libraries), so that work
        overlaps the server's start; :meth:`start` then hands them the environment.
    """

    def __init__(self, processes: int, preload: Sequence[str] = PRELOAD) -> None:
        if processes < 1:
            raise ValueError("the pool needs at least one process")
        ctx = multiprocessing.get_context("spawn")
        self.env: ClientEnv | None = None
        self._closed = False
        self._outbox: Any = ctx.Queue()
        self._inboxes: list[Any] = [ctx.Queue() for _ in range(processes)]
        self._procs = [
            ctx.Process(
                target=_client_main, args=(i, tuple(preload), self._inboxes[i], self._outbox), daemon=True
            )
            for i in range(processes)
        ]
        for p in self._procs:
            p.start()

    def start(self, env: ClientEnv) -> None:
        """Wait until every process is up; give them ``env`` (where the server and data are)."""
        self._collect("started", self.size, START_TIMEOUT_S)
        self.set_env(env)

    def set_env(self, env: ClientEnv) -> None:
        """Point the processes at another server (release the sessions of the old one first)."""
        self.env = env
        for inbox in self._inboxes:
            inbox.put(("env", env))

    @property
    def size(self) -> int:
        """Number of client processes."""
        return len(self._procs)

    def _collect(self, kind: str, n: int, timeout: float) -> dict[int, Any]:
        out: dict[int, Any] = {}
        deadline = time.monotonic() + timeout
        while len(out) < n:
            try:
                msg = self._outbox.get(timeout=_POLL_S)
            except queue.Empty:
                dead = [i for i, p in enumerate(self._procs) if not p.is_alive()]
                if dead or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"client processes did not answer {kind!r} "
                        f"(dead: {dead}, waited up to {timeout:.0f}s)"
                    ) from None
                continue
            if msg[0] == kind:
                out[msg[1]] = msg[2]
        return out

    def run(self, spec: RunSpec) -> RunResult:
        """Run ``spec`` on the first ``spec.processes`` processes; their merged result."""
        if self.env is None:
            raise RuntimeError("ClientPool.start(env) must come before run()")
        if not 1 <= spec.processes <= self.size:
            raise ValueError(f"a run needs 1..{self.size} processes, got {spec.processes}")
        taking_part = range(spec.processes)
        for i in taking_part:
            self._inboxes[i].put(("prepare", spec))
        problems = [p for p in self._collect("prepared", spec.processes, START_TIMEOUT_S).values() if p]
        if problems:
            return RunResult(
                spec, LatencyHistogram(), errors={"SETUP": len(problems)}, error_samples=problems[:3]
            )
        start_at = time.time() + START_LEAD_S
        for i in taking_part:
            self._inboxes[i].put(("go", spec, start_at))
        wait = START_LEAD_S + spec.warmup_s + spec.duration_s + self.env.timeout_s + 30.0
        parts = [ProcessResult(**r) for r in self._collect("result", spec.processes, wait).values()]
        errors, samples = merge_errors((p.errors, p.error_samples) for p in parts)
        return RunResult(
            spec,
            LatencyHistogram.merged(LatencyHistogram.decode(p.hist) for p in parts),
            ok=sum(p.ok for p in parts),
            rows=sum(p.rows for p in parts),
            errors=errors,
            unsent=sum(p.unsent for p in parts),
            error_samples=samples,
        )

    def release(self, scenario: str, arm: str) -> None:
        """Close the sessions of ``scenario`` on ``arm`` (open streams hold server resources)."""
        for inbox in self._inboxes:
            inbox.put(("release", (scenario, arm)))

    def close(self) -> None:
        """Stop the processes, closing their sessions (terminating any that linger); idempotent."""
        if self._closed:
            return
        self._closed = True
        for inbox in self._inboxes:
            inbox.put(("stop",))
        for p in self._procs:
            p.join(10)
            if p.is_alive():
                p.terminate()
                p.join(5)

    def __enter__(self) -> ClientPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
