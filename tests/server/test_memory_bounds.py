"""Server tables keyed by what clients send stay within their bounds (issue 14)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.plan_cache import MAX_KEY_BYTES, PlanCache
from lance_format.dataset.session import STORE_REGISTRY_ENTRIES
from tests.fuzz.server import memory_report
from tests.server.service_fixtures import Served, seed


def _info(name: str) -> flight.FlightInfo:
    return flight.FlightInfo(
        pa.schema([("a", pa.int64())]), flight.FlightDescriptor.for_path(name), [], -1, -1
    )


def test_plan_cache_counts_its_keys_bytes() -> None:
    # Descriptors up to MAX_KEY_BYTES are keys; their answers can be a few hundred bytes, so a
    # bound on the answers alone let 1 MiB of cache hold ~100x that in keys.
    cache = PlanCache(1 << 20)
    for i in range(200):
        raw = i.to_bytes(4, "little") * (MAX_KEY_BYTES // 4 - 16)
        cache.put((raw, "uri", 1, 0), _info("a"))
    assert len(cache) <= (1 << 20) // (MAX_KEY_BYTES - 64)
    assert cache.nbytes <= 1 << 20


def test_cache_stats_report_what_holds_memory(served: Served) -> None:
    seed(served, n=100)
    served.client.scan("ds")
    for i in range(5):  # names that do not exist leave no handle behind
        with pytest.raises(pa.ArrowKeyError):
            served.client.schema(f"missing{i}")
    stats = served.client.cache_stats()
    assert stats["memory_rss_bytes"] > 50 << 20  # an interpreter with pyarrow and gRPC
    assert stats["memory_arrow_peak_bytes"] >= stats["memory_arrow_bytes"] >= 0
    assert stats["memory_dataset_handles"] == 1
    assert 0 <= stats["memory_object_stores"] <= STORE_REGISTRY_ENTRIES
    assert stats["memory_open_files"] >= 1
    assert stats["plan_entries"] >= 1  # the scan's plan
    assert stats["plan_bytes"] > 0
    # The fuzzer's progress line reads them.
    line = memory_report(served.location)
    assert line.startswith("memory: metadata=")
    assert "handles=1" in line
