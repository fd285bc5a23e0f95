"""Protobuf messages as editable trees, encoded by hand from the generated descriptors.

The fuzzer needs messages that ``google.protobuf`` refuses to build (invalid UTF-8 in a string,
a varint where a string belongs, a field twice, a truncated length), so it builds a tree of
:class:`Entry` values per field number and encodes the wire format itself. The trees also shrink:
:func:`simpler` lists smaller variants of one tree, which the shrinker tries one by one.

This is the only fuzz module that reads the generated protobuf code (for its descriptors).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Union

from google.protobuf import text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from flight_server._proto import flight_pb2 as pb
from flight_server._proto import flight_sql_pb2 as sql_pb

__all__ = [
    "DESCRIPTORS",
    "Entry",
    "Msg",
    "Raw",
    "Value",
    "describe",
    "encode",
    "parse_text",
    "simpler",
    "sql_handle",
    "varint",
]


def _with_nested(messages: dict[str, Descriptor]) -> dict[str, Descriptor]:
    out = dict(messages)
    for desc in messages.values():
        for nested in desc.nested_types:
            if not nested.GetOptions().map_entry:
                out.setdefault(nested.name, nested)
    return out


#: The protocol's messages by short name (Ticket, Command, ScanRequest, ...), and Flight SQL's
#: (CommandStatementQuery, TicketStatementQuery, ... and nested TableDefinitionOptions); the two
#: packages share no message name.
DESCRIPTORS: dict[str, Descriptor] = _with_nested(
    {**pb.DESCRIPTOR.message_types_by_name, **sql_pb.DESCRIPTOR.message_types_by_name}
)

WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32 = 0, 1, 2, 5


@dataclass(frozen=True)
class Raw:
    """Bytes appended to a message as they are (garbage, a truncated field, an unknown tag)."""

    data: bytes


@dataclass(frozen=True)
class Msg:
    """A message of type ``name`` (a key of :data:`DESCRIPTORS` or a map-entry name) as entries."""

    name: str
    entries: tuple[Entry | Raw, ...] = ()


Value = Union[int, float, bytes, str, Msg]  # noqa: UP007 - a runtime alias


@dataclass(frozen=True)
class Entry:
    """One field occurrence: its number, the wire type to send it with, and the value.

    ``wire`` may differ from the field's declared wire type (a mutation); ``label`` names the field
    for printing.
    """

    number: int
    wire: int
    value: Value
    label: str = field(default="", compare=False)


def varint(value: int) -> bytes:
    """Protobuf varint of ``value`` (negative numbers as 64-bit two's complement, 10 bytes)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _payload(entry: Entry) -> bytes:
    v = entry.value
    if entry.wire == WIRE_VARINT:
        return varint(int(v) if isinstance(v, int | float) and math.isfinite(v) else 0)
    if entry.wire == WIRE_I64:
        if isinstance(v, float):
            return struct.pack("<d", v)
        return struct.pack("<Q", int(v) & ((1 << 64) - 1)) if isinstance(v, int) else b"\0" * 8
    if entry.wire == WIRE_I32:
        if isinstance(v, float):
            return struct.pack("<f", v if not math.isfinite(v) or abs(v) < 3e38 else math.inf)
        return struct.pack("<I", int(v) & 0xFFFFFFFF) if isinstance(v, int) else b"\0" * 4
    data = (
        encode(v)
        if isinstance(v, Msg)
        else v.encode("utf-8", "surrogatepass")
        if isinstance(v, str)
        else v
        if isinstance(v, bytes)
        else varint(int(v) if math.isfinite(v) else 0)  # a double given the wrong wire type
    )
    return varint(len(data)) + data


def encode(msg: Msg) -> bytes:
    """The wire bytes of ``msg``."""
    out = bytearray()
    for entry in msg.entries:
        if isinstance(entry, Raw):
            out += entry.data
        else:
            out += varint(entry.number << 3 | entry.wire) + _payload(entry)
    return bytes(out)


def wire_type(fd: FieldDescriptor) -> int:
    """The wire type a field is declared with."""
    if fd.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64):
        return WIRE_I64
    if fd.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32):
        return WIRE_I32
    if fd.type in (
        FieldDescriptor.TYPE_STRING,
        FieldDescriptor.TYPE_BYTES,
        FieldDescriptor.TYPE_MESSAGE,
    ):
        return WIRE_LEN
    return WIRE_VARINT


