"""SVG plots of a run (matplotlib's Agg backend: no display needed).

* ``latency_vs_load.svg``: p50 and p99 against the offered rate, per scenario (open-loop runs);
* ``percentiles.svg``: whole latency distributions (percentile curves, the tail stretched out),
  for each scenario's open-loop runs on the left and the unloaded arm comparison on the right;
* ``throughput_vs_workers.svg``: closed-loop batch-take throughput against the number of client
  processes, and against the server's ``--workers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; must precede pyplot's import

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["PLOT_FILES", "latency_series", "write_plots"]

PLOT_FILES = ("latency_vs_load.svg", "percentiles.svg", "throughput_vs_workers.svg")
#: Percentile ticks of the curve plot (x is 1 / (1 - q), so each tick is a tenfold rarer event).
_TICKS = (50.0, 90.0, 99.0, 99.9, 99.99)


#: A Flight run's point on the latency-vs-load curve: (load, p50, p99, closed-loop maximum?).
Point = tuple[float, float, float, bool]


def latency_series(runs: Sequence[Mapping[str, Any]]) -> dict[str, list[Point]]:
    """Per scenario, its Flight runs as points by load: open-loop runs at their offered rate and
    the closed-loop maximum at the rate it reached (the curve's right end), so even a ``--quick``
    run with one open-loop rate per scenario draws a line."""
    out: dict[str, list[Point]] = {}
    for r in runs:
        if r["arm"] != "flight" or not r.get("count"):
            continue
        if r["mode"] == "open" and r["offered_rate"]:
            point = (float(r["offered_rate"]), r["p50_ms"], r["p99_ms"], False)
        elif r["mode"] == "closed" and r.get("label") == "max" and r.get("throughput"):
            point = (float(r["throughput"]), r["p50_ms"], r["p99_ms"], True)
        else:
            continue
        out.setdefault(r["scenario"], []).append(point)
    return {name: sorted(points) for name, points in out.items()}


def _note_if_empty(ax: Any, note: str) -> None:
    """Say why a panel has nothing to show instead of leaving it blank."""
    if not ax.get_lines():
        ax.text(0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes, fontsize=9)


def _latency_vs_load(runs: Sequence[Mapping[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 5))
    groups = latency_series(runs)
    for i, (name, points) in enumerate(sorted(groups.items())):
        x = [p[0] for p in points]
        color = f"C{i % 10}"
        ax.plot(x, [p[2] for p in points], "o-", color=color, label=f"{name} p99")
        ax.plot(x, [p[1] for p in points], "s--", color=color, alpha=0.6, label=f"{name} p50")
        closed = [p for p in points if p[3]]
        ax.plot([p[0] for p in closed], [p[2] for p in closed], "X", color=color, markersize=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (requests/s, open loop)")
    ax.set_ylabel("latency (ms, from intended send time)")
    ax.set_title("Latency vs offered load (X: closed-loop maximum, at the rate it reached)")
    ax.grid(True, which="both", alpha=0.3)
    if groups:
        ax.legend(fontsize=7, ncol=2)
    _note_if_empty(ax, "no Flight runs in this report")
    fig.tight_layout()
    fig.savefig(path)  # format from the suffix (svg)
    plt.close(fig)


#: Line style per arm in the comparison plot (colour is the scenario).
_ARM_STYLES = {"flight": "-", "engine": "--", "pylance": ":"}


def _curve(ax: Any, r: Mapping[str, Any], label: str, color: str, style: str = "-") -> None:
    pts = [(p, ms) for p, ms in r["curve"] if p < 100.0]
    if not pts:
        return
    p = np.array([q for q, _ in pts])
    ax.plot(1.0 / (1.0 - p / 100.0), [ms for _, ms in pts], style, color=color, label=label)


def _percentiles(runs: Sequence[Mapping[str, Any]], path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    colors = {name: f"C{i % 10}" for i, name in enumerate(dict.fromkeys(r["scenario"] for r in runs))}
    for r in runs:
        color = colors[r["scenario"]]
        if r["mode"] == "open" and r["arm"] == "flight":
            _curve(left, r, f"{r['scenario']} @{r['offered_rate']:.0f}/s", color)
        elif r["mode"] == "closed" and r["processes"] == 1 and r["threads"] == 1:
            _curve(right, r, f"{r['scenario']} {r['arm']}", color, _ARM_STYLES.get(r["arm"], "-"))
    for ax, title in ((left, "Flight, open loop"), (right, "unloaded: flight vs in-process arms")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks([1.0 / (1.0 - t / 100.0) for t in _TICKS])
        ax.set_xticklabels([f"{t:g}%" for t in _TICKS])
        ax.set_xlabel("percentile")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=6)
        _note_if_empty(ax, "not measured in this run")
    left.set_ylabel("latency (ms)")
    fig.tight_layout()
    fig.savefig(path)  # format from the suffix (svg)
    plt.close(fig)


def _throughput_vs_workers(runs: Sequence[Mapping[str, Any]], path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    clients: dict[int, float] = {}
    servers: dict[int, float] = {}
    for r in runs:
        if r["scenario"] != "batch_take" or r["arm"] != "flight" or r["mode"] != "closed":
            continue
        if "server_workers" in r:
            servers[r["server_workers"]] = r["throughput"]
        elif r.get("label") in ("sweep", "max"):
            clients[r["processes"]] = r["throughput"]
    for ax, points, xlabel, missing in (
        (
            left,
            clients,
            "client processes (closed loop, server with 1 worker)",
            "no client-process sweep in this run",
        ),
        (
            right,
            servers,
            "server --workers (closed loop, all client processes)",
            "no server --workers sweep in this run\n(--quick skips it; the default suite runs it)",
        ),
    ):
        if points:
            xs = sorted(points)
            ax.plot(xs, [points[x] for x in xs], "o-", label="batch_take")
            ax.set_xticks(xs)
            ax.legend(fontsize=8)
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
        _note_if_empty(ax, missing)
    left.set_ylabel("throughput (requests/s)")
    fig.suptitle("Throughput vs workers")
    fig.tight_layout()
    fig.savefig(path)  # format from the suffix (svg)
    plt.close(fig)


def write_plots(out_dir: Path, runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Write the three SVGs into ``out_dir``; their file names."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # Text stays text in the SVG: smaller files, searchable labels, and seconds faster than
    # converting every glyph to a path (matplotlib's default).
    with plt.rc_context({"svg.fonttype": "none"}):
        _latency_vs_load(runs, out_dir / PLOT_FILES[0])
        _percentiles(runs, out_dir / PLOT_FILES[1])
        _throughput_vs_workers(runs, out_dir / PLOT_FILES[2])
    return list(PLOT_FILES)
