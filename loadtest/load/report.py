"""The run's report: ``report.json`` for machines, ``report.md`` / ``report.html`` for people.

``report.json`` has ``meta`` (machine, versions, settings), ``scenarios`` (per scenario: its
description and every run with offered rate, p50, p90, p99, p99.9, max, mean, throughput, rows/s,
errors by status, unsent, the server's metrics over the run and the percentile curve) and
``plots`` (file names). The pages show the summary table and the plots.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loadtest.load.hdr import PERCENTILES, percentile_key
from loadtest.load.pool import RunResult
from loadtest.load.scenarios import SCENARIOS

__all__ = [
    "REQUIRED_RUN_FIELDS",
    "markdown_inline",
    "run_record",
    "summary_rows",
    "summary_table",
    "write_report",
]

#: Fields every run of ``report.json`` carries (the smoke test checks them).
REQUIRED_RUN_FIELDS = (
    "id",
    "scenario",
    "arm",
    "mode",
    "processes",
    "threads",
    "offered_rate",
    *(percentile_key(q) for q in PERCENTILES),
    "max_ms",
    "throughput",
    "errors",
    "error_count",
    "count",
    "unsent",
)


def _num(x: float) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


def run_record(result: RunResult, server: Mapping[str, Any], label: str = "") -> dict[str, Any]:
    """One run as a JSON-ready dict."""
    spec = result.spec
    summary = {k: _num(v) for k, v in result.hist.summary().items()}
    return {
        "id": spec.run_id,
        "scenario": spec.scenario,
        "arm": spec.arm,
        "mode": spec.mode,
        "label": label,
        "processes": spec.processes,
        "threads": spec.threads,
        "offered_rate": result.offered_rate,
        "duration_s": spec.duration_s,
        "warmup_s": spec.warmup_s,
        "count": result.hist.count,
        **summary,
        "throughput": result.throughput,
        "rows_per_s": result.rows_per_s,
        "errors": dict(sorted(result.errors.items())),
        "error_count": result.error_count,
        "error_samples": result.error_samples,
        "unsent": result.unsent,
        "server": dict(server),
        "curve": [[p, ms] for p, ms in result.hist.curve()],
    }


_COLUMNS = (
    "scenario",
    "arm",
    "run",
    "procs x thr",
    "offered/s",
    "done/s",
    "n",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "p99.9 ms",
    "max ms",
    "errors",
    "cache hit",
)


def _fmt(x: float | None, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}f}"


def _hit(server: Mapping[str, Any]) -> str:
    ratios = server.get("cache_hit_ratio") or {}
    shown = [f"{name[:4]} {r:.0%}" for name, r in sorted(ratios.items()) if r is not None]
    return ", ".join(shown) or "-"


def summary_rows(runs: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The summary table's cells, one row per run."""
    rows = []
    for r in runs:
        errors = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0"
        if r.get("unsent"):
            errors += f" (+{r['unsent']} unsent)"
        rows.append(
            [
                r["scenario"],
                r["arm"],
                r.get("label") or r["mode"],
                f"{r['processes']}x{r['threads']}",
                _fmt(r["offered_rate"], 0) if r["offered_rate"] is not None else "max",
                _fmt(r["throughput"], 1),
                str(r.get("count", 0)),
                *(_fmt(r[percentile_key(q)]) for q in PERCENTILES),
                _fmt(r["max_ms"]),
                errors,
                _hit(r.get("server", {})),
            ]
        )
    return rows


def summary_table(runs: Sequence[Mapping[str, Any]]) -> str:
    """The summary as a Markdown table (also readable in a terminal)."""
    rows = summary_rows(runs)
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(_COLUMNS)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(_COLUMNS), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


def _meta_lines(meta: Mapping[str, Any]) -> list[str]:
    keys = ("started", "target", "server", "cpus", "client_processes", "dataset_rows", "suite", "python")
    return [f"- **{k}**: {meta[k]}" for k in keys if k in meta]


_EXPLAIN = (
    "Latencies are from each request's *intended* send time in open-loop runs (so queueing in a "
    "stalled server counts), per call in closed-loop (`max`) runs. `procs x thr`: client processes "
    "x threads each. `offered/s`: the fixed arrival rate; `done/s`: successful requests per second; "
    "`n`: latency samples behind the percentiles (a p99.9 of fewer than 1,000 samples is its "
    "maximum, not a tail estimate); `unsent`: open-loop requests still unsent at the end of the run "
    "(counted with their lower-bound latency). "
    "`engine` and `pylance` run in the client process on the same files: the difference to `flight` "
    "is the cost of the network hop and the server."
)


def markdown_inline(text: str) -> str:
    """HTML of one line of inline Markdown (`code`, **bold**, *emphasis*), escaped first."""
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)
    return re.sub(r"\*([^*\s][^*]*)\*", r"<em>\1</em>", out)


def write_report(
    out_dir: Path, meta: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], plots: Sequence[str]
) -> dict[str, Any]:
    """Write ``report.json``, ``report.md`` and ``report.html`` into ``out_dir``; the JSON document."""
    out_dir.mkdir(parents=True, exist_ok=True)
    scenarios: dict[str, Any] = {}
    for r in runs:
        entry = scenarios.setdefault(
            r["scenario"], {"description": SCENARIOS[r["scenario"]].description, "runs": []}
        )
        entry["runs"].append(dict(r))
    doc = {"meta": dict(meta), "scenarios": scenarios, "plots": list(plots)}
    (out_dir / "report.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")

    table = summary_table(runs)
    md = ["# Load test report", "", *_meta_lines(meta), "", _EXPLAIN, "", table, ""]
    md += [f"![{p}]({p})\n" for p in plots]
    (out_dir / "report.md").write_text("\n".join(md))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in _COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in summary_rows(runs)
    )
    meta_html = "".join(
        f"<li><b>{html.escape(str(k))}</b>: {html.escape(str(v))}</li>" for k, v in meta.items()
    )
    imgs = "".join(f'<p><img src="{html.escape(p)}" alt="{html.escape(p)}"></p>' for p in plots)
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Load test report</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style></head><body>"
        f"<h1>Load test report</h1><ul>{meta_html}</ul><p>{markdown_inline(_EXPLAIN)}</p>"
        f"<table><tr>{head}</tr>{body}</table>{imgs}</body></html>\n"
    )
    (out_dir / "report.html").write_text(page)
    return doc
