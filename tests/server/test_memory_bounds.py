"""Server tables keyed by what clients send stay within their bounds (issue 14)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.plan_cache import MAX_KEY_BYTES, PlanCache


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
