"""The dataset benchmark (``python -m loadtest dataset``) runs end to end on a small table and
reports CPU per operation beside the wall-clock figures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loadtest.bench_dataset import Row, main


def test_row_cpu_ratio_is_of_median_cpu_per_operation() -> None:
    row = Row("local", "scan", "all")
    row.cpu = {"pylance": [2.0, 1.0, 9.0], "ours cold": [1.5, 0.5, 0.4]}
    assert row.cpu_ratio("ours cold") == pytest.approx(0.25)
    assert row.cpu_ratio("ours warm") is None
    row.record("ours warm", lambda: sum(i * i for i in range(200_000)))
    assert len(row.times["ours warm"]) == len(row.cpu["ours warm"]) == 1
    assert row.cpu["ours warm"][0] > 0


def test_dataset_benchmark_prints_cpu_ratios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--rows", "3000", "--storages", "local", "--measures", "take,scan"]
    argv += ["--take-reps", "15", "--scan-reps", "15", "--dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "cpu cold/py" in out
    for measure in ("take 1", "take 100", "scan"):
        line = next(x for x in out.splitlines() if re.match(rf"local\s+{measure}\s+all ", x))
        assert len(re.findall(r"\d+\.\d\dx", line)) == 4, line  # wall and CPU ratios, cold and warm
        assert re.search(rf"local\s+{measure}\s+all\s+15\s", out), out  # CPU medians of 15 reps
        assert re.search(rf"local {measure}\s+all cpu cold/pylance\s+\d+\.\d\dx (ok|MISSED)", out), out
