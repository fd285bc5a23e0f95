"""``s3://`` against a real S3-compatible server on loopback (SeaweedFS)."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import CorruptFileError, InvalidInputError, NotFoundError, StorageError
from lance_format.dataset import write_dataset
from lance_format.io.cache import METADATA_CACHE, ByteCache
from lance_format.io.planner import PlanLimits
from lance_format.io.reader import RangeReader
from lance_format.io.retry import retry_count
from lance_format.io.s3 import S3Store, s3_options
from lance_format.io.store import store_for_uri
from tests.s3_server import ACCESS_KEY, BUCKET, SECRET_KEY, S3Server

pytestmark = pytest.mark.s3


def table(n: int) -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table(
        {
            "i": np.arange(n, dtype=np.int64),
            "x": rng.random(n),
            "s": pa.array([f"row {i}" for i in range(n)]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16, dtype=np.float32)), 16),
        }
    )


def test_write_read_take_and_pylance_reads_it(s3_server: S3Server, s3_uri: str) -> None:
    t = table(5000)
    opts = s3_server.storage_options
    write_dataset(t, s3_uri, max_rows_per_file=2000, storage_options=opts)
    write_dataset(table(100), s3_uri, mode="append", storage_options=opts)
    ds = lance_format.dataset(s3_uri, storage_options=opts)
    assert ds.version == 2
    assert ds.count_rows() == 5100
    assert ds.to_table(limit=5000).equals(t)
    assert ds.take([0, 4999, 2500]).column("i").to_pylist() == [0, 4999, 2500]
    import lance

    theirs = lance.dataset(s3_uri, storage_options=opts)
    assert theirs.count_rows() == 5100
    assert theirs.take([1, 4000]).column("s").to_pylist() == ["row 1", "row 4000"]


def test_conditional_put_has_one_winner(s3_server: S3Server, s3_uri: str) -> None:
    store = store_for_uri(s3_uri, s3_server.storage_options)
    wins: list[int] = []
    lock = threading.Lock()

    def attempt(i: int) -> None:
        if store.put_if_not_exists("_versions/x.manifest", f"writer {i}".encode()):
            with lock:
                wins.append(i)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1
    assert store.read_all("_versions/x.manifest") == f"writer {wins[0]}".encode()
    assert not store.put_if_not_exists("_versions/x.manifest", b"late")


def test_read_tail_is_one_request_with_the_size(s3_server: S3Server, s3_uri: str) -> None:
    store = store_for_uri(s3_uri, s3_server.storage_options)
    store.write("obj", bytes(range(200)))
    assert store.read_tail("obj", 16) == (200, bytes(range(184, 200)))
    assert store.read_range("obj", 190, 400) == bytes(range(190, 200))
    assert store.read_range("obj", 300, 400) == b""


def test_a_read_split_at_max_request_fills_one_buffer(s3_server: S3Server, s3_uri: str) -> None:
    # The parts of a split read are copied from each response straight into one buffer.
    data = np.random.default_rng(3).integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    store = store_for_uri(s3_uri, s3_server.storage_options)
    store.write("split", data)
    r = RangeReader(store, "split", len(data), PlanLimits(max_gap=0, max_request=30_000), ByteCache(0))
    out = r.read([(10, 95_000), (99_990, 10)])
    assert [bytes(b) for b in out] == [data[10:95_010], data[99_990:]]
    assert (r.stats.requests, r.stats.bytes_read) == (4 + 1, 95_000 + 10)
    buf = memoryview(bytearray(8))
    assert store.read_range_into("split", 99_996, buf) == 4  # short at the end of the object
    assert bytes(buf[:4]) == data[99_996:]
    assert store.read_range_into("split", 200_000, buf) == 0


def test_reads_hand_back_the_response_buffer_without_copying(s3_server: S3Server, s3_uri: str) -> None:
    # A full scan moves the whole file through these reads: each range is a view of obstore's
    # response buffer, not a ``bytes`` copy of it (one request each, single or in parallel).
    data = np.random.default_rng(4).integers(0, 256, 600_000, dtype=np.uint8).tobytes()
    store = store_for_uri(s3_uri, s3_server.storage_options)
    store.write("views", data)
    r = RangeReader(store, "views", len(data), PlanLimits(max_gap=0, max_request=1 << 20), ByteCache(0))
    one = r.read([(5, 1000)])
    many = r.read([(0, 100), (300_000, 200_000), (599_990, 10)])
    assert [bytes(b) for b in one + many] == [data[5:1005], data[:100], data[300_000:500_000], data[599_990:]]
    assert (r.stats.requests, r.stats.bytes_read) == (4, 1000 + 100 + 200_000 + 10)
    assert {type(b.obj).__name__ for b in one + many} == {"Bytes"}  # obstore.Bytes, not bytes
    assert bytes(store.read_range_view("views", 599_990, 700_000)) == data[599_990:]
    assert bytes(store.read_range_view("views", 700_000, 700_010)) == b""


def test_missing_and_denied_surface_at_once_with_the_path(s3_server: S3Server, s3_uri: str) -> None:
    store = store_for_uri(s3_uri, s3_server.storage_options)
    before = retry_count()
    with pytest.raises(NotFoundError, match=s3_uri):
        store.read_range("nope", 0, 10)
    with pytest.raises(NotFoundError):
        lance_format.dataset(s3_uri, storage_options=s3_server.storage_options)
    bad = dict(s3_server.storage_options, aws_secret_access_key="wrong-secret")
    wrong = S3Store(f"s3://{BUCKET}/x", bad)
    store.write("obj", b"1")
    # SeaweedFS without identities accepts any signature; only a missing bucket is certain to fail.
    with pytest.raises(StorageError, match="no-such-bucket"):
        S3Store("s3://no-such-bucket-here/p", s3_server.storage_options).write("k", b"1")
    assert wrong.uri == f"s3://{BUCKET}/x"
    assert retry_count() == before  # none of these were retried


def test_options_precedence_and_env() -> None:
    env = {
        "AWS_ENDPOINT_URL": "http://env:1",
        "AWS_ACCESS_KEY_ID": "env-key",
        "AWS_SECRET_ACCESS_KEY": "env-secret",
        "AWS_REGION": "eu-west-1",
    }
    o = s3_options({}, env)
    assert (o.endpoint_url, o.key, o.secret, o.region, o.anonymous) == (
        "http://env:1",
        "env-key",
        "env-secret",
        "eu-west-1",
        False,
    )
    o = s3_options({"aws_endpoint": "http://opt:2", "aws_region": "us-east-2", "anonymous": "true"}, env)
    assert (o.endpoint_url, o.region, o.anonymous) == ("http://opt:2", "us-east-2", True)
    o = s3_options({"aws_endpoint": "http://opt:2"}, env, endpoint_url="http://arg:3", anonymous=True)
    assert (o.endpoint_url, o.anonymous) == ("http://arg:3", True)
    o = s3_options({"client_max_retries": "3", "client_retry_timeout": "7"}, {})
    assert (o.retry.max_attempts, o.retry.timeout) == (4, 7.0)
    with pytest.raises(InvalidInputError):
        s3_options({"aws_endpoint": "ftp://x"}, {})
    with pytest.raises(InvalidInputError):
        s3_options({"client_max_retries": "many"}, {})
    with pytest.raises(InvalidInputError):
        s3_options({}, {}, colour="blue")


def test_reads_survive_a_server_restart_mid_scan(s3_server: S3Server, s3_uri: str) -> None:
    n = 40_000
    t = table(n)
    opts = dict(s3_server.storage_options, client_max_retries="40", client_retry_timeout="90")
    write_dataset(t, s3_uri, max_rows_per_file=5000, storage_options=opts)
    METADATA_CACHE.clear()
    ds = lance_format.dataset(s3_uri, storage_options=opts)
    before = retry_count()
    batches = ds.scanner(batch_size=1000).to_batches()
    got = [next(batches)]
    taken: list[pa.Table] = []
    errors: list[BaseException] = []

    def read_on() -> None:
        try:
            taken.append(ds.take([n - 1, 12_345, 0]))  # issued while the server is down
            got.extend(batches)
        except BaseException as e:
            errors.append(e)

    s3_server.stop()
    reader = threading.Thread(target=read_on)
    reader.start()
    time.sleep(1.0)  # the reader's requests fail and back off meanwhile
    s3_server.start()
    reader.join(120)
    assert not reader.is_alive()
    assert errors == []
    assert pa.Table.from_batches(got).equals(t)
    assert taken[0].column("i").to_pylist() == [n - 1, 12_345, 0]
    assert retry_count() > before


def test_anonymous_and_credential_chain_paths_read_the_same(
    s3_server: S3Server, s3_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    signed = store_for_uri(s3_uri, s3_server.storage_options)
    signed.write("obj", bytes(range(256)) * 10)
    # SeaweedFS without identities also serves unsigned requests.
    anon = S3Store(s3_uri, {"aws_endpoint": s3_server.endpoint_url, "anonymous": "true"})
    assert anon.options.anonymous
    assert anon.read_range("obj", 5, 10) == bytes(range(5, 10))
    assert anon.read_tail("obj", 3) == (2560, bytes([253, 254, 255]))
    # No keys in the options: botocore's provider chain finds them (here: the environment).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    chain = S3Store(s3_uri, {"aws_endpoint": s3_server.endpoint_url, "aws_region": "us-east-1"})
    assert chain.options.key == ACCESS_KEY  # resolved from the environment
    chain = S3Store(s3_uri, {"aws_endpoint": s3_server.endpoint_url}, key=None, secret=None)
    assert chain.read_range("obj", 250, 260) == (bytes(range(256)) * 2)[250:260]
    assert chain.read_tail("obj", 2) == (2560, bytes([254, 255]))
    assert chain.read_all("obj") == bytes(range(256)) * 10
    with pytest.raises(NotFoundError):
        chain.read_range("missing", 0, 1)


def test_metadata_requests_wait_for_their_sessions_gate(s3_server: S3Server, s3_uri: str) -> None:
    """Sizes, tails, listings and writes issued outside the scheduler still take a permit of the
    gate of the runtime (session) that opened the store."""
    from lance_format.core.config import EngineConfig
    from lance_format.io.runtime import IORuntime

    runtime = IORuntime.build(EngineConfig(io_parallelism=1))
    store = store_for_uri(s3_uri, s3_server.storage_options, runtime=runtime)
    store.write("obj", b"x" * 100)
    gate = runtime.scheduler.gate
    done: list[object] = []
    calls = [
        lambda: store.size("obj"),
        lambda: store.read_tail("obj", 10),
        lambda: list(store.list("")),
        lambda: store.write("other", b"y"),
    ]
    for call in calls:
        gate.acquire()  # every permit taken: the store's request must wait for it
        worker = threading.Thread(target=lambda c=call: done.append(c()))
        worker.start()
        worker.join(0.3)
        assert worker.is_alive(), "the request did not wait for the gate"
        gate.release()
        worker.join(30)
        assert not worker.is_alive()
    assert len(done) == len(calls)
    assert gate.in_flight == 0
    # Reads the scheduler runs hold the permit already: nesting does not take a second one.
    with gate.hold():
        assert store.read_range("obj", 0, 5) == b"xxxxx"
    assert gate.max_in_flight == 1


_STATUS = "Generic S3 error: GET x - Server returned non-2xx status code: "


@pytest.mark.parametrize(
    ("message", "kind", "transient"),
    [
        (_STATUS + "503 Service Unavailable", OSError, True),
        (_STATUS + "429 Too Many Requests", OSError, True),
        (_STATUS + "500 Internal", OSError, True),
        (_STATUS + "400 Bad Request", OSError, False),
        (_STATUS + "403 Forbidden", PermissionError, False),
        ("Generic S3 error: GET x - HTTP error: error sending request", ConnectionError, True),
        ("Generic S3 error: something else entirely", OSError, False),
    ],
)
def test_obstore_errors_are_classified_for_retries(message: str, kind: type, transient: bool) -> None:
    import obstore.exceptions

    from lance_format.io.retry import is_transient
    from lance_format.io.s3 import _translate

    translated = _translate(obstore.exceptions.GenericError(message + "\n\nDebug source:\nGeneric { ... }"))
    assert isinstance(translated, kind)
    assert is_transient(translated) is transient
    assert "Debug source" not in str(translated)


def _object_and_client_calls(
    s3_server: S3Server, s3_uri: str, monkeypatch: pytest.MonkeyPatch, size: int, seed: int
) -> tuple[Any, bytes, list[list[tuple[int, int]]]]:
    """An object of ``size`` random bytes on the S3 server: its store, its bytes and the spans of
    every concurrent client call (``read_spans_together``) made from now on."""
    store = store_for_uri(s3_uri, s3_server.storage_options)
    data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()
    store.write("obj", data)
    seen: list[list[tuple[int, int]]] = []
    together = S3Store.read_spans_together

    def spy(self: S3Store, key: str, spans: list[tuple[int, int]]) -> list[memoryview] | None:
        seen.append(list(spans))
        return together(self, key, spans)

    monkeypatch.setattr(S3Store, "read_spans_together", spy)
    return store, data, seen


def test_a_small_wave_of_requests_is_one_concurrent_client_call(
    s3_server: S3Server, s3_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A one-row take reads one chunk per column: the client fetches them concurrently in one call
    # (no hand-offs to our threads), each its own GET; the bytes and request counts are the plan's.
    store, data, seen = _object_and_client_calls(s3_server, s3_uri, monkeypatch, 3_000_000, 5)
    reader = RangeReader(store, "obj", len(data), page_cache=ByteCache(0))
    ranges = [(2_500_000, 4_000), (10, 300), (1_200_000, 8_000), (1_500_000, 2_000)]
    out = reader.read(ranges)
    assert [bytes(b) for b in out] == [data[o : o + n] for o, n in ranges]
    assert seen == [sorted((o, o + n) for o, n in ranges)]
    assert (reader.stats.requests, reader.stats.bytes_read) == (4, 14_300)
    # A range past the end of the object: the one-by-one path reports it as a truncated file.
    with pytest.raises(CorruptFileError, match="truncated"):
        RangeReader(store, "obj", 4_000_000, page_cache=ByteCache(0)).read([(10, 5), (3_500_000, 10)])


class _ClientCalls:
    """obstore's range calls spied on: the spans and thread of each, and the most async calls
    awaited at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_first: Exception | None = None) -> None:
        import obstore

        self.async_calls: list[tuple[int, list[tuple[int, int]]]] = []
        self.blocking_calls: list[tuple[int, list[tuple[int, int]]]] = []
        self.live = 0
        self.peak = 0
        self._fail = fail_first
        real_async, real_blocking = obstore.get_ranges_async, obstore.get_ranges

        async def spy_async(store: Any, path: str, *, starts: Any, ends: Any, coalesce: int) -> Any:
            self.async_calls.append((threading.get_ident(), list(zip(starts, ends, strict=True))))
            self.live += 1
            self.peak = max(self.peak, self.live)
            try:
                if self._fail is not None:
                    fail, self._fail = self._fail, None
                    raise fail
                return await real_async(store, path, starts=starts, ends=ends, coalesce=coalesce)
            finally:
                self.live -= 1

        def spy_blocking(store: Any, path: str, **kwargs: Any) -> Any:
            spans = list(zip(kwargs["starts"], kwargs["ends"], strict=True))
            self.blocking_calls.append((threading.get_ident(), spans))
            return real_blocking(store, path, **kwargs)

        monkeypatch.setattr(obstore, "get_ranges_async", spy_async)
        monkeypatch.setattr(obstore, "get_ranges", spy_blocking)


