"""Pacing at the edge (flight_server.pacing): whole calls' CPU per principal, and the wait before a
heavy principal's next call. Fake clocks and CPU charges; the server tests count calls and waits."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.config import load_settings
from flight_server.pacing import HEAVY_RATIO, CallPacer, PaceMiddleware, PaceMiddlewareFactory
from flight_server.service import LanceFlightService
from flight_server.settings import ServerSettings
from flight_server.workers import build_server
from lance_format import write_dataset


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _pacer(t: FakeTime, max_delay_s: float = 0.02) -> CallPacer:
    return CallPacer(max_delay_s=max_delay_s, clock=t.clock, sleep=t.sleep)


def test_a_principal_above_the_others_mean_waits_until_its_use_would_decay_to_the_line() -> None:
    t = FakeTime()
    pacer = _pacer(t, max_delay_s=10.0)
    pacer.charge("heavy", 0.6)
    pacer.charge("light", 0.1)
    pacer.charge("lighter", 0.05)
    line = HEAVY_RATIO * 0.075  # above the mean of the other active principals
    assert pacer.delay("heavy") == pytest.approx(math.log2(0.6 / line))  # one half-life per halving
    assert pacer.delay("light") == pacer.delay("lighter") == 0.0
    waited = pacer.pace("heavy")
    assert t.slept == [pytest.approx(waited)]
    assert pacer.use("heavy") == pytest.approx(line)
    assert (pacer.delayed, pacer.waited_s) == (1, pytest.approx(waited))


def test_a_principal_alone_or_beside_idle_ones_is_never_delayed() -> None:
    t = FakeTime()
    pacer = _pacer(t)
    pacer.charge("heavy", 5.0)
    assert pacer.delay("heavy") == 0.0  # alone: every cycle is its
    pacer.charge("idle", 0.0005)  # below the active threshold: not a competitor
    assert pacer.delay("heavy") == 0.0
    assert pacer.pace("heavy") == 0.0
    assert t.slept == []


def test_one_wait_is_at_most_the_max_delay_and_zero_turns_pacing_off() -> None:
    t = FakeTime()
    pacer = _pacer(t, max_delay_s=0.02)
    pacer.charge("heavy", 10.0)
    pacer.charge("light", 0.01)
    assert pacer.delay("heavy") == 0.02
    off = _pacer(t, max_delay_s=0.0)
    off.charge("heavy", 10.0)
    off.charge("light", 0.01)
    assert off.delay("heavy") == 0.0


def test_a_closed_loop_of_cheap_calls_is_slowed_to_the_other_principals_cpu_rate() -> None:
    """The wide-schema attack in fake time: an attacker calls back to back (1 ms of CPU each), a
    victim every 5 ms (1 ms each). Without pacing the attacker takes 4 times the victim's CPU;
    paced, about :data:`HEAVY_RATIO` times, and the victim never waits."""

    def run(max_delay_s: float) -> tuple[int, int]:
        t = FakeTime()
        pacer = _pacer(t, max_delay_s)
        attacker = victim = 0
        next_victim = attacker_ready = t.now
        end = t.now + 10.0
        while t.now < end:
            if t.now >= next_victim:  # the victim's call, never delayed (it stays light)
                assert pacer.delay("victim") == 0.0
                pacer.charge("victim", 0.001)
                t.now += 0.001
                victim += 1
                next_victim = t.now + 0.004
            elif t.now >= attacker_ready:
                wait = pacer.delay("attacker")
                if wait > 0:  # it sleeps; the victim's calls go on meanwhile
                    attacker_ready = t.now + wait
                    continue
                pacer.charge("attacker", 0.001)
                t.now += 0.001
                attacker += 1
            else:
                t.now = min(next_victim, attacker_ready)
        return attacker, victim

    attacker, victim = run(0.0)
    assert attacker > 3 * victim
    attacker, victim = run(0.02)
    assert victim >= 1990  # one call per 5 ms, never held up
    assert attacker <= 1.1 * HEAVY_RATIO * victim


def test_the_middleware_charges_the_whole_call_to_the_principal_the_handler_named() -> None:
    t = FakeTime()
    pacer = _pacer(t)
    unnamed = PaceMiddleware(pacer)
    named = PaceMiddleware(pacer)
    named.bind("p")
    deadline = time.thread_time() + 0.005
    while time.thread_time() < deadline:  # CPU spent between the call's start and completion
        pass
    unnamed.call_completed(None)  # nobody to charge: a call refused before its handler
    named.call_completed(None)
    assert pacer.use("p") >= 0.005
    assert pacer.principals() == {"p": pytest.approx(pacer.use("p"))}


def test_pace_max_delay_from_flag_env_and_yaml(tmp_path: Path) -> None:
    assert load_settings([], env={}).pace_max_delay_ms == 20.0
    config = tmp_path / "c.yaml"
    config.write_text("limits:\n  paceMaxDelayMs: 5\n")
    assert load_settings(["--config", str(config)], env={}).pace_max_delay_ms == 5.0
    env = {"LANCE_FLIGHT_PACE_MAX_DELAY_MS": "7.5"}
    assert load_settings(["--config", str(config)], env=env).pace_max_delay_ms == 7.5
    assert load_settings(["--pace-max-delay-ms", "0"], env=env).pace_max_delay_ms == 0.0


# -- a served process ------------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[LanceFlightService, FakeTime]]:
    # Written without a call, so no connection but the test's own has been charged.
    wide = pa.table({f"c{i}": np.arange(4, dtype=np.int32) for i in range(300)})
    write_dataset(wide, str(tmp_path / "root" / "wide"))
    t = FakeTime()  # stands still: no use decays while the test runs, however slowly
    settings = ServerSettings(root=str(tmp_path / "root"), port=0, metrics_port=-1)
    pace = PaceMiddlewareFactory(_pacer(t))
    srv = LanceFlightService(settings, location="grpc://127.0.0.1:0", middleware={"pace": pace})
    try:
        yield srv, t
    finally:
        srv.shutdown()


def test_a_served_anonymous_flood_of_plans_is_charged_per_connection_and_its_calls_wait(
    server: tuple[LanceFlightService, FakeTime],
) -> None:
    """Without auth each connection is a principal: the flooding connection's whole calls are
    charged to it, and once another connection is active its next calls wait first."""
    srv, t = server
    location = f"grpc://127.0.0.1:{srv.port}"
    pacer = srv.pacer
    descriptor = flight.FlightDescriptor.for_path("wide")
    flooder, other = flight.FlightClient(location), flight.FlightClient(location)
    try:
        for _ in range(200):
            flooder.get_flight_info(descriptor)
        assert pacer.delayed == 0  # alone: never delayed
        for _ in range(20):
            other.get_flight_info(descriptor)
        uses = pacer.principals()
        peers = sorted(p for p in uses if p.startswith("peer:"))
        assert len(peers) == 2  # the flooder's connection and the other's
        heavy = max(peers, key=lambda p: uses[p])
        assert pacer.delay(heavy) > 0
        assert pacer.delay(min(peers, key=lambda p: uses[p])) == 0.0
        flooder.get_flight_info(descriptor)
        assert pacer.delayed == 1
        assert t.slept == [pacer.max_delay_s]  # far above the other: the longest wait
    finally:
        flooder.close()
        other.close()


def test_a_built_server_charges_every_call_to_the_pacer_of_its_settings(tmp_path: Path) -> None:
    settings = ServerSettings(root=str(tmp_path / "root"), port=0, metrics_port=-1, pace_max_delay_ms=5.0)
    srv = build_server(settings, 0, ["grpc://127.0.0.1:0"], None)
    try:
        assert isinstance(srv, LanceFlightService)
        assert srv.pacer.max_delay_s == pytest.approx(0.005)
        client = flight.FlightClient(f"grpc://127.0.0.1:{srv.port}")
        assert list(client.list_flights()) == []
        client.close()
        assert [p.startswith("peer:") for p in srv.pacer.principals()] == [True]
    finally:
        srv.shutdown()
