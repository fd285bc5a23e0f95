"""Engine tables keyed by what clients choose stay bounded, and cached metadata is charged for the
memory it takes (issue 14: the server's resident size grew during long fuzz runs)."""

from __future__ import annotations

import gc
import tracemalloc
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.core.errors import InvalidInputError
from lance_format.dataset import udfs
from lance_format.dataset.cache import cached_manifest
from lance_format.dataset.fragment import ReaderCache
from lance_format.dataset.session import STORE_REGISTRY_ENTRIES, Session
from lance_format.encodings.v20 import pages
from lance_format.file import LanceFileReader, LanceFileWriter, decoded, writer
from lance_format.file.format import LanceFileVersion
from lance_format.io.cache import ByteCache
from lance_format.table import commit as commit_module
from lance_format.table.naming import manifest_key


def test_a_cached_file_reader_is_charged_at_least_the_memory_it_holds(tmp_path: Path) -> None:
    # 300 one-page columns: the parsed column metadata is ~12-14.5x its protobuf bytes, which alone
    # were charged, so a metadata cache of N MiB held ~8-12 N MiB of open files.
    uri = str(tmp_path / "wide.lance")
    table = pa.table({f"c{i}": np.arange(8, dtype=np.int32) + i for i in range(300)})
    ds = lance_format.write_dataset(table, uri)
    data_file = ds.manifest.fragments[0].files[0]
    cache = ByteCache(1 << 30, "metadata")
    readers = ReaderCache(ds.snapshot.store, cache)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        reader = readers.reader(data_file)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert reader is readers.reader(data_file)  # cached
    assert held > 100_000  # the measurement saw the parsed metadata
    assert cache.nbytes >= held, (cache.nbytes, held)


def test_commit_locks_are_kept_only_while_commits_use_them(tmp_path: Path) -> None:
    table = pa.table({"a": [1, 2, 3]})
    for i in range(20):
        lance_format.write_dataset(table, str(tmp_path / f"d{i}.lance"))
    gc.collect()
    assert len(commit_module._COMMIT_LOCKS) == 0
    # One lock per dataset while it is held: two commits to one URI still share it.
    first = commit_module._commit_lock("memory://x")
    assert commit_module._commit_lock("memory://x") is first
    del first
    gc.collect()
    assert len(commit_module._COMMIT_LOCKS) == 0


def test_the_session_store_registry_keeps_at_most_its_bound(tmp_path: Path) -> None:
    with Session() as session:
        for i in range(STORE_REGISTRY_ENTRIES + 50):
            session.store_for(str(tmp_path / f"ds{i}"))
        assert session.store_count == STORE_REGISTRY_ENTRIES
        # Recently used stores survive: the registry is an LRU, not a FIFO.
        kept = session.store_for(str(tmp_path / "ds60"))
        for i in range(10):
            session.store_for(str(tmp_path / f"new{i}"))
        assert session.store_for(str(tmp_path / "ds60")) is kept


def test_fixed_width_remembers_at_most_its_bound_of_types() -> None:
    for i in range(pages.WIDTH_TYPES + 100):
        assert pages.fixed_width(pa.timestamp("us", tz=f"+{i // 60 % 24:02d}:{i % 60:02d}")) == 8
        assert pages.fixed_width(pa.binary(i + 1)) == i + 1
    assert len(pages._WIDTHS) <= pages.WIDTH_TYPES


def test_tiny_decoded_blocks_are_charged_their_object_overhead(tmp_path: Path) -> None:
    # Blocks of small files hold a few bytes of buffers but ~1 KiB of objects each: charged the
    # buffers alone, a decoded cache of N MiB held ~30 N MiB of them.
    cache = ByteCache(1 << 30, "decoded")
    for i in range(20):
        path = tmp_path / f"f{i}.lance"
        with LanceFileWriter(str(path)) as w:
            w.write_batch(pa.table({"a": np.arange(8, dtype=np.int32)}))
        reader = LanceFileReader(str(path))
        for _ in range(2):  # admitted on its second touch
            decoded.take_cached(reader, np.array([1, 5]), cache=cache)
    assert len(cache) == 20
    assert cache.nbytes >= 20 * 1024


def test_a_cached_manifest_is_charged_at_least_the_memory_it_holds(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    table = pa.table({"id": np.arange(10), "s": pa.array(["x"] * 10)})
    for i in range(30):
        ds = lance_format.write_dataset(table, uri, mode="append" if i else "create")
    store = ds.snapshot.store
    key = manifest_key(ds.version, ds.manifest_naming)
    size = (tmp_path / "t.lance" / key).stat().st_size
    cache = ByteCache(1 << 30, "metadata")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        manifest = cached_manifest(store, ds.version, key, size, cache=cache)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(manifest.fragments) == 30
    assert cache.nbytes >= held, (cache.nbytes, held)


def test_writer_schema_plans_describe_at_most_their_bound_of_columns() -> None:
    # Schemas come from clients (a put of any width): 64 plans of wide ones held hundreds of MiB.
    for k in range(12):
        schema = pa.schema([(f"c{k}_{i}", pa.int32()) for i in range(3000)])
        writer._schema_plan(schema, LanceFileVersion.V2_1)
    assert sum(len(p.column_encodings) for p in writer._PLANS.values()) <= writer.PLAN_COLUMNS_MAX


def test_filter_function_signatures_from_client_types_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """``array_has`` and the list and cast functions register a pyarrow UDF per input type, in a
    registry that never forgets; a list type names its item field, so every dataset a client
    writes with a new field name added one for good (~1.6 KiB each). A process registers at most
    MAX_SIGNATURES; a filter that needs one more is refused, the known ones keep working."""
    room = 20
    cap = udfs.signature_count() + room
    monkeypatch.setattr(udfs, "MAX_SIGNATURES", cap)
    tag = uuid.uuid4().hex[:8]
    types = [pa.list_(pa.field(f"f{tag}_{i}", pa.int32())) for i in range(room + 5)]
    for lt in types[:room]:
        udfs.array_has(lt, pa.int32())
    for lt in types[room:]:
        with pytest.raises(InvalidInputError, match="too many distinct column types"):
            udfs.array_has(lt, pa.int32())
    assert udfs.signature_count() == cap
    name = udfs.array_has(types[0], pa.int32())  # already registered: still served
    lists = pa.array([[1, 2], [3]], types[0])
    result = pc.call_function(name, [lists, pa.scalar(3, pa.int32())])
    assert result.to_pylist() == [False, True]