def sql_handle(data: bytes) -> bytes | None:
    """The statement handle a Flight SQL answer carries (a prepared statement's result, a bound
    statement's do_put result, a statement ticket), or None."""
    from google.protobuf import any_pb2

    wrapper = any_pb2.Any()
    try:
        wrapper.ParseFromString(data)
        kind = wrapper.type_url.rsplit(".", 1)[-1]
        if kind == "ActionCreatePreparedStatementResult":
            handle = sql_pb.ActionCreatePreparedStatementResult.FromString(
                wrapper.value
            ).prepared_statement_handle
        elif kind == "TicketStatementQuery":
            handle = sql_pb.TicketStatementQuery.FromString(wrapper.value).statement_handle
        else:
            handle = sql_pb.DoPutPreparedStatementResult.FromString(data).prepared_statement_handle
    except Exception:
        return None
    return bytes(handle) or None


def parse_text(name: str, data: bytes, limit: int = 1500) -> str:
    """``data`` parsed as message ``name`` by protobuf itself, as one line (or why it does not parse)."""
    try:
        msg = getattr(pb, name, None) or getattr(sql_pb, name)
        msg = msg.FromString(data)
    except Exception as exc:  # any parse failure is the answer
        return f"<not a {name}: {type(exc).__name__}>"
    text = text_format.MessageToString(msg, as_one_line=True)
    return text if len(text) <= limit else f"{text[:limit]}...<{len(text)} chars>"


def _short(value: Value) -> str:
    if isinstance(value, Msg):
        return describe(value)
    if isinstance(value, str | bytes):
        text = repr(value)
        return text if len(text) <= 80 else f"{text[:60]}...<{len(value)} long>"
    return repr(value)


def describe(msg: Msg) -> str:
    """A readable one-line form of ``msg`` (long strings abbreviated)."""
    parts = []
    entries = msg.entries
    if len(entries) > 24:
        entries = (*entries[:12], Raw(b""), *entries[-4:])
    for e in entries:
        if isinstance(e, Raw) and not e.data:
            parts.append(f"...<{len(msg.entries) - 16} more entries>...")
            continue
        if isinstance(e, Raw):
            parts.append(f"<raw {e.data[:24].hex()}{'...' if len(e.data) > 24 else ''}>")
        else:
            label = e.label or f"#{e.number}"
            parts.append(f"{label}{'' if e.wire < 0 else f'/w{e.wire}'}: {_short(e.value)}")
    return f"{msg.name}{{{', '.join(parts)}}}"


def _simpler_values(value: Value) -> Iterator[Value]:
    if isinstance(value, Msg):
        yield from (m for m in simpler(value))
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        for v in (0, 1, value // 2):
            if abs(v) < abs(value):
                yield v
    elif isinstance(value, float):
        if value != 0.0 and not math.isnan(value):
            yield 0.0
    elif isinstance(value, str | bytes):
        n = len(value)
        # Round lengths first (limits are often 255/256 or a power of two), then halving.
        for cut in (0, 1, 16, 255, 256, n // 2, n - 1):
            if 0 <= cut < n:
                yield value[:cut]


def simpler(msg: Msg) -> Iterator[Msg]:
    """Smaller variants of ``msg``: an entry removed, then one entry's value simplified."""
    entries = msg.entries
    n = len(entries)
    # Coarse first (delta debugging): drop halves, quarters, ... so long repeated fields go fast.
    chunk = n // 2
    while chunk > 1:
        for start in range(0, n, chunk):
            yield replace(msg, entries=entries[:start] + entries[start + chunk :])
        chunk //= 2
    for i in range(n):
        yield replace(msg, entries=entries[:i] + entries[i + 1 :])
    for i, e in enumerate(entries):
        if isinstance(e, Raw):
            for cut in (len(e.data) // 2, 1):
                if 0 < cut < len(e.data):
                    yield replace(msg, entries=(*entries[:i], Raw(e.data[:cut]), *entries[i + 1 :]))
            continue
        for v in _simpler_values(e.value):
            yield replace(msg, entries=(*entries[:i], replace(e, value=v), *entries[i + 1 :]))
