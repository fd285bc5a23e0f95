"""The Arrow Flight service: every RPC of the lance-flight protocol over one root of datasets.

Handlers do the work (:mod:`flight_server.handlers`); this class decodes requests, enforces the
limits of :class:`~flight_server.settings.ServerSettings`, checks write permission, counts metrics,
and turns every failure into a Flight error without a traceback (:mod:`flight_server.errors`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_server import callinfo
from flight_server._serde import (
    decode_action_request,
    decode_command,
    decode_ticket,
    encode_action_result,
    encode_write_result,
)
from flight_server.batch_cache import BatchCache, scan_key
from flight_server.catalog import Catalog
from flight_server.errors import TooManyStreams, raise_flight_error, to_stream_error
from flight_server.handlers.actions import ACTIONS, run_action
from flight_server.handlers.exchange import serve_exchange
from flight_server.handlers.put import write_request, write_stream
from flight_server.handlers.scan import open_version, plan_scan, scan_stream
from flight_server.handlers.take import take_table
from flight_server.requests import ScanRequest, TakeRequest, WriteRequest
from flight_server.settings import ServerSettings
from lance_format.core.errors import CommitConflictError, InvalidInputError

__all__ = ["LanceFlightService"]

log = logging.getLogger("lance_flight.server")
_T = TypeVar("_T")


def _storage_options(settings: ServerSettings) -> dict[str, str]:
    options = dict(settings.storage_options)
    if settings.s3_endpoint:
        options.setdefault("aws_endpoint", settings.s3_endpoint)
        if settings.s3_endpoint.startswith("http://"):
            options.setdefault("allow_http", "true")
    if settings.s3_region:
        options.setdefault("aws_region", settings.s3_region)
    if settings.s3_anonymous:
        options.setdefault("anonymous", "true")
    return options


def _require_write(context: flight.ServerCallContext) -> None:
    from flight_server.auth import require_write

    require_write(context)


class _StreamSlots:
    """Counts open streams; refuses a new one above ``limits.maxConcurrentStreams``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0
        self._lock = threading.Lock()

    def acquire(self) -> _Lease:
        with self._lock:
            if self.open >= self.limit:
                raise TooManyStreams(self.limit)
            self.open += 1
        return _Lease(self)

    def _release(self) -> None:
        with self._lock:
            self.open -= 1


class _Lease:
    """One open stream; releasing twice is harmless (a stream ends once, however it ends)."""

    def __init__(self, slots: _StreamSlots) -> None:
        self._slots: _StreamSlots | None = slots

    def release(self) -> None:
        slots, self._slots = self._slots, None
        if slots is not None:
            slots._release()


