"""``do_put``: stream batches into one commit (create / append / overwrite) or stage fragments.

The batches are written to data files while they arrive; the manifest is committed only after the
client's stream ended cleanly. pyarrow ends the server's reader the same way whether the client
finished or died mid-stream, so a WriteRequest with ``end_marker`` (what our client sends) commits
only when the stream closed with :data:`~flight_server.requests.END_OF_WRITE`; a killed client
leaves the dataset at its previous version.

Plain clients (a path descriptor, or a command without ``end_marker``) have only the call's
cancellation flag: a dead peer marks the call cancelled when gRPC closes its stream, so
:func:`write_stream` polls the ``cancelled`` callable it is given (the call's
``context.is_cancelled``) for up to :data:`CANCEL_GRACE_S` after such a stream ends and commits
nothing if the call got cancelled. Without a ``cancelled`` callable those writes are unprotected.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.catalog import Catalog
from flight_server.errors import client_chunks
from flight_server.fairness import HeldTurn
from flight_server.requests import END_OF_WRITE, WriteRequest, WriteResult
from flight_server.streams import Lease
from lance_format import write_dataset
from lance_format.core.errors import InvalidInputError, NotFoundError
from lance_format.core.types import check_column_names, fields_from_arrow
from lance_format.dataset import stage_fragments
from lance_format.dataset.staging import StagingStore
from lance_format.dataset.write import DEFAULT_MAX_ROWS_PER_FILE, resolve_storage_version, write_fragments
from lance_format.io.store import ObjectStore
from lance_format.table.fragment_json import fragment_to_json
from lance_format.table.model import DataFragment

log = logging.getLogger("lance_flight.server")

__all__ = [
    "CANCEL_GRACE_S",
    "StreamCancelled",
    "cancelled_within",
    "received_bytes",
    "write_request",
    "write_stream",
]

#: Seconds a stream without an end-of-write marker waits, after its last message and before
#: anything is committed, for the call to be marked cancelled. In 1,100+ measured SIGKILLs of a
#: path-descriptor client (pyarrow 26: idle and busy CPUs, parallel kills, a slow consumer) the call
#: was already cancelled when the reader loop ended (first look: median 5 us, at most 0.14 ms
#: later), while a client that finished (``close()``, or ``done_writing()`` then reading the result)
#: was never marked cancelled. 10 ms is ~70x the worst seen and is what every finished plain client
#: pays (~10 ms on a ~3 ms small put); streams with an end marker do not wait.
CANCEL_GRACE_S = 0.01

#: Seconds between two looks at the cancellation flag during the grace period.
_CANCEL_POLL_S = 0.001


def write_request(descriptor: flight.FlightDescriptor, decoded: object | None) -> WriteRequest:
    """The write a do_put descriptor asks for (a path ``[dataset]`` means create-or-append)."""
    if descriptor.descriptor_type == flight.DescriptorType.PATH:
        path = descriptor.path or []
        if len(path) != 1:
            raise InvalidInputError("a path descriptor names exactly one dataset: [name]")
        name = path[0].decode("utf-8", "replace") if isinstance(path[0], bytes) else str(path[0])
        return WriteRequest(dataset=name, mode="auto")
    if not isinstance(decoded, WriteRequest):
        raise InvalidInputError("do_put needs a path descriptor or a WriteRequest command")
    return decoded


class StreamCancelled(InvalidInputError):
    """The client went away mid-stream; nothing is committed."""


def cancelled_within(cancelled: Callable[[], bool], grace: float, poll: float = _CANCEL_POLL_S) -> bool:
    """Whether ``cancelled()`` turns true within ``grace`` seconds (looked at every ``poll``).

    Parameters
    ----------
    cancelled : Callable[[], bool]
        The call's cancellation flag (``context.is_cancelled``).
    grace : float
        Seconds to wait at most; ``0`` looks once.
    poll : float, optional
        Seconds between two looks.

    Returns
    -------
    bool
        ``True`` as soon as ``cancelled()`` is true; ``False`` when it stayed false for ``grace``.
    """
    deadline = time.monotonic() + grace
    while not cancelled():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(poll, remaining))
    return True


def received_bytes(batch: pa.RecordBatch) -> int:
    """The bytes of a batch read off the wire: the sum of its buffers.

    A batch decoded from an IPC message holds exactly the buffers the sender wrote (the writer cuts
    slices down to their rows), so this is ``batch.nbytes`` up to padding, and never less: the
    memory the batch pins, what the lease and the message limit are about. ``nbytes`` walks every
    column's referenced byte ranges (~60 us a 10,000-row batch, Spark's batch size; two per batch
    were ~5% of a staged write's CPU); this only adds up buffer sizes.
    """
    return int(batch.get_total_buffer_size())


class _Counted:
    """The client's batches, counted (rows, bytes) and checked against the message-size limit."""

    def __init__(
        self,
        reader: flight.MetadataRecordBatchReader,
        max_bytes: int,
        cancelled: Callable[[], bool] | None,
        end_marker: bool,
        cancel_grace: float = CANCEL_GRACE_S,
        lease: Lease | None = None,
        turn: HeldTurn | None = None,
    ) -> None:
        self.reader = reader
        self.lease = lease
        self.turn = turn
        self.cancelled = cancelled
        self.end_marker = end_marker
        self.cancel_grace = cancel_grace
        self.max_bytes = max_bytes
        self.rows = 0
        self.nbytes = 0

    def _chunks(self) -> Iterator[Any]:
        """The client's messages; with a lease, waits on the client count toward the idle
        timeout, each batch is charged to it until the next is asked for, and cancellation stops
        the stream. With a turn, each batch is worked on (until the next is asked for) inside a
        turn of the caller, and so is what follows the last one (flush, commit); no turn is held
        while waiting on the client or for memory."""
        lease, turn = self.lease, self.turn
        chunks = client_chunks(self.reader)  # Arrow's decode errors are the client's bad input
        while True:
            if turn is not None:
                turn.give_back()  # the writer is done with the previous batch
            if lease is not None:
                lease.free()
                lease.check()
            with lease.waiting() if lease is not None else nullcontext():
                chunk = next(chunks, None)
            if chunk is None:
                if turn is not None:
                    turn.take()
                return
            if lease is not None and chunk.data is not None:
                lease.reserve(received_bytes(chunk.data))
            if turn is not None:
                turn.take()
            yield chunk

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        ended = False
        for chunk in self._chunks():
            batch = chunk.data
            if batch is None:
                meta = chunk.app_metadata
                ended = meta is not None and meta.to_pybytes() == END_OF_WRITE
                continue
            if ended:
                raise InvalidInputError("data arrived after the end-of-write marker")
            size = received_bytes(batch)
            if size > self.max_bytes:
                raise InvalidInputError(
                    f"a batch of {size} bytes exceeds limits.maxMessageBytes ({self.max_bytes}): "
                    "split it into smaller batches (pyarrow: writer.write_table(table, max_chunksize="
                    "rows); LanceFlightClient.write splits batches itself)"
                )
            self.rows += batch.num_rows
            self.nbytes += size
            yield batch
        # A client that dies mid-stream ends the reader exactly as if it had finished, so our
        # clients end with an explicit marker; without one, only the call's cancellation flag
        # tells a dead peer from a finished one (given a moment to be set). Both are checked
        # before anything is committed.
        if self.end_marker:
            gone = not ended or (self.cancelled is not None and self.cancelled())
        else:
            gone = self.cancelled is not None and cancelled_within(self.cancelled, self.cancel_grace)
        if gone:
            raise StreamCancelled("the client cancelled the write before finishing its stream")

    def reader_of(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.reader.schema, iter(self))


