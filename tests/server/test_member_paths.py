"""Over Flight, the existing scan ticket, take ticket and drop_columns action carry struct member
paths (``"st.a"``) as the engine now takes them; no protocol was added."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight

import lance_format
from flight_server._serde import encode_command
from flight_server.requests import ScanRequest
from tests.server.service_fixtures import Served


def _write(served: Served) -> pa.Table:
    data = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "st": pa.array([{"a": i, "b": f"b{i}"} if i % 3 else None for i in range(6)]),
        }
    )
    served.client.write("nested", data, mode="create", max_rows_per_file=4)
    return data


def test_scan_and_take_tickets_project_members(served: Served) -> None:
    _write(served)
    local = lance_format.dataset(str(served.root / "nested"))
    scanned = served.client.scan("nested", columns=["st.a", "id"])
    assert scanned.schema.names == ["st.a", "id"]
    assert scanned.to_pylist() == local.to_table(columns=["st.a", "id"]).to_pylist()
    taken = served.client.take("nested", indices=[5, 1], columns=["st.b"])
    assert taken.to_pylist() == local.take([5, 1], columns=["st.b"]).to_pylist()
    assert taken.schema.field("st").type == pa.struct([("b", pa.string())])


def test_drop_columns_action_drops_a_member(served: Served) -> None:
    _write(served)
    served.client.drop_columns("nested", ["st.b"])
    local = lance_format.dataset(str(served.root / "nested"))
    assert local.schema.field("st").type == pa.struct([("a", pa.int64())])


def test_flight_info_sizes_a_member_projection(served: Served) -> None:
    """``total_bytes`` counted no bytes for a member path (it looked up top-level names only)."""
    _write(served)
    member = served.raw.get_flight_info(_descriptor(["st.a"])).total_bytes
    whole = served.raw.get_flight_info(_descriptor(["st"])).total_bytes
    assert 0 < member <= whole


def _descriptor(columns: list[str]) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(encode_command(ScanRequest("nested", columns=tuple(columns))))
