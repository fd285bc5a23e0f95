"""Streaming take: the client streams batches of row ids (or offsets), the server streams the rows.

The descriptor command is a take ticket (:func:`flight_server.tickets.encode_ticket` of a
``TakeRequest`` without ids) naming the dataset, version and columns; each incoming batch has one
``uint64`` column, ``row_id`` or ``index``. The version is resolved once, so every answer reads the
same snapshot. Each answer batch holds the rows of one request batch, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

from flight_server import callinfo
from flight_server.catalog import Catalog
from flight_server.errors import ClientStreamError
from flight_server.fairness import HeldTurn
from flight_server.handlers.scan import open_version
from flight_server.handlers.take import check_take_size, take_rows
from flight_server.requests import TakeRequest
from flight_server.streams import Lease, estimate_row_bytes
from flight_server.tickets import decode_ticket
from lance_format.core.errors import InvalidInputError

__all__ = ["ID_COLUMNS", "exchange_request", "serve_exchange"]

#: Column names a request batch may use: stable row ids / addresses, or logical offsets.
ID_COLUMNS = ("row_id", "index")


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    """The table as one batch: the client pairs each answer batch with one request batch."""
    if table.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    return table.combine_chunks().to_batches()[0]


def exchange_request(descriptor: flight.FlightDescriptor) -> TakeRequest:
    """The take a do_exchange descriptor describes."""
    if descriptor.descriptor_type != flight.DescriptorType.CMD:
        raise InvalidInputError("do_exchange needs a command descriptor holding a take ticket")
    # The ids arrive as batches: the take in the descriptor needs none (an empty list is fine too).
    req = decode_ticket(descriptor.command, require_ids=False)
    if not isinstance(req, TakeRequest):
        raise InvalidInputError("do_exchange's descriptor must hold a take request")
    return req


def _next_chunk(reader: flight.MetadataRecordBatchReader, lease: Lease | None) -> Any:
    """The client's next message (``None`` at the end), counted as waiting on the client."""
    with lease.waiting() if lease is not None else nullcontext():
        try:
            return reader.read_chunk()
        except StopIteration:
            return None
        except pa.ArrowException as exc:  # what the client sent does not decode: its bad input
            raise ClientStreamError(f"the stream sent is not valid Arrow IPC: {exc}") from None


def serve_exchange(
    catalog: Catalog,
    descriptor: flight.FlightDescriptor,
    reader: flight.MetadataRecordBatchReader,
    writer: flight.MetadataRecordBatchWriter,
    max_rows: int,
    metrics: Any = None,
    lease: Lease | None = None,
    validate_request: Callable[[TakeRequest], None] | None = None,
    turn: HeldTurn | None = None,
) -> int:
    """Answer every request batch; return the number of rows sent.

    With a ``lease``, each answer's estimated bytes are reserved before its rows are read (and
    freed once written), waits on the client count toward the idle timeout, and the call's
    cancellation is checked between batches. ``validate_request`` checks the descriptor's take.
    With a ``turn`` (of the server's fair work scheduler), each answer's rows are taken inside a
    turn of the caller; none is held while waiting on the client or sending.
    """
    req = exchange_request(descriptor)
    if validate_request is not None:
        validate_request(req)
    callinfo.annotate(dataset=req.dataset)
    ds = open_version(catalog, req.dataset, req.version, req.tag)
    row_bytes = 0
    sent = 0
    started = False
    while True:
        if lease is not None:
            lease.check()
        chunk = _next_chunk(reader, lease)
        if chunk is None:
            break
        batch = chunk.data
        if batch is None:
            continue
        names = [n for n in batch.schema.names if n in ID_COLUMNS]
        if len(names) != 1 or batch.num_columns != 1:
            raise InvalidInputError(f"each exchange batch needs exactly one column, one of {ID_COLUMNS}")
        check_take_size(batch.num_rows, max_rows)
        column = batch.column(0)
        if column.null_count or not pa.types.is_integer(column.type):
            raise InvalidInputError("row ids / offsets must be non-null integers")
        values = column.to_numpy(zero_copy_only=False)
        if values.size and np.issubdtype(values.dtype, np.signedinteger) and values.min() < 0:
            raise InvalidInputError("row ids / offsets must not be negative")
        ids = values.astype(np.uint64, copy=False)
        if lease is not None:
            if not row_bytes:
                empty = np.zeros(0, np.uint64)
                row_bytes = estimate_row_bytes(take_rows(ds, req, empty, None).schema)
            lease.reserve(len(ids) * row_bytes)
        with turn.inside() if turn is not None else nullcontext():
            table = take_rows(
                ds, req, ids if names[0] == "row_id" else None, ids if names[0] == "index" else None
            )
            answer = _one_batch(table)
        if lease is not None:
            lease.resize(answer.nbytes)
        if not started:
            writer.begin(table.schema)
            started = True
        with lease.waiting() if lease is not None else nullcontext():
            writer.write_batch(answer)
        if lease is not None:
            lease.free()
        sent += table.num_rows
        if metrics is not None:
            metrics.rows_served("exchange", table.num_rows, table.nbytes)
    if not started:
        # No requests: still answer with the schema, so the client's reader completes.
        empty = take_rows(ds, req, np.zeros(0, np.uint64), None)
        writer.begin(empty.schema)
    return sent
