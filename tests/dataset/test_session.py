"""``Session`` and the engine config: one prefix, one table, precedence argument > environment >
config > default, deprecated names still honoured, and datasets reading through their session."""

from __future__ import annotations

import dataclasses
import threading
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from lance_format.core.config import SETTINGS, EngineConfig, env_setting, resolve_config
from lance_format.core.errors import InvalidInputError, SessionClosedError
from lance_format.dataset.session import Session
from lance_format.io.cache import METADATA_CACHE

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_precedence_argument_environment_config_default() -> None:
    env = {"LANCE_FORMAT_DECODE_THREADS": "3", "LANCE_FORMAT_IO_PARALLELISM": "7"}
    config = {"decode_threads": 5, "io_parallelism": 9, "readahead_bytes": 11}
    got = resolve_config({"decode_threads": 2}, config, env)
    assert got.decode_threads == 2  # argument beats environment and config
    assert got.io_parallelism == 7  # environment beats config
    assert got.readahead_bytes == 11  # config beats the default
    assert got.dataset_threads == EngineConfig().dataset_threads  # the default


def test_deprecated_names_warn_and_the_prefixed_name_wins() -> None:
    with pytest.warns(DeprecationWarning, match="LANCE_FORMAT_DECODE_THREADS"):
        assert env_setting("decode_threads", {"LANCE_DECODE_THREADS": "6"}) == 6
    with pytest.warns(DeprecationWarning, match="LANCE_FORMAT_ZONEMAP_ROWS_PER_ZONE"):
        assert env_setting("zonemap_rows_per_zone", {"LANCE_ZONEMAP_DEFAULT_ROWS_PER_ZONE": "100"}) == 100
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = {"LANCE_FORMAT_DICT_ENCODING_THRESHOLD": "5", "LANCE_DICT_ENCODING_THRESHOLD": "50"}
        assert env_setting("dict_encoding_threshold", both) == 5


def test_bad_values_and_unknown_names_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="LANCE_FORMAT_IO_PARALLELISM"):
        env_setting("io_parallelism", {"LANCE_FORMAT_IO_PARALLELISM": "0"})
    with (
        pytest.raises(InvalidInputError, match="LANCE_FILE_WRITER_MAX_PAGE_BYTES"),
        pytest.warns(DeprecationWarning, match="LANCE_FORMAT_FILE_WRITER_MAX_PAGE_BYTES"),
    ):
        env_setting("file_writer_max_page_bytes", {"LANCE_FILE_WRITER_MAX_PAGE_BYTES": "big"})
    with pytest.raises(InvalidInputError, match="unknown engine settings"):
        Session(decode_thread=2)
    with pytest.raises(InvalidInputError, match="metadata_cache_bytes"):
        EngineConfig(metadata_cache_bytes=-1)


def test_every_setting_has_one_prefix_and_a_row_in_the_docs_table() -> None:
    text = DOCS.read_text()
    fields = {f.name for f in dataclasses.fields(EngineConfig)}
    assert fields == {s.name for s in SETTINGS}
    for s in SETTINGS:
        assert s.env.startswith("LANCE_FORMAT_")
        assert f"`{s.name}`" in text, s.name
        assert f"`{s.env}`" in text, s.env
        for old in s.aliases:
            assert f"`{old}`" in text, old


def test_a_dataset_reads_through_its_session(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"a": list(range(10))}), uri)
    session = Session(metadata_cache_bytes=8 * 1024 * 1024)
    before = METADATA_CACHE.counters()
    ds = lance_format.dataset(uri, session=session)
    assert ds.session is session
    assert ds.snapshot.session is session
    assert ds.to_table().column("a").to_pylist() == list(range(10))
    # The manifest and the data file's metadata went into the session's cache, not the process's.
    assert session.metadata_cache.counters().entries >= 2
    assert METADATA_CACHE.counters().entries == before.entries
    again = lance_format.dataset(uri, session=session)
    assert again.store is ds.store  # one store per root in a session's registry
    assert ds.checkout_version(1).session is session
    ds.insert(pa.table({"a": [10]}))
    assert ds.session is session
    assert ds.count_rows() == 11


def test_the_default_session_serves_plain_calls(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    ds = lance_format.write_dataset(pa.table({"a": [1, 2]}), uri)
    default = Session.default()
    assert ds.session is default
    assert default.metadata_cache is METADATA_CACHE
    assert lance_format.dataset(uri).session is default
    assert set(default.cache_stats()) == {"metadata", "page", "decoded"}


def test_an_explicit_session_config_applies_to_index_building(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"a": list(range(100))}), uri)
    ds = lance_format.dataset(uri, session=Session(zonemap_rows_per_zone=10))
    ds.create_scalar_index("a")
    index = ds.list_indices()[0]
    assert index["type"].lower().startswith("zone")
    from lance_format.dataset.indices import dataset_indices
    from lance_format.dataset.zonemap import load_zonemap

    zm = load_zonemap(ds.snapshot, dataset_indices(ds.snapshot)[0])
    assert len(zm.zone_start) == 10  # 100 rows in zones of 10, from the session's config


