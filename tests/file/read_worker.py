"""Read damaged files in a separate process, so a hang or a crash fails one test instead of the run.

:class:`IsolatedReader` keeps one spawned worker process warm. ``read(path)`` sends it a path; the
worker opens the file with our ``LanceFileReader``, reads everything (``read_all``, a take with
repeats, a range, ``to_batches``), validates the Arrow result and answers with an :class:`Outcome`.
A worker that does not answer within the timeout is killed (``kind="hang"``); one that dies
(segfault, abort) is reported as ``kind="crash"``. Either way a fresh worker is started.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import pyarrow as pa

__all__ = ["IsolatedReader", "Outcome", "classify", "read_everything"]

_PING = "__ping__"


@dataclass(frozen=True)
class Outcome:
    """How reading one file ended.

    ``kind``: ``ok`` (valid Arrow data), ``corrupt`` (CorruptFileError), ``not_supported``
    (NotSupportedError), ``other`` (any other exception: a bug), ``invalid`` (returned data that fails
    ``validate(full=True)``: a crash waiting to happen), ``hang`` or ``crash``.
    """

    kind: str
    error_type: str = ""
    message: str = ""
    reason: str = ""
    error_path: str | None = None
    detail: str = ""


def read_everything(path: str) -> pa.Table:
    """Open ``path`` with our reader and read it every way; the concatenation of all results."""
    from lance_format.file import LanceFileReader

    reader = LanceFileReader(path)
    n = reader.num_rows()
    table = reader.read_all().to_table()
    if table.num_rows != n:
        raise AssertionError(f"read_all returned {table.num_rows} rows, num_rows() says {n}")
    if not n:
        return table
    take = reader.take_rows([n - 1, 0, n // 2, n // 2]).to_table()
    part = reader.read_range(n // 3, n - n // 3).to_table()
    batches = pa.Table.from_batches(list(reader.read_all(batch_size=97).to_batches()), table.schema)
    return pa.concat_tables([table, take, part, batches])


def classify(path: str) -> Outcome:
    """Read ``path`` in this process and say how it ended."""
    from lance_format.core.errors import CorruptFileError, NotSupportedError

    try:
        table = read_everything(path)
    except CorruptFileError as e:
        return Outcome("corrupt", type(e).__name__, str(e), e.reason, e.path)
    except NotSupportedError as e:
        return Outcome("not_supported", type(e).__name__, str(e))
    except BaseException as e:
        return Outcome(
            "other", type(e).__qualname__, str(e)[:4000], detail="".join(traceback.format_exception(e))
        )
    try:
        table.validate(full=True)
    except pa.ArrowInvalid as e:
        return Outcome("invalid", detail=str(e))
    return Outcome("ok")


def _serve(conn: Connection) -> None:
    while True:
        try:
            path = conn.recv()
        except EOFError:
            return
        if path is None:
            return
        if path == _PING:
            conn.send(Outcome("ok"))
            continue
        conn.send(classify(path))


class IsolatedReader:
    """A warm worker process that reads files for :func:`classify`."""

    def __init__(self, timeout: float = 15.0) -> None:
        self.timeout = timeout
        self._ctx: Any = mp.get_context("spawn")
        self._start()

    def _start(self) -> None:
        self._conn, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, args=(child,), name="lance-read-worker", daemon=True)
        self._proc.start()
        child.close()
        self._conn.send(_PING)
        if not self._conn.poll(120):
            raise RuntimeError("the read worker did not start")
        self._conn.recv()

    def _restart(self) -> int | None:
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(10)
        code = self._proc.exitcode
        self._conn.close()
        self._start()
        return code

    def read(self, path: str) -> Outcome:
        self._conn.send(str(path))
        if not self._conn.poll(self.timeout):
            self._restart()
            return Outcome("hang", detail=f"no answer within {self.timeout:.0f}s")
        try:
            outcome: Outcome = self._conn.recv()
        except EOFError:
            code = self._restart()
            return Outcome("crash", detail=f"worker died with exit code {code}")
        return outcome

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.send(None)
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
        self._conn.close()
