"""Reads through the service: list_flights, get_flight_info, get_schema, do_get (scan, take), do_exchange."""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest

from flight_server._serde import decode_ticket, encode_command, encode_ticket
from flight_server.requests import ScanRequest, TakeRequest
from lance_format.io import io_stats
from tests.server.service_fixtures import Recorder, Served, seed, start, stop, table


def _info(served: Served, req: ScanRequest) -> flight.FlightInfo:
    return served.raw.get_flight_info(flight.FlightDescriptor.for_command(encode_command(req)))


def _read(served: Served, info: flight.FlightInfo) -> pa.Table:
    return pa.concat_tables(served.raw.do_get(e.ticket).read_all() for e in info.endpoints)


def test_list_flights_lists_datasets(served: Served) -> None:
    seed(served, "a", 10)
    seed(served, "b", 20)
    infos = list(served.raw.list_flights())
    assert sorted((i.descriptor.path[0], i.total_records) for i in infos) == [(b"a", 10), (b"b", 20)]
    assert served.client.list_datasets() == ["a", "b"]


def test_path_descriptor_reads_whole_latest_version(served: Served) -> None:
    data = seed(served, n=1000, rows_per_file=300)
    info = served.raw.get_flight_info(flight.FlightDescriptor.for_path("ds"))
    assert len(info.endpoints) == 4  # one per fragment
    assert info.total_records == 1000
    assert info.total_bytes > 0
    assert info.schema == data.schema
    assert _read(served, info).equals(data)


def test_tickets_are_pinned_to_one_version(served: Served) -> None:
    data = seed(served, n=600, rows_per_file=300)
    info = served.raw.get_flight_info(flight.FlightDescriptor.for_path("ds"))
    versions = {decode_ticket(e.ticket.ticket).version for e in info.endpoints}  # type: ignore[union-attr]
    assert versions == {1}
    served.client.write("ds", table(50, 600))  # a new version after planning
    served.client.delete("ds", "id < 100")
    assert _read(served, info).equals(data)  # still the planned snapshot
    assert served.client.scan("ds").num_rows == 550


def test_endpoints_list_every_advertised_location(tmp_path: object, recorder: Recorder) -> None:
    from pathlib import Path

    s = start(Path(str(tmp_path)) / "r", recorder)
    try:
        seed(s, n=900, rows_per_file=300)
        other = ["grpc://10.0.0.1:1", "grpc://10.0.0.2:2"]
        s.server.advertise = [s.location, *other]
        info = s.raw.get_flight_info(flight.FlightDescriptor.for_path("ds"))
        firsts = []
        for e in info.endpoints:
            uris = sorted(loc.uri.decode() for loc in e.locations)
            assert uris == sorted([s.location, *other])
            firsts.append(e.locations[0].uri.decode())
        assert len(set(firsts)) == 3  # endpoints start at different workers
    finally:
        stop(s)


def test_scan_options(served: Served) -> None:
    data = seed(served)
    req = ScanRequest("ds", columns=("id", "s"), filter_sql="id >= 100 AND id < 700", batch_size=64)
    info = _info(served, req)
    got = _read(served, info)
    expected = data.filter((pc.field("id") >= 100) & (pc.field("id") < 700)).select(["id", "s"])
    assert got.equals(expected)
    assert info.total_records == -1  # unknown before filtering
    assert (
        max(b.num_rows for e in info.endpoints for b in served.raw.do_get(e.ticket).read_all().to_batches())
        <= 64
    )
    limited = _read(served, _info(served, ScanRequest("ds", columns=("id",), limit=7, offset=295)))
    assert limited.column("id").to_pylist() == list(range(295, 302))
    with_ids = _read(
        served, _info(served, ScanRequest("ds", columns=("id",), with_row_id=True, with_row_address=True))
    )
    assert with_ids.column("_rowaddr").to_pylist()[300] == (1 << 32) | 0
    empty_cols = served.client.scan("ds", columns=[], limit=3)
    assert empty_cols.num_columns == 0


def test_sql_and_substrait_filters_agree(served: Served) -> None:
    data = seed(served)
    expr = (pc.field("id") > 500) & (pc.field("s") == "s3")
    by_substrait = served.client.scan("ds", filter=expr)
    by_sql = served.client.scan("ds", filter="id > 500 AND s = 's3'")
    assert by_substrait.equals(by_sql)
    assert by_sql.equals(data.filter(expr))
    assert by_sql.num_rows > 0


def _settled_requests() -> int:
    """The process-wide request count once read-ahead left over from earlier calls has finished."""
    last = io_stats().requests
    for _ in range(100):
        time.sleep(0.05)
        now = io_stats().requests
        if now == last:
            return now
        last = now
    raise AssertionError("background reads never settled")


def test_bad_filters_fail_before_reading_data(served: Served) -> None:
    seed(served)
    served.client.scan("ds", limit=1)  # warm the metadata
    before = _settled_requests()
    for bad in ["nope > 1", "id >", "s + 1 > 'x'"]:
        with pytest.raises(pa.ArrowInvalid):
            served.client.scan("ds", filter=bad)
    with pytest.raises(pa.ArrowInvalid):
        _info(served, ScanRequest("ds", filter_substrait=b"\x01\x02garbage"))
    with pytest.raises(pa.ArrowInvalid):
        _info(served, ScanRequest("ds", filter_sql="id > 1", filter_substrait=b"x"))
    assert io_stats().requests == before