def _far_ranges(reader: RangeReader, n: int) -> list[tuple[int, int]]:
    """``n`` ranges too far apart to merge (each its own request), in reverse offset order."""
    gap = reader.limits.max_gap
    return [(i * (gap + 20_000), 1_000 + i) for i in range(n)][::-1]


def test_many_requests_go_as_waves_of_async_client_calls_from_the_callers_thread(
    s3_server: S3Server, s3_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A take of 100 rows issues ~180 GETs: one async client call per wave of <=
    # TOGETHER_MAX_REQUESTS, all awaited on the reading thread (no hand-off to our threads, no
    # blocking call per wave: ~1.4x -> ~1.2x pylance's CPU), waves of near-equal size in offset
    # order, each planned request still one GET with the plan's bytes.
    from lance_format.io.reader import TOGETHER_MAX_REQUESTS

    store, data, _ = _object_and_client_calls(s3_server, s3_uri, monkeypatch, 4_000_000, 6)
    calls = _ClientCalls(monkeypatch)
    reader = RangeReader(store, "obj", len(data), page_cache=ByteCache(0))
    ranges = _far_ranges(reader, 23)
    out = reader.read(ranges)
    assert [bytes(b) for b in out] == [data[o : o + n] for o, n in ranges]
    assert calls.blocking_calls == []
    assert {thread for thread, _ in calls.async_calls} == {threading.get_ident()}
    waves = [spans for _, spans in calls.async_calls]
    assert sorted(len(w) for w in waves) == [7, 8, 8]  # 23 requests: ceil(23 / 10) = 3 waves
    assert max(len(w) for w in waves) <= TOGETHER_MAX_REQUESTS
    # Each wave a contiguous run of the sorted requests; all three in flight at once.
    assert [s for w in sorted(waves) for s in w] == sorted((o, o + n) for o, n in ranges)
    assert calls.peak == 3
    assert (reader.stats.requests, reader.stats.bytes_read) == (23, sum(n for _, n in ranges))
    assert store.read_span_waves("obj", [], 4) == []  # no waves: no wait for one to finish
    # A range past the end of the object in one wave: the others' bytes stand, it reports truncation.
    far = [(i * (reader.limits.max_gap + 20_000), 100) for i in range(22)] + [(3_999_950, 100)]
    with pytest.raises(CorruptFileError, match="truncated"):
        RangeReader(store, "obj", 5_000_000, page_cache=ByteCache(0)).read(far)


def test_a_failed_async_wave_is_retried_through_the_blocking_call_and_counted(
    s3_server: S3Server, s3_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The async call's failure is the wave's first attempt: a transient one is retried (counted)
    # by the blocking call on the same thread; the other waves' responses stand.
    import obstore.exceptions

    store, data, _ = _object_and_client_calls(s3_server, s3_uri, monkeypatch, 4_000_000, 8)
    monkeypatch.setattr(time, "sleep", lambda _s: None)  # the retry's backoff
    busy = obstore.exceptions.GenericError(_STATUS + "503 Service Unavailable")
    calls = _ClientCalls(monkeypatch, fail_first=busy)
    reader = RangeReader(store, "obj", len(data), page_cache=ByteCache(0))
    ranges = _far_ranges(reader, 23)
    retries = retry_count()
    out = reader.read(ranges)
    assert [bytes(b) for b in out] == [data[o : o + n] for o, n in ranges]
    assert retry_count() - retries == 1
    assert len(calls.async_calls) == 3
    assert calls.blocking_calls == [calls.async_calls[0]]  # the failed wave again, same thread
    assert reader.stats.requests == 23
    # A permanent failure surfaces at once, with the path, and is not retried.
    calls._fail = obstore.exceptions.GenericError(_STATUS + "400 Bad Request")
    retries = retry_count()
    with pytest.raises(StorageError, match="obj"):
        RangeReader(store, "obj", len(data), page_cache=ByteCache(0)).read(ranges)
    assert retry_count() == retries


def test_a_thread_running_an_event_loop_sends_its_waves_through_our_threads(
    s3_server: S3Server, s3_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A synchronous read from inside a running event loop cannot run another loop on that thread:
    # its waves go to the scheduler's threads through the blocking call, with the same bytes.
    import asyncio

    store, data, _ = _object_and_client_calls(s3_server, s3_uri, monkeypatch, 4_000_000, 9)
    calls = _ClientCalls(monkeypatch)
    reader = RangeReader(store, "obj", len(data), page_cache=ByteCache(0))
    ranges = _far_ranges(reader, 23)

    async def read_inside_a_loop() -> list[memoryview]:
        return reader.read(ranges)

    out = asyncio.run(read_inside_a_loop())
    assert [bytes(b) for b in out] == [data[o : o + n] for o, n in ranges]
    assert calls.async_calls == []
    assert sorted(len(spans) for _, spans in calls.blocking_calls) == [7, 8, 8]


def test_a_sessions_io_parallelism_bounds_the_waves_in_flight_and_sets_the_gap(
    s3_server: S3Server, s3_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # io_parallelism=20: two waves of <= 10 requests in flight at once (one gate permit each), and
    # since each request beyond 20 adds a round trip, the merge gap is the model's for 20.
    from lance_format.dataset.session import Session
    from lance_format.io.planner import object_store_limits

    session = Session(io_parallelism=20)
    store = store_for_uri(s3_uri, s3_server.storage_options, runtime=session.runtime)
    assert store.requests_in_flight == 20
    assert store.plan_limits == object_store_limits(20_000, 20)
    assert store.plan_limits.max_gap == 128 * 1024  # (0.2 ms + 20 ms / 20) x 200 MB/s = 240 KB
    data = np.random.default_rng(7).integers(0, 256, 8_000_000, dtype=np.uint8).tobytes()
    store.write("obj", data)
    reader = RangeReader(store, "obj", len(data), page_cache=ByteCache(0))
    ranges = [(i * 150_000, 2_000) for i in range(50)]
    calls = _ClientCalls(monkeypatch)
    out = reader.read(ranges)
    assert [bytes(b) for b in out] == [data[o : o + n] for o, n in ranges]
    assert reader.stats.requests == 50
    # Two waves (a gate permit each) of 25 requests, awaited together: the client keeps 10 of
    # each call in flight, so 20 GETs are in flight as with five waves of 10 two at a time.
    assert sorted(len(spans) for _, spans in calls.async_calls) == [25, 25]
    assert calls.peak == session.runtime.scheduler.gate.max_in_flight == 2


def test_a_read_of_many_requests_is_one_wave_per_gate_permit_not_one_per_ten(
    s3_server: S3Server, s3_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 100 requests with io_parallelism 64: six calls of 16-17 GETs (the client keeps 10 of each in
    # flight: ~60 at once), not ten calls of 10 six at a time: the reading thread wakes for each
    # finished call (19 -> 6 calls cut a cold 100-row take's CPU by 2-3 ms on loopback).
    store, data, _ = _object_and_client_calls(s3_server, s3_uri, monkeypatch, 12_000_000, 10)
    assert store.requests_in_flight == 64
    calls = _ClientCalls(monkeypatch)
    reader = RangeReader(store, "obj", len(data), page_cache=ByteCache(0))
    ranges = _far_ranges(reader, 100)
    out = reader.read(ranges)
    assert [bytes(b) for b in out] == [data[o : o + n] for o, n in ranges]
    waves = [spans for _, spans in calls.async_calls]
    assert sorted(len(w) for w in waves) == [16, 16, 17, 17, 17, 17]
    assert [s for w in sorted(waves) for s in w] == sorted((o, o + n) for o, n in ranges)
    assert calls.peak == 6
    assert (reader.stats.requests, reader.stats.bytes_read) == (100, sum(n for _, n in ranges))


def test_a_process_forked_after_s3_io_gets_a_clear_error_not_a_hang(s3_server: S3Server, s3_uri: str) -> None:
    import os
    import signal

    opts = s3_server.storage_options
    write_dataset(table(100), s3_uri, storage_options=opts)
    assert lance_format.dataset(s3_uri, storage_options=opts).count_rows() == 100
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            lance_format.dataset(s3_uri, storage_options=opts).take([5])
            verdict = b"read"
        except NotImplementedError as e:
            verdict = b"refused: " + str(e).encode()
        except BaseException as e:
            verdict = f"other: {type(e).__name__}".encode()
        os.write(write_end, verdict)
        os._exit(0)
    os.close(write_end)
    try:
        deadline = time.monotonic() + 30
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the forked child hung on its S3 read")
            time.sleep(0.05)
        verdict = os.read(read_end, 4096)
    finally:
        os.close(read_end)
    assert verdict.startswith(b"refused: "), verdict
    assert b"spawn" in verdict
    assert b"fork()" in verdict
