"""Open-loop and closed-loop request drivers inside one client process.

**Open loop** (``mode="open"``): requests are due at a fixed rate. Process ``p`` of ``P`` owns
every ``P``-th slot of the global schedule, so the processes together offer exactly ``rate``
requests per second. Each request's latency runs from its *intended* send time, not from when a
thread got round to sending it: when the server stalls, the requests that pile up carry the stall
in their latency (no coordinated omission). Requests still unsent when the run ends (all threads
stuck in slow calls) are counted as ``unsent`` and recorded with their lower-bound latency (end of
run minus intended time), so even a server that stops answering shows up in the tail.

**Closed loop** (``mode="closed"``): every thread sends its next request as soon as the previous
one returns; throughput is the maximum this many concurrent callers get, latency is per call.

Only requests due (open) or started (closed) after the warm-up are recorded.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from flight_server.errors import status_of as wire_status
from loadtest.load.hdr import LatencyHistogram
from loadtest.load.scenarios import Session

__all__ = ["ProcessResult", "RunSpec", "merge_errors", "run_threads", "status_of"]

Mode = Literal["open", "closed"]


@dataclass(frozen=True)
class RunSpec:
    """One measured run, as every taking-part client process receives it.

    Attributes
    ----------
    run_id:
        Unique name in the report.
    scenario, arm, mode:
        What runs, where, and how (see the module docstring).
    processes, threads:
        Client processes taking part and threads in each (open loop: the most requests one
        process keeps in flight).
    rate:
        Open loop: requests per second offered by all processes together.
    duration_s, warmup_s:
        Recorded window, after an unrecorded warm-up at the same load.
    """

    run_id: str
    scenario: str
    arm: str
    mode: Mode
    processes: int
    threads: int
    rate: float
    duration_s: float
    warmup_s: float


@dataclass
class ProcessResult:
    """What one process measured in one run."""

    hist: str = ""  # LatencyHistogram.encode()
    ok: int = 0
    rows: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    unsent: int = 0
    error_samples: list[str] = field(default_factory=list)


#: Longest sleep between checks while waiting for a slot, so a thread notices the run's end.
_MAX_SLEEP_S = 0.05
#: Distinct error messages kept per process, for the report (the counts keep everything).
_ERROR_SAMPLES = 3


def status_of(exc: BaseException) -> str:
    """The gRPC status name of a failed call (the exception class name for local arms' errors).

    The server's metrics and call log use the same table (:func:`flight_server.errors.status_of`).
    """
    return wire_status(exc, default="") or type(exc).__name__


class _Recorder:
    """Per-thread histogram and counts (merged at the end, so threads never share a lock)."""

    def __init__(self) -> None:
        self.hist = LatencyHistogram()
        self.ok = 0
        self.rows = 0
        self.errors: Counter[str] = Counter()
        self.unsent = 0
        self.samples: list[str] = []

    def failed(self, exc: BaseException, record: bool) -> None:
        if not record:
            return
        status = status_of(exc)
        self.errors[status] += 1
        if len(self.samples) < _ERROR_SAMPLES:
            self.samples.append(f"{status}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")

    def call(self, session: Session, rng: np.random.Generator, since: float, record: bool) -> None:
        """Make one call; when ``record``, count it and its latency measured from ``since``."""
        try:
            rows = session.call(rng)
        except Exception as exc:
            self.failed(exc, record)
            return
        if record:
            self.hist.record(time.perf_counter() - since)
            self.ok += 1
            self.rows += rows


def _open_loop(
    spec: RunSpec, index: int, sessions: Sequence[Session], seed: int, t0: float
) -> list[_Recorder]:
    gap = spec.processes / spec.rate  # seconds between this process's slots
    phase = index / spec.rate  # processes interleave their slots
    record_from = t0 + spec.warmup_s
    end = record_from + spec.duration_s
    lock = threading.Lock()
    next_slot = [0]
    recorders = [_Recorder() for _ in sessions]

    def worker(i: int) -> None:
        rec, session = recorders[i], sessions[i]
        rng = np.random.default_rng((seed, i))
        while True:
            with lock:
                slot = next_slot[0]
                next_slot[0] += 1
            intended = t0 + phase + slot * gap
            if intended >= end:
                return
            while (now := time.perf_counter()) < intended:
                time.sleep(min(intended - now, _MAX_SLEEP_S))
            record = intended >= record_from
            if now >= end:  # due, but every thread was busy until the run ended
                if record:
                    rec.unsent += 1
                    rec.hist.record(now - intended)
                continue
            rec.call(session, rng, intended, record)

    _run_all(worker, len(sessions))
    return recorders


def _closed_loop(spec: RunSpec, sessions: Sequence[Session], seed: int, t0: float) -> list[_Recorder]:
    record_from = t0 + spec.warmup_s
    end = record_from + spec.duration_s
    recorders = [_Recorder() for _ in sessions]

    def worker(i: int) -> None:
        rec, session = recorders[i], sessions[i]
        rng = np.random.default_rng((seed, i))
        while (start := time.perf_counter()) < end:
            rec.call(session, rng, start, start >= record_from)

    _run_all(worker, len(sessions))
    return recorders


def _run_all(worker: Callable[[int], None], n: int) -> None:
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_threads(
    spec: RunSpec, index: int, sessions: Sequence[Session], *, seed: int, start_at: float
) -> ProcessResult:
    """Run this process's share of ``spec`` with one thread per session, from wall time ``start_at``.

    Parameters
    ----------
    spec:
        The run.
    index:
        This process's number among the ``spec.processes`` taking part.
    sessions:
        One per thread (``spec.threads`` of them).
    seed:
        Seeds the random row offsets (distinct per process).
    start_at:
        ``time.time()`` at which all processes start, so their schedules line up.
    """
    if spec.mode == "open" and spec.rate <= 0:
        raise ValueError("an open-loop run needs a positive rate")
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    t0 = time.perf_counter()
    if spec.mode == "open":
        recorders = _open_loop(spec, index, sessions, seed, t0)
    else:
        recorders = _closed_loop(spec, sessions, seed, t0)
    errors, samples = merge_errors((r.errors, r.samples) for r in recorders)
    return ProcessResult(
        hist=LatencyHistogram.merged(r.hist for r in recorders).encode(),
        ok=sum(r.ok for r in recorders),
        rows=sum(r.rows for r in recorders),
        errors=errors,
        unsent=sum(r.unsent for r in recorders),
        error_samples=samples,
    )


def merge_errors(
    parts: Iterable[tuple[Mapping[str, int], Sequence[str]]],
) -> tuple[dict[str, int], list[str]]:
    """Summed error counts by status and the first distinct messages (at most a few) of several
    threads' or processes' ``(counts, samples)``."""
    errors: Counter[str] = Counter()
    samples: list[str] = []
    for counts, part_samples in parts:
        errors.update(counts)
        samples += [s for s in part_samples if s not in samples]
    return dict(errors), samples[:_ERROR_SAMPLES]
