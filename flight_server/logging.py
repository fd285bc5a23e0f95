"""Structured logs: one line per Flight call with a request id, as ``key=value`` text or JSON lines.

:func:`configure_logging` installs the formatter on the ``lance_flight`` logger tree (and the
root logger, so library warnings share the format). :class:`RequestLogMiddlewareFactory`, registered
under ``"log"``, gives every call a request id (the client's ``x-request-id`` header when it sends a
sane one), makes it visible to every log record emitted while the call runs on its thread
(:func:`current_request_id`), returns it to the client in the ``x-request-id`` response header and
logs the call when it completes: method, status, duration and what :mod:`flight_server.callinfo`
gathered (dataset, principal, peer, rows, bytes).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any, TextIO

import pyarrow.flight as flight

from flight_server import callinfo
from flight_server.metrics import method_name, status_of

__all__ = [
    "CALL_LOGGER",
    "REQUEST_ID_HEADER",
    "JsonFormatter",
    "KeyValueFormatter",
    "RequestLogMiddleware",
    "RequestLogMiddlewareFactory",
    "configure_logging",
    "current_request_id",
]

REQUEST_ID_HEADER = "x-request-id"
CALL_LOGGER = "lance_flight.calls"
#: A client-chosen request id is kept only when it looks like an id (no log injection, bounded).
_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
#: Record attributes that are the logging module's own, not extra fields.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "request_id"}

# Keyed by OS thread id, not threading.local: pyarrow enters Python from gRPC threads with a fresh
# thread state per callback, so thread-locals set in start_call are gone when the handler runs.
_by_thread: dict[int, str] = {}
#: Fields of a call's log line gathered while it ran, in the order they are written.
_CALL_FIELDS = ("dataset", "principal", "peer", "rows", "bytes")


def current_request_id() -> str | None:
    """The id of the call running on this thread, if any."""
    return _by_thread.get(threading.get_ident())


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current_request_id()
        return True


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
        "level": record.levelname,
        "logger": record.name,
        "msg": record.getMessage(),
    }
    request_id = getattr(record, "request_id", None)
    if request_id:
        out["request_id"] = request_id
    out |= {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}
    if record.exc_info:
        out["exc"] = logging.Formatter().formatException(record.exc_info)
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_fields(record), default=str)


def _quote(value: Any) -> str:
    text = str(value)
    if text and not any(c in text for c in ' "=\n\t'):
        return text
    return json.dumps(text)


class KeyValueFormatter(logging.Formatter):
    """``key=value`` pairs (logfmt), readable by people and by log pipelines."""

    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{k}={_quote(v)}" for k, v in _fields(record).items())


def configure_logging(level: str = "INFO", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Send logs to ``stream`` (stderr) in ``fmt`` (``text`` or ``json``) at ``level``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    handler.addFilter(_RequestIdFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


class RequestLogMiddleware(flight.ServerMiddleware):  # type: ignore[misc]
    """Holds one call's request id and logs the call when it completes."""

    def __init__(self, request_id: str, method: str) -> None:
        self.request_id = request_id
        self.method = method
        self._start = time.perf_counter()

    def sending_headers(self) -> dict[str, str]:
        return {REQUEST_ID_HEADER: self.request_id}

    def call_completed(self, exception: BaseException | None) -> None:
        status = status_of(exception)
        extra: dict[str, Any] = {
            "request_id": self.request_id,
            "method": self.method,
            "status": status,
            "duration_ms": round((time.perf_counter() - self._start) * 1000, 3),
        }
        noted = callinfo.clear()
        for key in _CALL_FIELDS:
            if key in noted:
                extra[key] = noted[key]
        if exception is not None:
            # The first line only: the client-facing message, never a traceback in the call log.
            extra["error"] = str(exception).split("\n", 1)[0][:500]
        logger = logging.getLogger(CALL_LOGGER)
        logger.log(logging.INFO if status == "OK" else logging.WARNING, "call", extra=extra)
        if _by_thread.get(threading.get_ident()) == self.request_id:
            _by_thread.pop(threading.get_ident(), None)


class RequestLogMiddlewareFactory(flight.ServerMiddlewareFactory):  # type: ignore[misc]
    """Gives every call a request id; register it under the key ``"log"``."""

    def start_call(self, info: flight.CallInfo, headers: Mapping[str, Any]) -> RequestLogMiddleware:
        values = headers.get(REQUEST_ID_HEADER) or []
        given = values[0] if values else None
        given = given.decode() if isinstance(given, bytes) else given
        request_id = given if given and _SANE_ID.match(given) else uuid.uuid4().hex[:16]
        _by_thread[threading.get_ident()] = request_id
        # Fields left on this thread by a call that never completed here are not this call's; keep
        # only the principal the auth middleware (registered first) just noted.
        principal = callinfo.clear().get("principal")
        callinfo.annotate(principal=principal)
        return RequestLogMiddleware(request_id, method_name(info))


def log_refused(method: str, reason: str) -> None:
    """Log a call the auth middleware refused (it never reaches the call log's middleware)."""
    logging.getLogger(CALL_LOGGER).warning(
        "call",
        extra={
            "request_id": uuid.uuid4().hex[:16],
            "method": method,
            "status": "UNAUTHENTICATED",
            "error": reason,
        },
    )
