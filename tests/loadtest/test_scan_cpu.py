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
    argv = ["--rows", "20000", "--partitions", "2", "--reps", "2", "--warmup", "2", "--root", str(root)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "# 20,000 rows, 2 partitions, batch 65536, 2 reps after 2 warm-up" in out
    assert re.search(r"server CPU ns/row: best \d+\.\d, median \d+\.\d", out)
    # Each run also says how much of the CPU was the kernel's and how big the server's heap is.
    runs = re.findall(r"^ +\d+ +\d+\.\d +\d+\.\d\d +\d+ +(\d+\.\d) +(\d+)$", out, re.MULTILINE)
    assert len(runs) == 2
    assert all(0.0 <= float(sys_share) <= 100.0 and int(rss) > 0 for sys_share, rss in runs)
    assert (root / "bench").is_dir()  # --root keeps the dataset for the next run


def test_scancpu_serves_with_the_settings_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path / "root")
    argv = ["--rows", "5000", "--partitions", "1", "--reps", "1", "--root", root, "--set", "bulk_nice=0"]
    assert main(argv) == 0
    assert "1 warm-up, bulk_nice=0" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="ServerSettings field"):
        main(["--rows", "5000", "--root", root, "--set", "no_such_setting=1"])
