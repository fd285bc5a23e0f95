"""Flight SQL requests as plain values, and the opaque statement handles we hand to clients.

Handles are stateless: a prepared statement's handle carries its SQL (and, once parameters are
bound, the parameters), and a result ticket carries the SQL and the dataset versions it was
planned on. Any worker process can serve any handle, and nothing leaks when a client forgets to
close a statement.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_format.core.errors import InvalidInputError

__all__ = ["Handle", "SqlCommand", "decode_handle", "encode_handle"]

#: Marks our handles so a foreign or corrupted one is refused as such.
_MAGIC = b"lfsql1:"


@dataclass(frozen=True)
class SqlCommand:
    """One decoded Flight SQL message: its name (``CommandGetTables``...) and its fields."""

    kind: str
    fields: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        """Field ``name`` (``default`` when the message did not set it)."""
        return self.fields.get(name, default)


@dataclass(frozen=True)
class Handle:
    """A statement handle or result ticket: SQL, pinned versions, bound parameters."""

    sql: str
    versions: dict[str, int] = field(default_factory=dict)
    params: pa.Table | None = None
    #: Rows an update run at planning time changed (its ticket returns this count, never re-runs).
    count: int | None = None


def encode_handle(handle: Handle) -> bytes:
    """The opaque bytes of ``handle``."""
    body: dict[str, Any] = {"sql": handle.sql, "versions": handle.versions}
    if handle.count is not None:
        body["count"] = handle.count
    if handle.params is not None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, handle.params.schema) as writer:
            writer.write_table(handle.params)
        body["params"] = base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")
    return _MAGIC + json.dumps(body, separators=(",", ":")).encode()


def _int64(value: Any) -> int:
    """``value`` as a non-negative int64 (a version, a row count), else ValueError."""
    number = int(value)
    if not 0 <= number < 2**63:
        raise ValueError(f"{number} is out of range")
    return number


def decode_handle(data: bytes) -> Handle:
    """The handle ``data`` encodes; :class:`InvalidInputError` for anything else."""
    data = bytes(data)
    if not data.startswith(_MAGIC):
        raise InvalidInputError("not a statement handle of this server")
    # Handles are stateless, so a client can forge one: every field is checked for its type.
    try:
        body = json.loads(data[len(_MAGIC) :])
        if not isinstance(body, dict) or not isinstance(body.get("sql"), str):
            raise TypeError("a handle is an object with the statement's sql")
        versions = body.get("versions", {})
        if not isinstance(versions, dict):
            raise TypeError("versions are an object")
        params = None
        if "params" in body:
            params = pa.ipc.open_stream(pa.py_buffer(base64.b64decode(body["params"]))).read_all()
        count = None if body.get("count") is None else _int64(body["count"])
        pins = {str(k): _int64(v) for k, v in versions.items()}
        return Handle(sql=body["sql"], versions=pins, params=params, count=count)
    except (ValueError, KeyError, TypeError, OSError, pa.ArrowException) as exc:
        raise InvalidInputError("corrupt statement handle") from exc
