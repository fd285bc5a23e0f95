"""Flight SQL messages (package ``arrow.flight.protocol.sql``) <-> :class:`SqlCommand` values.

The only module of :mod:`flight_server.flightsql` that imports generated code. Flight SQL wraps
every command, ticket and action body in a ``google.protobuf.Any`` whose type URL names the
message; :func:`unpack` recognizes those (anything else is not Flight SQL and returns ``None``).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from flight_server._proto import flight_sql_pb2 as sql_pb
from flight_server.flightsql.commands import SqlCommand
from lance_format.core.errors import InvalidInputError

__all__ = ["TYPE_URL_PREFIX", "pack", "serialize", "unpack"]

TYPE_URL_PREFIX = "type.googleapis.com/arrow.flight.protocol.sql."


def _values(msg: Message) -> dict[str, Any]:
    """A message's fields as plain Python values (optional fields only when set)."""
    out: dict[str, Any] = {}
    for fd in msg.DESCRIPTOR.fields:
        if fd.has_presence and not msg.HasField(fd.name):
            continue
        value = getattr(msg, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value = dict(value)
        elif fd.message_type is not None and not _is_repeated(fd):
            value = _values(value)
        elif _is_repeated(fd):
            value = list(value)
        out[fd.name] = value
    return out


def _is_repeated(fd: Any) -> bool:
    if hasattr(fd, "is_repeated"):  # protobuf >= 5.28 (label is gone in 7)
        return bool(fd.is_repeated)
    return bool(fd.label == fd.LABEL_REPEATED)


def unpack(data: bytes) -> SqlCommand | None:
    """The Flight SQL command ``data`` holds, or ``None`` when it is not a Flight SQL ``Any``."""
    wrapper = any_pb2.Any()
    try:
        wrapper.ParseFromString(bytes(data))
    except (DecodeError, ValueError, TypeError):
        return None
    if not wrapper.type_url.startswith(TYPE_URL_PREFIX):
        return None
    kind = wrapper.type_url[len(TYPE_URL_PREFIX) :]
    cls = getattr(sql_pb, kind, None)
    if not isinstance(cls, type) or not issubclass(cls, Message):
        raise InvalidInputError(f"Flight SQL message arrow.flight.protocol.sql.{kind} is not supported")
    try:
        msg = cls.FromString(wrapper.value)
    except (DecodeError, ValueError, TypeError) as exc:
        raise InvalidInputError(f"not a valid arrow.flight.protocol.sql.{kind} message") from exc
    return SqlCommand(kind, _values(msg))


def pack(kind: str, **fields: Any) -> bytes:
    """``Any``-wrapped bytes of the Flight SQL message ``kind`` with ``fields``."""
    cls = getattr(sql_pb, kind)
    wrapper = any_pb2.Any()
    wrapper.Pack(cls(**fields))
    return bytes(wrapper.SerializeToString())


def serialize(kind: str, **fields: Any) -> bytes:
    """Plain (not ``Any``-wrapped) bytes of ``kind``: the form of do_put results."""
    return bytes(getattr(sql_pb, kind)(**fields).SerializeToString())
