"""The one table from exception to Flight status, and the exceptions that carry it to clients.

Two questions, two tables, one module:

* :data:`ERROR_TABLE` (server side): which gRPC status and machine-readable code an exception of
  the engine or a handler becomes. Only our typed errors (:mod:`lance_format.core.errors`) and
  deliberate validation errors are client errors; any other exception of our own code (a bare
  ``ValueError``, ``KeyError``, ``IndexError``, ``TypeError``, ``OverflowError``, ...) is a bug
  and answers INTERNAL, logged with its traceback server-side.
* :data:`WIRE_STATUS` (any side): which gRPC status an exception *as pyarrow sends or receives it*
  stands for. :func:`status_of` reads it for the server's metrics and call log and for the load
  generator, so all three count the same call under the same status.

pyarrow shapes what can reach a client. A handler's plain Python exception gets a status
(``ValueError`` -> INVALID_ARGUMENT, ``KeyError`` -> NOT_FOUND) but pyarrow appends its traceback
(file paths, source lines) to the message; so client errors are raised as exceptions whose
``__notes__`` cannot be read, and pyarrow falls back to the bare class name. The Flight error classes
carry a code in ``extra_info`` and no traceback, but only where pyarrow maps them: in unary handlers.
Mid-stream (a batch iterator) and in ``get_schema`` pyarrow maps nothing but Arrow's own statuses,
so there INTERNAL, UNAVAILABLE and ``extra_info`` cannot be expressed: the error goes out as UNKNOWN
with its code in the message (``"... [CODE]"``), which :func:`error_code` reads too. Hence corrupt
data, which can surface mid-stream, is UNKNOWN with code ``CORRUPT_DATA`` in every RPC.
``tests/server/test_rpc_errors.py`` checks codes and that no traceback or path reaches a client.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.flight as flight

from lance_format.core.errors import (
    CommitConflictError,
    CorruptFileError,
    DatasetAlreadyExistsError,
    InvalidInputError,
    NotFoundError,
    NotSupportedError,
    RetryableCommitConflictError,
)

__all__ = [
    "ERROR_CODES",
    "ERROR_TABLE",
    "WIRE_STATUS",
    "ClientStreamError",
    "InvalidArgument",
    "NotFound",
    "Outcome",
    "QueryTimedOut",
    "ResourceExhausted",
    "StreamFailed",
    "Unimplemented",
    "client_chunks",
    "error_code",
    "outcome_of",
    "raise_flight_error",
    "status_of",
    "to_flight_error",
    "to_stream_error",
]

log = logging.getLogger("lance_flight.server")


@dataclass(frozen=True)
class Outcome:
    """What a client gets for an exception: the gRPC status name and a machine-readable code."""

    status: str
    code: str | None = None


INTERNAL = Outcome("INTERNAL", "INTERNAL")


class QueryTimedOut(TimeoutError):
    """A SQL query ran past ``limits.sqlTimeoutSeconds`` and was stopped: DEADLINE_EXCEEDED with
    code ``QUERY_TIMEOUT`` (UNKNOWN with ``[QUERY_TIMEOUT]`` in the message mid-stream)."""


#: Server side: exception type -> outcome, first match wins; anything not listed is INTERNAL.
ERROR_TABLE: tuple[tuple[type[BaseException], Outcome], ...] = (
    (RetryableCommitConflictError, Outcome("UNAVAILABLE", "RETRYABLE_COMMIT_CONFLICT")),
    (CommitConflictError, Outcome("UNKNOWN", "COMMIT_CONFLICT")),
    (DatasetAlreadyExistsError, Outcome("UNKNOWN", "ALREADY_EXISTS")),
    (CorruptFileError, Outcome("UNKNOWN", "CORRUPT_DATA")),
    (QueryTimedOut, Outcome("DEADLINE_EXCEEDED", "QUERY_TIMEOUT")),
    (NotFoundError, Outcome("NOT_FOUND")),
    (NotSupportedError, Outcome("UNIMPLEMENTED")),
    (NotImplementedError, Outcome("UNIMPLEMENTED")),
    (InvalidInputError, Outcome("INVALID_ARGUMENT")),
)

#: The machine-readable codes servers put in ``FlightError.extra_info`` (and in stream messages).
ERROR_CODES = tuple(sorted({o.code for _, o in ERROR_TABLE if o.code} | {"RESOURCE_EXHAUSTED", "INTERNAL"}))


def outcome_of(exc: BaseException) -> Outcome:
    """The outcome :data:`ERROR_TABLE` gives ``exc`` (INTERNAL for exceptions it does not list)."""
    for kind, outcome in ERROR_TABLE:
        if isinstance(exc, kind):
            return outcome
    return INTERNAL


class _NoClientTraceback(Exception):
    """Mixin: pyarrow cannot format these, so it sends the class name instead of a traceback."""

    @property
    def __notes__(self) -> list[str]:  # type: ignore[override]  # read by traceback
        raise RuntimeError("not formatted for clients")

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidArgument(_NoClientTraceback, pa.ArrowInvalid):  # type: ignore[misc]
    """Bad input: gRPC INVALID_ARGUMENT (``pyarrow.ArrowInvalid`` on the client)."""


class NotFound(_NoClientTraceback, KeyError):
    """Missing dataset, version or tag: gRPC NOT_FOUND (``pyarrow.ArrowKeyError`` on the client)."""


class Unimplemented(_NoClientTraceback, NotImplementedError):
    """Valid input the engine cannot serve: gRPC UNIMPLEMENTED."""


class StreamFailed(_NoClientTraceback, RuntimeError):
    """gRPC UNKNOWN with a clean message: every other outcome mid-stream and in ``get_schema``.

    pyarrow maps no Flight error class there (they would arrive as UNKNOWN with a traceback), so the
    outcome's code travels in the message as ``[CODE]``.
    """


class ClientStreamError(InvalidInputError):
    """The batches a client streams in (``do_put``, ``do_exchange``) do not decode: its bad input."""


def client_chunks(reader: Iterable[Any]) -> Iterator[Any]:
    """The chunks of a client's stream; Arrow's errors decoding them become :class:`ClientStreamError`
    (bad input, INVALID_ARGUMENT), not bugs of ours."""
    chunks = iter(reader)
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            return
        except pa.ArrowException as exc:
            raise ClientStreamError(f"the stream sent is not valid Arrow IPC: {exc}") from None
        yield chunk


class ResourceExhausted(flight.FlightUnavailableError):  # type: ignore[misc]
    """No slot or result memory is free within the wait (or the call asks for more than its
    share): UNAVAILABLE with code ``RESOURCE_EXHAUSTED``; retry later or ask for less."""

    def __init__(self, message: str) -> None:
        super().__init__(message, b"RESOURCE_EXHAUSTED")


_CODE_IN_MESSAGE = re.compile(r"\[([A-Z_]+)\]")


def error_code(error: BaseException) -> str | None:
    """The machine-readable code of a Flight error a client received (``None`` when it has none).

    Read from ``extra_info``, else from a ``[CODE]`` in the message (errors sent mid-stream or by
    ``get_schema``, where pyarrow drops ``extra_info``).
    """
    extra = getattr(error, "extra_info", b"") or b""
    text = extra.decode("ascii", "replace") if isinstance(extra, bytes) else str(extra)
    if text in ERROR_CODES:
        return text
    for found in _CODE_IN_MESSAGE.findall(str(error)):
        if found in ERROR_CODES:
            return str(found)
    return None


def _scrub(message: str, hide: tuple[str, ...]) -> str:
    """Take server-side locations (the root) out of a message meant for clients."""
    for prefix in hide:
        if prefix:
            message = message.replace(prefix, "<root>")
    return message


def _message(exc: BaseException, outcome: Outcome, hide: tuple[str, ...]) -> str:
    if outcome is INTERNAL:
        log.error("internal error", exc_info=exc)
        return f"internal error ({type(exc).__name__}); see the server log"
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = _scrub(text, hide)
    if outcome.code == "COMMIT_CONFLICT":
        return f"commit conflict: {text}"
    if outcome.code == "RETRYABLE_COMMIT_CONFLICT":
        return f"commit conflict, retry: {text}"
    return text


def to_flight_error(exc: BaseException, hide: tuple[str, ...] = ()) -> Any:
    """The exception a unary handler raises to the client for ``exc`` (``hide``: strings to scrub)."""
    if isinstance(exc, flight.FlightError | _NoClientTraceback):
        return exc  # already meant for the client (auth, stream limits, our own mapping)
    outcome = outcome_of(exc)
    message = _message(exc, outcome, hide)
    code = outcome.code.encode() if outcome.code else b""
    if outcome.status == "INVALID_ARGUMENT":
        return InvalidArgument(message)
    if outcome.status == "NOT_FOUND":
        return NotFound(message)
    if outcome.status == "UNIMPLEMENTED":
        return Unimplemented(message)
    if outcome.status == "UNAVAILABLE":
        return flight.FlightUnavailableError(message, code)
    if outcome.status == "INTERNAL":
        return flight.FlightInternalError(message, code)
    if outcome.status == "DEADLINE_EXCEEDED":
        return flight.FlightTimedOutError(message, code)
    return flight.FlightServerError(message, code)  # UNKNOWN


def to_stream_error(exc: BaseException, hide: tuple[str, ...] = ()) -> _NoClientTraceback:
    """:func:`to_flight_error` for errors raised mid-stream or by ``get_schema``.

    Client errors keep their status; every other outcome is :class:`StreamFailed` (UNKNOWN) with
    its code in the message.
    """
    mapped = to_flight_error(exc, hide)
    if isinstance(mapped, _NoClientTraceback):
        return mapped
    code = error_code(mapped)
    message = str(mapped)
    return StreamFailed(f"{message} [{code}]" if code and f"[{code}]" not in message else message)


def raise_flight_error(exc: BaseException, hide: tuple[str, ...] = ()) -> NoReturn:
    """Raise :func:`to_flight_error` of ``exc`` without chaining (the chain is server-side only)."""
    raise to_flight_error(exc, hide) from None


#: Any side: the gRPC status an exception stands for as pyarrow sends or receives it (first match
#: wins). A plain ``ValueError`` *is* sent as INVALID_ARGUMENT by pyarrow (our handlers never let
#: one through: :func:`to_flight_error` maps it to INTERNAL first).
WIRE_STATUS: tuple[tuple[type[BaseException], str], ...] = (
    (flight.FlightUnauthenticatedError, "UNAUTHENTICATED"),
    (flight.FlightUnauthorizedError, "PERMISSION_DENIED"),
    (flight.FlightCancelledError, "CANCELLED"),
    (flight.FlightTimedOutError, "DEADLINE_EXCEEDED"),
    (flight.FlightUnavailableError, "UNAVAILABLE"),
    (flight.FlightInternalError, "INTERNAL"),
    (flight.FlightServerError, "UNKNOWN"),
    (pa.ArrowInvalid, "INVALID_ARGUMENT"),
    (pa.ArrowKeyError, "NOT_FOUND"),
    (pa.ArrowNotImplementedError, "UNIMPLEMENTED"),
    (KeyError, "NOT_FOUND"),
    (FileNotFoundError, "NOT_FOUND"),
    (FileExistsError, "ALREADY_EXISTS"),
    (ValueError, "INVALID_ARGUMENT"),
    (NotImplementedError, "UNIMPLEMENTED"),
    (TimeoutError, "DEADLINE_EXCEEDED"),
)

#: Status names pyarrow keeps in the text of some errors (``"gRPC code: NOT_FOUND"``, or a
#: middleware's C++ status starting with the name).
_NAMED_IN_TEXT = (
    "ALREADY_EXISTS",
    "NOT_FOUND",
    "INVALID_ARGUMENT",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "UNAVAILABLE",
)


def status_of(exception: BaseException | None, default: str = "UNKNOWN") -> str:
    """The gRPC status name of a call that ended with ``exception`` (``"OK"`` for ``None``).

    Parameters
    ----------
    exception : BaseException | None
        What a handler raised (the server's middleware) or what a client received.
    default : str, optional
        The answer for exceptions :data:`WIRE_STATUS` does not know (``"UNKNOWN"``: pyarrow sends
        them as UNKNOWN; the load generator passes ``""`` to name local errors by class).

    Returns
    -------
    str
        ``"OK"``, a gRPC status name, or ``default``.
    """
    if exception is None:
        return "OK"
    text = str(exception)
    for name in _NAMED_IN_TEXT:
        if f"gRPC code: {name}" in text or text.startswith(name):
            return name
    for kind, name in WIRE_STATUS:
        if isinstance(exception, kind):
            return name
    return default
