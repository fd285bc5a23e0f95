"""The Arrow Flight service: every RPC of the lance-flight protocol over one root of datasets.

Handlers do the work (:mod:`flight_server.handlers`); this class decodes requests, enforces the
limits of :class:`~flight_server.settings.ServerSettings`, checks write permission, counts metrics,
and turns every failure into a Flight error without a traceback (:mod:`flight_server.errors`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import operator
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_server import callinfo
from flight_server._serde import (
    decode_action_request,
    decode_command,
    decode_take_ticket,
    decode_ticket,
    encode_action_result,
    encode_write_result,
    peek_take_count,
)
from flight_server.batch_cache import BatchCache, scan_key
from flight_server.catalog import Catalog
from flight_server.errors import raise_flight_error, to_stream_error
from flight_server.fairness import FairScheduler, HeldTurn, scheduled
from flight_server.flightsql import SQL_ACTIONS, DataFusionBatches, FlightSql, QuerySlots
from flight_server.handlers.actions import ACTIONS, run_action
from flight_server.handlers.exchange import serve_exchange
from flight_server.handlers.put import write_request, write_stream
from flight_server.handlers.scan import open_version, plan_scan, scan_stream
from flight_server.handlers.take import take_batches
from flight_server.json_bodies import decode_json_action, encode_json_result, is_json_body
from flight_server.penalties import OversizePenalties, peer_host
from flight_server.plan_cache import MAX_KEY_BYTES, PLAN_MAX_AGE_SECONDS, PlanCache
from flight_server.requests import ScanRequest, TakeRequest, WriteRequest
from flight_server.settings import ServerSettings
from flight_server.streams import (
    CallCancelled,
    CancelCheck,
    Lease,
    StreamGovernor,
    admission_bytes,
    estimate_row_bytes,
    governed,
    principal_of,
)
from flight_server.validation import RequestLimits, check_request_bytes, check_take_rows, validate
from lance_format import LanceDataset
from lance_format.core.errors import CommitConflictError, InvalidInputError
from lance_format.dataset.scanner import DEFAULT_BATCH_SIZE as SCAN_BATCH_ROWS
from lance_format.dataset.session import Session

__all__ = ["LanceFlightService"]

log = logging.getLogger("lance_flight.server")
_T = TypeVar("_T")
#: An opened read: the cached table of a finished scan, or (kind, schema, estimated bytes of the
#: first batch, lazy batches).
_Opened: TypeAlias = pa.Table | tuple[str, pa.Schema, int, Iterator[pa.RecordBatch]]


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


def _caller(context: flight.ServerCallContext) -> str:
    """The authenticated principal's name (``""`` when the server authenticates no one)."""
    middleware = context.get_middleware("auth")
    principal = getattr(middleware, "principal", None)
    return str(getattr(principal, "name", "") or "")


def _checkpoint(context: flight.ServerCallContext) -> Callable[[], None]:
    """Raises :class:`CallCancelled` once the call's deadline has passed or its client has gone
    (long actions call it between steps, so nobody's abandoned work runs on)."""

    def check() -> None:
        if context.is_cancelled():
            raise CallCancelled()

    return check


#: Results up to this many bytes (estimated from the column types) are read whole in the turn that
#: decoded their ticket and sent by C++ without calling back into Python: a small take then costs
#: one turn of the fair scheduler and one GIL hand-off fewer per step, each of which can wait
#: behind a heavy client's work. 64 KiB is HTTP/2's initial flow-control window: gRPC takes a
#: result this small without waiting on the client, so holding no stream slot while it is sent
#: lets no unread call pin more than that.
SMALL_RESULT_BYTES = 64 * 1024


def _read_small(opened: _Opened) -> tuple[pa.RecordBatch | None, _Opened]:
    """The whole result of a take of one small chunk, read now (else None: streamed in turns), and
    the read; a chunk found bigger than estimated (long strings) is put back in front of it."""
    if isinstance(opened, pa.Table):
        return None, opened
    kind, schema, first, batches = opened
    if kind != "take" or first > SMALL_RESULT_BYTES or operator.length_hint(batches, -1) != 1:
        return None, opened
    batch = next(batches)
    if batch.nbytes <= SMALL_RESULT_BYTES:
        return batch, opened
    return None, (kind, schema, first, _Prepended(batch, batches))


