"""The bounded CI run of the interleaving generator (see docs/testing.md, "Two clients").

Fixed schedules, so a red run replays: the three of seed 1's long run that reported a violation
(465143663 and 500545052: a stale handle's commit landing under the latest version, failing before
that fix; 815217483: a compaction with nothing to do, which the generator took for a commit), one
threaded run of three clients, the generator's false alarms found since (fixed interleavings), and
short runs with clients through Flight and on an S3 root (SeaweedFS; marked ``s3``).
"""

from __future__ import annotations

import random

import pytest

from tests.race.engine import (
    Checker,
    Clients,
    Outcome,
    Setup,
    fresh_dataset,
    make_schedule,
    run_schedule,
    run_threaded,
)
from tests.s3_server import BUCKET, S3Server

#: Sub-seeds of ``python -m tests.race --seed 1`` whose schedules (20 steps) reported a violation.
FOUND_BY_SEED_1 = (815217483, 465143663, 500545052)
#: Steps of each schedule, as in the run that found them.
STEPS = 20


@pytest.mark.parametrize("sub_seed", FOUND_BY_SEED_1)
def test_two_clients_interleaved_keep_each_other_s_commits(sub_seed: int) -> None:
    out = run_schedule(make_schedule(random.Random(sub_seed), STEPS, 2), 2)
    assert not out.violations, "\n".join(out.violations)
    assert sum(out.ops.values()) >= STEPS // 2  # most operations committed: the run did something


@pytest.mark.parametrize("op", ["update", "delete"])
def test_a_change_owes_nothing_to_rows_inserted_after_the_version_it_was_planned_on(
    op: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the threaded runs (update: seed 41's schedule 600749980, 3 runs in 40, the shape of
    # seed 4's "violations: 2 in 1 schedules [1028383521]" of session 15; delete: seed 161's
    # 137840147): a stale client's update or delete of ids 0, 1, 2 loses to an overwrite (which
    # removes them) and is planned again on the overwrite's version, where it matches nothing;
    # meanwhile another stale client's upsert inserts ids 0, 1. The change commits after it, rebased
    # (an insert commutes with an update or a delete, as in Lance), and ids 0, 1 keep the upsert's
    # value: a correct history, which the generator took for a lost update (or delete).
    monkeypatch.setattr(
        Clients,
        "_visible",
        lambda self, client, rng, n: sorted(self.handles[client].to_table()["id"].to_pylist())[:n],
    )
    out = Outcome()
    with fresh_dataset() as place:
        checker = Checker(place.uri)
        clients = Clients(place.uri, 3, checker)
        clients.run(1, "overwrite", 0, out)
        store = clients.handles[2].store
        real_write = store.write
        plans: list[str] = []

        def upsert_at_second_plan(key: str, data: bytes) -> None:
            # The second plan's transaction file, written before its commit (and its lock).
            if key.startswith("_transactions/"):
                plans.append(key)
                if len(plans) == 2:
                    clients.run(0, "merge_insert", 0, out)
            real_write(key, data)

        monkeypatch.setattr(store, "write", upsert_at_second_plan)
        clients.run(2, op, 0, out)
        monkeypatch.undo()
        checker.sweep(out, "at the end")
    assert not out.violations, "\n".join(out.violations)
    assert dict(out.ops) == {"overwrite": 1, "merge_insert": 1, op: 1}
    assert len(plans) == 2


def test_three_clients_in_threads_keep_each_other_s_commits() -> None:
    out = run_threaded(random.Random(20261202), 6, 3)
    assert not out.violations, "\n".join(out.violations)
    assert sum(out.ops.values()) >= 6


#: A fixed schedule (sub-seed, steps) run with the last of three clients through Flight (``--flight 1``).
FLIGHT_SCHEDULE, FLIGHT_STEPS = 12345, 12


def test_a_flight_client_among_engine_clients_keeps_and_is_kept_their_commits() -> None:
    out = run_schedule(make_schedule(random.Random(FLIGHT_SCHEDULE), FLIGHT_STEPS, 3), 3, Setup(flight=1))
    assert not out.violations, "\n".join(out.violations)
    assert sum(out.ops.values()) >= FLIGHT_STEPS // 2


def test_flight_and_engine_clients_in_threads_keep_each_other_s_commits() -> None:
    out = run_threaded(random.Random(20261203), 4, 3, Setup(flight=2))
    assert not out.violations, "\n".join(out.violations)
    assert sum(out.ops.values()) >= 4


@pytest.mark.s3
def test_clients_on_an_s3_root_keep_each_other_s_commits(s3_server: S3Server) -> None:
    setup = Setup(f"s3://{BUCKET}", dict(s3_server.storage_options), flight=1)
    out = run_schedule(make_schedule(random.Random(FLIGHT_SCHEDULE), 8, 3), 3, setup)
    assert not out.violations, "\n".join(out.violations)
    assert sum(out.ops.values()) >= 4
