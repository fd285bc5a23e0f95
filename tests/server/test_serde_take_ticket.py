"""Zero-copy decoding of take tickets (flight_server._serde.decode_take_ticket) against protobuf's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flight_server._proto import flight_pb2 as pb
from flight_server._serde import decode_take_ticket, decode_ticket, encode_ticket, peek_take_count
from flight_server.requests import ScanRequest, TakeRequest
from lance_format.core.errors import InvalidInputError

_ids = st.lists(st.integers(0, 2**64 - 1), max_size=50).map(lambda v: np.array(v, dtype=np.uint64))


@settings(max_examples=60, deadline=None)
@given(
    ids=_ids,
    by_row_id=st.booleans(),
    version=st.none() | st.integers(0, 2**64 - 1),
    tag=st.none() | st.text(min_size=1, max_size=8),
    columns=st.none() | st.lists(st.text(max_size=6), max_size=4).map(tuple),
    flags=st.tuples(st.booleans(), st.booleans()),
)
def test_decodes_what_protobuf_decodes(
    ids: np.ndarray,
    by_row_id: bool,
    version: int | None,
    tag: str | None,
    columns: tuple[str, ...] | None,
    flags: tuple[bool, bool],
) -> None:
    req = TakeRequest(
        "ds",
        version=version,
        tag=tag,
        row_ids=ids if by_row_id else None,
        indices=None if by_row_id else ids,
        columns=columns,
        with_row_id=flags[0],
        with_row_address=flags[1],
    )
    raw = encode_ticket(req)
    fast = decode_take_ticket(raw)
    slow = decode_ticket(raw)
    assert isinstance(fast, TakeRequest)
    assert isinstance(slow, TakeRequest)
    for name in ("dataset", "version", "tag", "columns", "with_row_id", "with_row_address"):
        assert getattr(fast, name) == getattr(slow, name)
    for name in ("row_ids", "indices"):
        a, b = getattr(fast, name), getattr(slow, name)
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == np.uint64
            assert np.array_equal(a, b)


def test_aligned_ids_are_a_view_of_the_ticket_and_others_an_aligned_copy() -> None:
    views = 0
    for name in ("d" * n for n in range(1, 9)):  # moves the ids' offset in the ticket through 8
        raw = encode_ticket(TakeRequest(name, indices=np.arange(1000, dtype=np.uint64)))
        req = decode_take_ticket(raw)
        assert req is not None
        assert req.indices is not None
        assert req.indices.flags.aligned
        assert np.array_equal(req.indices, np.arange(1000))
        views += np.shares_memory(req.indices, np.frombuffer(raw, np.uint8))
    assert views == 1


def test_the_last_ids_field_wins_as_in_protobuf() -> None:
    first = pb.TakeRequest(dataset="ds", row_ids=np.arange(3, dtype="<u8").tobytes())
    second = pb.TakeRequest(indices=np.arange(5, dtype="<u8").tobytes())
    take = first.SerializeToString() + second.SerializeToString()
    raw = bytes([0x12]) + _varint(len(take)) + take
    fast, slow = decode_take_ticket(raw), decode_ticket(raw)
    assert isinstance(slow, TakeRequest)
    assert fast is not None
    assert slow.row_ids is None
    assert fast.row_ids is None
    assert np.array_equal(fast.indices, slow.indices)  # type: ignore[arg-type]
    assert fast.dataset == slow.dataset == "ds"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def test_other_tickets_are_left_to_the_real_decoder() -> None:
    assert decode_take_ticket(encode_ticket(ScanRequest("ds"))) is None
    assert decode_take_ticket(b"\x00garbage") is None
    take = pb.TakeRequest(dataset="ds").SerializeToString()  # no ids
    assert decode_take_ticket(pb.Ticket(take=pb.TakeRequest.FromString(take)).SerializeToString()) is None


def test_ids_of_a_length_not_a_multiple_of_8_are_refused() -> None:
    raw = pb.Ticket(take=pb.TakeRequest(dataset="ds", indices=b"\x01" * 12)).SerializeToString()
    assert peek_take_count(raw) == 1
    with pytest.raises(InvalidInputError, match="multiple of 8"):
        decode_take_ticket(raw)
    with pytest.raises(InvalidInputError, match="multiple of 8"):
        decode_ticket(raw)


def test_bad_other_fields_are_invalid_input() -> None:
    take = pb.TakeRequest(indices=np.arange(2, dtype="<u8").tobytes()).SerializeToString()
    bad_name = b"\x0a\x02\xff\xfe"  # dataset: invalid UTF-8
    body = bad_name + take
    raw = bytes([0x12]) + _varint(len(body)) + body
    with pytest.raises(InvalidInputError):
        decode_take_ticket(raw)
    with pytest.raises(InvalidInputError):
        decode_ticket(raw)