class _Prepended(Iterator[pa.RecordBatch]):
    """``first``, then ``rest``; says how many are left, as a take's chunks do (see
    :func:`~flight_server.fairness.scheduled`)."""

    def __init__(self, first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> None:
        self._first: pa.RecordBatch | None = first
        self._rest = rest

    def __next__(self) -> pa.RecordBatch:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        return next(self._rest)

    def __length_hint__(self) -> int:
        return (self._first is not None) + operator.length_hint(self._rest)


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
        session: Session | None = None,
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
        # Where refusals of oversized requests are reported: the auth middleware's back-off (it
        # refuses known principals early), else the service's own (anonymous callers, by host).
        penalties = getattr((middleware or {}).get("auth"), "penalties", None)
        self.penalties: OversizePenalties = penalties or OversizePenalties.of(settings)
        # The engine session build_server made from the settings and passed in (the default
        # session when a test builds the service by hand).
        self.session = session or Session.default()
        self.catalog = Catalog(
            settings.root,
            _storage_options(settings),
            settings.latest_version_seconds,
            session=self.session,
            orphan_min_age_seconds=settings.orphan_min_age_seconds,
        )
        self.metrics = metrics
        # Slots and result memory of this process, shared fairly between principals.
        self._slots = StreamGovernor(
            settings.max_concurrent_streams,
            settings.streams_per_principal,
            settings.memory_budget_bytes,
            settings.call_memory_bytes,
            settings.stream_wait_seconds,
            settings.stream_idle_seconds,
        )
        self._limits = RequestLimits.of(settings)
        # CPU work of this process (decoding, planning, each batch), shared fairly between principals.
        self._work = FairScheduler(settings.work_slots, settings.bulk_nice)
        lifetime = settings.ticket_lifetime_seconds
        # A reused answer's tickets must stay well inside their promised lifetime.
        max_age = PLAN_MAX_AGE_SECONDS if lifetime <= 0 else min(PLAN_MAX_AGE_SECONDS, lifetime / 4)
        self.plan_cache = PlanCache(settings.plan_cache_bytes, max_age=max_age)
        # Per service (one per worker process): decoded batches of finished scan endpoints.
        self.batch_cache = BatchCache(settings.batch_cache_bytes)
        # Flight SQL (and plain SQL text commands) on the same port.
        self.sql = FlightSql(
            self.catalog,
            settings.max_message_bytes,
            settings.ticket_lifetime_seconds,
            memory_bytes=settings.sql_memory_bytes,
            timeout_seconds=settings.sql_timeout_seconds,
            slots=QuerySlots(settings.max_concurrent_sql_queries, settings.stream_wait_seconds),
        )
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

    def shutdown(self) -> None:
        """Stop serving: wait for the calls in flight to finish, then close the engine session, so
        none of its threads (I/O, decode, encode) outlives the server."""
        super().shutdown()
        self._work.close()
        self.session.close()

    @property
    def work_scheduler(self) -> FairScheduler:
        """The fair scheduler of this process's CPU work (``limits.workSlots`` turns)."""
        return self._work

    # -- plumbing --------------------------------------------------------------------------------
    @staticmethod
    def _note(context: flight.ServerCallContext, dataset: str | None = None) -> None:
        """The caller's address and the dataset asked for, for the call's log line."""
        callinfo.annotate(peer=context.peer(), dataset=dataset)

    def _guard(self, fn: Callable[[], _T], *, unary: bool = True) -> _T:
        """Run a handler; any failure becomes a client error of :mod:`flight_server.errors`.

        ``unary=False`` for calls where pyarrow maps no Flight error class (``get_schema``).
        """
        try:
            return fn()
        except BaseException as exc:
            if isinstance(exc, CommitConflictError) and self.metrics is not None:
                self.metrics.commit_conflict()
            if not unary:
                raise to_stream_error(exc, self._hide) from None
            raise_flight_error(exc, self._hide)

    @staticmethod
    def _cancelled(context: flight.ServerCallContext) -> CancelCheck:
        """The call's cancellation flag, cheap to ask often (one per call, passed down)."""
        return CancelCheck(context.is_cancelled)

    def _lease(self, context: flight.ServerCallContext, cancelled: Callable[[], bool]) -> Lease:
        """A stream slot for the caller (waits, bounded, for one; else RESOURCE_EXHAUSTED)."""
        return self._slots.acquire(principal_of(context), cancelled)

    def _turn(
        self, context: flight.ServerCallContext, cancelled: Callable[[], bool]
    ) -> contextlib.AbstractContextManager[None]:
        """One turn of the fair work scheduler for the caller (see :mod:`flight_server.fairness`)."""
        return self._work.turn(principal_of(context), cancelled)

    def _stream(
        self,
        kind: str,
        batches: Iterator[pa.RecordBatch],
        lease: Lease,
        cancelled: Callable[[], bool],
        in_turns: bool = True,
    ) -> Iterator[pa.RecordBatch]:
        """Yield ``batches`` split under the message limit, each produced in a turn of the caller
        (unless not ``in_turns``) and charged to ``lease`` until sent; count them; free the slot
        and memory at the end."""
        rows = nbytes = 0
        limit = self.settings.max_message_bytes
        fair = scheduled(self._work, lease.principal, batches, cancelled) if in_turns else batches
        try:
            if self.metrics is not None:
                self.metrics.stream_started()
            for batch, size in governed(lease, fair):
                rows += batch.num_rows
                nbytes += size
                if size > limit and batch.num_rows > 1:
                    step = max(1, batch.num_rows * limit // max(1, size))
                    yield from (batch.slice(i, step) for i in range(0, batch.num_rows, step))
                else:
                    yield batch
        except BaseException as exc:
            if isinstance(exc, GeneratorExit):
                raise
            raise to_stream_error(exc, self._hide) from None
        finally:
            lease.release()
            if self.metrics is not None:
                self.metrics.stream_finished()
                self.metrics.rows_served(kind, rows, nbytes)

    def _oversized(self, context: flight.ServerCallContext, method: str, nbytes: int) -> None:
        """Report a request refused for its size (see :mod:`flight_server.penalties`).

        An authenticated principal's next calls are refused by the auth middleware. An anonymous
        caller (keyed by its host) that was already in a back-off gets this refusal only when the
        back-off is over: nothing can refuse it before its next request is copied.
        """
        key = str(getattr(context.get_middleware("auth"), "principal_key", "") or "")
        if key:
            self.penalties.refused(key, method, nbytes)
            return
        key = peer_host(str(context.peer()))
        backed_off = self.penalties.remaining(key, method) > 0
        if self.penalties.refused(key, method, nbytes) and backed_off:
            self.penalties.hold(key, method, nbytes, self._cancelled(context))

    def _check_bytes(self, context: flight.ServerCallContext, method: str, raw: bytes, what: str) -> None:
        """Refuse an oversized request (ticket, command, action body, criteria) before anything
        parses it; the refusal counts towards the caller's back-off."""
        try:
            check_request_bytes(raw, self.settings.max_message_bytes, what)
        except InvalidInputError:
            self._oversized(context, method, len(raw))
            raise

    def _check_command_bytes(
        self, context: flight.ServerCallContext, method: str, descriptor: flight.FlightDescriptor
    ) -> None:
        """Refuse an oversized descriptor command before anything parses it."""
        if descriptor.descriptor_type == flight.DescriptorType.CMD:
            self._check_bytes(context, method, descriptor.command or b"", "descriptor command")

    # -- discovery -------------------------------------------------------------------------------
    def list_flights(self, context: flight.ServerCallContext, criteria: bytes) -> Iterator[flight.FlightInfo]:
        self._note(context)
        raw = bytes(criteria or b"")
        self._guard(lambda: self._check_bytes(context, "list_flights", raw, "criteria"))
        names = self._guard(self.catalog.names)
        prefix = raw.decode("utf-8", "replace")
        cancelled = self._cancelled(context)
        for name in names:
            if prefix and not name.startswith(prefix):
                continue
            if cancelled():
                return  # nobody reads the rest
            try:
                with self._turn(context, cancelled):
                    info = self._plan(ScanRequest(name), flight.FlightDescriptor.for_path(name), cancelled)
                yield info
            except CallCancelled:
                return
            except Exception:
                log.warning("list_flights: cannot plan dataset", extra={"dataset": name}, exc_info=True)

    def _scan_request(self, descriptor: flight.FlightDescriptor) -> ScanRequest:
        """The scan a descriptor asks for, validated (callers ran :meth:`_check_command_bytes`)."""
        if descriptor.descriptor_type == flight.DescriptorType.PATH:
            path = descriptor.path or []
            if len(path) != 1:
                raise InvalidInputError("a path descriptor names exactly one dataset: [name]")
            raw = path[0]
            check_request_bytes(raw, self.settings.max_message_bytes, "descriptor path")
            req = ScanRequest(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw))
        else:
            decoded = decode_command(descriptor.command or b"")  # size checked by the caller
            if not isinstance(decoded, ScanRequest):
                raise InvalidInputError("this call needs a path descriptor or a ScanRequest command")
            req = decoded
        validate(req, self._limits)
        return req

    def _plan(
        self, req: ScanRequest, descriptor: flight.FlightDescriptor, cancelled: Callable[[], bool]
    ) -> flight.FlightInfo:
        """The FlightInfo of a scan, reused from :attr:`plan_cache` while its version is unchanged."""
        ds = open_version(self.catalog, req.dataset, req.version, req.tag)
        key = self._plan_key(descriptor, ds)
        info = self.plan_cache.get(key) if key is not None else None
        if info is None:
            info = plan_scan(
                self.catalog,
                req,
                descriptor,
                self.advertise,
                self.settings.ticket_lifetime_seconds,
                self.settings.max_endpoints,
                cancelled,
                ds,
            )
            if key is not None:
                self.plan_cache.put(key, info)
        return info

    def _plan_key(self, descriptor: flight.FlightDescriptor, ds: LanceDataset) -> tuple[object, ...] | None:
        if not self.plan_cache.enabled:
            return None
        raw = descriptor.serialize()  # type, path and command: the whole request
        if len(raw) > MAX_KEY_BYTES:
            return None
        return (raw, ds.uri, ds.version, ds.manifest.timestamp_ns)

    def get_flight_info(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        def run() -> flight.FlightInfo:
            self._check_command_bytes(context, "get_flight_info", descriptor)
            cancelled = self._cancelled(context)
            with self._turn(context, cancelled):
                sql = self.sql.command(descriptor)
                if sql is not None:
                    self._note(context)
                    return self.sql.flight_info(sql, descriptor, lambda: _require_write(context))
                req = self._scan_request(descriptor)
                self._note(context, req.dataset)
                return self._plan(req, descriptor, cancelled)

        return self._guard(run)

    def get_schema(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.SchemaResult:
        def run() -> flight.SchemaResult:
            self._check_command_bytes(context, "get_schema", descriptor)
            with self._turn(context, self._cancelled(context)):
                sql = self.sql.command(descriptor)
                if sql is not None:
                    self._note(context)
                    return flight.SchemaResult(self.sql.schema(sql))
                req = self._scan_request(descriptor)
                self._note(context, req.dataset)
                schema, batches = scan_stream(self.catalog, req)
                del batches  # a lazy generator: nothing was read
                return flight.SchemaResult(schema)

        # pyarrow's get_schema maps no Flight error class: a FlightInternalError would reach the
        # client as UNKNOWN with the Python traceback appended.
        return self._guard(run, unary=False)

    # -- reads -----------------------------------------------------------------------------------
    def do_get(self, context: flight.ServerCallContext, ticket: flight.Ticket) -> flight.FlightDataStream:
        def run() -> flight.FlightDataStream:
            raw = ticket.ticket  # a new copy of the bytes at every read: read once
            self._check_bytes(context, "do_get", raw, "ticket")
            try:
                count = peek_take_count(raw)
                if count is not None:
                    check_take_rows(count, self._limits)  # before the ids are copied and decoded
            except InvalidInputError:
                self._oversized(context, "do_get", len(raw))
                raise
            # Decoding and planning run in turns of the caller; waiting for a slot or memory does
            # not (it would hold a turn other principals need while it waits). When a slot is free
            # at once, the read is opened in the decoding turn (one wait behind others fewer).
            cancelled = self._cancelled(context)
            lease: Lease | None = None
            opened = None
            small: pa.RecordBatch | None = None
            with self._turn(context, cancelled):
                # A plain take ticket is no Flight SQL ticket, and its ids are read in place (a
                # big take's ids are megabytes: parsing and copying them would hold the GIL).
                req: ScanRequest | TakeRequest | None = None
                if count is not None:
                    req = decode_take_ticket(raw)
                sql = self.sql.stream(raw) if req is None else None
                if req is None and sql is None:
                    req = decode_ticket(raw)
                if req is not None:
                    validate(req, self._limits)
                    self._note(context, req.dataset)
                    lease = self._slots.try_acquire(principal_of(context), cancelled)
                    if lease is not None:
                        try:
                            small, opened = _read_small(self._open_read(req))
                        except BaseException:
                            lease.release()
                            raise
            del raw
            if sql is not None:
                self._note(context)
                return self._sql_stream(context, cancelled, *sql)
            assert req is not None
            if small is not None and lease is not None and isinstance(opened, tuple):
                # The whole (small) result was read in the decoding turn: C++ sends it alone.
                lease.release()
                return self._table_stream("take", pa.Table.from_batches([small], opened[1]))
            if lease is None:
                lease = self._lease(context, cancelled)
            try:
                if opened is None:
                    with self._turn(context, cancelled):
                        opened = self._open_read(req)
                if isinstance(opened, pa.Table):
                    lease.release()  # cached batches are memory the batch cache already accounts for
                    return self._table_stream("scan", opened)
                kind, schema, first, batches = opened
                # Admission: the first batch's bytes are reserved now, so a stream that finds no
                # room is refused (RESOURCE_EXHAUSTED) before it starts, never halfway.
                lease.reserve(admission_bytes(first))
            except BaseException:
                lease.release()
                raise
            stream = self._stream(kind, batches, lease, cancelled)
            # A stream cancelled before its first batch never runs the generator's finally.
            weakref.finalize(stream, lease.release)
            # Through a reader, not GeneratorStream: the IPC writer behind RecordBatchStream sends
            # dictionary batches (dictionary-encoded columns) before the data that uses them.
            return flight.RecordBatchStream(pa.RecordBatchReader.from_batches(schema, stream))

        return self._guard(run)

    def _open_read(self, req: ScanRequest | TakeRequest) -> _Opened:
        """A read's batches (lazy), schema and estimated first-batch bytes; or the cached table of
        an identical finished scan."""
        if isinstance(req, TakeRequest):
            schema, first, batches = take_batches(self.catalog, req, self.settings.max_take_rows)
            return "take", schema, first, batches
        ds = open_version(self.catalog, req.dataset, req.version, req.tag)
        key = None
        if self.batch_cache.enabled:
            key = scan_key(ds.uri, ds.version, ds.manifest.timestamp_ns, req)
        cached = self.batch_cache.get(key) if key is not None else None
        if cached is not None:
            return cached
        schema, batches = scan_stream(self.catalog, req, ds)
        row_bytes = estimate_row_bytes(schema)
        rows = req.batch_size or SCAN_BATCH_ROWS
        if req.batch_size is None and rows * row_bytes > self.settings.max_message_bytes:
            # Wide rows: batches of one message each, not 8,192 rows of many messages.
            rows = max(1, self.settings.max_message_bytes // row_bytes)
            narrow = dataclasses.replace(req, batch_size=rows)
            schema, batches = scan_stream(self.catalog, narrow, ds)
        first = min(rows, req.limit if req.limit is not None else rows) * row_bytes
        if key is not None:
            batches = self.batch_cache.recording(key, schema, batches)
        return "scan", schema, first, batches

    def _sql_stream(
        self,
        context: flight.ServerCallContext,
        cancelled: Callable[[], bool],
        schema: pa.Schema,
        batches: Iterator[pa.RecordBatch],
    ) -> flight.FlightDataStream:
        """A Flight SQL result, holding a stream slot and charged to the memory budget like a scan."""
        lease = self._lease(context, cancelled)
        # DataFusion computes in its own threads without the GIL, for as long as a query takes: it
        # holds no turn (three long count(*) queries over generate_series(1, 1e11) held every turn
        # and no other client was served for minutes), and a client that leaves stops it.
        in_turns = not isinstance(batches, DataFusionBatches)
        if isinstance(batches, DataFusionBatches):
            batches.watch(cancelled, lease.principal)
        stream = self._stream("sql", batches, lease, cancelled, in_turns=in_turns)
        weakref.finalize(stream, lease.release)
        return flight.RecordBatchStream(pa.RecordBatchReader.from_batches(schema, stream))

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
            self._note(context)  # the dataset is noted once the exchange's command is decoded
            self._check_command_bytes(context, "do_exchange", descriptor)
            cancelled = self._cancelled(context)
            lease = self._lease(context, cancelled)
            turn = HeldTurn(self._work, lease.principal, cancelled)
            try:
                serve_exchange(
                    self.catalog,
                    descriptor,
                    reader,
                    writer,
                    self.settings.max_take_rows,
                    self.metrics,
                    lease=lease,
                    validate_request=lambda req: validate(req, self._limits),
                    turn=turn,
                )
            finally:
                turn.give_back()
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
            self._check_command_bytes(context, "do_put", descriptor)
            sql = self.sql.command(descriptor)
            if sql is not None:
                self._note(context)
                lease = self._lease(context, self._cancelled(context))
                try:
                    answer = self.sql.put(
                        sql, reader, lambda: _require_write(context), self.metrics, context.is_cancelled
                    )
                finally:
                    lease.release()
                writer.write(pa.py_buffer(answer))
                return
            _require_write(context)
            decoded = None
            if descriptor.descriptor_type == flight.DescriptorType.CMD:
                decoded = decode_command(descriptor.command or b"")  # size checked above
            req: WriteRequest = write_request(descriptor, decoded)
            validate(req, self._limits)
            self._note(context, req.dataset)
            self.catalog.uri(req.dataset)  # validate the name before reading any data
            cancelled = self._cancelled(context)
            lease = self._lease(context, cancelled)
            # Each batch is written in a turn of the caller, like a read's batches are produced.
            turn = HeldTurn(self._work, lease.principal, cancelled)
            try:
                result = write_stream(
                    self.catalog,
                    req,
                    reader,
                    self.settings.max_message_bytes,
                    self.metrics,
                    cancelled=context.is_cancelled,
                    owner=_caller(context),
                    lease=lease,
                    turn=turn,
                )
            finally:
                turn.give_back()
                lease.release()
                self.catalog.written(req.dataset)
            writer.write(pa.py_buffer(encode_write_result(result)))

        self._guard(run)

    # -- actions ---------------------------------------------------------------------------------
    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        ours = [(name, spec.description) for name, spec in ACTIONS.items()]
        return ours + list(SQL_ACTIONS.items())

    def do_action(self, context: flight.ServerCallContext, action: flight.Action) -> Iterator[bytes]:
        if action.type in SQL_ACTIONS:
            body = action.body.to_pybytes() if action.body is not None else b""

            def sql_action() -> list[bytes]:
                self._check_bytes(context, "do_action", body, "action body")
                return list(self.sql.action(action.type, body))

            return iter(self._guard(sql_action))

        def run() -> bytes:
            name = action.type
            spec = ACTIONS.get(name)
            if spec is not None and spec.writes:
                _require_write(context)
            body = action.body.to_pybytes() if action.body is not None else b""
            self._check_bytes(context, "do_action", body, "action body")
            request = decode_json_action(body) if is_json_body(body) else decode_action_request(body)
            validate(request, self._limits)
            self._note(context, request.dataset)
            try:
                result = run_action(self.catalog, name, request, _caller(context), _checkpoint(context))
            finally:
                if spec is not None and spec.writes and request.dataset:
                    self.catalog.written(request.dataset)  # a later "latest" read must see it
            if name == "cache_stats":
                batch = dataclasses.asdict(self.batch_cache.counters())
                counters = {**result.counters, **{f"batch_{k}": int(v) for k, v in batch.items()}}
                counters |= self._slots.stats()  # streams_open, stream_principals, stream_memory_bytes
                counters |= {"plan_entries": len(self.plan_cache), "plan_bytes": self.plan_cache.nbytes}
                result = dataclasses.replace(result, counters=counters)
            return encode_json_result(result) if is_json_body(body) else encode_action_result(result)

        return iter([self._guard(run)])
