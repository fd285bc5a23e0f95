"""Server tables keyed by what clients send stay within their bounds (issue 14)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.heap import heap_stats
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
    heap = heap_stats()
    if heap is not None:  # glibc: the C heap's live and kept free bytes, and its arenas
        assert stats["memory_heap_bytes"] > 1 << 20
        assert stats["memory_heap_free_bytes"] >= 0
        assert stats["memory_heap_arenas"] >= 1
    # The fuzzer's progress line reads them.
    line = memory_report(served.location)
    assert line.startswith("memory: metadata=")
    assert "handles=1" in line
    assert "heap=" in line
    assert "arenas=" in line


#: A serving process that allocates from 32 more threads at once (gRPC's and the engine's threads
#: do), then prints how many arenas its C heap has; ``argv[1]`` is ``limits.mallocArenas``,
#: ``argv[2]`` "owned" (the process is the server) or "hosted" (a server inside a host process).
_ARENAS_PROBE = """
import ctypes, os, signal, sys, threading
from flight_server.heap import heap_stats
from flight_server.settings import ServerSettings
from flight_server.workers import serve

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
s = ServerSettings(root=sys.argv[3], port=0, metrics_port=-1, malloc_arenas=int(sys.argv[1]))

def allocate_from_threads():
    gate = threading.Barrier(33)
    def work():
        libc.malloc(4096)  # leaked on purpose: 32 x 4 KiB
        gate.wait()
    threads = [threading.Thread(target=work) for _ in range(32)]
    for t in threads:
        t.start()
    gate.wait()
    for t in threads:
        t.join()
    print("arenas", heap_stats().arenas, flush=True)

def ready(info):
    allocate_from_threads()
    if sys.argv[2] == "owned":
        os.kill(os.getpid(), signal.SIGTERM)
    else:
        hosted.set()

if sys.argv[2] == "owned":
    raise SystemExit(serve(s, on_ready=ready))
hosted = threading.Event()
serve(s, stop=hosted, on_ready=ready)
"""


@pytest.mark.skipif(heap_stats() is None, reason="the arena cap is glibc's")
@pytest.mark.parametrize(
    ("arenas", "mode", "most"),
    [(2, "owned", 2), (0, "owned", None), (2, "hosted", None)],
    ids=["capped", "glibc-default", "hosted-keeps-its-own"],
)
def test_a_serving_process_caps_its_c_heap_arenas(
    tmp_path: Path, arenas: int, mode: str, most: int | None
) -> None:
    """Every thread of a server took an arena of its own (up to 8 per core), each keeping its own
    high-water mark of freed memory: the fuzz run's resident size climbed with its caches flat.
    A serving process caps them at ``limits.mallocArenas``; 0 leaves glibc's default, and a host
    process running a server in-process keeps its allocator."""
    argv = [sys.executable, "-c", _ARENAS_PROBE, str(arenas), mode, str(tmp_path / "root")]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    counts = dict(line.split() for line in out.stdout.splitlines() if line.startswith("arenas"))
    found = int(counts["arenas"])
    if most is not None:
        assert found <= most, out.stderr
    else:
        assert found > 2, out.stderr  # one per thread, up to glibc's 8 per core
