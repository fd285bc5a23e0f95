"""A Python client of the lance-flight server.

Reads (listing, schemas, scans, takes, version and stats queries) are retried when the server
answers UNAVAILABLE (a restarting worker, a full stream table); writes never are, since a write
whose answer was lost may have committed. Unary calls and takes have a whole-call timeout; streams
(writes, scan endpoints, streaming takes) have an idle deadline per message instead, so a large
write runs as long as the server keeps accepting data. ``docs/client.md`` is the reference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

from flight_server._serde import (
    decode_action_result,
    decode_write_result,
    encode_action_request,
    encode_command,
    encode_ticket,
)
from flight_server.client_streams import (
    DEFAULT_IDLE_TIMEOUT_S,
    MAX_BATCH_BYTES,
    IdleDeadline,
    progress_bar,
    show_progress,
    spinner,
    split_batches,
    to_reader,
)
from flight_server.requests import (
    END_OF_WRITE,
    ActionRequest,
    ActionResult,
    ScanRequest,
    TakeRequest,
    VersionEntry,
    WriteMode,
    WriteRequest,
    WriteResult,
)

__all__ = ["LanceFlightClient", "ScanEndpoint"]

_T = TypeVar("_T")

#: Attempts of a read that meets UNAVAILABLE (1 + retries), and the first backoff (doubled each
#: time): rides out a worker restart (about a second) without hiding a server that is down.
READ_ATTEMPTS = 4
RETRY_BACKOFF_S = 0.2
#: Endpoint streams :meth:`LanceFlightClient.scan` reads at once: enough to keep a few server
#: cores busy (each stream decodes on its own server thread) without flooding one server.
PARALLEL_ENDPOINTS = 4
#: Seconds a unary call or a take may take (streams have an idle deadline instead).
DEFAULT_TIMEOUT_S = 60.0
_WRITE_MODES = ("create", "append", "overwrite")
#: The location a server advertises to mean "the connection this plan came from" (Flight's own).
REUSE_CONNECTION = "arrow-flight-reuse-connection"


@dataclasses.dataclass(frozen=True)
class ScanEndpoint:
    """One independent piece of a scan plan: an opaque ticket and the locations that serve it.

    Picklable, so a planner can ship it to another process (a Spark executor) that reads it with
    :meth:`LanceFlightClient.read_endpoint`.
    """

    ticket: bytes
    locations: tuple[str, ...]


class LanceFlightClient:
    """Talks to a lance-flight server.

    Parameters
    ----------
    location:
        ``grpc://host:port`` or ``grpc+tls://host:port``.
    token:
        Bearer token, when the server has auth on.
    tls_root_certs:
        PEM bytes of the CA that signed the server's certificate (TLS with a private CA).
    timeout:
        Seconds a unary call (actions, plans, schemas) or a take may take.
    idle_timeout:
        Seconds a stream (a write, a scan endpoint, a streaming take) may wait for one message
        before it fails with ``FlightTimedOutError``; the stream as a whole has no deadline.
    cert_chain, private_key:
        PEM client certificate and key, for servers that require mutual TLS.

    Examples
    --------
    >>> client = LanceFlightClient("grpc://127.0.0.1:8815")  # doctest: +SKIP
    >>> client.write("points", pa.table({"x": [1, 2]}), mode="create")  # doctest: +SKIP
    1
    """

    def __init__(
        self,
        location: str,
        token: str | None = None,
        tls_root_certs: bytes | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
        cert_chain: bytes | None = None,
        private_key: bytes | None = None,
    ) -> None:
        if (cert_chain is None) != (private_key is None):
            raise ValueError("mutual TLS needs both cert_chain and private_key")
        self.location = location
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        #: Largest batch sent in one message; bigger ones are sliced (the server refuses a message
        #: over its ``limits.maxMessageBytes``).
        self.max_batch_bytes = MAX_BATCH_BYTES
        self.parallel_endpoints = PARALLEL_ENDPOINTS
        self._tls_root_certs = tls_root_certs
        self._identity = (cert_chain, private_key)
        headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        self._options = flight.FlightCallOptions(headers=headers, timeout=timeout)
        # Streams: no whole-call deadline; IdleDeadline bounds each message instead.
        self._stream_options = flight.FlightCallOptions(headers=headers)
        self._clients: dict[str, flight.FlightClient] = {}
        self._lock = threading.Lock()
        self._main = self._client(location)

    # -- plumbing --------------------------------------------------------------------------------
    def _client(self, location: str) -> flight.FlightClient:
        with self._lock:
            client = self._clients.get(location)
            if client is None:
                kwargs: dict[str, Any] = {}
                if self._tls_root_certs is not None:
                    kwargs["tls_root_certs"] = self._tls_root_certs
                if self._identity[0] is not None:
                    kwargs["cert_chain"], kwargs["private_key"] = self._identity
                client = flight.FlightClient(location, **kwargs)
                self._clients[location] = client
            return client

    def close(self) -> None:
        """Close every connection."""
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()

    def __enter__(self) -> LanceFlightClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _read(call: Callable[[], _T]) -> _T:
        """Run a read, retrying on UNAVAILABLE with exponential backoff."""
        for attempt in range(READ_ATTEMPTS):
            try:
                return call()
            except flight.FlightUnavailableError:
                if attempt == READ_ATTEMPTS - 1:
                    raise
                time.sleep(RETRY_BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    def action(self, name: str, request: ActionRequest | None = None, *, read: bool = False) -> ActionResult:
        """Run action ``name`` (``list_actions`` shows them); ``read`` allows retries."""
        body = encode_action_request(request or ActionRequest())

        def call() -> ActionResult:
            results = list(self._main.do_action(flight.Action(name, body), self._options))
            return decode_action_result(results[0].body.to_pybytes() if results else b"")

        return self._read(call) if read else call()

    def _filter(self, name: str, flt: str | pc.Expression | None) -> tuple[str | None, bytes | None]:
        if flt is None:
            return None, None
        if isinstance(flt, str):
            return flt, None
        if isinstance(flt, pc.Expression):
            import pyarrow.substrait as ps

            schema = self.schema(name)
            for extra in ("_rowid", "_rowaddr"):
                if extra not in schema.names:
                    schema = schema.append(pa.field(extra, pa.uint64()))
            return None, bytes(ps.serialize_expressions([flt], ["filter"], schema))
        raise TypeError(f"filter must be a SQL string or a pyarrow Expression, not {type(flt).__name__}")

    # -- reads -----------------------------------------------------------------------------------
    def list_datasets(self) -> list[str]:
        """Names of the datasets on the server."""
        return self._read(
            lambda: sorted(
                info.descriptor.path[0].decode()
                if isinstance(info.descriptor.path[0], bytes)
                else info.descriptor.path[0]
                for info in self._main.list_flights(b"", self._options)
                if info.descriptor.path
            )
        )

    def schema(self, name: str, version: int | str | None = None) -> pa.Schema:
        """The Arrow schema of a dataset (at ``version``: a number or tag)."""
        req = ScanRequest(name, **_version_kwargs(version))
        descriptor = flight.FlightDescriptor.for_command(encode_command(req))
        return self._read(lambda: self._main.get_schema(descriptor, self._options).schema)

    def flight_info(self, request: ScanRequest) -> flight.FlightInfo:
        """The plan of a scan: schema, totals and endpoints (each ticket pinned to one version)."""
        descriptor = flight.FlightDescriptor.for_command(encode_command(request))
        return self._read(lambda: self._main.get_flight_info(descriptor, self._options))

    def _read_stream(self, client: flight.FlightClient, ticket: flight.Ticket) -> pa.Table:
        """All batches of one ``do_get`` stream, each within the idle deadline."""
        with IdleDeadline(self.idle_timeout, "scan stream") as deadline:
            reader = deadline.run(lambda: client.do_get(ticket, self._stream_options))
            deadline.on_timeout = reader.cancel
            batches = []
            while True:
                try:
                    chunk = deadline.run(reader.read_chunk)
                except StopIteration:
                    break
                if chunk.data is not None:
                    batches.append(chunk.data)
            return pa.Table.from_batches(batches, reader.schema)

    def _endpoint_table(self, endpoint: flight.FlightEndpoint) -> pa.Table:
        def fetch() -> pa.Table:
            for loc in endpoint.locations:
                uri = loc.uri.decode() if isinstance(loc.uri, bytes) else str(loc.uri)
                try:
                    return self._read_stream(self._client(uri), endpoint.ticket)
                except flight.FlightUnavailableError:
                    continue  # another advertised worker, then the main location
            return self._read_stream(self._main, endpoint.ticket)

        return self._read(fetch)

    def scan_batches(
        self,
        name: str,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,
        version: int | str | None = None,
        limit: int | None = None,
        *,
        offset: int | None = None,
        batch_size: int | None = None,
        with_row_id: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """The rows of a scan as batches, endpoint by endpoint (one snapshot)."""
        sql, substrait = self._filter(name, filter)
        req = ScanRequest(
            name,
            columns=tuple(columns) if columns is not None else None,
            filter_sql=sql,
            filter_substrait=substrait,
            limit=limit,
            offset=offset,
            batch_size=batch_size,
            with_row_id=with_row_id,
            **_version_kwargs(version),
        )
        info = self.flight_info(req)
        for endpoint in info.endpoints:
            yield from self._endpoint_table(endpoint).to_batches()

    def scan(
        self,
        name: str,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,
        version: int | str | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> pa.Table:
        """The rows of a scan as one Table (see :meth:`scan_batches` for the parameters)."""
        sql, substrait = self._filter(name, filter)
        req = ScanRequest(
            name,
            columns=tuple(columns) if columns is not None else None,
            filter_sql=sql,
            filter_substrait=substrait,
            limit=limit,
            offset=kwargs.get("offset"),
            batch_size=kwargs.get("batch_size"),
            with_row_id=bool(kwargs.get("with_row_id", False)),
            **_version_kwargs(version),
        )
        info = self.flight_info(req)
        endpoints = list(info.endpoints)
        if len(endpoints) > 1:
            # Endpoints are independent streams: fetch them at once (Flight's own parallelism;
            # the reads release the GIL), keeping their order in the result.
            with ThreadPoolExecutor(min(len(endpoints), self.parallel_endpoints)) as pool:
                tables = list(pool.map(self._endpoint_table, endpoints))
        else:
            tables = [self._endpoint_table(e) for e in endpoints]
        if not tables:
            return info.schema.empty_table()
        return pa.concat_tables(tables)

    def take(
        self,
        name: str,
        row_ids: Sequence[int] | np.ndarray | None = None,
        indices: Sequence[int] | np.ndarray | None = None,
        columns: Sequence[str] | None = None,
        version: int | str | None = None,
    ) -> pa.Table:
        """Rows by row id or by logical offset (exactly one of the two), in the order given."""
        if (row_ids is None) == (indices is None):
            raise ValueError("pass exactly one of row_ids and indices")
        req = TakeRequest(
            name,
            row_ids=_u64(row_ids) if row_ids is not None else None,
            indices=_u64(indices) if indices is not None else None,
            columns=tuple(columns) if columns is not None else None,
            **_version_kwargs(version),
        )
        ticket = flight.Ticket(encode_ticket(req))
        return self._read(lambda: self._main.do_get(ticket, self._options).read_all())

    def take_stream(
        self,
        name: str,
        batches: Iterable[Sequence[int] | np.ndarray],
        *,
        by: str = "row_id",
        columns: Sequence[str] | None = None,
        version: int | None = None,
    ) -> Iterator[pa.Table]:
        """Streaming take (``do_exchange``): one answer table per batch of ids sent, in order."""
        if by not in ("row_id", "index"):
            raise ValueError("by must be 'row_id' or 'index'")
        req = TakeRequest(
            name, version=version, row_ids=np.zeros(0, np.uint64), columns=tuple(columns) if columns else None
        )
        descriptor = flight.FlightDescriptor.for_command(encode_ticket(req))
        schema = pa.schema([(by, pa.uint64())])
        with IdleDeadline(self.idle_timeout, f"streaming take from {name!r}") as deadline:
            writer, reader = deadline.run(lambda: self._main.do_exchange(descriptor, self._stream_options))
            deadline.on_timeout = reader.cancel
            deadline.run(lambda: writer.begin(schema))
            for ids in batches:
                batch = pa.record_batch([pa.array(_u64(ids))], schema=schema)
                deadline.run(lambda b=batch: writer.write_batch(b))  # type: ignore[misc]
                # The server answers each request batch with exactly one batch.
                yield pa.Table.from_batches([deadline.run(reader.read_chunk).data])
            deadline.run(writer.done_writing)
            deadline.run(writer.close)

    def versions(self, name: str) -> list[VersionEntry]:
        """Every version of a dataset, oldest first."""
        return list(self.action("versions", ActionRequest(name), read=True).versions)

    def tags(self, name: str) -> dict[str, int]:
        """Tag name -> version."""
        return {t.name: t.version for t in self.action("tags", ActionRequest(name), read=True).tags}

    def checkout(self, name: str, version: int | str) -> int:
        """Resolve a version number or tag of ``name`` to the version it is (checks it exists)."""
        return self.action("checkout", ActionRequest(name, **_action_version(version)), read=True).version

    def stats(self, name: str, version: int | str | None = None) -> dict[str, int]:
        """Row, fragment, file and byte counts of a dataset version."""
        kwargs = _action_version(version) if version is not None else {}
        return dict(self.action("stats", ActionRequest(name, **kwargs), read=True).counters)

    def cache_stats(self) -> dict[str, int]:
        """The server process's cache and I/O counters."""
        return dict(self.action("cache_stats", read=True).counters)

    def health(self) -> str:
        """``"ok"`` when the server answers."""
        return self.action("health", read=True).status

    # -- writes ----------------------------------------------------------------------------------
    def _put(self, request: WriteRequest, data: Any, progress: bool | None = None) -> WriteResult:
        total = data.nbytes if isinstance(data, (pa.Table, pa.RecordBatch)) else None
        reader = to_reader(data)
        descriptor = flight.FlightDescriptor.for_command(encode_command(request))
        bar = progress_bar(progress, f"{request.mode} {request.dataset}", total)
        counting = show_progress(progress)  # a batch's nbytes costs ~50 us: only for a drawn bar
        try:
            with IdleDeadline(self.idle_timeout, f"write to {request.dataset!r}") as deadline:
                writer, meta = deadline.run(
                    lambda: self._main.do_put(descriptor, reader.schema, self._stream_options)
                )
                try:
                    # Batches are produced here (a slow producer is not an idle server), sent there.
                    for batch in split_batches(reader, self.max_batch_bytes):
                        deadline.run(lambda b=batch: writer.write_batch(b))  # type: ignore[misc]
                        if counting:
                            bar.update(batch.nbytes)
                    deadline.run(lambda: writer.write_metadata(pa.py_buffer(END_OF_WRITE)))
                    deadline.run(writer.done_writing)
                    buf = deadline.run(meta.read)
                except BaseException:
                    if not deadline.expired:
                        # The server's own error (if it refused the stream) beats a broken pipe.
                        deadline.run(writer.close)
                    raise
                deadline.run(writer.close)  # raises the server's error when the call failed
        finally:
            bar.close()
        if buf is None:
            raise RuntimeError("the server did not answer the write")
        return decode_write_result(buf.to_pybytes())

    def write(
        self,
        name: str,
        data: Any,
        mode: str = "append",
        *,
        max_rows_per_file: int | None = None,
        data_storage_version: str | None = None,
        progress: bool | None = None,
    ) -> int:
        """Write ``data`` and commit it; return the new version.

        ``data``: a Table, RecordBatch, RecordBatchReader, iterable of batches, dict of columns
        (``{"a": [1, 2]}``), list of row dicts, pandas DataFrame or Arrow C stream. Batches over
        ``max_batch_bytes`` are sliced. ``progress`` draws a bar on stderr (default: when stderr is
        a terminal).
        """
        if mode not in _WRITE_MODES:
            raise ValueError(f"mode must be one of {_WRITE_MODES}, got {mode!r}")
        req = WriteRequest(name, _mode(mode), max_rows_per_file, data_storage_version, end_marker=True)
        return self._put(req, data, progress).version

    def stage(
        self, name: str, data: Any, *, max_rows_per_file: int | None = None, progress: bool | None = None
    ) -> WriteResult:
        """Write data files without committing; pass the result's fragments to :meth:`commit`."""
        return self._put(WriteRequest(name, "stage", max_rows_per_file, end_marker=True), data, progress)

    def commit(
        self,
        name: str,
        staged: Sequence[WriteResult],
        mode: str = "append",
        *,
        read_version: int | None = None,
    ) -> int:
        """Commit the fragments of several :meth:`stage` calls in one transaction; the new version."""
        fragments = tuple(f for s in staged for f in s.fragments)
        schema = next((s.schema for s in staged if s.schema is not None), None)
        req = ActionRequest(
            name, fragments=fragments, schema=schema, mode=_mode(mode), read_version=read_version
        )
        return self.action("commit", req).version

    def create(self, name: str, schema: pa.Schema) -> int:
        """Create an empty dataset; its first version."""
        return self.action("create", ActionRequest(name, schema=schema)).version

    def delete(self, name: str, filter: str | pc.Expression) -> int:
        """Delete the rows matching ``filter``; the number deleted."""
        sql, substrait = self._filter(name, filter)
        return self.action("delete", ActionRequest(name, filter_sql=sql, filter_substrait=substrait)).rows

    def create_tag(self, name: str, tag: str, version: int | None = None) -> None:
        """Tag ``version`` (the latest when omitted)."""
        self.action("create_tag", ActionRequest(name, tag=tag, version=version))

    def delete_tag(self, name: str, tag: str) -> None:
        """Remove a tag."""
        self.action("delete_tag", ActionRequest(name, tag=tag))

    def restore(self, name: str, version: int | str) -> int:
        """Make an old version the latest again; the new version."""
        return self.action("restore", ActionRequest(name, **_action_version(version))).version

    def add_columns(self, name: str, transforms: dict[str, str]) -> int:
        """Add columns computed by SQL expressions; the new version."""
        return self.action("add_columns", ActionRequest(name, transforms=dict(transforms))).version

    def drop_columns(self, name: str, columns: Sequence[str]) -> int:
        """Remove columns; the new version."""
        return self.action("drop_columns", ActionRequest(name, columns=tuple(columns))).version

    def compact(
        self, name: str, target_rows_per_fragment: int = 0, *, progress: bool | None = None
    ) -> dict[str, int]:
        """Compact small fragments; the compaction counters (``progress``: elapsed time on stderr)."""
        req = ActionRequest(name, target_rows_per_fragment=target_rows_per_fragment)
        with spinner(progress, f"compact {name}") as bar:
            counters = dict(self.action("compact", req).counters)
            bar.set_postfix_str(_summary(counters))
        return counters

    def cleanup(
        self, name: str, older_than_seconds: float | None = None, *, progress: bool | None = None
    ) -> dict[str, int]:
        """Remove versions older than the cutoff; the cleanup counters (``progress`` as in compact)."""
        with spinner(progress, f"cleanup {name}") as bar:
            req = ActionRequest(name, older_than_seconds=older_than_seconds)
            counters = dict(self.action("cleanup", req).counters)
            bar.set_postfix_str(_summary(counters))
        return counters

    def drop(self, name: str) -> None:
        """Delete a dataset."""
        self.action("drop", ActionRequest(name))

    # -- distributed reads and writes (planned in one process, run in others: Spark) -------------
    def describe(self, name: str, version: int | str | None = None) -> tuple[pa.Schema, int]:
        """The Arrow schema and the version number of ``name`` at ``version`` (latest when None).

        Raises ``KeyError`` (``pyarrow.ArrowKeyError``, gRPC NOT_FOUND) when the dataset, version
        or tag does not exist.
        """
        kwargs = _action_version(version) if version is not None else {}
        result = self.action("checkout", ActionRequest(name, **kwargs), read=True)
        if result.schema is None:
            raise pa.ArrowInvalid(f"the server described dataset {name!r} without a schema")
        return result.schema, result.version

    def scan_endpoints(
        self,
        name: str,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,
        version: int | str | None = None,
        *,
        batch_size: int | None = None,
        with_row_id: bool = False,
        min_endpoints: int = 1,
    ) -> list[ScanEndpoint]:
        """Plan a scan as endpoints that can be read independently, all pinned to one version.

        With fewer than ``min_endpoints`` endpoints the plan is asked for again with big fragments
        split into row ranges, so that ``min_endpoints`` readers all get work.
        """
        sql, substrait = self._filter(name, filter)
        req = ScanRequest(
            name,
            columns=tuple(columns) if columns is not None else None,
            filter_sql=sql,
            filter_substrait=substrait,
            batch_size=batch_size,
            with_row_id=with_row_id,
            **_version_kwargs(version),
        )
        info = self.flight_info(req)
        if 0 < len(info.endpoints) < min_endpoints and info.total_records > 0:
            per_endpoint = max(1, -(-info.total_records // min_endpoints))
            info = self.flight_info(dataclasses.replace(req, max_rows_per_endpoint=per_endpoint))
        return [
            ScanEndpoint(ep.ticket.ticket, tuple(self._location_uri(loc) for loc in ep.locations))
            for ep in info.endpoints
        ]

    def _location_uri(self, location: flight.Location) -> str:
        uri = location.uri.decode() if isinstance(location.uri, bytes) else str(location.uri)
        return self.location if uri.startswith(REUSE_CONNECTION) else uri

    def read_endpoint(self, endpoint: ScanEndpoint, index: int = 0) -> Iterator[pa.RecordBatch]:
        """Stream the batches of one endpoint of :meth:`scan_endpoints`.

        ``index`` picks which advertised location to try first (readers spread over the workers);
        a location that answers UNAVAILABLE is skipped, and opening the stream is retried as
        every read is. Batches already received are never fetched twice.
        """
        locations = list(endpoint.locations)
        if locations:
            start = index % len(locations)
            locations = locations[start:] + locations[:start]
        ticket = flight.Ticket(endpoint.ticket)

        def open_stream() -> tuple[flight.FlightStreamReader, pa.RecordBatch | None]:
            for uri in [*locations, self.location]:
                try:
                    reader = self._client(uri).do_get(ticket, self._options)
                    try:
                        return reader, reader.read_chunk().data
                    except StopIteration:
                        return reader, None
                except flight.FlightUnavailableError:
                    if uri == self.location:
                        raise
            raise AssertionError("unreachable")

        reader, first = self._read(open_stream)
        if first is None:
            return
        yield first
        for chunk in reader:
            yield chunk.data

    def stage_batches(
        self,
        name: str,
        batches: Iterable[pa.RecordBatch],
        schema: pa.Schema,
        *,
        max_rows_per_file: int | None = None,
        data_storage_version: str | None = None,
    ) -> WriteResult:
        """Stage ``batches`` (any iterable, consumed once) without committing; see :meth:`commit`.

        If producing the batches fails part-way, the put is finished, whatever it staged is
        discarded at once, and the producer's exception is raised: a failed producer leaves no
        files behind.
        """
        failure: list[BaseException] = []

        def guarded() -> Iterator[pa.RecordBatch]:
            try:
                yield from batches
            except BaseException as exc:  # re-raised below, once the put is finished
                failure.append(exc)

        req = WriteRequest(name, "stage", max_rows_per_file, data_storage_version, end_marker=True)
        result = self._put(req, pa.RecordBatchReader.from_batches(schema, guarded()))
        if failure:
            with contextlib.suppress(flight.FlightError, pa.ArrowException):
                self.discard(name, result.fragments)
            raise failure[0]
        return result

    def discard(self, name: str, fragments: Sequence[bytes]) -> int:
        """Delete the data files of staged fragments that will never be committed; files removed."""
        if not fragments:
            return 0
        result = self.action("discard_staged", ActionRequest(name, fragments=tuple(fragments)))
        return int(result.counters.get("files_removed", 0))


def _u64(values: Sequence[int] | np.ndarray) -> np.ndarray:
    arr = np.asarray(values)
    if arr.size and (
        not np.issubdtype(arr.dtype, np.integer)
        or (np.issubdtype(arr.dtype, np.signedinteger) and arr.min() < 0)
    ):
        raise ValueError("row ids and indices must be non-negative integers")
    return arr.astype(np.uint64, copy=False).ravel()


def _mode(mode: str) -> WriteMode:
    if mode not in ("auto", "create", "append", "overwrite", "stage"):
        raise ValueError(f"unknown write mode {mode!r}")
    return mode  # type: ignore[return-value]


def _version_kwargs(version: int | str | None) -> dict[str, Any]:
    if version is None:
        return {}
    if isinstance(version, str):
        return {"tag": version}
    return {"version": int(version)}


def _action_version(version: int | str) -> dict[str, Any]:
    return {"tag": version} if isinstance(version, str) else {"version": int(version)}


def _summary(counters: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(counters.items()))
