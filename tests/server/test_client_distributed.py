"""LanceFlightClient's planned reads and staged writes: what the Spark data source runs on."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pyarrow as pa
import pytest

from flight_server.client import ScanEndpoint
from loadtest.load.server import free_port
from tests.server.service_fixtures import Served, seed, table


def _data_files(served: Served, name: str) -> set[str]:
    return {p.name for p in (served.root / name / "data").glob("*")}


def test_endpoints_read_independently_give_the_scan(served: Served) -> None:
    data = seed(served, n=1000, rows_per_file=300)
    endpoints = served.client.scan_endpoints("ds", columns=["id", "s"], filter="id >= 100")
    assert len(endpoints) == 4  # one per fragment
    assert pickle.loads(pickle.dumps(endpoints)) == endpoints  # shipped to executors as they are
    assert all(ep.locations == (served.location,) for ep in endpoints)
    batches = [b for i, ep in enumerate(endpoints) for b in served.client.read_endpoint(ep, i)]
    got = pa.Table.from_batches(batches)
    assert got.column_names == ["id", "s"]
    assert got.column("id").to_pylist() == list(range(100, 1000))
    assert got.column("s").to_pylist() == data.column("s").to_pylist()[100:]


def test_min_endpoints_splits_fragments_into_row_ranges(served: Served) -> None:
    seed(served, n=1000, rows_per_file=1000)
    assert len(served.client.scan_endpoints("ds")) == 1
    endpoints = served.client.scan_endpoints("ds", min_endpoints=4, with_row_id=True)
    assert len(endpoints) == 4
    rows = pa.Table.from_batches([b for ep in endpoints for b in served.client.read_endpoint(ep)])
    assert rows.column("id").to_pylist() == list(range(1000))
    assert "_rowid" in rows.column_names


def test_read_endpoint_skips_an_unavailable_location(served: Served) -> None:
    seed(served, n=100, rows_per_file=100)
    (planned,) = served.client.scan_endpoints("ds")
    dead = f"grpc://127.0.0.1:{free_port()}"
    endpoint = ScanEndpoint(planned.ticket, (dead, served.location))
    rows = sum(b.num_rows for b in served.client.read_endpoint(endpoint, index=0))
    assert rows == 100


def test_describe_resolves_versions_and_reports_missing_by_status(served: Served) -> None:
    seed(served, n=10, rows_per_file=10)
    served.client.write("ds", table(5, 10), mode="append")
    schema, version = served.client.describe("ds")
    assert (schema.names, version) == (["id", "x", "s", "l"], 2)
    assert served.client.describe("ds", 1)[1] == 1
    with pytest.raises(KeyError):
        served.client.describe("missing")
    with pytest.raises(KeyError):
        served.client.describe("ds", 9)


def test_stage_batches_then_commit(served: Served) -> None:
    seed(served, n=10, rows_per_file=10)
    data = table(30, 10)
    staged = served.client.stage_batches("ds", iter(data.to_batches(max_chunksize=7)), data.schema)
    assert staged.rows_written == 30
    assert served.client.commit("ds", [staged]) == 2
    assert served.client.scan("ds").num_rows == 40


def test_a_failing_producer_leaves_no_staged_files(served: Served) -> None:
    seed(served, n=10, rows_per_file=10)
    before = _data_files(served, "ds")
    data = table(20, 10)

    def producer() -> Iterator[pa.RecordBatch]:
        yield data.to_batches()[0]
        raise RuntimeError("the upstream task failed")

    with pytest.raises(RuntimeError, match="upstream task failed"):
        served.client.stage_batches("ds", producer(), data.schema)
    assert _data_files(served, "ds") == before
    assert served.client.versions("ds")[-1].version == 1


def test_discard_removes_only_the_staged_files(served: Served) -> None:
    seed(served, n=10, rows_per_file=10)
    before = _data_files(served, "ds")
    staged = served.client.stage("ds", table(10, 10))
    assert _data_files(served, "ds") > before
    assert served.client.discard("ds", staged.fragments) == len(staged.fragments)
    assert served.client.discard("ds", []) == 0
    assert _data_files(served, "ds") == before
