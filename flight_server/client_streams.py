"""The stream plumbing of :class:`~flight_server.client.LanceFlightClient`.

* :func:`to_reader` turns what a user hands ``write`` (a Table, batches, a reader, a dict of
  columns, a list of row dicts, a pandas DataFrame, any Arrow C stream) into one reader;
* :func:`split_batches` keeps every message under the server's message limit;
* :class:`IdleDeadline` gives a stream a per-message deadline instead of a whole-call one, so a long
  write or scan runs as long as data keeps moving and fails fast when it stops;
* :func:`progress_bar` / :func:`spinner` report long writes and actions on a terminal (tqdm).
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_S",
    "MAX_BATCH_BYTES",
    "IdleDeadline",
    "progress_bar",
    "show_progress",
    "spinner",
    "split_batches",
    "to_reader",
]

_T = TypeVar("_T")

#: Largest batch the client sends in one message: half the server's default
#: ``limits.maxMessageBytes`` (64 MiB), so IPC framing and a server configured a little lower still fit.
MAX_BATCH_BYTES = 32 * 1024 * 1024
#: Seconds a stream may wait for one message (sent or received) before the call fails: long enough
#: for a busy server's commit or a cold object-store read, short enough to notice a stuck server.
DEFAULT_IDLE_TIMEOUT_S = 60.0
#: Seconds between redraws of a spinner while an action runs.
SPINNER_REFRESH_S = 0.5


# -- input -----------------------------------------------------------------------------------------


def to_reader(data: Any) -> pa.RecordBatchReader:
    """One reader over ``data``.

    Accepts a RecordBatchReader, Table, RecordBatch, a dict of columns (``{"a": [1, 2]}``), a list
    of row dicts, a pandas DataFrame, an object with ``__arrow_c_stream__`` (Polars, DuckDB, ...),
    or an iterable of RecordBatches / Tables.

    Raises
    ------
    ValueError
        For an empty iterable (it has no schema).
    TypeError
        For anything else.
    """
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.Table):
        return data.to_reader()
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatchReader.from_batches(data.schema, [data])
    if isinstance(data, dict):
        return pa.table(data).to_reader()
    with contextlib.suppress(ImportError):
        import pandas as pd  # type: ignore[import-untyped]

        if isinstance(data, pd.DataFrame):
            return pa.Table.from_pandas(data, preserve_index=False).to_reader()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data)
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise TypeError(
            "write takes a Table, RecordBatch(es), RecordBatchReader, dict of columns, list of row "
            f"dicts or pandas DataFrame, not {type(data).__name__}"
        )
    items = list(data)
    if not items:
        raise ValueError("no data to write (an empty iterable has no schema)")
    if all(isinstance(item, dict) for item in items):
        return pa.Table.from_pylist(items).to_reader()
    batches: list[pa.RecordBatch] = []
    for item in items:
        if isinstance(item, pa.Table):
            batches.extend(item.to_batches())
        elif isinstance(item, pa.RecordBatch):
            batches.append(item)
        else:
            raise TypeError(f"an iterable to write holds RecordBatches or Tables, not {type(item).__name__}")
    schema = items[0].schema
    return pa.RecordBatchReader.from_batches(schema, batches)


def split_batches(
    batches: Iterable[pa.RecordBatch], max_bytes: int = MAX_BATCH_BYTES
) -> Iterator[pa.RecordBatch]:
    """``batches`` with every batch over ``max_bytes`` sliced (zero-copy) into parts under it."""
    for batch in batches:
        # The buffers' sizes bound nbytes from above and cost nothing to add up; nbytes walks
        # every column's byte ranges (~50 us a 10,000-row batch, Spark's size), so only a batch
        # whose buffers exceed the limit (a slice of something bigger, or truly big) pays for it.
        if batch.num_rows <= 1 or batch.get_total_buffer_size() <= max_bytes:
            yield batch
            continue
        size = batch.nbytes
        if size <= max_bytes:
            yield batch
            continue
        step = max(1, batch.num_rows * max_bytes // size)
        for start in range(0, batch.num_rows, step):
            yield batch.slice(start, step)


# -- idle deadlines --------------------------------------------------------------------------------


class IdleDeadline:
    """Runs the blocking steps of one stream with a deadline each.

    pyarrow cannot cancel a ``do_put`` from another thread, and a gRPC deadline covers a whole call,
    so each step (send a batch, read a batch, wait for the answer) runs on one daemon thread of this
    stream while the caller waits at most ``timeout`` seconds for it. When a step overruns, the
    caller gets :class:`pyarrow.flight.FlightTimedOutError`, ``on_timeout`` (e.g. a reader's
    ``cancel``) is called, and the stream is abandoned.

    Parameters
    ----------
    timeout:
        Seconds one step may take.
    what:
        Names the stream in the error (``"write to 'events'"``).
    """

    def __init__(self, timeout: float, what: str) -> None:
        self.timeout = timeout
        self.what = what
        self.on_timeout: Callable[[], None] | None = None
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="lance-flight-stream", daemon=True)
        self._thread.start()
        self.expired = False

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def run(self, step: Callable[[], _T]) -> _T:
        """``step()``, run on the stream's thread, or FlightTimedOutError after ``timeout`` seconds."""
        if self.expired:
            raise flight.FlightTimedOutError(f"{self.what}: the stream was abandoned after a timeout")
        done = threading.Event()
        box: list[Any] = []

        def job() -> None:
            try:
                box.append((True, step()))
            except BaseException as exc:
                box.append((False, exc))
            done.set()

        self._jobs.put(job)
        if not done.wait(self.timeout):
            self.expired = True
            if self.on_timeout is not None:
                with contextlib.suppress(Exception):
                    self.on_timeout()
            raise flight.FlightTimedOutError(
                f"{self.what}: no progress for {self.timeout:g} s (the idle deadline; pass a larger "
                "idle_timeout for a slower server)"
            )
        ok, value = box[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def close(self) -> None:
        """Let the stream's thread end (at once, or when a step stuck past its deadline returns)."""
        self._jobs.put(None)

    def __enter__(self) -> IdleDeadline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- progress --------------------------------------------------------------------------------------


def show_progress(progress: bool | None) -> bool:
    """Whether to draw a bar: ``progress`` when given, else only when stderr is a terminal and tqdm
    (the ``server`` extra) is installed."""
    if progress is not None:
        return progress
    if not sys.stderr.isatty():
        return False
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


class _NoBar:
    def update(self, n: float = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(progress: bool | None, desc: str, total: float | None = None, unit: str = "B") -> Any:
    """A tqdm bar on stderr (bytes, scaled) when progress is on; else one that draws nothing."""
    if not show_progress(progress):
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, unit_divisor=1024, file=sys.stderr)


@contextlib.contextmanager
def spinner(progress: bool | None, desc: str) -> Iterator[Any]:
    """A bar showing the elapsed time of a call with no measurable progress (compaction, cleanup)."""
    if not show_progress(progress):
        yield _NoBar()
        return
    from tqdm import tqdm

    bar = tqdm(desc=desc, bar_format="{desc}: {elapsed} {postfix}", file=sys.stderr)
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(SPINNER_REFRESH_S):
            bar.refresh()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    started = time.monotonic()
    try:
        yield bar
    finally:
        stop.set()
        ticker.join()
        bar.set_postfix_str(f"done in {time.monotonic() - started:.1f} s")
        bar.close()
