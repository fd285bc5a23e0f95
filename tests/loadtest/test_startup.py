"""``python -m loadtest startup``: registered, and it reads the compile time the server logs."""

from __future__ import annotations

import json
import math
from pathlib import Path

from loadtest.__main__ import BENCHMARKS
from loadtest.bench_startup import _logged_compile_seconds


def test_startup_benchmark_is_registered() -> None:
    assert BENCHMARKS["startup"][0] == "loadtest.bench_startup"


def test_compile_seconds_come_from_the_kernels_ready_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    lines = [
        json.dumps({"message": "kernels ready", "who": "supervisor", "seconds": 3.5}),
        "not json: kernels ready",
        json.dumps({"message": "kernels ready", "who": "worker 0", "seconds": 0.25}),
        json.dumps({"message": "serving"}),
    ]
    log.write_text("\n".join(lines))
    assert _logged_compile_seconds(log) == 3.5  # the slowest process decides readiness
    log.write_text(json.dumps({"message": "serving"}))
    assert math.isnan(_logged_compile_seconds(log))
