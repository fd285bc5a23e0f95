"""The bounded CI run of the differential state machine (see docs/differential-testing.md).

``LANCE_DIFF_EXAMPLES`` (sequences) and ``LANCE_DIFF_STEPS`` (steps per sequence) scale it; the
defaults take about a minute on two busy cores. The seed is fixed, so a red run replays.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.differential.machine import STATS, DifferentialMachine

pytestmark = pytest.mark.interop

#: Sequences in the CI run: enough to reach every rule, small enough for ~40-60 s on busy cores.
CI_SEQUENCES = 30
#: Steps per sequence (after the create).
CI_STEPS = 10


def test_engines_agree_on_random_operation_sequences() -> None:
    n = int(os.environ.get("LANCE_DIFF_EXAMPLES", CI_SEQUENCES))
    steps = int(os.environ.get("LANCE_DIFF_STEPS", CI_STEPS))
    try:
        run_state_machine_as_test(
            DifferentialMachine,
            settings=settings(
                max_examples=n,
                stateful_step_count=steps,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        print(STATS.summary())
