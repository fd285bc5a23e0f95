"""Planning scans into per-fragment endpoints and streaming one endpoint's batches."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.catalog import Catalog
from flight_server.handlers.filters import resolve_filter
from flight_server.requests import ScanRequest
from flight_server.settings import DEFAULT_MAX_ENDPOINTS, DEFAULT_TICKET_LIFETIME_SECONDS
from flight_server.streams import CallCancelled
from flight_server.tickets import encode_ticket
from lance_format import LanceDataset
from lance_format.core.errors import InvalidInputError, NotFoundError, NotSupportedError
from lance_format.dataset import LanceFragment
from lance_format.dataset.scanner import LanceScanner
from lance_format.dataset.sql_print import to_sql

__all__ = [
    "TICKET_LIFETIME_SECONDS",
    "open_version",
    "plan_scan",
    "projected_bytes",
    "scan_stream",
    "ticket_expiration",
]

#: How long a pinned ticket is promised to stay readable (``limits.ticketLifetimeSeconds``).
TICKET_LIFETIME_SECONDS = DEFAULT_TICKET_LIFETIME_SECONDS


def open_version(catalog: Catalog, name: str, version: int | None, tag: str | None) -> LanceDataset:
    """The dataset at a version number or tag (latest when neither is given)."""
    if version is not None and tag:
        raise InvalidInputError("pass a version or a tag, not both")
    return catalog.open(name, tag or version)


def _scanner(ds: LanceDataset, req: ScanRequest) -> LanceScanner:
    flt = resolve_filter(req.filter_sql, req.filter_substrait, ds.schema)
    fragments = None
    limit, offset = req.limit, req.offset
    if req.fragment_ids:
        # One lookup table (get_fragment searches the list: quadratic over many ids).
        by_id = {f.fragment_id: f for f in ds.get_fragments()} if len(req.fragment_ids) > 1 else {}
        fragments = []
        for fid in req.fragment_ids:
            frag = by_id.get(fid) if by_id else ds.get_fragment(fid)
            if frag is None:
                raise NotFoundError(f"fragment {fid} not in version {ds.version} of {req.dataset!r}")
            fragments.append(frag)
    if req.row_start is not None or req.row_end is not None:
        if len(req.fragment_ids) != 1 or flt is not None or limit is not None or offset is not None:
            raise InvalidInputError("a row range needs exactly one fragment and no filter, limit or offset")
        start = req.row_start or 0
        stop = req.row_end if req.row_end is not None else start
        if stop < start:
            raise InvalidInputError("row_end is before row_start")
        offset, limit = start, stop - start
    return ds.scanner(
        columns=list(req.columns) if req.columns is not None else None,
        filter=flt,
        limit=limit,
        offset=offset,
        batch_size=req.batch_size,
        with_row_id=req.with_row_id,
        with_row_address=req.with_row_address,
        fragments=fragments,
    )


def _rotate(locations: Sequence[str], i: int) -> list[flight.Location]:
    """Every location, starting at a different one per endpoint (spreads clients over workers)."""
    n = len(locations)
    return [flight.Location(locations[(i + k) % n]) for k in range(n)]


def _never() -> bool:
    return False


#: Fragments or endpoints planned between two looks at the call's cancellation flag.
_CANCEL_CHECK_EVERY = 64


def _check_split(live: Sequence[int], step: int, max_endpoints: int) -> None:
    """Refuse a ``max_rows_per_endpoint`` that would plan more than ``limits.maxEndpoints``."""
    planned = sum(-(-n // step) if n > step else 1 for n in live)
    if planned > max(max_endpoints, len(live)):
        smallest = -(-sum(live) // max_endpoints)
        raise InvalidInputError(
            f"max_rows_per_endpoint={step} would plan {planned} endpoints, more than "
            f"limits.maxEndpoints ({max_endpoints}); use max_rows_per_endpoint >= {smallest}"
        )


def plan_scan(
    catalog: Catalog,
    req: ScanRequest,
    descriptor: flight.FlightDescriptor,
    locations: Sequence[str],
    ticket_lifetime: int = TICKET_LIFETIME_SECONDS,
    max_endpoints: int = DEFAULT_MAX_ENDPOINTS,
    cancelled: Callable[[], bool] = _never,
    ds: LanceDataset | None = None,
) -> flight.FlightInfo:
    """The FlightInfo of a scan: its schema, totals and one ticket per fragment (or row range).

    Every ticket is pinned to the version resolved here, so all endpoints read one snapshot. A
    scan with ``limit`` or ``offset`` is one endpoint (rows are counted across fragments). The
    work is linear in fragments and columns; ``cancelled`` (the call's ``is_cancelled``) is looked
    at while planning, so a client that gave up stops the work. Splitting fragments by
    ``max_rows_per_endpoint`` is refused when it would plan more than ``max_endpoints`` endpoints
    (and more than one per fragment). ``ds`` is the dataset the request already resolved to (saves
    opening it twice).
    """
    if ds is None:
        ds = open_version(catalog, req.dataset, req.version, req.tag)
    scanner = _scanner(ds, req)  # validates columns and filter before any data is read
    pinned = replace(req, version=ds.version, tag=None, max_rows_per_endpoint=0)
    if req.filter_substrait is not None and scanner.predicate is not None:
        # Tickets carry the bound filter's canonical SQL rather than the client's bytes.
        with contextlib.suppress(NotSupportedError):
            pinned = replace(pinned, filter_sql=to_sql(scanner.predicate.tree), filter_substrait=None)
    filtered = req.filter_sql is not None or req.filter_substrait is not None
    frags = ds.get_fragments()
    if req.fragment_ids:
        wanted = set(req.fragment_ids)
        frags = [f for f in frags if f.fragment_id in wanted]
    live_rows = [f.count_rows() for f in frags]
    tickets: list[ScanRequest] = []
    if req.limit is not None or req.offset is not None or req.row_start is not None:
        tickets.append(pinned)
    else:
        step = req.max_rows_per_endpoint if not filtered else 0
        if step:
            _check_split(live_rows, step, max_endpoints)
        for i, (frag, live) in enumerate(zip(frags, live_rows, strict=True)):
            if i % _CANCEL_CHECK_EVERY == 0 and cancelled():
                raise CallCancelled()
            if step and live > step:
                for lo in range(0, live, step):
                    hi = min(live, lo + step)
                    tickets.append(
                        replace(pinned, fragment_ids=(frag.fragment_id,), row_start=lo, row_end=hi)
                    )
            else:
                tickets.append(replace(pinned, fragment_ids=(frag.fragment_id,)))
    expires = ticket_expiration(ticket_lifetime)
    endpoints = []
    for i, t in enumerate(tickets):
        if i % _CANCEL_CHECK_EVERY == 0 and cancelled():
            raise CallCancelled()
        endpoints.append(
            flight.FlightEndpoint(encode_ticket(t), _rotate(locations, i), expiration_time=expires)
        )
    total = -1
    if not filtered:
        live_total = sum(live_rows)
        total = max(0, live_total - (req.offset or 0))
        if req.limit is not None:
            total = min(total, req.limit)
    total_bytes = projected_bytes(ds, frags, scanner.projected_schema.names)
    # Endpoints follow fragment order and each streams its rows in order: endpoint order is row order.
    return flight.FlightInfo(
        scanner.projected_schema, descriptor, endpoints, total, total_bytes, ordered=True
    )


def ticket_expiration(lifetime: int = TICKET_LIFETIME_SECONDS) -> pa.TimestampScalar | None:
    """When a ticket pinned now stops being promised (``None`` for a lifetime of 0).

    Every pinned ticket gets one, tagged versions too: checking tags would cost a listing per plan.
    """
    if lifetime <= 0:
        return None
    deadline = int((time.time() + lifetime) * 1_000_000)
    return pa.scalar(deadline, pa.timestamp("us", tz="UTC"))


def projected_bytes(ds: LanceDataset, frags: Sequence[LanceFragment], columns: Sequence[str]) -> int:
    """Stored bytes of ``columns`` in ``frags``: each data file's size shared out by its fields.

    An estimate (fields of one file are not equally large), but it scales with the projection,
    which is what a client sizing its reads needs.
    """
    wanted: set[int] = set()
    for name in columns:
        try:  # a column, or a struct member by path ("st.a"); _rowid and the like hold no bytes
            field = ds.lance_schema.field_by_path(name)
        except KeyError:
            continue
        wanted.update(f.id for f in field.walk())
    total = 0
    for frag in frags:
        for data_file in frag.data_files():
            fields = [f for f in data_file.fields if f >= 0]
            if fields:
                share = sum(1 for f in fields if f in wanted) / len(fields)
                total += int(data_file.file_size_bytes * share)
    return total


def scan_stream(
    catalog: Catalog, req: ScanRequest, ds: LanceDataset | None = None
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The schema and batches of one scan ticket (validated before the first batch is read).

    ``ds`` is the dataset the ticket already resolved to (saves opening it twice).
    """
    if ds is None:
        ds = open_version(catalog, req.dataset, req.version, req.tag)
    scanner = _scanner(ds, req)
    return scanner.projected_schema, scanner.to_batches()
