"""Smoke run of the attack benchmark: a real server, every attack, a complete table.

Tiny sizes and windows; it checks the shape of the results and that every phase ran, never the
timings (those are for people: ``python -m loadtest attack``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.__main__ import BENCHMARKS
from loadtest.bench_attack import ATTACKS, AttackConfig, format_table, main, run_attacks

TINY = AttackConfig(
    rows=2000,
    fragments=2,
    wide_columns=20,
    seconds=0.3,
    warmup_s=0.1,
    streams=3,
    big_take=500,
    big_take_threads=1,
    huge_ids=20_000,
    attack_threads=1,
)


def test_every_attack_runs_against_the_baseline() -> None:
    results = run_attacks(TINY, log=lambda _: None)
    assert [r.phase for r in results] == ["alone", *ATTACKS]
    for r in results:
        assert r.calls > 0, r
        assert r.p50_ms <= r.p99_ms, r
    assert results[0].ratio_p99 == 1.0
    assert all(r.attacker_calls > 0 for r in results[1:])
    table = format_table(results)
    assert all(name in table for name in ATTACKS)
    assert "target (p99 <= 3x, 0 errors)" in table
    assert "server cpu s" in table
    assert all(r.server_cpu_s >= 0 for r in results)  # the server's CPU in each victim window


def test_cli_is_wired_and_rejects_bad_settings(tmp_path: Path) -> None:
    assert BENCHMARKS["attack"][0] == "loadtest.bench_attack"
    with pytest.raises(SystemExit):
        main(["--seconds", "0"])
    with pytest.raises(SystemExit):
        main(["--attacks", "nope"])
    with pytest.raises(SystemExit):
        main(["--workers", "0"])
    with pytest.raises(SystemExit):
        main(["--rounds", "0"])


def test_the_configuration_of_the_run_is_reported() -> None:
    text = AttackConfig(workers=2, work_slots=1).describe()
    assert "2 worker(s)" in text
    assert "limits.workSlots=1" in text
    assert "load average" in text
    assert "default: one per core" in AttackConfig().describe()
