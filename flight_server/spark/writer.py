"""The write side of the ``lance`` data source: stage on executors, commit once on the driver.

Each task streams its batches to the server with one ``do_put`` in stage mode: the server writes data
files but commits nothing, and answers with the staged fragments, which travel back to the driver in
the task's commit message. The driver's ``commit`` hands every task's fragments to the server's
``commit`` action: one transaction, one new version, or nothing at all. ``abort`` (a failed job) asks
the server to delete the files of the tasks that did finish; a task that fails mid-stream cancels its
``do_put``, and the server deletes what that stream had written.

Spark's JVM only offers Python data sources the ``append`` and ``overwrite`` save modes; the option
``save_mode`` (``errorifexists`` / ``ignore``, or see :func:`flight_server.spark.save`) adds the rest.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from flight_server.requests import WriteResult
from flight_server.spark.connection import client_for
from flight_server.spark.options import WriteOptions
from flight_server.spark.types import to_dataset_batch
from lance_format.core.errors import InvalidInputError

__all__ = ["LanceCommitMessage", "LanceWriter", "WritePlan", "save"]

SAVE_MODES = ("append", "overwrite", "errorifexists", "ignore")


@dataclass(frozen=True)
class WritePlan:
    """Decided on the driver before any task runs, shipped to every task with the writer."""

    mode: str  # "append" | "overwrite" | "create" (errorifexists) | "skip" (ignore, dataset exists)
    # The existing dataset's Arrow schema for appends (batches are cast to it); None: new dataset.
    target: pa.Schema | None
    # The schema the dataset gets when no task wrote a row (empty overwrite / create).
    empty_schema: pa.Schema
    read_version: int | None


class LanceCommitMessage(WriterCommitMessage):
    """What one task staged: the server's opaque fragment documents, their schema, the row count."""

    def __init__(self, fragments: tuple[bytes, ...], schema: pa.Schema | None, rows: int) -> None:
        self.fragments = fragments
        self.schema = schema
        self.rows = rows


def _staged(messages: list[WriterCommitMessage | None]) -> list[LanceCommitMessage]:
    return [m for m in messages if isinstance(m, LanceCommitMessage) and m.fragments]


def _cast_batches(
    batches: Iterator[pa.RecordBatch], plan: WritePlan, options: WriteOptions
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        if batch.num_rows:
            yield to_dataset_batch(batch, plan.target, options.vector_columns)


class LanceWriter(DataSourceArrowWriter):
    """Stages each task's data on the server; commits or discards all of it on the driver."""

    def __init__(self, options: WriteOptions, plan: WritePlan) -> None:
        self.options = options
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LanceCommitMessage:
        """Stream this task's batches to the server in stage mode (runs on an executor)."""
        if self.plan.mode == "skip":
            return LanceCommitMessage((), None, 0)
        batches = _cast_batches(iterator, self.plan, self.options)
        first = next(batches, None)
        if first is None:
            return LanceCommitMessage((), None, 0)
        opts = self.options
        staged = client_for(opts.source).stage_batches(
            opts.source.dataset,
            itertools.chain([first], batches),
            first.schema,
            max_rows_per_file=opts.max_rows_per_file,
            data_storage_version=opts.data_storage_version,
        )
        return LanceCommitMessage(staged.fragments, staged.schema, staged.rows_written)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit every task's staged fragments in one transaction (runs on the driver)."""
        if self.plan.mode == "skip":
            return
        staged = _staged(messages)
        if not staged and self.plan.mode == "append":
            return  # nothing to add: no new version
        # The schema the data was staged with (vectors included); Spark's own for an empty job.
        schema = next((m.schema for m in staged if m.schema is not None), self.plan.empty_schema)
        fragments = [f for m in staged for f in m.fragments]
        source = self.options.source
        everything = WriteResult(source.dataset, 0, 0, tuple(fragments), schema)
        client_for(source).commit(
            source.dataset, [everything], self.plan.mode, read_version=self.plan.read_version
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete the files staged by the tasks that finished (runs on the driver)."""
        source = self.options.source
        client_for(source).discard(source.dataset, [f for m in _staged(messages) for f in m.fragments])


def save(
    df: DataFrame,
    dataset: str,
    *,
    uri: str | None = None,
    mode: str = "errorifexists",
    **options: str | int,
) -> None:
    """Write ``df`` to ``dataset`` with any Spark save mode, including ``errorifexists`` and ``ignore``.

    Spark's JVM accepts only ``append`` and ``overwrite`` from a Python data source; this helper
    passes the wanted mode as the ``save_mode`` option, which the driver enforces (``errorifexists``
    commits with "create", so a concurrent creator makes the job fail rather than mix data).

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The data to write.
    dataset : str
        Dataset name on the server.
    uri : str, optional
        Server location (default: option/env ``LANCE_FLIGHT_URI``).
    mode : {"errorifexists", "append", "overwrite", "ignore"}
        Spark save mode semantics (default, as in Spark: ``errorifexists``).
    **options
        Other writer options (``token``, ``vector_columns``, ``max_rows_per_file``, ...).
    """
    if mode not in SAVE_MODES:
        raise InvalidInputError(f"mode must be one of {SAVE_MODES}, got {mode!r}")
    writer = df.write.format("lance_flight").option("dataset", dataset).option("save_mode", mode)
    if uri is not None:
        writer = writer.option("uri", uri)
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.mode("overwrite" if mode == "overwrite" else "append").save()