def test_split_endpoints_by_rows(served: Served) -> None:
    data = seed(served, n=1000, rows_per_file=600)
    info = _info(served, ScanRequest("ds", max_rows_per_endpoint=250))
    assert len(info.endpoints) == 3 + 2  # 600 -> 250+250+100, 400 -> 250+150
    assert _read(served, info).equals(data)
    served.client.delete("ds", "id % 3 = 0")
    info = _info(served, ScanRequest("ds", max_rows_per_endpoint=100))
    assert _read(served, info).equals(data.filter(pa.array(data.column("id").to_numpy() % 3 != 0)))


def test_get_schema(served: Served) -> None:
    data = seed(served)
    schema = served.raw.get_schema(flight.FlightDescriptor.for_path("ds")).schema
    assert schema == data.schema
    req = ScanRequest("ds", columns=("s", "id"), with_row_id=True)
    got = served.raw.get_schema(flight.FlightDescriptor.for_command(encode_command(req))).schema
    assert got.names == ["s", "id", "_rowid"]


def test_take_by_offset_and_row_id_keeps_order(served: Served, recorder: Recorder) -> None:
    data = seed(served)
    order = [999, 0, 301, 301, 5]
    got = served.client.take("ds", indices=order)
    assert got.equals(data.take(order))
    # Row ids are addresses here (fragment << 32 | offset): 301 is fragment 1, offset 1.
    ids = [(1 << 32) | 1, 2, (3 << 32) | 99]
    got = served.client.take("ds", row_ids=ids, columns=["id"])
    assert got.column("id").to_pylist() == [301, 2, 999]
    assert ("take", 3, got.nbytes) in [(k, r, b) for k, r, b in recorder.served if k == "take"] or any(
        k == "take" and r == 3 for k, r, _ in recorder.served
    )
    old = served.client.write("ds", table(5, 1000))
    assert served.client.take("ds", indices=[1000], version=old).column("id").to_pylist() == [1000]
    with pytest.raises(pa.ArrowInvalid):
        served.client.take("ds", indices=[1000], version=1)


def test_oversized_take_is_refused(tmp_path: object, recorder: Recorder) -> None:
    from pathlib import Path

    s = start(Path(str(tmp_path)) / "r", recorder, max_take_rows=10)
    try:
        seed(s, n=100)
        assert s.client.take("ds", indices=list(range(10))).num_rows == 10
        with pytest.raises(pa.ArrowInvalid, match="maxTakeRows"):
            s.client.take("ds", indices=list(range(11)))
        with pytest.raises(pa.ArrowInvalid, match="maxTakeRows"):
            list(s.client.take_stream("ds", [list(range(11))], by="index"))
        assert s.client.take("ds", indices=[3]).num_rows == 1  # still serving
    finally:
        stop(s)


def test_exchange_streams_takes(served: Served) -> None:
    data = seed(served)
    requests = [[5, 1, 999], [], [300] * 4]
    answers = list(served.client.take_stream("ds", requests, by="index", columns=["id", "s"]))
    assert [a.column("id").to_pylist() for a in answers] == [[5, 1, 999], [], [300] * 4]
    assert answers[0].schema.names == ["id", "s"]
    answers = list(served.client.take_stream("ds", [np.array([(2 << 32) | 7], np.uint64)]))
    assert answers[0].equals(data.take([607]))


def test_exchange_accepts_a_take_without_ids(served: Served) -> None:
    # The ids come as batches, so the descriptor's take need not carry an (empty) id list.
    data = seed(served, n=10)
    descriptor = flight.FlightDescriptor.for_command(encode_ticket(TakeRequest("ds", columns=("id",))))
    writer, reader = served.raw.do_exchange(descriptor)
    ids = pa.record_batch({"index": pa.array([3, 1], pa.uint64())})
    writer.begin(ids.schema)
    writer.write_batch(ids)
    assert reader.read_chunk().data.column("id").to_pylist() == data.column("id").take([3, 1]).to_pylist()
    writer.done_writing()
    writer.close()
    # A do_get take still needs its ids.
    with pytest.raises(pa.ArrowInvalid, match="needs row_ids or indices"):
        served.raw.do_get(flight.Ticket(encode_ticket(TakeRequest("ds")))).read_all()


def test_exchange_rejects_bad_batches(served: Served) -> None:
    seed(served, n=10)
    req = TakeRequest("ds", row_ids=np.zeros(0, np.uint64))
    descriptor = flight.FlightDescriptor.for_command(encode_ticket(req))
    writer, reader = served.raw.do_exchange(descriptor)
    bad = pa.record_batch({"wrong": pa.array([1], pa.uint64())})

    def exchange() -> None:
        writer.begin(bad.schema)
        writer.write_batch(bad)
        writer.done_writing()
        reader.read_all()

    with pytest.raises(pa.ArrowInvalid, match="exactly one column"):
        exchange()
    with contextlib.suppress(pa.ArrowInvalid):
        writer.close()  # reports the same error again


def test_missing_dataset_version_and_tag_are_not_found(served: Served) -> None:
    seed(served, n=10)
    with pytest.raises(pa.ArrowKeyError):
        served.client.scan("absent")
    with pytest.raises(pa.ArrowKeyError):
        served.client.scan("ds", version=42)
    with pytest.raises(pa.ArrowKeyError):
        served.client.scan("ds", version="no-such-tag")


def test_dictionary_columns_stream(served: Served) -> None:
    data = pa.table({"id": [1, 2, 3], "d": pa.array(["p", "q", None]).dictionary_encode()})
    served.client.write("dict", data, mode="create")
    got = served.client.scan("dict")
    assert got.column("d").to_pylist() == ["p", "q", None]
    assert pa.types.is_dictionary(got.schema.field("d").type)
    assert served.client.take("dict", indices=[2, 0]).column("d").to_pylist() == [None, "p"]
