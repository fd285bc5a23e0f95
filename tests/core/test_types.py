"""Arrow <-> Lance field trees and logical type strings."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lance_format.core.errors import CorruptFileError, NotSupportedError
from lance_format.core.types import (
    LanceField,
    LanceSchema,
    arrow_type_to_logical,
    fields_from_arrow,
    logical_to_arrow_type,
)

CASES = [
    (pa.bool_(), "bool"),
    (pa.int8(), "int8"),
    (pa.uint64(), "uint64"),
    (pa.float16(), "halffloat"),
    (pa.float32(), "float"),
    (pa.float64(), "double"),
    (pa.decimal128(12, 3), "decimal:128:12:3"),
    (pa.date32(), "date32:day"),
    (pa.date64(), "date64:ms"),
    (pa.time32("ms"), "time32:ms"),
    (pa.time64("ns"), "time64:ns"),
    (pa.timestamp("us"), "timestamp:us:-"),
    (pa.timestamp("ns", "America/New_York"), "timestamp:ns:America/New_York"),
    (pa.timestamp("s", "+05:30"), "timestamp:s:+05:30"),
    (pa.duration("ms"), "duration:ms"),
    (pa.string(), "string"),
    (pa.large_binary(), "large_binary"),
    (pa.binary(16), "fixed_size_binary:16"),
    (pa.list_(pa.float32(), 8), "fixed_size_list:float:8"),
    (pa.dictionary(pa.int32(), pa.string()), "dict:string:int32:false"),
]


@pytest.mark.parametrize(("arrow", "logical"), CASES, ids=[c[1] for c in CASES])
def test_logical_types_round_trip(arrow: pa.DataType, logical: str) -> None:
    assert arrow_type_to_logical(arrow) == logical
    assert logical_to_arrow_type(logical) == arrow


def test_nested_field_ids_are_preorder() -> None:
    schema = pa.schema(
        [
            pa.field("a", pa.int32(), nullable=False),
            pa.field("l", pa.list_(pa.struct([("x", pa.string()), ("y", pa.int64())]))),
            pa.field("v", pa.list_(pa.float32(), 4)),
        ],
        metadata={"k": "v"},
    )
    lance = fields_from_arrow(schema)
    flat = [(f.id, f.parent_id, f.name, f.logical_type) for f in lance.flat()]
    assert flat == [
        (0, -1, "a", "int32"),
        (1, -1, "l", "list.struct"),
        (2, 1, "item", "struct"),
        (3, 2, "x", "string"),
        (4, 2, "y", "int64"),
        (5, -1, "v", "fixed_size_list:float:4"),
    ]
    assert lance.to_arrow() == schema
    assert lance.to_arrow().metadata == {b"k": b"v"}
    rebuilt = LanceSchema.from_flat(
        [LanceField(f.id, f.parent_id, f.name, f.logical_type, f.nullable) for f in lance.flat()]
    )
    assert rebuilt.to_arrow().remove_metadata() == schema.remove_metadata()


def test_unsupported_and_malformed() -> None:
    with pytest.raises(NotSupportedError):
        fields_from_arrow(pa.schema([pa.field("m", pa.map_(pa.string(), pa.int32()))]))
    with pytest.raises(ValueError, match="unknown logical type"):
        logical_to_arrow_type("int128")
    with pytest.raises(ValueError, match="time unit"):
        logical_to_arrow_type("time32:us")


def test_from_flat_rejects_orphans_and_duplicates() -> None:
    with pytest.raises(CorruptFileError, match="unknown parent"):
        LanceSchema.from_flat([LanceField(1, 7, "x", "int32")])
    with pytest.raises(CorruptFileError, match="duplicate"):
        LanceSchema.from_flat([LanceField(0, -1, "x", "int32"), LanceField(0, -1, "y", "int32")])
