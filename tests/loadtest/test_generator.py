"""The load generator's accounting: HDR merges, open loop without coordinated omission, errors."""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow.flight as flight
import pytest

from loadtest.load.generator import RunSpec, run_threads, status_of
from loadtest.load.hdr import LatencyHistogram
from loadtest.load.scenarios import Session


def test_merged_histograms_give_the_percentiles_of_all_samples() -> None:
    rng = np.random.default_rng(0)
    samples = rng.exponential(0.01, 20_000)
    parts = [LatencyHistogram() for _ in range(4)]
    for i, s in enumerate(samples):
        parts[i % 4].record(float(s))
    merged = LatencyHistogram.merged(LatencyHistogram.decode(p.encode()) for p in parts)
    assert merged.count == len(samples)
    for q in (50.0, 90.0, 99.0, 99.9):
        exact = float(np.percentile(samples, q)) * 1e3
        assert merged.percentile_ms(q) == pytest.approx(exact, rel=0.01, abs=0.002)
    assert merged.max_ms() == pytest.approx(float(samples.max()) * 1e3, rel=0.001)
    assert LatencyHistogram.decode("").count == 0


def _spec(mode: str, rate: float, duration: float, threads: int = 1) -> RunSpec:
    return RunSpec("t", "point_take", "flight", mode, 1, threads, rate, duration, 0.0)  # type: ignore[arg-type]


def test_open_loop_charges_a_stall_to_every_request_queued_behind_it() -> None:
    """One 300 ms stall at 100 req/s: about 30 requests wait, so p90 is far above the service time.

    A closed-loop or send-time-based measurement would record the stall once (p90 ~ 1 ms).
    """
    calls = [0]

    def call(rng: np.random.Generator) -> int:
        calls[0] += 1
        time.sleep(0.3 if calls[0] == 10 else 0.001)
        return 1

    result = run_threads(
        _spec("open", 100.0, 1.0), 0, [Session(call, lambda: None)], seed=0, start_at=time.time()
    )
    hist = LatencyHistogram.decode(result.hist)
    assert hist.count == pytest.approx(100, abs=3)  # every slot recorded, none skipped
    assert result.errors == {}
    assert hist.percentile_ms(90) > 50.0
    assert hist.max_ms() >= 290.0


def test_open_loop_counts_unsent_requests_of_a_server_that_stops_answering() -> None:
    gate = threading.Event()

    def call(rng: np.random.Generator) -> int:
        gate.wait(0.8)  # hangs past the run's end
        return 1

    result = run_threads(
        _spec("open", 50.0, 0.5), 0, [Session(call, lambda: None)], seed=0, start_at=time.time()
    )
    assert result.unsent >= 20  # the slots due while the only thread was stuck
    assert LatencyHistogram.decode(result.hist).percentile_ms(50) > 100.0


def test_closed_loop_counts_errors_by_status() -> None:
    def call(rng: np.random.Generator) -> int:
        if rng.random() < 0.5:
            raise flight.FlightUnavailableError("server restarting")
        return 3

    result = run_threads(
        _spec("closed", 0.0, 0.2, threads=2),
        0,
        [Session(call, lambda: None), Session(call, lambda: None)],
        seed=1,
        start_at=time.time(),
    )
    assert set(result.errors) == {"UNAVAILABLE"}
    assert result.ok > 0
    assert result.rows == 3 * result.ok
    assert result.error_samples
    assert result.error_samples[0].startswith("UNAVAILABLE")


def test_status_names() -> None:
    assert status_of(flight.FlightTimedOutError("slow")) == "DEADLINE_EXCEEDED"
    assert status_of(ValueError("bad")) == "INVALID_ARGUMENT"
    assert status_of(RuntimeError("x")) == "RuntimeError"


def test_open_loop_needs_a_rate() -> None:
    with pytest.raises(ValueError, match="rate"):
        run_threads(_spec("open", 0.0, 0.1), 0, [], seed=0, start_at=time.time())
