"""Decoding on threads (fields of a read, pages of a column) returns what serial decoding returns.

Scans fan decoders out to threads only past a byte threshold no test file reaches, so the
threshold is lowered here to make every read of a multi-page file take the threaded paths.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lance_format.core.concurrency import LazyPool
from lance_format.core.config import EngineConfig
from lance_format.encodings import base
from lance_format.file.reader import LanceFileReader
from lance_format.io.runtime import IORuntime
from lance_format.io.store import store_for_uri


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_threaded_decode_matches_pylance(tmp_path: Any, monkeypatch: Any, version: str) -> None:
    pytest.importorskip("lance.file", reason="pylance (the test oracle) is not installed")
    from lance.file import LanceFileReader as TheirReader
    from lance.file import LanceFileWriter

    rng = np.random.default_rng(2)
    rows = 20_000
    table = pa.table(
        {
            "i": pa.array(rng.integers(0, 1000, rows)),
            "s": pa.array([f"v{x}" for x in rng.integers(0, 10**6, rows)], mask=rng.random(rows) < 0.1),
            "l": pa.array([[int(x)] * int(x % 3) for x in rng.integers(0, 9, rows)], pa.list_(pa.int32())),
        }
    )
    path = os.fspath(tmp_path / "t.lance")
    kw = {"max_page_bytes": 16 * 1024, "data_cache_bytes": 16 * 1024}
    with LanceFileWriter(path, table.schema, version=version, **kw) as w:
        for batch in table.to_batches(max_chunksize=2048):
            w.write_batch(batch)
    monkeypatch.setattr(base, "PARALLEL_DECODE_MIN_BYTES", 0)
    # The field and page decoders are the session's: two threads each whatever the machine's cores.
    page_pool = _CountingPool(2, "test-decode-page")
    runtime = dataclasses.replace(IORuntime.build(EngineConfig(decode_threads=2)), page_pool=page_pool)
    reader = LanceFileReader("t.lance", store=store_for_uri(os.fspath(tmp_path), runtime=runtime))
    assert max(len(c.pages) for c in reader.metadata().columns) > 1
    theirs = TheirReader(path).read_all().to_table()
    assert reader.read_all().to_table().equals(theirs)
    idx = np.unique(rng.integers(0, rows, 500))
    assert reader.take_rows(idx).to_table().equals(theirs.take(pa.array(idx)))
    # The pages of a column decoded on this runtime's page pool, not on a process-wide one.
    assert page_pool.uses > 0
    runtime.close()
    assert not any(t.name.startswith("test-decode-page") for t in threading.enumerate())


class _CountingPool(LazyPool):
    """A pool that counts how often decoding asked it for its threads."""

    uses = 0

    def __call__(self) -> ThreadPoolExecutor:
        self.uses += 1
        return super().__call__()
