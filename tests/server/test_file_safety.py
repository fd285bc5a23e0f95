"""Actions that delete files never lose data: discard_staged deletes only the caller's uncommitted
staged files, cleanup keeps every file a kept version or tag references (issue 14)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from flight_server.auth import Authenticator, AuthMiddlewareFactory, Principal
from flight_server.client import LanceFlightClient
from flight_server.requests import ActionRequest
from flight_server.service import LanceFlightService
from flight_server.settings import ServerSettings, Token
from lance_format.table.fragment_json import fragment_to_json
from tests.server.service_fixtures import Served, seed, table


def _all_fragments(path: Path) -> tuple[bytes, ...]:
    """Fragment JSON of every fragment of every version: what a hostile client would send."""
    ds = lance_format.dataset(str(path))
    blobs = {}
    for v in ds.versions():
        for frag in ds.checkout_version(int(v["version"])).manifest.fragments:
            blobs[json.dumps(fragment_to_json(frag))] = None
    return tuple(b.encode() for b in blobs)


def _data_files(path: Path) -> set[str]:
    return {p.name for p in (path / "data").iterdir()}


def test_hostile_discard_keeps_old_and_tagged_versions(served: Served) -> None:
    c = served.client
    v1_rows = seed(served, "ds", n=50, rows_per_file=20)
    c.create_tag("ds", "gold", 1)
    c.write("ds", table(30, 1000))  # v2: an append
    v2 = c.scan("ds", version=2)
    c.delete("ds", "id < 10")  # v3: deletion files
    c.write("ds", table(5, 5000), mode="overwrite")  # v4: the latest references none of the above
    path = served.root / "ds"
    before = _data_files(path)
    result = c.action("discard_staged", ActionRequest("ds", fragments=_all_fragments(path)))
    assert result.counters["files_removed"] == 0
    assert _data_files(path) == before
    assert c.scan("ds", version="gold").sort_by("id").equals(v1_rows)
    assert c.scan("ds", version=1).sort_by("id").equals(v1_rows)
    assert c.scan("ds", version=2).sort_by("id").equals(v2.sort_by("id"))
    assert c.scan("ds", version=3).num_rows == 70
    assert c.scan("ds").num_rows == 5


def test_discard_never_deletes_committed_staged_files(served: Served) -> None:
    c = served.client
    seed(served, "ds", n=10)
    staged = c.stage("ds", table(10, 100))
    c.commit("ds", [staged])
    result = c.action("discard_staged", ActionRequest("ds", fragments=staged.fragments))
    assert result.counters["files_removed"] == 0
    assert c.scan("ds").num_rows == 20
    assert not (served.root / "ds" / "_staged").exists() or not any(
        (served.root / "ds" / "_staged").iterdir()
    )


def test_discard_refuses_names_outside_data(served: Served) -> None:
    c = served.client
    seed(served, "ds", n=10)
    bad = json.dumps({"id": 0, "files": [{"path": "../_versions/1.manifest", "fields": [0]}]})
    with pytest.raises(pa.ArrowInvalid):
        c.action("discard_staged", ActionRequest("ds", fragments=(bad.encode(),)))
    assert c.scan("ds").num_rows == 10


@pytest.fixture
def two_writers(tmp_path: Path) -> Iterator[tuple[LanceFlightClient, LanceFlightClient, Path]]:
    settings = replace(
        ServerSettings(root=str(tmp_path / "root"), port=0, metrics_port=-1), tokens=(Token("admin"),)
    )
    auth = Authenticator(settings)
    server = LanceFlightService(
        settings, location="grpc://127.0.0.1:0", middleware={"auth": AuthMiddlewareFactory(auth)}
    )
    location = f"grpc://127.0.0.1:{server.port}"
    ann = LanceFlightClient(location, token=auth.issue(Principal("ann", False)), timeout=30)
    bob = LanceFlightClient(location, token=auth.issue(Principal("bob", False)), timeout=30)
    try:
        yield ann, bob, tmp_path / "root"
    finally:
        ann.close()
        bob.close()
        server.shutdown()


def test_discard_deletes_only_the_callers_staged_files(
    two_writers: tuple[LanceFlightClient, LanceFlightClient, Path],
) -> None:
    ann, bob, root = two_writers
    ann.write("ds", table(10), mode="create")
    anns = ann.stage("ds", table(10, 100))
    bobs = bob.stage("ds", table(10, 200))
    # Bob names Ann's staged files: nothing of hers goes.
    assert bob.action("discard_staged", ActionRequest("ds", fragments=anns.fragments)).counters == {
        "files_removed": 0
    }
    assert ann.commit("ds", [anns]) == 2
    assert bob.action("discard_staged", ActionRequest("ds", fragments=bobs.fragments)).counters == {
        "files_removed": 1
    }
    assert ann.scan("ds").num_rows == 20
    assert len(_data_files(root / "ds")) == 2


def _age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def test_cleanup_removes_orphans_of_a_killed_writer_after_the_safety_age(served: Served) -> None:
    c = served.client
    seed(served, "ds", n=30, rows_per_file=10)
    path = served.root / "ds"
    # What a server killed mid-stage leaves: data files no version references (and their records).
    c.stage("ds", table(10, 100))
    c.stage("ds", table(10, 200))
    committed = {d.path for f in lance_format.dataset(str(path)).manifest.fragments for d in f.files}
    orphans = sorted(_data_files(path) - committed)
    assert len(orphans) == 2
    old, young = orphans
    week = 8 * 24 * 3600
    _age(path / "data" / old, week)
    _age(path / "_staged" / old, week)
    # A cutoff of an hour: the young orphan (a write that may be in flight) stays.
    counters = c.cleanup("ds", older_than_seconds=3600)
    assert counters["orphans_removed"] == 1
    assert _data_files(path) == committed | {young}
    assert not (path / "_staged" / old).exists()
    assert c.scan("ds").num_rows == 30
    # delete_unverified: orphans older than the cutoff go whatever their age, once past the
    # server's in-flight bound (limits.orphanMinAgeSeconds, a day by default).
    _age(path / "data" / young, 2 * 24 * 3600)
    req = ActionRequest("ds", older_than_seconds=0, delete_unverified=True)
    assert c.action("cleanup", req).counters["orphans_removed"] == 1
    assert _data_files(path) == committed
    assert c.scan("ds").num_rows == 30


def test_cleanup_never_deletes_another_clients_write_in_flight(served: Served) -> None:
    # Found in session 14: cleanup(older_than_seconds=0, delete_unverified=True) by any writer
    # deleted the data files of another client's write that had not committed yet (here a staged
    # fragment; a do_put between its data files and its commit is the same): the write was lost.
    c = served.client
    seed(served, "ds", n=30, rows_per_file=10)
    staged = c.stage("ds", table(10, 100))
    req = ActionRequest("ds", older_than_seconds=0, delete_unverified=True)
    assert c.action("cleanup", req).counters["orphans_removed"] == 0
    assert c.commit("ds", [staged]) == 2
    assert c.scan("ds").num_rows == 40
    assert c.scan("ds", version=2).num_rows == 40


@pytest.mark.parametrize(("min_age", "removed"), [(0.0, 1), (7 * 24 * 3600.0, 0)])
def test_the_in_flight_bound_of_cleanup_is_the_servers_setting(
    tmp_path: Path, min_age: float, removed: int
) -> None:
    """``limits.orphanMinAgeSeconds``: an operator whose Spark jobs stage fragments for longer than
    a day raises it; 0 gives pylance's ``delete_unverified`` (every orphan older than the cutoff)."""
    settings = ServerSettings(
        root=str(tmp_path / "root"), port=0, metrics_port=-1, orphan_min_age_seconds=min_age
    )
    server = LanceFlightService(settings, location="grpc://127.0.0.1:0")
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", timeout=30)
    try:
        client.write("ds", table(10, 0), mode="create")
        staged = client.stage("ds", table(10, 100))
        path = tmp_path / "root" / "ds" / "data"
        for p in path.iterdir():
            _age(p, 2 * 24 * 3600)  # older than the default day: only a larger setting keeps it
        req = ActionRequest("ds", older_than_seconds=0, delete_unverified=True)
        assert client.action("cleanup", req).counters["orphans_removed"] == removed
        if not removed:
            assert client.commit("ds", [staged]) == 2
            assert client.scan("ds").num_rows == 20
    finally:
        client.close()
        server.shutdown()