class _StopWhenCancelled:
    """Write progress that stops the write before each new data file once the call is cancelled:
    one small batch with ``max_rows_per_file=1`` is hundreds of files (seconds each on wide
    schemas), so checking only when the stream ends would let abandoned work run on."""

    def __init__(self, cancelled: Callable[[], bool]) -> None:
        self.cancelled = cancelled

    def begin(self, fragment: DataFragment) -> None:
        if self.cancelled():
            raise StreamCancelled("the call was cancelled while its data was being written")

    def complete(self, fragment: DataFragment) -> None:
        return None


def same_schema(data: pa.Schema, target: pa.Schema) -> bool:
    """Same column names (any order) with the same types."""
    return sorted(data.names) == sorted(target.names) and all(
        data.field(f.name).type.equals(f.type) for f in target
    )


def _stage(
    catalog: Catalog,
    req: WriteRequest,
    reader: pa.RecordBatchReader,
    uri: str,
    store: ObjectStore,
    storage: dict[str, str] | None,
    options: dict[str, Any],
) -> list[DataFragment]:
    """Stage data files: with the dataset's field ids when the data has its schema, else with
    fresh ids for the data's own schema (an overwrite that changes the schema commits those with
    the new schema; an append of them fails at commit)."""
    try:
        ds = catalog.open(req.dataset)
    except NotFoundError:
        ds = None
    if ds is None or same_schema(reader.schema, ds.schema):
        return stage_fragments(
            reader,
            uri,
            data_storage_version=req.data_storage_version,
            storage_options=storage,
            store=store,
            **options,
        )
    # A requested version is checked like any write's; without one the dataset keeps its own.
    version = resolve_storage_version(req.data_storage_version or ds.data_storage_version)
    max_rows = int(options.get("max_rows_per_file", DEFAULT_MAX_ROWS_PER_FILE))
    check_column_names(reader.schema.names)
    schema = fields_from_arrow(reader.schema)
    return write_fragments(store, reader, schema, version, max_rows, progress=options.get("progress"))


