"""Conversion between the protobuf messages of ``lance_flight.v1`` and :mod:`flight_server.requests`.

The only module that imports the generated code. Every decoder raises
:class:`~lance_format.core.errors.InvalidInputError` on bytes that are not a well-formed request,
so a fuzzed ticket or descriptor becomes INVALID_ARGUMENT, never a crash.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from google.protobuf.message import DecodeError, Message

from flight_server._proto import flight_pb2 as pb
from flight_server.requests import (
    ActionRequest,
    ActionResult,
    ScanRequest,
    TagEntry,
    TakeRequest,
    VersionEntry,
    WriteMode,
    WriteRequest,
    WriteResult,
)
from lance_format.core.errors import InvalidInputError

__all__ = [
    "decode_action_request",
    "decode_action_result",
    "decode_command",
    "decode_take_ticket",
    "decode_ticket",
    "decode_write_result",
    "encode_action_request",
    "encode_action_result",
    "encode_command",
    "encode_ticket",
    "encode_write_result",
    "peek_take_count",
    "schema_from_bytes",
    "schema_to_bytes",
]

_M = TypeVar("_M", bound=Message)

_MODE_TO_PB: dict[str, int] = {
    "auto": pb.WRITE_MODE_UNSPECIFIED,
    "create": pb.WRITE_MODE_CREATE,
    "append": pb.WRITE_MODE_APPEND,
    "overwrite": pb.WRITE_MODE_OVERWRITE,
    "stage": pb.WRITE_MODE_STAGE,
}
_MODE_FROM_PB: dict[int, WriteMode] = {v: k for k, v in _MODE_TO_PB.items()}  # type: ignore[misc]


def _parse(cls: type[_M], data: bytes, what: str) -> _M:
    try:
        return cls.FromString(bytes(data))
    except (DecodeError, ValueError, TypeError) as exc:
        raise InvalidInputError(f"{what} is not a valid lance_flight.v1.{cls.__name__} message") from exc


def schema_to_bytes(schema: pa.Schema | None) -> bytes:
    """IPC bytes of a schema (empty for ``None``)."""
    return b"" if schema is None else schema.serialize().to_pybytes()


def schema_from_bytes(data: bytes) -> pa.Schema | None:
    """The schema IPC bytes describe (``None`` for empty bytes)."""
    if not data:
        return None
    try:
        return pa.ipc.read_schema(pa.py_buffer(data))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as exc:
        raise InvalidInputError("schema bytes are not an Arrow IPC schema") from exc


def _u64_bytes(values: npt.NDArray[np.uint64]) -> bytes:
    return np.ascontiguousarray(values, dtype="<u8").tobytes()


def _u64_array(data: bytes, what: str) -> npt.NDArray[np.uint64]:
    if len(data) % 8:
        raise InvalidInputError(f"{what} must be little-endian uint64 values (length a multiple of 8)")
    return np.frombuffer(data, dtype="<u8").astype(np.uint64, copy=False)


def _columns(msg: pb.Columns, present: bool) -> tuple[str, ...] | None:
    return tuple(msg.names) if present else None


def _opt(msg: Message, name: str) -> int | None:
    return int(getattr(msg, name)) if msg.HasField(name) else None


# -- scan ------------------------------------------------------------------------------------------


def _scan_to_pb(req: ScanRequest) -> pb.ScanRequest:
    msg = pb.ScanRequest(
        dataset=req.dataset,
        tag=req.tag or "",
        filter_sql=req.filter_sql or "",
        filter_substrait=req.filter_substrait or b"",
        batch_size=req.batch_size or 0,
        with_row_id=req.with_row_id,
        with_row_address=req.with_row_address,
        fragment_ids=list(req.fragment_ids),
        max_rows_per_endpoint=req.max_rows_per_endpoint,
    )
    for name in ("version", "limit", "offset", "row_start", "row_end"):
        value = getattr(req, name)
        if value is not None:
            setattr(msg, name, value)
    if req.columns is not None:
        msg.columns.names.extend(req.columns)
    return msg


def _scan_from_pb(msg: pb.ScanRequest) -> ScanRequest:
    return ScanRequest(
        dataset=msg.dataset,
        version=_opt(msg, "version"),
        tag=msg.tag or None,
        columns=_columns(msg.columns, msg.HasField("columns")),
        filter_sql=msg.filter_sql or None,
        filter_substrait=msg.filter_substrait or None,
        limit=_opt(msg, "limit"),
        offset=_opt(msg, "offset"),
        batch_size=msg.batch_size or None,
        with_row_id=msg.with_row_id,
        with_row_address=msg.with_row_address,
        fragment_ids=tuple(int(f) for f in msg.fragment_ids),
        row_start=_opt(msg, "row_start"),
        row_end=_opt(msg, "row_end"),
        max_rows_per_endpoint=int(msg.max_rows_per_endpoint),
    )


# -- take ------------------------------------------------------------------------------------------


def _take_to_pb(req: TakeRequest) -> pb.TakeRequest:
    msg = pb.TakeRequest(
        dataset=req.dataset,
        tag=req.tag or "",
        with_row_id=req.with_row_id,
        with_row_address=req.with_row_address,
    )
    if req.version is not None:
        msg.version = req.version
    if req.row_ids is not None:
        msg.row_ids = _u64_bytes(req.row_ids)
    elif req.indices is not None:
        msg.indices = _u64_bytes(req.indices)
    if req.columns is not None:
        msg.columns.names.extend(req.columns)
    return msg


def _take_from_pb(msg: pb.TakeRequest, require_ids: bool = True) -> TakeRequest:
    which = msg.WhichOneof("selector")
    if which is None and require_ids:
        raise InvalidInputError("a take needs row_ids or indices")
    return TakeRequest(
        dataset=msg.dataset,
        version=_opt(msg, "version"),
        tag=msg.tag or None,
        row_ids=_u64_array(msg.row_ids, "row_ids") if which == "row_ids" else None,
        indices=_u64_array(msg.indices, "indices") if which == "indices" else None,
        columns=_columns(msg.columns, msg.HasField("columns")),
        with_row_id=msg.with_row_id,
        with_row_address=msg.with_row_address,
    )


# -- reading a take's size without decoding it ----------------------------------------------------

_TICKET_TAKE = pb.Ticket.DESCRIPTOR.fields_by_name["take"].number
_TAKE_IDS = frozenset(pb.TakeRequest.DESCRIPTOR.fields_by_name[n].number for n in ("row_ids", "indices"))
_ROW_IDS = pb.TakeRequest.DESCRIPTOR.fields_by_name["row_ids"].number
#: Fields of a take looked at before giving up (a take has eight; a ticket of millions of tiny
#: fields is left to the real decoder, which refuses or accepts it as protobuf says).
_PEEK_FIELDS = 64
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise IndexError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _skip(data: memoryview, pos: int, wire: int) -> int:
    if wire == _VARINT:
        return _varint(data, pos)[1]
    if wire == _I64:
        return pos + 8
    if wire == _I32:
        return pos + 4
    if wire == _LEN:
        size, pos = _varint(data, pos)
        return pos + size
    raise IndexError("group or unknown wire type")


class _TakeLayout:
    """Where the parts of a plain take ticket lie: the take's other fields, and its ids."""

    __slots__ = ("ids", "ids_field", "others")

    def __init__(self) -> None:
        self.others: list[tuple[int, int]] = []  # (start, end) of each field that is not the ids
        self.ids: tuple[int, int] | None = None  # (start, end) of the ids' bytes (the last wins)
        self.ids_field = 0


