"""The scan CPU benchmark (``python -m loadtest scancpu``) runs end to end on a small table."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from loadtest.bench_scan_cpu import main, server_cpu


def test_server_cpu_reads_this_process_cpu_and_faults() -> None:
    cpu0, faults0 = server_cpu(os.getpid())
    sum(i * i for i in range(2_000_000))  # burn ~0.1 s of CPU
    cpu1, faults1 = server_cpu(os.getpid())
    assert cpu1 > cpu0
    assert faults1 >= faults0 > 0


def test_scancpu_prints_server_ns_per_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    assert main(["--rows", "20000", "--partitions", "2", "--reps", "2", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "# 20,000 rows, 2 partitions" in out
    assert re.search(r"server CPU ns/row: best \d+\.\d, median \d+\.\d", out)
    assert (root / "bench").is_dir()  # --root keeps the dataset for the next run
