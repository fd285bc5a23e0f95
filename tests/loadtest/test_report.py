"""The load-test report's pages and plots, from synthetic runs (no server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadtest.load.hdr import PERCENTILES, percentile_key
from loadtest.load.plots import PLOT_FILES, latency_series, write_plots
from loadtest.load.report import markdown_inline, summary_table, write_report


def _run(
    scenario: str, mode: str, label: str, rate: float | None, throughput: float, count: int
) -> dict[str, Any]:
    base = 2.0 if mode == "open" else 5.0
    return {
        "id": f"{scenario}/{mode}/{label}",
        "scenario": scenario,
        "arm": "flight",
        "mode": mode,
        "label": label,
        "processes": 2,
        "threads": 4,
        "offered_rate": rate,
        "count": count,
        **{percentile_key(q): base * (1 + i) for i, q in enumerate(PERCENTILES)},
        "max_ms": base * 10,
        "throughput": throughput,
        "errors": {},
        "error_count": 0,
        "unsent": 3 if mode == "open" else 0,
        "server": {},
        "curve": [[50.0, base], [99.0, base * 3]],
    }


# What --quick produces: per scenario one closed-loop maximum and one open-loop rate.
QUICK_RUNS = [
    _run("point_take", "closed", "max", None, 200.0, 13_000),
    _run("point_take", "open", "50% of max", 100.0, 99.0, 13),
    _run("batch_take", "closed", "max", None, 50.0, 500),
    _run("batch_take", "open", "50% of max", 25.0, 25.0, 250),
    _run("batch_take", "closed", "sweep", None, 40.0, 400),
]


def test_quick_runs_draw_a_line_per_scenario_ending_at_the_closed_loop_maximum() -> None:
    series = latency_series(QUICK_RUNS)
    assert [(x, closed) for x, _, _, closed in series["point_take"]] == [(100.0, False), (200.0, True)]
    assert len(series["batch_take"]) == 2  # the sweep is not a point of this curve


def test_empty_panels_say_why(tmp_path: Path) -> None:
    assert write_plots(tmp_path, QUICK_RUNS) == list(PLOT_FILES)
    workers = (tmp_path / "throughput_vs_workers.svg").read_text()
    assert "no server --workers sweep in this run" in workers
    percentiles = (tmp_path / "percentiles.svg").read_text()
    assert "not measured in this run" in percentiles  # no unloaded single-caller runs


def test_tables_count_samples_and_unsent_requests() -> None:
    table = summary_table(QUICK_RUNS)
    header, _, first, second, *_ = table.splitlines()
    assert "| n " in header
    assert "| 13000 " in first
    assert "| 13 " in second
    assert "(+3 unsent)" in second


def test_html_renders_the_markdown(tmp_path: Path) -> None:
    doc = write_report(tmp_path, {"suite": "quick"}, QUICK_RUNS, list(PLOT_FILES))
    page = (tmp_path / "report.html").read_text()
    assert "<em>intended</em>" in page
    assert "<code>procs x thr</code>" in page
    assert "`" not in page
    assert "*intended*" not in page
    assert "<th>n</th>" in page
    run = doc["scenarios"]["point_take"]["runs"][1]
    assert run["unsent"] == 3
    assert "backlog" not in run
    assert markdown_inline("a **b** <c> `d`") == "a <b>b</b> &lt;c&gt; <code>d</code>"