def test_cleanup_keeps_files_of_tagged_and_recent_versions(served: Served) -> None:
    c = served.client
    rows = seed(served, "ds", n=20, rows_per_file=10)
    c.create_tag("ds", "t1", 1)
    c.write("ds", table(5, 500), mode="overwrite")
    c.write("ds", table(5, 900), mode="overwrite")
    for p in (served.root / "ds" / "data").iterdir():
        _age(p, 30 * 24 * 3600)  # every file looks ancient: references alone must protect them
    req = ActionRequest("ds", older_than_seconds=0, delete_unverified=True)
    c.action("cleanup", req)
    assert c.scan("ds", version="t1").sort_by("id").equals(rows)
    assert c.scan("ds").num_rows == 5


@pytest.mark.parametrize("prefix", ["../../other/data/", "../other/", "sub/", "/abs/"])
def test_commits_reference_only_files_of_their_own_dataset(served: Served, prefix: str) -> None:
    c = served.client
    seed(served, "ds", n=10)
    seed(served, "other", n=10)
    doc = fragment_to_json(lance_format.dataset(str(served.root / "other")).manifest.fragments[0])
    doc["files"][0]["path"] = prefix + doc["files"][0]["path"]
    with pytest.raises(pa.ArrowInvalid):
        c.action("commit", ActionRequest("ds", fragments=(json.dumps(doc).encode(),)))
    c.drop("other")  # had the commit passed, this would delete files "ds" references
    assert c.scan("ds").num_rows == 10
