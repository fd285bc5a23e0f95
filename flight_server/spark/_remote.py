"""Every call the ``lance`` data source makes to the Flight server, in one place.

The reader, writer and take helper speak to the server only through these functions. They run in
Spark's Python workers (driver-side planning workers and executors alike), which are reused between
tasks, so connections are cached per process.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.spark import _wire
from flight_server.spark.options import ReadOptions, SourceOptions, WriteOptions
from lance_format.core.errors import InvalidInputError

__all__ = [
    "DatasetInfo",
    "Endpoint",
    "Staged",
    "commit",
    "dataset_info",
    "discard",
    "plan_scan",
    "projected_schema",
    "stage",
    "stream",
    "take_stream",
]

ROW_ID = "_rowid"

_clients: dict[tuple[str, str | None, bytes | None], flight.FlightClient] = {}
_clients_lock = threading.Lock()


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset's Arrow schema at one version."""

    schema: pa.Schema
    version: int


@dataclass(frozen=True)
class Endpoint:
    """One piece of a scan plan: an opaque ticket and the locations that serve it."""

    ticket: bytes
    locations: tuple[str, ...]


@dataclass(frozen=True)
class Staged:
    """What one stage-mode ``do_put`` wrote: opaque fragment documents, their schema, rows."""

    fragments: tuple[bytes, ...]
    schema: pa.Schema | None
    rows: int


def _client(source: SourceOptions, location: str | None = None) -> flight.FlightClient:
    key = (location or source.uri, source.token, source.tls_root_certs)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            kwargs = {"tls_root_certs": source.tls_root_certs} if source.tls_root_certs else {}
            client = flight.FlightClient(key[0], **kwargs)
            _clients[key] = client
        return client


def _call_options(source: SourceOptions) -> flight.FlightCallOptions:
    headers = [(b"authorization", f"Bearer {source.token}".encode())] if source.token else []
    return flight.FlightCallOptions(timeout=source.timeout, headers=headers)


def projected_schema(schema: pa.Schema, columns: Sequence[str] | None, with_row_id: bool) -> pa.Schema:
    """The schema a scan returns: ``columns`` (in that order) and, if asked, ``_rowid`` last."""
    if columns is not None:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise InvalidInputError(f"no column(s) {missing} in the dataset; it has {schema.names}")
        schema = pa.schema([schema.field(c) for c in columns])
    if with_row_id:
        schema = schema.append(pa.field(ROW_ID, pa.uint64(), nullable=False))
    return schema


def dataset_info(source: SourceOptions, version: int | str | None) -> DatasetInfo | None:
    """The dataset's schema and resolved version; None when it does not exist."""
    try:
        return _wire.dataset_info(_client(source), _call_options(source), source.dataset, version)
    except (flight.FlightError, pa.ArrowException) as e:
        if _wire.is_not_found(e) and version is None:
            return None
        raise


def plan_scan(options: ReadOptions, columns: Sequence[str]) -> list[Endpoint]:
    """The server's scan plan: one endpoint per fragment or row range, pinned to one version.

    With fewer endpoints than ``options.min_partitions`` the plan is asked for again with big
    fragments split into row ranges, so that every Spark core gets work.
    """
    source = options.source
    client, call = _client(source), _call_options(source)
    info = _wire.plan_scan(client, call, options, columns)
    if 0 < len(info.endpoints) < options.min_partitions and info.total_records > 0:
        per_endpoint = max(1, -(-info.total_records // options.min_partitions))
        info = _wire.plan_scan(client, call, options, columns, per_endpoint)
    return [
        Endpoint(ep.ticket.ticket, tuple(_location_uri(loc, source) for loc in ep.locations))
        for ep in info.endpoints
    ]


def _location_uri(location: flight.Location, source: SourceOptions) -> str:
    uri = location.uri.decode() if isinstance(location.uri, bytes) else str(location.uri)
    # "arrow-flight-reuse-connection://?" means: the connection the plan came from.
    return source.uri if uri.startswith("arrow-flight-reuse-connection") else uri


def stream(
    source: SourceOptions, ticket: bytes, locations: Sequence[str], index: int = 0
) -> Iterator[pa.RecordBatch]:
    """The batches of one endpoint, from one of its locations (spread by partition index)."""
    location = locations[index % len(locations)] if locations else source.uri
    reader = _client(source, location).do_get(flight.Ticket(ticket), _call_options(source))
    for chunk in reader:
        yield chunk.data


def stage(options: WriteOptions, batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Staged:
    """Stream ``batches`` to the server in stage mode; nothing is committed.

    If producing the batches fails part-way (the Spark task failed upstream), the put is finished
    and what it staged is discarded at once, so a failed task leaves no files behind. (A put cut off
    by a network failure or a killed worker is cleaned up by the server.)
    """
    source = options.source
    descriptor = _wire.stage_descriptor(options)
    writer, result_reader = _client(source).do_put(descriptor, schema, _call_options(source))
    rows = 0
    try:
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
    except BaseException:
        with contextlib.suppress(Exception):
            fragments, _ = _finish_put(writer, result_reader)
            discard(source, fragments)
        raise
    fragments, staged_schema = _finish_put(writer, result_reader)
    return Staged(fragments, staged_schema, rows)


def _finish_put(
    writer: flight.FlightStreamWriter, result_reader: flight.FlightMetadataReader
) -> tuple[tuple[bytes, ...], pa.Schema | None]:
    writer.write_metadata(_wire.end_of_write())
    writer.done_writing()
    buf = result_reader.read()
    writer.close()
    if buf is None:
        raise InvalidInputError("the server answered the staged put without fragment metadata")
    return _wire.staged(buf.to_pybytes())


def commit(
    source: SourceOptions,
    mode: str,
    fragments: Sequence[bytes],
    schema: pa.Schema,
    read_version: int | None,
) -> int:
    """Commit the staged fragments of every task in one transaction; returns the new version."""
    client, opts = _client(source), _call_options(source)
    return _wire.commit(client, opts, source.dataset, mode, fragments, schema, read_version)


def discard(source: SourceOptions, fragments: Sequence[bytes]) -> None:
    """Delete the data files of staged fragments that will never be committed."""
    if fragments:
        _wire.discard(_client(source), _call_options(source), source.dataset, fragments)


def take_stream(
    source: SourceOptions,
    version: int,
    columns: Sequence[str],
    id_batches: Iterable[pa.Array],
) -> Iterator[tuple[pa.Array, pa.RecordBatch]]:
    """For each array of row ids, the rows (``columns``) in the same order."""
    for ids in id_batches:
        if ids.null_count:
            raise InvalidInputError("row ids must not be null")
        as_u64 = ids.cast(pa.uint64())
        rows = _wire.take(_client(source), _call_options(source), source.dataset, version, columns, as_u64)
        if rows.num_rows != len(ids):
            raise InvalidInputError(f"asked for {len(ids)} rows, the server returned {rows.num_rows}")
        yield ids, rows