def test_a_session_owns_its_caches_gate_and_pools(tmp_path: Path) -> None:
    """A second session's page-cache size and I/O parallelism take effect for its datasets and
    leave the default session's objects alone."""
    from lance_format.io.cache import PAGE_CACHE
    from lance_format.io.scheduler import MAX_PARALLEL_REQUESTS, io_gate

    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"a": list(range(5000)), "s": [str(i) for i in range(5000)]}), uri)
    small = Session(page_cache_bytes=4 * 1024 * 1024, io_parallelism=3, decode_threads=2, dataset_threads=2)
    other = Session(io_parallelism=5)
    default = Session.default()
    assert small.page_cache is not PAGE_CACHE
    assert small.page_cache is not other.page_cache
    assert small.page_cache.capacity == 4 * 1024 * 1024
    assert (small.io_parallelism, other.io_parallelism) == (3, 5)
    assert default.io_parallelism == MAX_PARALLEL_REQUESTS == io_gate().permits
    assert small.runtime.scheduler.gate is not io_gate()
    assert small.decode_pool() is not default.decode_pool()
    assert small.dataset_pool() is not default.dataset_pool()
    assert small.dataset_pool()._max_workers == 2

    page_before = PAGE_CACHE.counters()
    default_peak = io_gate().max_in_flight
    ds = lance_format.dataset(uri, session=small)
    assert ds.store.runtime is small.runtime  # its store reads through the session's runtime
    for _ in range(2):
        assert ds.take([1, 4000, 2500], columns=["s"]).column("s").to_pylist() == ["1", "4000", "2500"]
    assert small.page_cache.counters().entries > 0  # the take's pages went to the session's cache
    assert small.page_cache.counters().hits > 0
    assert PAGE_CACHE.counters().entries == page_before.entries
    assert 1 <= small.runtime.scheduler.gate.max_in_flight <= 3
    assert io_gate().max_in_flight == default_peak
    small.close()
    other.close()


def test_writers_take_their_settings_from_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = pa.table({"a": list(range(20000))})
    monkeypatch.setenv("LANCE_FORMAT_FILE_WRITER_MAX_PAGE_BYTES", "1000000000")  # not the session's
    session = Session(file_writer_max_page_bytes=4096, encode_threads=1)
    ds = lance_format.write_dataset(table, str(tmp_path / "s.lance"), session=session)
    assert ds.session is session
    pages = ds.data_file_reader(ds.snapshot.manifest.fragments[0].files[0]).metadata().columns[0].pages
    assert len(pages) > 10  # 160 KB of values in pages of at most 4 KiB
    assert ds.to_table().equals(table)
    again = lance_format.write_dataset(table, ds, mode="append")  # the dataset lends its session
    assert again.session is session
    session.close()


def test_opened_scalar_indices_are_cached_in_the_session(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"a": list(range(1000))}), uri)
    session = Session()
    ds = lance_format.dataset(uri, session=session)
    ds.create_scalar_index("a", "BTREE")
    before, mine = METADATA_CACHE.counters().entries, session.metadata_cache.counters().entries
    assert ds.to_table(filter="a = 5").column("a").to_pylist() == [5]
    assert METADATA_CACHE.counters().entries == before
    assert session.metadata_cache.counters().entries > mine
    session.close()


def test_for_process_sizes_the_process_wide_gate_and_pools() -> None:
    from lance_format.io.scheduler import io_gate

    try:
        session = Session.for_process(io_parallelism=7, decode_threads=3, dataset_threads=2)
        assert Session.default() is session
        assert io_gate().permits == 7 == session.io_parallelism
        assert session.runtime.decode_pool.workers == 3
        assert session.dataset_pool()._max_workers == 2
    finally:
        Session.for_process()  # back to the environment's sizes
        Session.reset_default()


def _session_threads(before: set[int]) -> list[str]:
    return [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]


def test_close_stops_every_thread_of_the_session_and_refuses_new_work(tmp_path: Path) -> None:
    """After a scan, a parallel take and a write, every thread the session started (I/O workers,
    field and page decoders, encoders, read-ahead) is gone once it is closed; a second close is a
    no-op and any later use raises ``SessionClosedError`` (a ``ValueError``, as a closed file)."""
    uri = str(tmp_path / "t.lance")
    rows = 200_000
    table = pa.table({"a": list(range(rows)), "s": [f"v{i % 977}" for i in range(rows)]})
    before = {t.ident for t in threading.enumerate()}
    session = Session(decode_threads=2, encode_threads=2, dataset_threads=2, io_parallelism=3)
    ds = lance_format.write_dataset(table, uri, session=session, max_rows_per_file=50_000)
    assert ds.to_table().equals(table)
    assert ds.take([0, 70_000, 199_999], columns=["s"]).column("s").to_pylist() == ["v0", "v633", "v691"]
    # The session's pools ran (whatever the read sizes decided): run one task on each.
    for pool in (session.runtime.decode_pool, session.runtime.page_pool, session.runtime.encode_pool):
        assert pool().submit(threading.current_thread).result() is not None
    session.runtime.scheduler.run(lambda i: i, [1, 2, 3], parallel=True)
    assert _session_threads(before)  # it did start threads
    session.close()
    assert session.closed
    assert _session_threads(before) == []
    session.close()  # idempotent
    with pytest.raises(SessionClosedError, match="closed"):
        lance_format.dataset(uri, session=session)
    with pytest.raises(ValueError, match="closed"):
        ds.to_table()
    with pytest.raises(SessionClosedError):
        session.dataset_pool()
    with pytest.raises(SessionClosedError):
        session.runtime.scheduler.run(lambda i: i, [1, 2], parallel=True)
    assert lance_format.dataset(uri).to_table().equals(table)  # other sessions are unaffected


def test_a_session_is_a_context_manager(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    with Session() as session:
        lance_format.write_dataset(pa.table({"a": [1, 2]}), uri, session=session)
    assert session.closed
    with pytest.raises(SessionClosedError):
        lance_format.dataset(uri, session=session)