def _take_layout(view: memoryview) -> _TakeLayout | None:
    """The layout of a ticket holding one ``take`` and nothing else (at most a few dozen fields),
    read from its wire format without copying anything; ``None`` for any other ticket."""
    try:
        key, pos = _varint(view, 0)
        if key != (_TICKET_TAKE << 3 | _LEN):
            return None
        size, pos = _varint(view, pos)
        end = pos + size
        if end != len(view):  # another field follows (or the message is cut): not the plain case
            return None
        layout = _TakeLayout()
        for _ in range(_PEEK_FIELDS):
            if pos == end:
                return layout
            field_start = pos
            key, pos = _varint(view, pos)
            number, wire = key >> 3, key & 7
            if number in _TAKE_IDS and wire == _LEN:
                size, pos = _varint(view, pos)
                layout.ids = (pos, pos + size)  # the last of the oneof wins, as in protobuf
                layout.ids_field = number
                pos += size
            else:
                pos = _skip(view, pos, wire)
                layout.others.append((field_start, pos))
            if pos > end:
                return None
    except IndexError:
        return None
    return None


def peek_take_count(data: bytes) -> int | None:
    """The rows a take ticket asks for, read from its wire format without decoding the ids.

    Lets the server refuse a take above ``limits.maxTakeRows`` before copying and decoding its
    ids (a 4-million-id ticket is 32 MB). ``None`` when ``data`` is not a plain take ticket (one
    ``take`` field, at most a few dozen fields in it); the real decoder then decides.
    """
    layout = _take_layout(memoryview(data))
    if layout is None or layout.ids is None:
        return None
    return (layout.ids[1] - layout.ids[0]) // 8


