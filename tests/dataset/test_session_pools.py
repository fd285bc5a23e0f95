"""The session owns every thread of the engine: none starts at import, the write path splits large
string pages on the writing session's split pool (not a process-wide one), and closing a session
(the default one too) stops its threads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.core.concurrency import LazyPool
from lance_format.dataset.session import Session
from lance_format.encodings.v21.encode import _split
from lance_format.file import LanceFileWriter
from lance_format.io.runtime import default_runtime

ROOT = Path(__file__).resolve().parents[2]


class CountingExecutor(ThreadPoolExecutor):
    """A thread pool counting the tasks submitted to it."""

    def __init__(self, workers: int, prefix: str) -> None:
        super().__init__(workers, thread_name_prefix=prefix)
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def _counting_pool(workers: int, prefix: str) -> tuple[LazyPool, list[CountingExecutor]]:
    made: list[CountingExecutor] = []

    def make(n: int, name: str) -> ThreadPoolExecutor:
        made.append(CountingExecutor(n, name))
        return made[-1]

    return LazyPool(workers, prefix, make), made


def _strings_table(rows: int = 40_000) -> pa.Table:
    """Short distinct strings (FSST) and low-cardinality ones (a dictionary): each page's strings
    are several split ranges once SPLIT_MIN_BYTES is small."""
    rng = np.random.default_rng(3)
    words = [f"category-{i}-{'x' * (i % 9)}" for i in range(60)]
    return pa.table(
        {
            "short": pa.array([f"user-{x}" for x in rng.integers(0, 1 << 40, rows)]),
            "low": pa.array([words[int(i)] for i in rng.integers(0, len(words), rows)]),
        }
    )


def _write(session: Session, folder: Path, name: str, table: pa.Table) -> bytes:
    with LanceFileWriter(name, table.schema, version="2.1", store=session.store_for(str(folder))) as w:
        w.write_batch(table)
    return (folder / name).read_bytes()


def test_importing_the_packages_starts_no_thread() -> None:
    """No pool, scheduler or client is made at import: a fresh interpreter importing the engine
    and the server has only its main thread."""
    code = (
        "import threading\n"
        "import lance_format, lance_format.file, lance_format.encodings.v21.encode.fsst\n"
        "import lance_format.encodings.v21.encode._dict, lance_format.dataset.session\n"
        "import flight_server.service, flight_server.workers, flight_server.cli\n"
        "print(sorted(t.name for t in threading.enumerate()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "['MainThread']", out.stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_the_write_path_splits_on_the_writing_sessions_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """A large string page's dictionary build and FSST coding go to the split pool of the session
    whose store the writer writes to, as many ranges as that pool has threads (one: all on the
    calling thread); the process's default pool gets nothing, and the bytes are those of a
    one-range write."""
    table = _strings_table()
    default_pool, default_made = _counting_pool(4, "default-split")
    monkeypatch.setattr(default_runtime(), "split_pool", default_pool)
    monkeypatch.setattr(_split, "SPLIT_MIN_BYTES", 1 << 12)
    with Session(encode_threads=1) as plain:
        want = _write(plain, tmp_path, "one.lance", table)
    with Session(encode_threads=2) as session:
        pool, made = _counting_pool(workers, "session-split")
        session.runtime.split_pool = pool  # sized 1 or 2, whatever encode_threads says
        got = _write(session, tmp_path, "split.lance", table)
    assert got == want
    submitted = sum(e.submitted for e in made)
    if workers == 1:
        assert submitted == 0  # one range per page: coded on the writing thread
    else:
        assert submitted > 0
    assert sum(e.submitted for e in default_made) == 0


def test_the_split_pool_is_sized_by_the_sessions_config() -> None:
    with Session(encode_threads=3) as session:
        assert session.runtime.split_pool.workers == 3
        offsets = np.arange(0, 10 * (1 << 21), 1 << 21, dtype=np.int64)  # 9 strings of 2 MiB
        assert len(_split.split_rows(offsets, session.runtime.split_pool)) - 1 == 3
        assert _split.split_rows(offsets, None) == [0, 9]


def _new_threads(before: set[int]) -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.ident not in before and t.is_alive())


def test_close_stops_the_split_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The split threads a write started are the session's: gone once it is closed."""
    monkeypatch.setattr(_split, "SPLIT_MIN_BYTES", 1 << 12)
    before = {t.ident for t in threading.enumerate()}
    session = Session(encode_threads=2)
    _write(session, tmp_path, "t.lance", _strings_table())
    assert any(name.startswith("lance-encode-split") for name in _new_threads(before))
    session.close()
    assert _new_threads(before) == []


