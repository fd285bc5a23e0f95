"""LanceFlightClient's streams: any tabular input, large batches split, idle deadlines, progress."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.client import LanceFlightClient
from flight_server.client_streams import split_batches
from flight_server.requests import END_OF_WRITE
from tests.server.service_fixtures import Recorder, Served, start, stop

MiB = 1024 * 1024


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"a": [1, 2], "b": ["x", "y"]}, id="dict-of-columns"),
        pytest.param([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}], id="list-of-row-dicts"),
        pytest.param(pa.table({"a": [1, 2], "b": ["x", "y"]}).to_reader(), id="reader"),
        pytest.param([pa.table({"a": [1], "b": ["x"]}), pa.table({"a": [2], "b": ["y"]})], id="tables"),
        pytest.param(pa.record_batch({"a": [1, 2], "b": ["x", "y"]}), id="batch"),
    ],
)
def test_write_takes_any_tabular_input(served: Served, data: Any) -> None:
    served.client.write("x", data, mode="create")
    assert served.client.scan("x").to_pydict() == {"a": [1, 2], "b": ["x", "y"]}


def test_write_takes_a_pandas_frame(served: Served) -> None:
    pd = pytest.importorskip("pandas")
    served.client.write("x", pd.DataFrame({"a": [1, 2]}), mode="create")
    assert served.client.scan("x").to_pydict() == {"a": [1, 2]}


def test_write_refuses_what_is_not_a_table(served: Served) -> None:
    with pytest.raises(TypeError, match="dict of columns"):
        served.client.write("x", "not a table", mode="create")
    with pytest.raises(ValueError, match="empty"):
        served.client.write("x", [], mode="create")


def _big_table(nbytes: int) -> pa.Table:
    return pa.table({"v": np.arange(nbytes // 8, dtype=np.int64)})


def test_a_batch_over_the_message_limit_is_split_by_the_client(served: Served) -> None:
    big = _big_table(96 * MiB)  # one batch, over the server's default 64 MiB message limit
    assert big.num_rows == len(big.to_batches()[0])
    served.client.write("big", big, mode="create")
    assert served.client.stats("big")["rows"] == big.num_rows
    # A plain Flight client sending it whole is refused with the way out in the message.
    desc = flight.FlightDescriptor.for_path("big2")
    writer, _ = served.raw.do_put(desc, big.schema)
    writer.write_table(big)
    with pytest.raises(pa.ArrowInvalid, match="max_chunksize"):
        writer.close()


def _slow_gigabyte(batch_bytes: int = 32 * MiB, pause: float = 0.25) -> Iterator[pa.RecordBatch]:
    """1 GiB as 32 batches of one reused 32 MiB batch, produced slowly: the whole write lasts
    longer than the client's deadlines, while no single message waits long."""
    batch = pa.record_batch({"v": np.arange(batch_bytes // 8, dtype=np.int64)})
    for _ in range(1024 * MiB // batch_bytes):
        time.sleep(pause)
        yield batch


@pytest.mark.slow  # about 30 s on two shared cores: the server writes a gigabyte
def test_a_gigabyte_write_outlives_short_deadlines(tmp_path: Path, recorder: Recorder) -> None:
    s = start(tmp_path / "r", recorder)
    # Old behaviour: the 2 s call deadline covered the whole stream (>= 8 s here): DEADLINE_EXCEEDED.
    client = LanceFlightClient(s.location, timeout=2.0, idle_timeout=10.0)
    try:
        schema = pa.schema([("v", pa.int64())])
        reader = pa.RecordBatchReader.from_batches(schema, _slow_gigabyte())
        version = client.write("gb", reader, mode="create", max_rows_per_file=32 * 1024 * 1024)
        assert version == 1
        assert client.stats("gb")["rows"] == 1024 * MiB // 8
    finally:
        client.close()
        stop(s)


class Stalled(flight.FlightServerBase):  # type: ignore[misc]
    """Accepts streams, then stops reading (do_put) or sending (do_get) for ``stall`` seconds."""

    def __init__(self, stall: float) -> None:
        super().__init__("grpc://127.0.0.1:0")
        self.stall = stall

    def do_put(self, context: Any, descriptor: Any, reader: Any, writer: Any) -> None:
        time.sleep(self.stall)

    def get_flight_info(self, context: Any, descriptor: Any) -> flight.FlightInfo:
        schema = pa.schema([("v", pa.int64())])
        endpoint = flight.FlightEndpoint(b"t", [])
        return flight.FlightInfo(schema, descriptor, [endpoint], -1, -1)

    def do_get(self, context: Any, ticket: Any) -> flight.FlightDataStream:
        schema = pa.schema([("v", pa.int64())])

        def batches() -> Iterator[pa.RecordBatch]:
            yield pa.record_batch({"v": [1]})
            time.sleep(self.stall)
            yield pa.record_batch({"v": [2]})

        return flight.GeneratorStream(schema, batches())


def test_a_stalled_write_fails_on_the_idle_deadline() -> None:
    server = Stalled(stall=3.0)
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", idle_timeout=0.5)
    try:
        many = (pa.record_batch({"v": np.arange(MiB, dtype=np.int64)}) for _ in range(256))
        reader = pa.RecordBatchReader.from_batches(pa.schema([("v", pa.int64())]), many)
        with pytest.raises(flight.FlightTimedOutError, match=r"no progress for 0\.5 s"):
            client.write("x", reader)
    finally:
        client.close()
        server.shutdown()


def test_a_stalled_scan_fails_on_the_idle_deadline() -> None:
    server = Stalled(stall=3.0)
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", idle_timeout=0.5)
    try:
        with pytest.raises(flight.FlightTimedOutError, match="scan stream: no progress"):
            client.scan("t")
    finally:
        client.close()
        server.shutdown()


def test_progress_bars_on_request_and_only_then(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    data = pa.table({"a": np.arange(1000)})
    served.client.write("p", data, mode="create", progress=True)
    err = capsys.readouterr().err
    assert "create p" in err
    assert "7.81k/7.81k" in err  # the bar's total is the table's size (8000 bytes)
    served.client.compact("p", progress=True)
    served.client.cleanup("p", progress=True)
    err = capsys.readouterr().err
    assert "compact p" in err
    assert "cleanup p" in err
    assert "done in" in err
    # Default: only on a terminal (pytest's stderr is not one).
    served.client.write("p", data, progress=None)
    served.client.compact("p")
    assert capsys.readouterr().err == ""


def test_end_marker_is_sent_after_split_batches(served: Served) -> None:
    # The server commits only after the end marker: a split write commits once, all rows.
    served.client.max_batch_bytes = 1000
    served.client.write("m", pa.table({"a": np.arange(10_000)}), mode="create")
    assert served.client.versions("m")[-1].version == 1
    assert served.client.scan("m").num_rows == 10_000
    assert END_OF_WRITE


def test_split_batches_measures_slices_by_their_rows_not_their_buffers() -> None:
    # A small slice of a big batch shares its buffers (over the limit) but is itself small: sent
    # whole. A batch that is big by its rows is cut into parts under the limit, rows in order.
    big = pa.record_batch({"x": pa.array(range(100_000), pa.int64())})
    small = big.slice(10, 50)
    assert small.get_total_buffer_size() > 1000 >= small.nbytes
    assert list(split_batches([small], max_bytes=1000)) == [small]
    parts = list(split_batches([big.slice(0, 1000)], max_bytes=1000))
    assert all(p.nbytes <= 1000 for p in parts)
    assert len(parts) == 8
    assert pa.Table.from_batches(parts).column("x").to_pylist() == list(range(1000))
    assert list(split_batches([big.slice(5, 1)], max_bytes=1)) == [big.slice(5, 1)]
