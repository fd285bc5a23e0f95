"""One check of every request field, right after decoding and before any work.

A request that passes :func:`validate` has every count, length, range and list in bounds, so the
handlers never start work a field would make unbounded (a ticket naming one fragment a million
times, a batch size of four billion rows, a version no dataset can have). Failures are
:class:`~lance_format.core.errors.InvalidInputError` (INVALID_ARGUMENT) naming the field and the
limit. :func:`check_request_bytes` bounds the raw bytes of a ticket, command or action body before
they are parsed.

Limits that operators tune come from :class:`~flight_server.settings.ServerSettings`; the others are
named constants here, each with the reason for its value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sized
from dataclasses import dataclass

from flight_server.requests import ActionRequest, ScanRequest, TakeRequest, WriteRequest
from flight_server.settings import ServerSettings
from lance_format.core.errors import InvalidInputError

__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_FILTER_BYTES",
    "MAX_INT",
    "MAX_LIST_ITEMS",
    "MAX_NAME_BYTES",
    "RequestLimits",
    "check_request_bytes",
    "check_take_rows",
    "validate",
]

#: Row counts, versions and offsets are int64 in the engine and in Arrow: larger values are bad input.
MAX_INT = 2**63 - 1
#: Dataset, tag and column names: far above any real name, far below what would cost memory.
MAX_NAME_BYTES = 4096
#: A SQL predicate longer than this is generated garbage, not a filter (Substrait filters are bound
#: by the message size only: their plans are bigger).
MAX_FILTER_BYTES = 1024 * 1024
#: Rows per scan batch: larger batches only cost memory (the server splits them to the message
#: size anyway); pylance's readers use 1,024 to 8,192.
MAX_BATCH_SIZE = 1024 * 1024
#: Items of a repeated field (columns, fragment ids, transforms, staged fragments): a million
#: columns or fragments is past any dataset this server plans linearly in reasonable time.
MAX_LIST_ITEMS = 1_000_000
#: Rows per data file a write may ask for: Lance files address rows with 32 bits.
MAX_ROWS_PER_FILE = 2**31 - 1


@dataclass(frozen=True)
class RequestLimits:
    """The operator-tuned limits :func:`validate` applies (from the server's settings)."""

    max_take_rows: int
    max_message_bytes: int

    @classmethod
    def of(cls, settings: ServerSettings) -> RequestLimits:
        """The limits of ``settings``."""
        return cls(settings.max_take_rows, settings.max_message_bytes)


def check_request_bytes(data: Sized, limit: int, what: str) -> None:
    """Refuse request bytes above ``limits.maxMessageBytes`` before they are parsed.

    pyarrow's Flight server lets gRPC receive messages of any size (Arrow's gRPC transport sets an
    unlimited receive size and pyarrow exposes no builder hook to change it), so this is the
    earliest point the limit can be applied: before protobuf parsing and any work.
    """
    size = len(data)
    if size > limit:
        raise InvalidInputError(
            f"{what} of {size} bytes exceeds limits.maxMessageBytes ({limit}); send a smaller request"
        )


def _int(value: int | None, name: str, low: int = 0, high: int = MAX_INT) -> None:
    if value is not None and not low <= value <= high:
        raise InvalidInputError(f"{name} must be between {low} and {high}, got {value}")


def _name(value: str | None, name: str) -> None:
    if value is not None and len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise InvalidInputError(f"{name} is longer than {MAX_NAME_BYTES} bytes")


def _unique(values: Iterable[object], name: str) -> None:
    seen: set[object] = set()
    for value in values:
        if value in seen:
            raise InvalidInputError(f"{name} names {value!r} twice")
        seen.add(value)


def _names(values: tuple[str, ...] | None, name: str) -> None:
    if values is None:
        return
    if len(values) > MAX_LIST_ITEMS:
        raise InvalidInputError(f"{name} lists {len(values)} items, more than {MAX_LIST_ITEMS}")
    for value in values:
        _name(value, name)
    _unique(values, name)


def _scan(req: ScanRequest) -> None:
    _name(req.dataset, "dataset")
    _name(req.tag, "tag")
    _int(req.version, "version")
    _names(req.columns, "columns")
    if req.filter_sql is not None and len(req.filter_sql.encode("utf-8", "surrogatepass")) > MAX_FILTER_BYTES:
        raise InvalidInputError(f"filter_sql is longer than {MAX_FILTER_BYTES} bytes")
    _int(req.limit, "limit")
    _int(req.offset, "offset")
    _int(req.batch_size, "batch_size", 1, MAX_BATCH_SIZE)
    # A fragment listed twice would be streamed twice: refused, as a set of fragments is meant.
    if len(req.fragment_ids) > MAX_LIST_ITEMS:
        raise InvalidInputError(f"fragment_ids lists more than {MAX_LIST_ITEMS} fragments")
    _unique(req.fragment_ids, "fragment_ids")
    _int(req.row_start, "row_start")
    _int(req.row_end, "row_end")
    if req.row_start is not None and req.row_end is not None and req.row_end < req.row_start:
        raise InvalidInputError("row_end is before row_start")
    _int(req.max_rows_per_endpoint, "max_rows_per_endpoint")


def check_take_rows(count: int, limits: RequestLimits) -> None:
    """Refuse a take of more than ``limits.maxTakeRows`` rows (also before its ticket is decoded)."""
    if count > limits.max_take_rows:
        raise InvalidInputError(
            f"take of {count} rows exceeds the server limit of {limits.max_take_rows} "
            "(limits.maxTakeRows); use a scan or split the take"
        )


def _take(req: TakeRequest, limits: RequestLimits) -> None:
    _name(req.dataset, "dataset")
    _name(req.tag, "tag")
    _int(req.version, "version")
    _names(req.columns, "columns")
    check_take_rows(req.count, limits)


def _write(req: WriteRequest) -> None:
    _name(req.dataset, "dataset")
    _int(req.max_rows_per_file, "max_rows_per_file", 1, MAX_ROWS_PER_FILE)
    _name(req.data_storage_version, "data_storage_version")


def _action(req: ActionRequest) -> None:
    _name(req.dataset, "dataset")
    _name(req.tag, "tag")
    _int(req.version, "version")
    _int(req.read_version, "read_version")
    _names(req.columns, "columns")
    if req.filter_sql is not None and len(req.filter_sql.encode("utf-8", "surrogatepass")) > MAX_FILTER_BYTES:
        raise InvalidInputError(f"filter_sql is longer than {MAX_FILTER_BYTES} bytes")
    _int(req.target_rows_per_fragment, "target_rows_per_fragment")
    if req.older_than_seconds is not None and not (
        math.isfinite(req.older_than_seconds) and req.older_than_seconds >= 0
    ):
        raise InvalidInputError("older_than_seconds must be a finite number of seconds >= 0")
    if len(req.transforms) > MAX_LIST_ITEMS:
        raise InvalidInputError(f"transforms lists more than {MAX_LIST_ITEMS} columns")
    for column, sql in req.transforms.items():
        _name(column, "transforms")
        if len(sql.encode("utf-8", "surrogatepass")) > MAX_FILTER_BYTES:
            raise InvalidInputError(f"the expression of transforms[{column!r}] is too long")
    if len(req.fragments) > MAX_LIST_ITEMS:
        raise InvalidInputError(f"fragments lists more than {MAX_LIST_ITEMS} fragments")
    _unique(req.fragments, "fragments")
    _name(req.data_storage_version, "data_storage_version")


def validate(req: ScanRequest | TakeRequest | WriteRequest | ActionRequest, limits: RequestLimits) -> None:
    """Check every field of a decoded request against its bounds.

    Parameters
    ----------
    req : ScanRequest | TakeRequest | WriteRequest | ActionRequest
        A request as :mod:`flight_server._serde` decoded it.
    limits : RequestLimits
        The server's tunable limits.

    Raises
    ------
    InvalidInputError
        A field is out of range, too long, or lists an item twice (fragment ids, column names).
    """
    if isinstance(req, ScanRequest):
        _scan(req)
    elif isinstance(req, TakeRequest):
        _take(req, limits)
    elif isinstance(req, WriteRequest):
        _write(req)
    else:
        _action(req)