def test_closing_the_default_session_stops_its_threads_which_come_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default session owns the process-wide pools and I/O workers: closing it (as a server
    does at shutdown) stops every one of them, and plain calls still work afterwards."""
    monkeypatch.setattr(_split, "SPLIT_MIN_BYTES", 1 << 12)
    uri = str(tmp_path / "t.lance")
    table = _strings_table()
    before = {t.ident for t in threading.enumerate()}
    default = Session.default()
    with mock.patch.object(default_runtime(), "split_pool", LazyPool(2, "lance-encode-split")):
        lance_format.write_dataset(table, uri, data_storage_version="2.1")
        ds = lance_format.dataset(uri)
        assert ds.to_table().equals(table)
        default.runtime.scheduler.run(lambda i: i, [1, 2, 3], parallel=True)
        for pool in default.runtime.pools:
            assert pool().submit(threading.current_thread).result() is not None
        assert _new_threads(before)
        default.close()
        assert [n for n in _new_threads(before) if n.startswith("lance-")] == []
    assert lance_format.dataset(uri).take([0, 39_999]).equals(table.take([0, 39_999]))
    default.close()
    assert [n for n in _new_threads(before) if n.startswith("lance-")] == []


def test_s3_clients_belong_to_the_session() -> None:
    """An S3 client (its connection pool) is made once per session, settings and bucket: stores
    of one session share it, another session makes its own, and closing a session drops its
    clients (no process-wide client cache)."""
    options = {"aws_endpoint": "http://127.0.0.1:9", "aws_access_key_id": "k", "aws_secret_access_key": "s"}
    one, two = Session(), Session()
    try:
        a = one.store_for("s3://bucket/a", options)
        b = one.store_for("s3://bucket/b", options)
        c = two.store_for("s3://bucket/a", options)
        assert a._client is b._client  # type: ignore[attr-defined]
        assert c._client is not a._client  # type: ignore[attr-defined]
        assert len(one.runtime.clients) == 1 == len(two.runtime.clients)
    finally:
        one.close()
        two.close()
    assert len(one.runtime.clients) == 0


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_started_threads_keep_the_starters_priority_not_a_later_submitters() -> None:
    # A thread inherits its starter's nice value. Without start_threads, the first submit from a
    # lower-priority (bulk) thread starts the pools' threads at that priority for good.
    base = _nice()

    def nices_seen(session: Session) -> set[int]:
        seen: set[int] = set()
        barrier = threading.Barrier(session.config.decode_threads)

        def record() -> None:
            seen.add(_nice())
            barrier.wait(10)

        def from_a_niced_thread() -> None:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, base + 5))
            futures = [session.decode_pool().submit(record) for _ in range(session.config.decode_threads)]
            futures.append(session.dataset_pool().submit(lambda: seen.add(_nice())))
            got: list[int] = []
            session.runtime.scheduler.submit(lambda: got.append(_nice())).result()
            seen.update(got)
            for future in futures:
                future.result()

        niced = threading.Thread(target=from_a_niced_thread)
        niced.start()
        niced.join()
        return seen

    with Session() as lazy:
        assert nices_seen(lazy) == {min(19, base + 5)}  # the defect start_threads prevents
    with Session() as started:
        started.start_threads()
        assert nices_seen(started) == {base}
