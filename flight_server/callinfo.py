"""What the call running on this thread did, for its access-log line.

Middleware and handlers of one Flight call run on one gRPC thread, but pyarrow gives each callback a
fresh Python thread state, so this is keyed by OS thread id (as the request ids of
:mod:`flight_server.logging` are). The auth middleware notes the principal, the service the peer,
the catalog the dataset, the metrics the rows and bytes; the call log reads and clears it when the
call completes.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["add_counts", "annotate", "clear", "current"]

_by_thread: dict[int, dict[str, Any]] = {}


def annotate(**fields: Any) -> None:
    """Record ``fields`` (dataset, principal, peer, ...) on the current call; the first value of a
    field wins, so a dataset named by the request is not replaced by one a handler opens later."""
    record = _by_thread.setdefault(threading.get_ident(), {})
    for key, value in fields.items():
        if value is not None and value != "":
            record.setdefault(key, value)


def add_counts(rows: int, nbytes: int) -> None:
    """Add rows and Arrow bytes sent or received to the current call."""
    record = _by_thread.setdefault(threading.get_ident(), {})
    record["rows"] = record.get("rows", 0) + int(rows)
    record["bytes"] = record.get("bytes", 0) + int(nbytes)


def current() -> dict[str, Any]:
    """A copy of the fields recorded on the current call."""
    return dict(_by_thread.get(threading.get_ident(), {}))


def clear() -> dict[str, Any]:
    """The current call's fields, forgotten (its log line is written)."""
    return _by_thread.pop(threading.get_ident(), {})
