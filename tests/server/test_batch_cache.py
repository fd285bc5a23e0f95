"""The server's caches: decoded scan batches (flight_server.batch_cache) and the engine page cache
that the serving process turns on."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flight_server.batch_cache import BatchCache, scan_key
from flight_server.config import load_settings
from flight_server.requests import ActionRequest, ScanRequest
from flight_server.settings import DEFAULT_BATCH_CACHE_BYTES, ServerSettings
from flight_server.workers import build_server
from lance_format.io import configure_caches, io_stats
from lance_format.io.cache import DECODED_CACHE, PAGE_CACHE
from tests.server.service_fixtures import Served, seed, start, stop


def _batch_counters(served: Served) -> dict[str, int]:
    return {k[len("batch_") :]: v for k, v in served.client.cache_stats().items() if k.startswith("batch_")}


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


def test_warm_scan_streams_from_memory_with_zero_reads(served: Served) -> None:
    data = seed(served, n=1000, rows_per_file=300)
    cold = served.client.scan("ds")
    before_io = io_stats().requests
    before = _batch_counters(served)
    warm = served.client.scan("ds")
    after = _batch_counters(served)
    assert io_stats().requests == before_io  # no byte of the dataset was read again
    assert after["hits"] - before["hits"] == 4  # one per fragment endpoint
    assert after["misses"] == before["misses"]
    assert after["entries"] == 4
    assert after["bytes"] > 0
    assert warm.equals(cold)
    assert _sorted(warm).equals(data)


def test_cached_and_uncached_servers_agree(tmp_path: Path) -> None:
    """Projection, filters and row ids are part of the key: every shape gets its own answer."""
    on = start(tmp_path / "root")
    off = start(tmp_path / "root", batch_cache_bytes=0)
    try:
        seed(on, n=900, rows_per_file=250)
        shapes: list[dict[str, object]] = [
            {},
            {"columns": ["id"]},
            {"columns": ["s", "id"]},
            {"filter": "id > 500"},
            {"filter": pc.field("id") < 100},
            {"columns": ["id"], "with_row_id": True},
            {"batch_size": 64},
        ]
        for _ in range(2):  # cold, then warm: both must equal the uncached server's answer
            for shape in shapes:
                got = on.client.scan("ds", **shape)  # type: ignore[arg-type]
                want = off.client.scan("ds", **shape)  # type: ignore[arg-type]
                assert got.equals(want), shape
        assert _batch_counters(on)["hits"] > 0
        assert _batch_counters(off)["capacity"] == 0
        assert _batch_counters(off)["entries"] == 0
    finally:
        stop(on)
        stop(off)


def test_new_versions_are_new_keys(served: Served) -> None:
    seed(served, n=100, rows_per_file=100)
    first = served.client.scan("ds")
    served.client.write("ds", seed_table(100, 100), mode="append")
    assert served.client.scan("ds").num_rows == 200  # latest version: new endpoints, new keys
    assert served.client.scan("ds", version=1).equals(first)  # the pinned version is still cached
    served.client.action("delete", _req("ds", "id < 150"))
    assert served.client.scan("ds").column("id").to_pylist() == list(range(150, 200))


def seed_table(n: int, start_id: int) -> pa.Table:
    from tests.server.service_fixtures import table

    return table(n, start_id)


def _req(name: str, predicate: str) -> ActionRequest:
    return ActionRequest(name, filter_sql=predicate)


def _batches(n: int, rows: int = 100) -> Iterator[pa.RecordBatch]:
    for i in range(n):
        yield pa.record_batch({"a": pa.array(np.arange(i * rows, (i + 1) * rows))})


_SCHEMA = pa.schema([("a", pa.int64())])


def test_a_stream_stopped_early_stores_nothing() -> None:
    cache = BatchCache(1 << 20)
    gen = cache.recording("k", _SCHEMA, _batches(5))
    assert isinstance(gen, Generator)
    next(gen)
    gen.close()  # the client cancelled after one batch
    assert cache.get("k") is None
    assert list(cache.recording("k", _SCHEMA, _batches(5))) == list(_batches(5))
    got = cache.get("k")
    assert got is not None
    assert got.num_rows == 500
    assert got.column("a").num_chunks == 5


def test_results_larger_than_the_cache_are_not_kept() -> None:
    cache = BatchCache(1000)  # 100 int64 rows are 800 bytes: the second batch overflows
    assert len(list(cache.recording("k", _SCHEMA, _batches(3)))) == 3
    assert cache.get("k") is None
    assert cache.counters().entries == 0


def test_off_cache_passes_batches_through() -> None:
    cache = BatchCache(0)
    assert not cache.enabled
    assert len(list(cache.recording("k", _SCHEMA, _batches(3)))) == 3
    assert cache.get("k") is None


def test_only_single_fragment_scans_without_limit_are_keyed() -> None:
    base = ScanRequest("ds", version=3, fragment_ids=(1,))
    assert scan_key("u", 3, 9, base) is not None
    assert scan_key("u", 3, 9, ScanRequest("ds", fragment_ids=(1, 2))) is None
    assert scan_key("u", 3, 9, ScanRequest("ds", fragment_ids=(1,), limit=5)) is None
    assert scan_key("u", 3, 9, ScanRequest("ds", fragment_ids=(1,), offset=5)) is None
    # A tag and the version it names are one key; another shape is another key.
    assert scan_key("u", 3, 9, ScanRequest("ds", tag="t", fragment_ids=(1,))) == scan_key("u", 3, 9, base)
    assert scan_key("u", 3, 9, ScanRequest("ds", version=3, fragment_ids=(1,), columns=("a",))) != scan_key(
        "u", 3, 9, base
    )
    assert scan_key("u", 3, 10, base) != scan_key("u", 3, 9, base)  # a re-created dataset


def test_batch_cache_size_is_configurable(tmp_path: Path) -> None:
    assert ServerSettings().batch_cache_bytes == DEFAULT_BATCH_CACHE_BYTES
    assert load_settings(["--batch-cache-bytes", "64MiB"], env={}).batch_cache_bytes == 64 * 1024 * 1024
    env = {"LANCE_FLIGHT_BATCH_CACHE_BYTES": "0"}
    assert load_settings([], env=env).batch_cache_bytes == 0
    config = tmp_path / "c.yaml"
    config.write_text("cache:\n  batchBytes: 1Ki\n")
    assert load_settings(["--config", str(config)], env={}).batch_cache_bytes == 1024


def test_serving_process_turns_the_page_cache_on_and_warm_takes_hit_it(tmp_path: Path) -> None:
    """build_server (what every worker runs) sizes the engine caches from the settings (the
    autouse ``restore_engine_caches`` fixture of conftest.py puts them back)."""
    from flight_server.client import LanceFlightClient

    settings = ServerSettings(root=str(tmp_path / "root"), port=0, metrics_port=-1, page_cache_bytes=8 << 20)
    configure_caches(page_bytes=0)
    server = build_server(settings, 0, (), None)
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", timeout=30)
    try:
        assert PAGE_CACHE.capacity == 8 << 20
        client.write("ds", seed_table(2000, 0), mode="create", max_rows_per_file=700)
        rows = np.random.default_rng(0).integers(0, 2000, 100)
        cold = client.take("ds", indices=rows)
        page_before = PAGE_CACHE.counters()
        io_before = io_stats()
        warm = client.take("ds", indices=rows)
        page_after = PAGE_CACHE.counters()
        assert (io_stats() - io_before).requests == 0  # metadata and data both from memory
        assert page_after.hits > page_before.hits
        assert page_after.misses == page_before.misses
        assert warm.equals(cold)
        assert warm.column("id").to_pylist() == rows.tolist()
    finally:
        client.close()
        server.shutdown()


def test_repeated_takes_over_flight_copy_rows_from_decoded_blocks(tmp_path: Path) -> None:
    """The serving process turns the decoded-block cache on: a take that touches blocks a second
    time decodes them whole, and later takes of those blocks read and decode nothing."""
    from flight_server.client import LanceFlightClient

    settings = ServerSettings(root=str(tmp_path / "root"), port=0, metrics_port=-1)
    configure_caches(decoded_bytes=0)
    server = build_server(settings, 0, (), None)
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", timeout=30)
    try:
        assert DECODED_CACHE.capacity == settings.decoded_cache_bytes > 0
        data = seed_table(3000, 0)
        client.write("ds", data, mode="create", max_rows_per_file=1000)
        rows = np.random.default_rng(5).integers(0, 3000, 200)
        cols = ["id", "s"]  # 2 columns x 3 files = 6 blocks, within one take's admission budget
        first = client.take("ds", indices=rows, columns=cols)
        client.take("ds", indices=rows, columns=cols)  # second touch: the blocks are decoded and kept
        stats = client.cache_stats()
        assert stats["decoded_entries"] == 6
        io_before, hits_before = io_stats(), stats["decoded_hits"]
        warm = client.take("ds", indices=rows[::-1], columns=cols)
        assert (io_stats() - io_before).requests == 0
        assert client.cache_stats()["decoded_hits"] - hits_before == 6
        assert warm.equals(first.take(pa.array(np.arange(len(rows))[::-1])))
        assert warm.column("id").to_pylist() == data.column("id").take(pa.array(rows[::-1])).to_pylist()
    finally:
        client.close()
        server.shutdown()


def test_small_results_are_charged_what_they_hold() -> None:
    """Each cached result is charged its Python and C++ objects, not only its data bytes: 10,000
    distinct tickets with three-row results (24 bytes of data each) fit a 1 MiB cache before, at
    ~2 KiB of resident memory each (~20 MiB held under a 1 MiB budget)."""
    cache = BatchCache(1 << 20)
    for i in range(10_000):
        list(cache.recording(("k", i), _SCHEMA, _batches(1, rows=3)))
    counters = cache.counters()
    assert counters.bytes <= 1 << 20
    assert counters.entries <= (1 << 20) // 1536  # >= 1 KiB a result + 512 bytes a column
    assert cache.get(("k", 9_999)) is not None  # the newest are kept
