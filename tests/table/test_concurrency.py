"""Concurrent commits on a local and an S3 root: appends from many threads with deletes between.

Every commit either lands or fails with a typed commit-conflict error; the final row count is
exactly what the landed commits imply, and versions are contiguous (no gaps, no duplicates).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import CommitConflictError
from lance_format.dataset import write_dataset
from lance_format.io.store import store_for_uri
from lance_format.table.naming import list_versions
from tests.s3_server import S3Server

ROWS_PER_APPEND = 10
INITIAL_ROWS = 2000
DELETE_WINDOW = 50


def batch(writer: int, seq: int, n: int = ROWS_PER_APPEND) -> pa.Table:
    return pa.table(
        {
            "i": pa.array(np.full(n, -1, dtype=np.int64)),
            "writer": pa.array(np.full(n, writer, dtype=np.int32)),
            "seq": pa.array(np.full(n, seq, dtype=np.int32)),
        }
    )


@dataclass
class Outcome:
    appended: int = 0
    deleted_rows: int = 0
    deletes: int = 0
    failures: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def run(uri: str, opts: dict[str, str] | None, writers: int, appends: int, deletes: int) -> None:
    initial = pa.table(
        {
            "i": pa.array(np.arange(INITIAL_ROWS, dtype=np.int64)),
            "writer": pa.array(np.full(INITIAL_ROWS, -1, dtype=np.int32)),
            "seq": pa.array(np.full(INITIAL_ROWS, -1, dtype=np.int32)),
        }
    )
    write_dataset(initial, uri, storage_options=opts)
    out = Outcome()
    start = threading.Barrier(writers + 1)

    def appender(w: int) -> None:
        start.wait()
        for s in range(appends):
            try:
                write_dataset(batch(w, s), uri, mode="append", storage_options=opts)
            except CommitConflictError as e:  # typed: a lost race past the retry budget
                with out.lock:
                    out.failures.append(e)
                continue
            with out.lock:
                out.appended += 1

    def deleter() -> None:
        start.wait()
        for d in range(deletes):
            lo = d * DELETE_WINDOW  # disjoint windows of the initial rows
            try:
                ds = lance_format.dataset(uri, storage_options=opts)
                n = ds.delete(f"i >= {lo} AND i < {lo + DELETE_WINDOW}")["num_deleted_rows"]
            except CommitConflictError as e:
                with out.lock:
                    out.failures.append(e)
                continue
            if n != DELETE_WINDOW:
                raise AssertionError(f"delete of window {d} removed {n} rows")
            with out.lock:
                out.deletes += 1
                out.deleted_rows += n
            time.sleep(0.001)

    errors: list[BaseException] = []

    def guarded(fn: object, *args: int) -> None:
        try:
            fn(*args)  # type: ignore[operator]
        except BaseException as e:  # anything untyped fails the test below
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(appender, w)) for w in range(writers)]
    threads.append(threading.Thread(target=guarded, args=(deleter,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert all(isinstance(e, CommitConflictError) for e in out.failures)

    ds = lance_format.dataset(uri, storage_options=opts)
    expected = INITIAL_ROWS + out.appended * ROWS_PER_APPEND - out.deleted_rows
    assert ds.count_rows() == expected
    assert ds.to_table(columns=["i"]).num_rows == expected
    # Each landed append is there exactly once.
    t = ds.to_table(columns=["writer", "seq"], filter="writer >= 0")
    pairs = {(w, s) for w, s in zip(t.column("writer").to_pylist(), t.column("seq").to_pylist(), strict=True)}
    assert len(pairs) == out.appended
    assert t.num_rows == out.appended * ROWS_PER_APPEND
    # Versions: 1 (create) + one per landed commit, no gaps.
    versions, _ = list_versions(store_for_uri(uri, opts))
    assert sorted(versions) == list(range(1, 2 + out.appended + out.deletes))
    assert ds.version == 1 + out.appended + out.deletes


def test_concurrent_appends_and_deletes_local(tmp_path: Path) -> None:
    run(str(tmp_path / "ds"), None, writers=8, appends=20, deletes=10)


@pytest.mark.s3
def test_concurrent_appends_and_deletes_s3_small(s3_server: S3Server, s3_uri: str) -> None:
    run(s3_uri, s3_server.storage_options, writers=4, appends=5, deletes=3)


@pytest.mark.s3
@pytest.mark.slow
def test_concurrent_appends_and_deletes_s3(s3_server: S3Server, s3_uri: str) -> None:
    run(s3_uri, s3_server.storage_options, writers=8, appends=20, deletes=10)
