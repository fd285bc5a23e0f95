"""Turning any exception of a handler into a Flight error the client can act on, without tracebacks.

pyarrow gives a handler's plain Python exception the right gRPC status (``ValueError`` ->
INVALID_ARGUMENT, ``KeyError`` -> NOT_FOUND) but appends ``traceback.format_exception`` of it to the
message the client sees: file paths and source lines. Flight's own error classes carry no traceback
but cannot say INVALID_ARGUMENT or NOT_FOUND. So for those two codes we raise exceptions whose
``__notes__`` cannot be read: formatting them fails, and pyarrow falls back to the bare class name
(``"<message>. Detail: Python exception: InvalidArgument"``). ``tests/server/test_rpc_errors.py``
checks that no traceback or path reaches the client, so a Python that changes this fails loudly.

Every other outcome uses a Flight error class with a machine-readable code in ``extra_info``
(:data:`ERROR_CODES`); a commit conflict that may succeed on retry is UNAVAILABLE with code
``RETRYABLE_COMMIT_CONFLICT``.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.flight as flight

from lance_format.core.errors import (
    CommitConflictError,
    DatasetAlreadyExistsError,
    InvalidInputError,
    NotFoundError,
    NotSupportedError,
    RetryableCommitConflictError,
)

__all__ = [
    "ERROR_CODES",
    "InvalidArgument",
    "NotFound",
    "ResourceExhausted",
    "StreamFailed",
    "TooManyStreams",
    "Unimplemented",
    "error_code",
    "to_flight_error",
    "to_stream_error",
]

log = logging.getLogger("lance_flight.server")

#: The machine-readable codes servers put in ``FlightError.extra_info``.
ERROR_CODES = (
    "ALREADY_EXISTS",
    "COMMIT_CONFLICT",
    "RETRYABLE_COMMIT_CONFLICT",
    "RESOURCE_EXHAUSTED",
    "INTERNAL",
)


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


class TooManyStreams(flight.FlightUnavailableError):  # type: ignore[misc]
    """The concurrent-stream limit is reached; retry later."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"too many concurrent streams (limit {limit}, limits.maxConcurrentStreams); retry later",
            b"RESOURCE_EXHAUSTED",
        )


class ResourceExhausted(flight.FlightUnavailableError):  # type: ignore[misc]
    """No slot or result memory is free within the wait (or the call asks for more than its
    share): UNAVAILABLE with code ``RESOURCE_EXHAUSTED``; retry later or ask for less."""

    def __init__(self, message: str) -> None:
        super().__init__(message, b"RESOURCE_EXHAUSTED")


def error_code(error: BaseException) -> str | None:
    """The machine-readable code of a Flight error a client received (``None`` when it has none)."""
    extra = getattr(error, "extra_info", b"") or b""
    text = extra.decode("ascii", "replace") if isinstance(extra, bytes) else str(extra)
    return text if text in ERROR_CODES else None


def _scrub(message: str, hide: tuple[str, ...]) -> str:
    """Take server-side locations (the root) out of a message meant for clients."""
    for prefix in hide:
        if prefix:
            message = message.replace(prefix, "<root>")
    return message


def to_flight_error(exc: BaseException, hide: tuple[str, ...] = ()) -> Any:
    """The exception to raise to the client for ``exc`` (``hide``: strings to scrub from messages)."""
    if isinstance(exc, flight.FlightError | _NoClientTraceback):
        return exc
    message = _scrub(str(exc) if not isinstance(exc, KeyError) else str(exc.args[0]), hide)
    if isinstance(exc, RetryableCommitConflictError):
        return flight.FlightUnavailableError(
            f"commit conflict, retry: {message}", b"RETRYABLE_COMMIT_CONFLICT"
        )
    if isinstance(exc, CommitConflictError):
        return flight.FlightServerError(f"commit conflict: {message}", b"COMMIT_CONFLICT")
    if isinstance(exc, DatasetAlreadyExistsError | FileExistsError):
        return flight.FlightServerError(message, b"ALREADY_EXISTS")
    if isinstance(exc, NotFoundError | FileNotFoundError):
        return NotFound(message)
    if isinstance(exc, NotSupportedError | NotImplementedError):
        return Unimplemented(message)
    if isinstance(
        exc, InvalidInputError | ValueError | TypeError | IndexError | KeyError | pa.ArrowException
    ):
        return InvalidArgument(message)
    log.error("internal error", exc_info=exc)
    return flight.FlightInternalError(
        f"internal error ({type(exc).__name__}); see the server log", b"INTERNAL"
    )


class StreamFailed(_NoClientTraceback, RuntimeError):
    """A failure after a stream started: gRPC UNKNOWN with a clean message.

    Errors raised while pyarrow pulls batches from a Python iterator skip Flight's error mapping
    (even Flight error classes arrive with a traceback), so mid-stream errors must be one of the
    classes above.
    """


def to_stream_error(exc: BaseException, hide: tuple[str, ...] = ()) -> _NoClientTraceback:
    """:func:`to_flight_error` for errors raised mid-stream."""
    mapped = to_flight_error(exc, hide)
    if isinstance(mapped, _NoClientTraceback):
        return mapped
    return StreamFailed(str(mapped))


def raise_flight_error(exc: BaseException, hide: tuple[str, ...] = ()) -> NoReturn:
    """Raise :func:`to_flight_error` of ``exc`` without chaining (the chain is server-side only)."""
    raise to_flight_error(exc, hide) from None
