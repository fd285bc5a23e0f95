"""Writes through the service: do_put modes, stage + commit, concurrency, kills, pylance interop."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server._serde import decode_write_result, encode_command
from flight_server.catalog import Catalog
from flight_server.client import LanceFlightClient
from flight_server.errors import error_code
from flight_server.handlers.put import (
    CANCEL_GRACE_S,
    StreamCancelled,
    cancelled_within,
    received_bytes,
    write_stream,
)
from flight_server.requests import END_OF_WRITE, WriteRequest
from lance_format.core.errors import NotFoundError
from tests.server.service_fixtures import Recorder, Served, seed, start, stop, table

ROOT = Path(__file__).resolve().parents[2]


def test_put_modes(served: Served, recorder: Recorder) -> None:
    c = served.client
    assert c.write("ds", table(100), mode="create") == 1
    with pytest.raises(flight.FlightServerError) as info:
        c.write("ds", table(1), mode="create")
    assert error_code(info.value) == "ALREADY_EXISTS"
    assert c.write("ds", table(50, 100)) == 2
    assert c.scan("ds").equals(pa.concat_tables([table(100), table(50, 100)]).combine_chunks()) or (
        c.scan("ds").column("id").to_pylist() == list(range(150))
    )
    assert c.write("ds", table(10, 500), mode="overwrite") == 3
    assert c.scan("ds").column("id").to_pylist() == list(range(500, 510))
    assert ("put", 10) in [(kind, rows) for kind, rows, _ in recorder.served]
    with pytest.raises(pa.ArrowInvalid):
        c.write("ds", pa.table({"other": [1]}))  # schema mismatch on append
    assert c.scan("ds").num_rows == 10


def test_plain_path_descriptor_creates_then_appends(served: Served) -> None:
    for i in range(2):
        writer, meta = served.raw.do_put(flight.FlightDescriptor.for_path("plain"), table(5).schema)
        writer.write_table(table(5, 5 * i))
        writer.done_writing()
        result = decode_write_result(meta.read().to_pybytes())
        writer.close()
        assert (result.version, result.rows_written) == (i + 1, 5)
    assert served.client.scan("plain").column("id").to_pylist() == list(range(10))


def test_stage_then_commit_many_writers_in_one_transaction(served: Served) -> None:
    c = served.client
    staged = [c.stage("new", table(20, 20 * i)) for i in range(3)]
    assert [s.rows_written for s in staged] == [20, 20, 20]
    assert c.list_datasets() == []  # nothing committed yet
    assert c.commit("new", staged, mode="create") == 1
    assert sorted(c.scan("new").column("id").to_pylist()) == list(range(60))
    more = [c.stage("new", table(5, 100 + 5 * i)) for i in range(2)]
    assert c.commit("new", more) == 2
    assert c.scan("new").num_rows == 70
    with pytest.raises(flight.FlightServerError) as info:
        c.commit("new", more, mode="create")
    assert error_code(info.value) == "ALREADY_EXISTS"
    assert c.commit("new", [], mode="overwrite") == 3  # an empty Spark job
    assert c.scan("new").num_rows == 0


def test_discard_staged_removes_only_uncommitted_files(served: Served) -> None:
    from flight_server.requests import ActionRequest

    c = served.client
    seed(served, "ds", 10)
    staged = c.stage("ds", table(10, 10))
    data_dir = served.root / "ds" / "data"
    assert len(list(data_dir.iterdir())) == 2
    result = c.action("discard_staged", ActionRequest("ds", fragments=staged.fragments))
    assert result.counters["files_removed"] == 1
    assert len(list(data_dir.iterdir())) == 1
    assert c.scan("ds").num_rows == 10


def test_concurrent_writers_exact_row_counts(served: Served) -> None:
    c = served.client
    c.write("ds", table(1), mode="create")
    writers, per_writer, rows = 6, 5, 37
    errors: list[BaseException] = []

    def work(w: int) -> None:
        client = LanceFlightClient(served.location)
        try:
            for i in range(per_writer):
                client.write("ds", table(rows, 1000 * (w + 1) + rows * i))
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ids = c.scan("ds", columns=["id"]).column("id").to_pylist()
    assert len(ids) == 1 + writers * per_writer * rows
    assert len(set(ids)) == len(ids)
    assert c.versions("ds")[-1].version == 1 + writers * per_writer


@pytest.mark.parametrize("mode", ["append", "overwrite", "stage", "plain"])
def test_client_killed_mid_put_leaves_no_commit(served: Served, mode: str) -> None:
    ids = pa.table({"id": pa.array(range(10), pa.int64())})  # the worker's schema
    served.client.write("ds", ids, mode="create")
    before = served.client.versions("ds")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "server" / "put_worker.py"), served.location, mode],
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"sent"
        deadline = time.monotonic() + 10
        while served.server._slots.open == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # the server is inside do_put
        proc.kill()
    finally:
        proc.wait(10)
    deadline = time.monotonic() + 20
    while served.server._slots.open and time.monotonic() < deadline:
        time.sleep(0.05)
    assert served.server._slots.open == 0, "the server did not notice the dead client"
    assert served.client.versions("ds") == before
    assert served.client.scan("ds").num_rows == 10
    if mode == "stage":  # the worker's 5 finished files were removed again
        assert len(list((served.root / "ds" / "data").iterdir())) == 1
    assert served.client.write("ds", ids) == before[-1].version + 1  # still serving


@dataclass
class _Chunk:
    """One message of a do_put stream: a batch, or app_metadata alone."""

    data: pa.RecordBatch | None
    app_metadata: pa.Buffer | None = None


class _StreamStandIn:
    """What write_stream reads of a do_put reader; remembers when the stream ended."""

    def __init__(self, batches: list[pa.RecordBatch], end_marker: bool = False) -> None:
        self.schema = batches[0].schema
        self.chunks = [_Chunk(b) for b in batches]
        if end_marker:
            self.chunks.append(_Chunk(None, pa.py_buffer(END_OF_WRITE)))
        self.ended_at: float | None = None

    def __iter__(self) -> Iterator[_Chunk]:
        yield from self.chunks
        self.ended_at = time.monotonic()

    def cancelled_after(self, delay: float) -> Callable[[], bool]:
        """A call that is marked cancelled ``delay`` seconds after its stream ended."""
        return lambda: self.ended_at is not None and time.monotonic() >= self.ended_at + delay


def _write(catalog: Catalog, req: WriteRequest, stream: _StreamStandIn, **kwargs: Any) -> tuple[int, float]:
    start = time.monotonic()
    version = write_stream(catalog, req, stream, 1 << 30, **kwargs).version
    return version, time.monotonic() - start


def test_plain_stream_waits_for_a_late_cancellation(tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path))
    batch = pa.record_batch({"id": pa.array(range(10), pa.int64())})
    late = _StreamStandIn([batch])
    with pytest.raises(StreamCancelled):  # the dead peer's cancellation arrives within the grace
        _write(catalog, WriteRequest("ds"), late, cancelled=late.cancelled_after(CANCEL_GRACE_S / 2))
    with pytest.raises(NotFoundError):  # nothing committed
        catalog.open("ds", shared=False)
    honest = _StreamStandIn([batch])
    version, took = _write(catalog, WriteRequest("ds"), honest, cancelled=lambda: False, cancel_grace=0.03)
    assert version == 1
    assert took >= 0.03  # a finished plain client waits out the whole grace period
    assert not cancelled_within(lambda: False, 0.0)
    assert cancelled_within(lambda: True, 10.0)


def test_marked_stream_does_not_wait_for_cancellation(tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path))
    batch = pa.record_batch({"id": pa.array(range(10), pa.int64())})
    req = WriteRequest("ds", "create", end_marker=True)
    version, took = _write(
        catalog, req, _StreamStandIn([batch], end_marker=True), cancelled=lambda: False, cancel_grace=30
    )
    assert (version, took < 10) == (1, True)
    unmarked = _StreamStandIn([batch])  # killed before the marker: refused at once, no wait
    with pytest.raises(StreamCancelled):
        _write(catalog, WriteRequest("ds", "append", end_marker=True), unmarked, cancel_grace=30)
    ds = catalog.open("ds", shared=False)
    assert (ds.latest_version, ds.count_rows()) == (1, 10)


def test_oversized_batches_are_refused(tmp_path: Path, recorder: Recorder) -> None:
    s = start(tmp_path / "r", recorder, max_message_bytes=1000)
    try:
        with pytest.raises(pa.ArrowInvalid, match=r"maxMessageBytes.*max_chunksize"):
            s.client.write("ds", table(1000), mode="create")
        assert s.client.list_datasets() == []
        s.client.write("ds", table(5), mode="create")
        big = s.client.scan("ds")  # answers are split under the limit, never refused
        assert big.num_rows == 5
    finally:
        stop(s)


@pytest.mark.interop
def test_received_bytes_is_what_a_received_batch_holds() -> None:
    # A batch off the wire (sent sliced, as Spark and split_batches send): the cheap buffer sum the
    # server charges and limits is nbytes up to padding, never below it.
    vec = pa.FixedSizeListArray.from_arrays(pa.array(range(800), pa.float32()), 8)
    tags = pa.array([f"t{i % 7}" for i in range(100)]).dictionary_encode()
    names = pa.array([None if i % 5 == 0 else "x" * (i % 9) for i in range(100)])
    sent = pa.record_batch({"i": range(100), "v": vec, "t": tags, "s": names}).slice(13, 50)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, sent.schema) as w:
        w.write_batch(sent)
    got = pa.ipc.open_stream(sink.getvalue()).read_next_batch()
    assert got.nbytes <= received_bytes(got) <= got.nbytes + 64 * 2 * got.num_columns


def test_pylance_opens_what_the_server_wrote(served: Served) -> None:
    lance = pytest.importorskip("lance")
    c = served.client
    data = table(2000)
    c.write("ds", data.slice(0, 1500), mode="create", max_rows_per_file=400)
    c.write("ds", data.slice(1500))
    c.delete("ds", "id < 10 OR s = 's4'")
    c.add_columns("ds", {"y": "id * 2"})
    ours = c.scan("ds")
    theirs = lance.dataset(str(served.root / "ds")).to_table()
    assert theirs.schema == ours.schema
    assert theirs.num_rows == ours.num_rows > 0
    for name in ours.column_names:
        assert theirs.column(name).to_pylist() == ours.column(name).to_pylist(), name


def test_read_only_token_cannot_write(tmp_path: Path) -> None:
    from dataclasses import replace

    from flight_server.settings import ServerSettings, Token
    from flight_server.workers import build_server

    settings = replace(
        ServerSettings(root=str(tmp_path / "r"), port=0, metrics_port=-1),
        tokens=(Token("rw"), Token("ro", read_only=True)),
    )
    server = build_server(settings, 0, (), None)
    try:
        location = f"grpc://127.0.0.1:{server.port}"
        rw, ro = LanceFlightClient(location, token="rw"), LanceFlightClient(location, token="ro")
        rw.write("ds", table(3), mode="create")
        with pytest.raises(flight.FlightUnauthorizedError):
            ro.write("ds", table(3))
        with pytest.raises(flight.FlightUnauthorizedError):
            ro.delete("ds", "id = 1")
        assert ro.scan("ds").num_rows == 3
        with pytest.raises(flight.FlightUnauthenticatedError):
            LanceFlightClient(location).scan("ds")
        rw.close()
        ro.close()
    finally:
        server.shutdown()


def test_write_request_command_roundtrip(served: Served) -> None:
    req = WriteRequest("cmd", "create", max_rows_per_file=2, data_storage_version="2.0")
    writer, meta = served.raw.do_put(
        flight.FlightDescriptor.for_command(encode_command(req)), table(5).schema
    )
    writer.write_table(table(5))
    writer.done_writing()
    result = decode_write_result(meta.read().to_pybytes())
    writer.close()
    assert (result.dataset, result.version, result.rows_written) == ("cmd", 1, 5)
    assert served.client.stats("cmd")["fragments"] == 3


def test_stage_overwrite_may_change_the_schema(served: Served) -> None:
    c = served.client
    c.write("ds", table(5), mode="create")
    staged = [c.stage("ds", pa.table({"other": ["a", "b"]})), c.stage("ds", pa.table({"other": ["c"]}))]
    assert c.commit("ds", staged, mode="overwrite") == 2
    assert c.scan("ds").to_pydict() == {"other": ["a", "b", "c"]}
    with pytest.raises(pa.ArrowInvalid):
        c.commit("ds", [c.stage("ds", pa.table({"third": [1]}))])  # an append must match the schema
    assert c.scan("ds").num_rows == 3


@pytest.mark.interop
def test_staged_create_records_the_files_version(served: Served) -> None:
    lance = pytest.importorskip("lance")
    c = served.client
    assert c.commit("new", [c.stage("new", table(30))], mode="create") == 1
    theirs = lance.dataset(str(served.root / "new")).to_table()
    assert theirs.column("id").to_pylist() == list(range(30))
