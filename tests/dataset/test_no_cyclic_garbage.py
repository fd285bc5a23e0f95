"""A cold open and take leave no reference cycles behind.

Garbage in cycles is freed only by the cycle collector; a cold open + take made ~150 such objects
(recursive closures over the schema, a field caching a list that names itself), so a collection ran
every few takes and a full one (~100 ms in a server process) every few hundred. Counts, not time:
the objects the collector finds after the calls.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.session import Session
from lance_format.io.cache import METADATA_CACHE
from lance_format.io.reader import io_stats


def _table(n: int = 2000) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "x": pa.array(np.arange(n, dtype=np.float64)),
            "name": pa.array([f"name-{i}" for i in range(n)]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.ones(4 * n, dtype=np.float32)), 4),
            "st": pa.StructArray.from_arrays(
                [pa.array(np.arange(n, dtype=np.int32)), pa.array(np.arange(n, dtype=np.float32))], ["a", "b"]
            ),
            "l": pa.array([[i, i] for i in range(n)], pa.list_(pa.int64())),
        }
    )


def _ours(obj: object) -> bool:
    """Whether ``obj`` is an instance or a function of the project's own code."""
    module = getattr(obj, "__module__", None) if callable(obj) else type(obj).__module__
    return isinstance(module, str) and module.split(".")[0] in _OUR_PACKAGES


_OUR_PACKAGES = {"lance_format", "flight_server"}


def _cyclic_garbage(work: Callable[[], None]) -> list[object]:
    """The cycles the collector finds after ``work`` (run with the collector off) that hold an object
    of ours. Cycles of third-party objects alone (a botocore client that an earlier test's S3 store
    left to a dying thread's event loop) are not ours to fix, and when they are freed is timing."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        work()
        gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        if was:
            gc.enable()
    return _components_with_ours(garbage)


def _components_with_ours(garbage: list[object]) -> list[object]:
    """The objects of ``garbage`` connected (through references inside it) to an object of ours."""
    index = {id(o): i for i, o in enumerate(garbage)}
    parent = list(range(len(garbage)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, obj in enumerate(garbage):
        for ref in gc.get_referents(obj):
            j = index.get(id(ref))
            if j is not None:
                parent[root(i)] = root(j)
    keep = {root(i) for i, obj in enumerate(garbage) if _ours(obj)}
    return [obj for i, obj in enumerate(garbage) if root(i) in keep]


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_cold_open_and_take_make_no_cycles(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "d.lance")
    lance_format.write_dataset(_table(), uri, data_storage_version=version)
    lance_format.dataset(uri).take([1, 50])  # imports, kernels and one-time state out of the way

    def work() -> None:
        for i in range(3):
            METADATA_CACHE.clear()
            got = lance_format.dataset(uri).take([7 + i, 900 + i])
            assert got.column("id").to_pylist() == [7 + i, 900 + i]
            METADATA_CACHE.clear()
            lance_format.dataset(uri).take([3 + i], columns=["x", "st"])

    garbage = _cyclic_garbage(work)
    kinds = Counter(type(o).__qualname__ for o in garbage)
    assert not garbage, f"cyclic garbage: {kinds.most_common(8)}"


def test_cold_scan_makes_no_cycles(tmp_path: Path) -> None:
    # A scan whose chunks read megabytes fetches them on the scheduler's threads; that path once
    # left a cycle per read holding every buffer it fetched (until the collector ran).
    n = 200_000
    table = pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.ones(16 * n, dtype=np.float32)), 16),
        }
    )
    uri = str(tmp_path / "d.lance")
    lance_format.write_dataset(table, uri)
    cold = lance_format.dataset(uri, session=Session(page_cache_bytes=0, decoded_cache_bytes=0))
    assert cold.to_table().num_rows == n  # imports, kernels and file opens out of the way

    def work() -> None:
        before = io_stats()
        assert cold.to_table().equals(table)
        assert (io_stats() - before).bytes_read > 4 * 2**20  # reads large enough to run in parallel

    garbage = _cyclic_garbage(work)
    kinds = Counter(type(o).__qualname__ for o in garbage)
    assert not garbage, f"cyclic garbage: {kinds.most_common(8)}"