def decode_take_ticket(data: bytes) -> TakeRequest | None:
    """The take a plain take ticket holds, its ids a zero-copy view of ``data``.

    Same result as :func:`decode_ticket`, without copying or parsing the ids under the GIL: only
    the take's other fields (a few bytes) go through protobuf, and the ids are read in place with
    :func:`numpy.frombuffer` (copied, by numpy without the GIL, only when not 8-byte aligned).
    ``None`` when ``data`` is not a plain take ticket with ids (:func:`peek_take_count` is
    ``None``): :func:`decode_ticket` then decides.
    """
    view = memoryview(data)
    layout = _take_layout(view)
    if layout is None or layout.ids is None:
        return None
    lo, hi = layout.ids
    if (hi - lo) % 8:
        what = "row_ids" if layout.ids_field == _ROW_IDS else "indices"
        raise InvalidInputError(f"{what} must be little-endian uint64 values (length a multiple of 8)")
    rest = b"".join(bytes(view[a:b]) for a, b in layout.others)
    msg = _parse(pb.TakeRequest, rest, "ticket")
    ids = np.frombuffer(data, dtype="<u8", count=(hi - lo) // 8, offset=lo)
    if not ids.flags.aligned:
        ids = ids.copy()
    ids = ids.astype(np.uint64, copy=False)
    by_row_id = layout.ids_field == _ROW_IDS
    return TakeRequest(
        dataset=msg.dataset,
        version=_opt(msg, "version"),
        tag=msg.tag or None,
        row_ids=ids if by_row_id else None,
        indices=None if by_row_id else ids,
        columns=_columns(msg.columns, msg.HasField("columns")),
        with_row_id=msg.with_row_id,
        with_row_address=msg.with_row_address,
    )


# -- tickets and commands --------------------------------------------------------------------------


def encode_ticket(req: ScanRequest | TakeRequest) -> bytes:
    """The bytes of a ``do_get`` ticket."""
    if isinstance(req, ScanRequest):
        return pb.Ticket(scan=_scan_to_pb(req)).SerializeToString()
    return pb.Ticket(take=_take_to_pb(req)).SerializeToString()


def decode_ticket(data: bytes, *, require_ids: bool = True) -> ScanRequest | TakeRequest:
    """The request a ticket holds; ``require_ids=False`` accepts a take without ids (do_exchange)."""
    msg = _parse(pb.Ticket, data, "ticket")
    which = msg.WhichOneof("kind")
    if which == "scan":
        return _scan_from_pb(msg.scan)
    if which == "take":
        return _take_from_pb(msg.take, require_ids)
    raise InvalidInputError("ticket holds neither a scan nor a take")


def encode_command(req: ScanRequest | WriteRequest) -> bytes:
    """The bytes of a FlightDescriptor command."""
    if isinstance(req, ScanRequest):
        return pb.Command(scan=_scan_to_pb(req)).SerializeToString()
    write = pb.WriteRequest(
        dataset=req.dataset,
        mode=_MODE_TO_PB[req.mode],  # type: ignore[arg-type]
        max_rows_per_file=req.max_rows_per_file or 0,
        data_storage_version=req.data_storage_version or "",
        enable_stable_row_ids=req.enable_stable_row_ids,
        end_marker=req.end_marker,
    )
    return pb.Command(write=write).SerializeToString()


def _mode(value: int) -> WriteMode:
    try:
        return _MODE_FROM_PB[value]
    except KeyError:
        raise InvalidInputError(f"unknown write mode {value}") from None


def decode_command(data: bytes) -> ScanRequest | WriteRequest:
    """The request a FlightDescriptor command holds."""
    msg = _parse(pb.Command, data, "descriptor command")
    which = msg.WhichOneof("kind")
    if which == "scan":
        return _scan_from_pb(msg.scan)
    if which == "write":
        w = msg.write
        return WriteRequest(
            dataset=w.dataset,
            mode=_mode(w.mode),
            max_rows_per_file=int(w.max_rows_per_file) or None,
            data_storage_version=w.data_storage_version or None,
            enable_stable_row_ids=w.enable_stable_row_ids,
            end_marker=w.end_marker,
        )
    raise InvalidInputError("descriptor command holds neither a scan nor a write")


# -- do_put results --------------------------------------------------------------------------------


def encode_write_result(res: WriteResult) -> bytes:
    """The bytes of ``do_put``'s PutResult metadata."""
    return pb.WriteResult(
        dataset=res.dataset,
        version=res.version,
        rows_written=res.rows_written,
        fragments=list(res.fragments),
        schema=schema_to_bytes(res.schema),
    ).SerializeToString()


def decode_write_result(data: bytes) -> WriteResult:
    """A ``do_put`` answer."""
    msg = _parse(pb.WriteResult, data, "write result")
    return WriteResult(
        dataset=msg.dataset,
        version=int(msg.version),
        rows_written=int(msg.rows_written),
        fragments=tuple(msg.fragments),
        schema=schema_from_bytes(msg.schema),
    )


# -- actions ---------------------------------------------------------------------------------------


def encode_action_request(req: ActionRequest) -> bytes:
    """The bytes of an action body."""
    msg = pb.ActionRequest(
        dataset=req.dataset,
        tag=req.tag,
        filter_sql=req.filter_sql or "",
        filter_substrait=req.filter_substrait or b"",
        transforms=dict(req.transforms),
        columns=list(req.columns),
        target_rows_per_fragment=req.target_rows_per_fragment,
        delete_unverified=req.delete_unverified,
        schema=schema_to_bytes(req.schema),
        fragments=list(req.fragments),
        mode=_MODE_TO_PB[req.mode],  # type: ignore[arg-type]
        data_storage_version=req.data_storage_version,
        enable_stable_row_ids=req.enable_stable_row_ids,
        if_exists=req.if_exists,
    )
    if req.version is not None:
        msg.version = req.version
    if req.older_than_seconds is not None:
        msg.older_than_seconds = req.older_than_seconds
    if req.read_version is not None:
        msg.read_version = req.read_version
    return msg.SerializeToString()


def decode_action_request(data: bytes) -> ActionRequest:
    """An action body (empty bytes are an empty request)."""
    msg = _parse(pb.ActionRequest, data, "action body")
    return ActionRequest(
        dataset=msg.dataset,
        version=_opt(msg, "version"),
        tag=msg.tag,
        filter_sql=msg.filter_sql or None,
        filter_substrait=msg.filter_substrait or None,
        transforms=dict(msg.transforms),
        columns=tuple(msg.columns),
        target_rows_per_fragment=int(msg.target_rows_per_fragment),
        older_than_seconds=msg.older_than_seconds if msg.HasField("older_than_seconds") else None,
        delete_unverified=msg.delete_unverified,
        schema=schema_from_bytes(msg.schema),
        fragments=tuple(msg.fragments),
        mode=_mode(msg.mode),
        read_version=_opt(msg, "read_version"),
        data_storage_version=msg.data_storage_version,
        enable_stable_row_ids=msg.enable_stable_row_ids,
        if_exists=msg.if_exists,
    )


def encode_action_result(res: ActionResult) -> bytes:
    """The bytes of an action's answer."""
    return pb.ActionResult(
        dataset=res.dataset,
        version=res.version,
        rows=res.rows,
        versions=[
            pb.VersionInfo(version=v.version, timestamp_ns=v.timestamp_ns, metadata=v.metadata)
            for v in res.versions
        ],
        tags=[pb.TagInfo(name=t.name, version=t.version) for t in res.tags],
        counters=dict(res.counters),
        datasets=list(res.datasets),
        status=res.status,
        schema=schema_to_bytes(res.schema),
    ).SerializeToString()


def decode_action_result(data: bytes) -> ActionResult:
    """An action's answer."""
    msg = _parse(pb.ActionResult, data, "action result")
    return ActionResult(
        dataset=msg.dataset,
        version=int(msg.version),
        rows=int(msg.rows),
        versions=tuple(
            VersionEntry(int(v.version), int(v.timestamp_ns), dict(v.metadata)) for v in msg.versions
        ),
        tags=tuple(TagEntry(t.name, int(t.version)) for t in msg.tags),
        counters={k: int(v) for k, v in msg.counters.items()},
        datasets=tuple(msg.datasets),
        status=msg.status,
        schema=schema_from_bytes(msg.schema),
    )