def write_stream(
    catalog: Catalog,
    req: WriteRequest,
    reader: flight.MetadataRecordBatchReader,
    max_message_bytes: int,
    metrics: Any = None,
    cancelled: Callable[[], bool] | None = None,
    cancel_grace: float = CANCEL_GRACE_S,
    owner: str = "",
    lease: Lease | None = None,
    turn: HeldTurn | None = None,
) -> WriteResult:
    """Write the client's stream as ``req`` says; return the new version (or staged fragments).

    Parameters
    ----------
    catalog : Catalog
        The datasets' catalog.
    req : WriteRequest
        What to write (``mode="auto"`` for a path descriptor: create-or-append).
    reader : flight.MetadataRecordBatchReader
        The do_put's reader of the client's stream.
    max_message_bytes : int
        The largest batch accepted (``limits.maxMessageBytes``).
    metrics : Any, optional
        Receives ``rows_served("put", rows, nbytes)`` after a successful write.
    cancelled : Callable[[], bool] | None, optional
        The call's ``context.is_cancelled``. Checked before committing; without it a plain client
        (no end marker) killed mid-stream gets what it sent committed.
    cancel_grace : float, optional
        Seconds a stream without an end marker waits for ``cancelled`` to turn true before
        committing (default :data:`CANCEL_GRACE_S`); streams with an end marker never wait.
    owner : str, optional
        Who writes (the caller's principal): staged files are recorded as theirs, and only they
        may discard them (:mod:`lance_format.dataset.staging`).
    lease : Lease | None, optional
        The call's stream slot: each incoming batch is charged to it while it is written, and a
        client that stops sending for ``limits.streamIdleSeconds`` loses the slot.
    turn : HeldTurn | None, optional
        The call's turn of the server's fair work scheduler: each batch is written, and the write
        finished, inside a turn; none is held while waiting on the client. The caller gives the
        turn back at the end.

    Returns
    -------
    WriteResult
        The new version and rows written, or the staged fragments for ``mode="stage"``.

    Raises
    ------
    StreamCancelled
        The client went away before finishing its stream; nothing was committed (staged files of
        ``mode="stage"`` are removed again).
    """
    uri = catalog.uri(req.dataset)
    counted = _Counted(reader, max_message_bytes, cancelled, req.end_marker, cancel_grace, lease, turn)
    options: dict[str, Any] = {}
    if req.max_rows_per_file:
        options["max_rows_per_file"] = req.max_rows_per_file
    if cancelled is not None:
        options["progress"] = _StopWhenCancelled(cancelled)
    storage = catalog.storage_options or None
    if req.mode == "stage":
        store = StagingStore(catalog.session.store_for(uri, storage), owner)
        try:
            frags = _stage(catalog, req, counted.reader_of(), uri, store, storage, options)
        except BaseException:
            # Staged files are nobody's until a commit names them: a failed stage leaves none.
            store.remove_written()
            raise
        blobs = tuple(json.dumps(fragment_to_json(f)).encode() for f in frags)
        result = WriteResult(req.dataset, 0, counted.rows, blobs, reader.schema)
    else:
        mode = "append" if req.mode == "auto" else req.mode
        ds = write_dataset(
            counted.reader_of(),
            uri,
            mode=mode,
            data_storage_version=req.data_storage_version,
            enable_stable_row_ids=req.enable_stable_row_ids,
            storage_options=storage,
            session=catalog.session,
            **options,
        )
        if mode != "append":
            catalog.forget(req.dataset)
        result = WriteResult(req.dataset, ds.version, counted.rows)
    if metrics is not None:
        metrics.rows_served("put", counted.rows, counted.nbytes)
    return result
