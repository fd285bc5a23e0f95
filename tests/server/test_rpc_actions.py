"""Every action of the service, through the client and raw Flight."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import lance_format
from flight_server._serde import decode_action_result, encode_action_request
from flight_server.errors import error_code
from flight_server.flightsql import SQL_ACTIONS
from flight_server.handlers.actions import ACTIONS
from flight_server.requests import ActionRequest
from tests.server.service_fixtures import Served, seed, table


def _act(served: Served, name: str, req: ActionRequest) -> object:
    body = encode_action_request(req)
    results = list(served.raw.do_action(flight.Action(name, body)))
    assert len(results) == 1
    return decode_action_result(results[0].body.to_pybytes())


def test_list_actions_names_every_action(served: Served) -> None:
    listed = {a.type: a.description for a in served.raw.list_actions()}
    assert set(listed) == set(ACTIONS) | set(SQL_ACTIONS)
    assert {
        "create", "drop", "delete", "versions", "tags", "create_tag", "checkout", "add_columns",
        "drop_columns", "compact", "cleanup", "commit", "stats", "cache_stats", "health",
    } <= set(listed)  # fmt: skip
    assert all(listed.values())


def test_create_and_drop(served: Served) -> None:
    c = served.client
    schema = pa.schema([("a", pa.int32()), ("b", pa.string())])
    assert c.create("empty", schema) == 1
    assert c.schema("empty") == schema
    # A dataset the server creates gets pylance 14's default file version, as lance.write_dataset does.
    assert lance_format.dataset(str(served.root / "empty")).data_storage_version == "2.2"
    assert c.scan("empty").num_rows == 0
    with pytest.raises(flight.FlightServerError) as info:
        c.create("empty", schema)
    assert error_code(info.value) == "ALREADY_EXISTS"
    again = c.action("create", ActionRequest("empty", schema=schema, if_exists=True))
    assert again.version == 1
    with pytest.raises(pa.ArrowInvalid):
        c.action("create", ActionRequest("noschema"))
    c.drop("empty")
    assert c.list_datasets() == []
    assert not (served.root / "empty").exists()
    with pytest.raises(pa.ArrowKeyError):
        c.drop("empty")
    assert c.action("drop", ActionRequest("empty", if_exists=True)).status == "absent"
    assert c.create("empty", schema) == 1  # re-created from scratch
    # Same name, same version number, same manifest size: no cached state of the old one leaks.
    c.write("empty", pa.table({"a": pa.array([1], pa.int32()), "b": ["x"]}))
    c.drop("empty")
    other = pa.schema([("a", pa.int32()), ("c", pa.string())])
    assert c.create("empty", other) == 1
    assert c.schema("empty") == other
    c.write("empty", pa.table({"a": pa.array([2], pa.int32()), "c": ["y"]}))
    assert c.scan("empty").to_pylist() == [{"a": 2, "c": "y"}]


def test_delete_rows(served: Served) -> None:
    seed(served, n=100)
    assert served.client.delete("ds", "id >= 90") == 10
    assert served.client.delete("ds", "id >= 90") == 0
    import pyarrow.compute as pc

    assert served.client.delete("ds", pc.field("id") < 5) == 5
    assert served.client.scan("ds").column("id").to_pylist() == list(range(5, 90))
    with pytest.raises(pa.ArrowInvalid):
        served.client.action("delete", ActionRequest("ds"))  # no filter
    with pytest.raises(pa.ArrowInvalid):
        served.client.delete("ds", "nope = 1")


def test_versions_tags_checkout_restore(served: Served) -> None:
    c = served.client
    seed(served, n=10)
    c.write("ds", table(5, 10))
    versions = c.versions("ds")
    assert [v.version for v in versions] == [1, 2]
    assert versions[1].metadata["total_rows"] == "15"
    assert versions[0].timestamp_ns <= versions[1].timestamp_ns
    c.create_tag("ds", "first", 1)
    c.create_tag("ds", "latest")
    assert c.tags("ds") == {"first": 1, "latest": 2}
    c.action("update_tag", ActionRequest("ds", tag="latest", version=1))
    assert c.tags("ds")["latest"] == 1
    c.delete_tag("ds", "latest")
    assert c.tags("ds") == {"first": 1}
    assert c.checkout("ds", "first") == 1
    assert c.checkout("ds", 2) == 2
    assert c.scan("ds", version="first").num_rows == 10
    with pytest.raises(pa.ArrowKeyError):
        c.checkout("ds", 9)
    assert c.restore("ds", "first") == 3
    assert c.scan("ds").num_rows == 10
    with pytest.raises(pa.ArrowInvalid):
        c.action("create_tag", ActionRequest("ds"))  # no tag name


def test_schema_evolution(served: Served) -> None:
    c = served.client
    seed(served, n=20)
    v = c.add_columns("ds", {"double": "id * 2"})
    assert v == 2
    got = c.scan("ds", columns=["id", "double"])
    assert got.column("double").to_pylist() == [2 * i for i in range(20)]
    c.drop_columns("ds", ["s", "l"])
    assert c.schema("ds").names == ["id", "x", "double"]
    with pytest.raises(pa.ArrowInvalid):
        c.drop_columns("ds", [])
    with pytest.raises(pa.ArrowInvalid):
        c.add_columns("ds", {"bad": "no_such_column + 1"})


def test_compact_and_cleanup(served: Served) -> None:
    c = served.client
    data = seed(served, n=1000, rows_per_file=100)
    c.delete("ds", "id < 50")
    stats = c.compact("ds")
    assert stats["fragments_removed"] == 10
    assert stats["fragments_added"] == 1
    assert c.stats("ds")["fragments"] == 1
    assert c.scan("ds").equals(data.slice(50).combine_chunks()) or c.scan("ds").column(
        "id"
    ).to_pylist() == list(range(50, 1000))
    removed = c.cleanup("ds", older_than_seconds=0)
    # Compaction commits twice, as pylance: ReserveFragments, then the Rewrite.
    assert removed["old_versions"] == 3
    assert [v.version for v in c.versions("ds")] == [4]
    with pytest.raises(pa.ArrowInvalid):
        c.cleanup("ds", older_than_seconds=-1)


def test_stats_cache_stats_health(served: Served) -> None:
    seed(served, n=1000, rows_per_file=300)
    served.client.delete("ds", "id < 10")
    stats = served.client.stats("ds")
    assert (stats["rows"], stats["physical_rows"], stats["deleted_rows"]) == (990, 1000, 10)
    assert (stats["fragments"], stats["data_files"], stats["version"], stats["versions"]) == (4, 4, 2, 2)
    assert stats["data_bytes"] > 0
    assert served.client.stats("ds", 1)["rows"] == 1000
    cache = served.client.cache_stats()
    assert {"metadata_hits", "metadata_misses", "page_capacity", "decoded_hits", "io_requests"} <= set(cache)
    assert served.client.health() == "ok"
    assert _act(served, "health", ActionRequest()).datasets == ("ds",)  # type: ignore[attr-defined]


def test_commit_validates_fragments(served: Served) -> None:
    seed(served, n=10)
    for junk in [b"not json", b"[1, 2]", b'{"id": 0}']:
        with pytest.raises(pa.ArrowInvalid):
            served.client.action("commit", ActionRequest("ds", fragments=(junk,)))
    assert served.client.scan("ds").num_rows == 10


def test_unknown_action_and_bad_body(served: Served) -> None:
    with pytest.raises(pa.ArrowInvalid, match="unknown action"):
        list(served.raw.do_action(flight.Action("explode", b"")))
    with pytest.raises(pa.ArrowInvalid):
        list(served.raw.do_action(flight.Action("stats", b"\xff\xff\xff")))


def test_compact_keeps_and_remaps_indices(served: Served) -> None:
    """The compact action remaps the dataset's BTREE index (it dropped every index before): the
    index covers the new fragment, and an indexed filter still returns the right rows."""
    c = served.client
    seed(served, n=1000, rows_per_file=100)
    uri = str(served.root / "ds")
    lance_format.dataset(uri).create_scalar_index("id", "BTREE")
    c.delete("ds", "id < 50")
    c.compact("ds")
    listed = lance_format.dataset(uri).list_indices()
    frags = {f.fragment_id for f in lance_format.dataset(uri).get_fragments()}
    assert [(i["name"], i["fragment_ids"]) for i in listed] == [("id_idx", frags)]
    assert c.scan("ds", filter="id = 700").column("id").to_pylist() == [700]