class LanceFlightService(flight.FlightServerBase):  # type: ignore[misc]
    """Serves the Lance datasets under ``settings.root`` over Arrow Flight.

    Parameters
    ----------
    settings:
        Root, limits and storage options (see ``docs/configuration.md``).
    location:
        Where to listen, e.g. ``grpc://127.0.0.1:0`` (port 0 picks a free port; see ``.port``).
    advertise:
        The locations every endpoint lists (all workers); empty means this server's own location.
    middleware, auth_handler, tls_certificates, verify_client, root_certificates:
        Passed to :class:`pyarrow.flight.FlightServerBase`.
    metrics:
        Receives ``rows_served``, ``commit_conflict`` and ``stream_started/finished`` calls.
    """

    def __init__(
        self,
        settings: ServerSettings,
        *,
        location: str,
        advertise: Sequence[str] = (),
        middleware: Mapping[str, flight.ServerMiddlewareFactory] | None = None,
        auth_handler: Any = None,
        tls_certificates: Any = (),
        verify_client: bool = False,
        root_certificates: bytes | None = None,
        metrics: Any = None,
    ) -> None:
        super().__init__(
            location,
            auth_handler=auth_handler,
            tls_certificates=list(tls_certificates),
            verify_client=verify_client,
            root_certificates=root_certificates,
            middleware=dict(middleware or {}),
        )
        self.settings = settings
        self.catalog = Catalog(settings.root, _storage_options(settings), settings.latest_version_seconds)
        self.metrics = metrics
        self._slots = _StreamSlots(settings.max_concurrent_streams)
        # Per service (one per worker process): decoded batches of finished scan endpoints.
        self.batch_cache = BatchCache(settings.batch_cache_bytes)
        if advertise:
            self.advertise = [str(a) for a in advertise]
        else:
            scheme = "grpc+tls" if tls_certificates else "grpc"
            host = location.split("://", 1)[-1].rsplit(":", 1)[0] or "127.0.0.1"
            if host in ("0.0.0.0", "[::]", "::"):
                host = "127.0.0.1"
            self.advertise = [f"{scheme}://{host}:{self.port}"]
        # Local roots appear in engine messages; clients see "<root>" instead.
        self._hide = (self.catalog.root,) if self.catalog.local else ()

    # -- plumbing --------------------------------------------------------------------------------
    @staticmethod
    def _note(context: flight.ServerCallContext, dataset: str | None = None) -> None:
        """The caller's address and the dataset asked for, for the call's log line."""
        callinfo.annotate(peer=context.peer(), dataset=dataset)

    def _guard(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except BaseException as exc:
            if isinstance(exc, CommitConflictError) and self.metrics is not None:
                self.metrics.commit_conflict()
            raise_flight_error(exc, self._hide)

    def _stream(
        self, kind: str, batches: Iterator[pa.RecordBatch], lease: _Lease
    ) -> Iterator[pa.RecordBatch]:
        """Yield ``batches`` split under the message limit; count them; free the stream slot at the end."""
        rows = nbytes = 0
        limit = self.settings.max_message_bytes
        try:
            if self.metrics is not None:
                self.metrics.stream_started()
            for batch in batches:
                if batch.nbytes > limit and batch.num_rows > 1:
                    step = max(1, batch.num_rows * limit // max(1, batch.nbytes))
                    parts = [batch.slice(i, step) for i in range(0, batch.num_rows, step)]
                else:
                    parts = [batch]
                for part in parts:
                    rows += part.num_rows
                    nbytes += part.nbytes
                    yield part
        except BaseException as exc:
            if isinstance(exc, GeneratorExit):
                raise
            raise to_stream_error(exc, self._hide) from None
        finally:
            lease.release()
            if self.metrics is not None:
                self.metrics.stream_finished()
                self.metrics.rows_served(kind, rows, nbytes)

    # -- discovery -------------------------------------------------------------------------------
    def list_flights(self, context: flight.ServerCallContext, criteria: bytes) -> Iterator[flight.FlightInfo]:
        self._note(context)
        names = self._guard(self.catalog.names)
        prefix = bytes(criteria or b"").decode("utf-8", "replace")
        for name in names:
            if prefix and not name.startswith(prefix):
                continue
            try:
                yield plan_scan(
                    self.catalog, ScanRequest(name), flight.FlightDescriptor.for_path(name), self.advertise
                )
            except Exception:
                log.warning("list_flights: cannot plan dataset", extra={"dataset": name}, exc_info=True)

    def _scan_request(self, descriptor: flight.FlightDescriptor) -> ScanRequest:
        if descriptor.descriptor_type == flight.DescriptorType.PATH:
            path = descriptor.path or []
            if len(path) != 1:
                raise InvalidInputError("a path descriptor names exactly one dataset: [name]")
            raw = path[0]
            return ScanRequest(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw))
        req = decode_command(descriptor.command)
        if not isinstance(req, ScanRequest):
            raise InvalidInputError("this call needs a path descriptor or a ScanRequest command")
        return req

    def get_flight_info(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        def run() -> flight.FlightInfo:
            req = self._scan_request(descriptor)
            self._note(context, req.dataset)
            return plan_scan(self.catalog, req, descriptor, self.advertise)

        return self._guard(run)

    def get_schema(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.SchemaResult:
        def run() -> flight.SchemaResult:
            req = self._scan_request(descriptor)
            self._note(context, req.dataset)
            schema, batches = scan_stream(self.catalog, req)
            del batches  # a lazy generator: nothing was read
            return flight.SchemaResult(schema)

        return self._guard(run)

    # -- reads -----------------------------------------------------------------------------------
    def do_get(self, context: flight.ServerCallContext, ticket: flight.Ticket) -> flight.FlightDataStream:
        def run() -> flight.FlightDataStream:
            req = decode_ticket(ticket.ticket)
            self._note(context, req.dataset)
            lease = self._slots.acquire()
            if isinstance(req, TakeRequest):
                try:
                    return self._take_stream(req)
                finally:
                    lease.release()
            try:
                ds = open_version(self.catalog, req.dataset, req.version, req.tag)
                key = (
                    scan_key(ds.uri, ds.version, ds.manifest.timestamp_ns, req)
                    if self.batch_cache.enabled
                    else None
                )
                cached = self.batch_cache.get(key) if key is not None else None
                if cached is not None:
                    lease.release()
                    return self._table_stream("scan", cached)
                schema, batches = scan_stream(self.catalog, req, ds)
            except BaseException:
                lease.release()
                raise
            if key is not None:
                batches = self.batch_cache.recording(key, schema, batches)
            stream = self._stream("scan", batches, lease)
            # A stream cancelled before its first batch never runs the generator's finally.
            weakref.finalize(stream, lease.release)
            # Through a reader, not GeneratorStream: the IPC writer behind RecordBatchStream sends
            # dictionary batches (dictionary-encoded columns) before the data that uses them.
            return flight.RecordBatchStream(pa.RecordBatchReader.from_batches(schema, stream))

        return self._guard(run)

    def _take_stream(self, req: TakeRequest) -> flight.FlightDataStream:
        """A take is materialized whole (it is bounded by maxTakeRows), then sent by C++ alone:
        no Python per batch, which is most of a small take's latency."""
        return self._table_stream("take", take_table(self.catalog, req, self.settings.max_take_rows))

    def _table_stream(self, kind: str, table: pa.Table) -> flight.FlightDataStream:
        """A materialized result sent by C++ alone, its batches kept under the message limit."""
        limit = self.settings.max_message_bytes
        if table.nbytes > limit and table.num_rows > 1:
            rows_per_batch = max(1, table.num_rows * limit // table.nbytes)
            table = pa.Table.from_batches(table.to_batches(rows_per_batch), table.schema)
        if self.metrics is not None:
            self.metrics.rows_served(kind, table.num_rows, table.nbytes)
        return flight.RecordBatchStream(table)

    def do_exchange(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.MetadataRecordBatchWriter,
    ) -> None:
        def run() -> None:
            self._note(context)
            lease = self._slots.acquire()
            try:
                serve_exchange(
                    self.catalog, descriptor, reader, writer, self.settings.max_take_rows, self.metrics
                )
            finally:
                lease.release()

        self._guard(run)

    # -- writes ----------------------------------------------------------------------------------
    def do_put(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        def run() -> None:
            _require_write(context)
            decoded = (
                decode_command(descriptor.command)
                if descriptor.descriptor_type == flight.DescriptorType.CMD
                else None
            )
            req: WriteRequest = write_request(descriptor, decoded)
            self._note(context, req.dataset)
            self.catalog.uri(req.dataset)  # validate the name before reading any data
            lease = self._slots.acquire()
            try:
                result = write_stream(
                    self.catalog,
                    req,
                    reader,
                    self.settings.max_message_bytes,
                    self.metrics,
                    cancelled=context.is_cancelled,
                )
            finally:
                lease.release()
                self.catalog.written(req.dataset)
            writer.write(pa.py_buffer(encode_write_result(result)))

        self._guard(run)

    # -- actions ---------------------------------------------------------------------------------
    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        return [(name, spec.description) for name, spec in ACTIONS.items()]

    def do_action(self, context: flight.ServerCallContext, action: flight.Action) -> Iterator[bytes]:
        def run() -> bytes:
            name = action.type
            spec = ACTIONS.get(name)
            if spec is not None and spec.writes:
                _require_write(context)
            body = action.body.to_pybytes() if action.body is not None else b""
            request = decode_action_request(body)
            self._note(context, request.dataset)
            try:
                result = run_action(self.catalog, name, request)
            finally:
                if spec is not None and spec.writes and request.dataset:
                    self.catalog.written(request.dataset)  # a later "latest" read must see it
            if name == "cache_stats":
                batch = dataclasses.asdict(self.batch_cache.counters())
                counters = {**result.counters, **{f"batch_{k}": int(v) for k, v in batch.items()}}
                result = dataclasses.replace(result, counters=counters)
            return encode_action_result(result)

        return iter([self._guard(run)])
