"""Smoke run of the latency suite: a real ``lance-flight serve``, every scenario, a complete report.

Seconds, not minutes: tiny dataset and windows. It checks the report's shape and that nothing
failed; the figures themselves are for people (``python -m loadtest``).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from loadtest.load.hdr import PERCENTILES, percentile_key
from loadtest.load.plots import PLOT_FILES
from loadtest.load.report import REQUIRED_RUN_FIELDS
from loadtest.load.scenarios import SCENARIOS
from loadtest.load.suite import QUICK, main, run_suite

SMOKE = replace(
    QUICK,
    name="smoke",
    rows=2000,
    processes=2,
    duration_s=0.2,
    warmup_s=0.05,
    open_threads=4,
    fractions=(0.5,),
    sweep=(2,),  # = processes: no extra sweep run
    compare=("point_take",),  # in-process arms on one scenario keep this to seconds
    timeout_s=20.0,
)


def test_smoke_suite_report_is_complete_and_error_free(tmp_path: Path) -> None:
    doc = run_suite(SMOKE, tmp_path, verbose=False)

    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk == json.loads(json.dumps(doc))
    assert set(on_disk["scenarios"]) == set(SCENARIOS)
    runs = [r for s in on_disk["scenarios"].values() for r in s["runs"]]
    for r in runs:
        missing = [f for f in REQUIRED_RUN_FIELDS if f not in r]
        assert not missing, (r["id"], missing)
        assert r["error_count"] == 0, (r["id"], r["errors"], r["error_samples"])
        assert r["count"] > 0, r["id"]
        assert r["throughput"] > 0, r["id"]
        values = [r[percentile_key(q)] for q in PERCENTILES] + [r["max_ms"]]
        assert all(isinstance(v, float) and math.isfinite(v) for v in values), r["id"]
        assert values == sorted(values), (r["id"], values)  # p50 <= p90 <= ... <= max
    # Every scenario ran closed-loop at max and open-loop at a fixed offered rate on the server.
    for name in SCENARIOS:
        modes = {(r["arm"], r["mode"]) for r in on_disk["scenarios"][name]["runs"]}
        assert {("flight", "closed"), ("flight", "open")} <= modes, name
        for r in on_disk["scenarios"][name]["runs"]:
            if r["mode"] == "open":
                assert r["offered_rate"] > 0
    # The comparison arms ran on the same dataset.
    take_arms = {r["arm"] for r in on_disk["scenarios"]["point_take"]["runs"]}
    assert take_arms == {"flight", "engine", "pylance"}
    # The server's /metrics were scraped around the runs.
    served = [r for r in on_disk["scenarios"]["batch_take"]["runs"] if r["arm"] == "flight"]
    assert all(r["server"]["rpcs"].get("do_get/OK", 0) > 0 for r in served)
    assert all("page" in r["server"]["cache_hit_ratio"] for r in served)
    # The SQL scenarios went through the server's Flight SQL (ADBC: get_flight_info, then do_get).
    for name in ("sql_point", "sql_filter"):
        sql_runs = [r for r in on_disk["scenarios"][name]["runs"] if r["arm"] == "flight"]
        assert all(r["server"]["rpcs"].get("get_flight_info/OK", 0) > 0 for r in sql_runs), name
    assert on_disk["meta"]["server_exit_status"] == 0
    for name in [*PLOT_FILES, "report.md", "report.html"]:
        text = (tmp_path / name).read_text()
        assert len(text) > 200, name
    assert "<svg" in (tmp_path / PLOT_FILES[0]).read_text()
    assert "| point_take" in (tmp_path / "report.md").read_text()


def test_cli_rejects_bad_settings(tmp_path: Path) -> None:
    import pytest

    with pytest.raises(SystemExit):
        main(["--quick", "--duration", "0", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        main(["--scenarios", "nope", "--out", str(tmp_path)])
