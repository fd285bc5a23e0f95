"""The generated protobuf code is current, and our messages are wire-compatible with Lance's.

The byte strings below were written by hand from the protobuf wire format or copied from files
pylance 14.0.2 wrote (see reference/lance-format.md); none of these tests needs pylance, except
the last one, which decodes a fresh pylance dataset and looks for fields we do not model.
"""

from __future__ import annotations

import importlib.util
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from lance_format._proto import (
    encodings_v2_0_pb2,
    encodings_v2_1_pb2,
    file2_pb2,
    file_pb2,
    rowids_pb2,
    table_pb2,
    transaction_pb2,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(
    importlib.util.find_spec("grpc_tools") is None,
    reason="grpcio-tools (test extra) is not installed, so the code cannot be regenerated to compare",
)
def test_generated_code_is_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("message", "type_url"),
    [
        (encodings_v2_0_pb2.ArrayEncoding(), "/lance.encodings.ArrayEncoding"),
        (encodings_v2_0_pb2.ColumnEncoding(), "/lance.encodings.ColumnEncoding"),
        (encodings_v2_1_pb2.PageLayout(), "/lance.encodings21.PageLayout"),
        (table_pb2.Manifest(), "/lance.table.Manifest"),
        (transaction_pb2.Transaction(), "/lance.table.Transaction"),
        (rowids_pb2.RowIdSequence(), "/lance.table.RowIdSequence"),
        (file_pb2.Field(), "/lance.file.Field"),
        (file2_pb2.ColumnMetadata(), "/lance.file.v2.ColumnMetadata"),
    ],
)
def test_package_names_give_lances_type_urls(message: Message, type_url: str) -> None:
    packed = any_pb2.Any()
    packed.Pack(message, type_url_prefix="")  # pylance writes "/" + full name, no domain
    assert packed.type_url == type_url


def test_row_id_sequence_bytes_match_pylance() -> None:
    raw = bytes.fromhex("0a070a050864109601")  # pylance 14.0.2: row ids 100..149
    seq = rowids_pb2.RowIdSequence.FromString(raw)
    assert len(seq.segments) == 1
    assert seq.segments[0].WhichOneof("segment") == "range"
    assert (seq.segments[0].range.start, seq.segments[0].range.end) == (100, 150)
    rebuilt = rowids_pb2.RowIdSequence(
        segments=[rowids_pb2.U64Segment(range=rowids_pb2.U64Segment.Range(start=100, end=150))]
    )
    assert rebuilt.SerializeToString() == raw


def test_version_sequence_bytes_match_pylance() -> None:
    raw = bytes.fromhex("0a080a040a0210641001")  # pylance 14.0.2: rows 0..99 created at version 1
    seq = rowids_pb2.RowDatasetVersionSequence.FromString(raw)
    assert len(seq.runs) == 1
    run = seq.runs[0]
    assert run.span.WhichOneof("segment") == "range"
    assert (run.span.range.start, run.span.range.end, run.version) == (0, 100, 1)
    rebuilt = rowids_pb2.RowDatasetVersionSequence(
        runs=[
            rowids_pb2.RowDatasetVersionRun(
                span=rowids_pb2.U64Segment(range=rowids_pb2.U64Segment.Range(end=100)), version=1
            )
        ]
    )
    assert rebuilt.SerializeToString() == raw


def test_field_bytes() -> None:
    field = file_pb2.Field(
        name="a", id=0, parent_id=-1, logical_type="int32", nullable=True, encoding=file_pb2.PLAIN
    )
    raw = bytes.fromhex("12 01 61  20 ff ff ff ff ff ff ff ff ff 01  2a 05 696e743332  30 01  38 01")
    assert field.SerializeToString() == raw  # parent_id -1 is a ten-byte varint; id 0 is omitted
    back = file_pb2.Field.FromString(raw)
    assert (back.name, back.parent_id, back.encoding) == ("a", -1, file_pb2.PLAIN)
    clustering = file_pb2.Field.FromString(bytes.fromhex("78 02"))  # pylance 14: key position 2
    assert clustering.unenforced_clustering_key_position == 2


def test_manifest_optional_fields_keep_presence() -> None:
    # pylance 14 writes max_fragment_id (11) and the inline transaction position (23) even when 0.
    manifest = table_pb2.Manifest(max_fragment_id=0, transaction_section=0)
    raw = manifest.SerializeToString()
    assert raw == bytes.fromhex("58 00  b8 01 00")
    back = table_pb2.Manifest.FromString(raw)
    assert back.HasField("max_fragment_id")
    assert back.HasField("transaction_section")
    assert not back.HasField("transaction_section_deprecated")
    assert not back.HasField("index_section")
    older = table_pb2.Manifest.FromString(bytes.fromhex("a8 01 96 01"))  # older writers: field 21 = 150
    assert older.transaction_section_deprecated == 150


def test_nullable_flat_page_encoding_bytes() -> None:
    # nullable { no_nulls { values { flat { bits_per_value: 32, buffer {} } } } }: the empty buffer
    # must be on the wire (pylance panics without it).
    flat = encodings_v2_0_pb2.Flat(bits_per_value=32)
    flat.buffer.SetInParent()
    enc = encodings_v2_0_pb2.ArrayEncoding(
        nullable=encodings_v2_0_pb2.Nullable(
            no_nulls=encodings_v2_0_pb2.Nullable.NoNull(values=encodings_v2_0_pb2.ArrayEncoding(flat=flat))
        )
    )
    raw = bytes.fromhex("12 0a  0a 08  0a 06  0a 04  08 20  12 00")
    assert enc.SerializeToString() == raw
    back = encodings_v2_0_pb2.ArrayEncoding.FromString(raw)
    assert back.nullable.no_nulls.values.flat.HasField("buffer")


def test_all_null_layout_bytes_parse_as_constant_layout() -> None:
    # Lance 2.1's all_null_layout { layers: [NULLABLE_ITEM] } is field 2 with layers = 5.
    layout = encodings_v2_1_pb2.PageLayout.FromString(bytes.fromhex("12 03  2a 01 03"))
    assert layout.WhichOneof("layout") == "constant_layout"
    assert list(layout.constant_layout.layers) == [encodings_v2_1_pb2.REPDEF_NULLABLE_ITEM]
    assert not layout.constant_layout.HasField("inline_value")


def test_transaction_fields_pylance_14_adds() -> None:
    merge = transaction_pb2.Transaction.FromString(bytes.fromhex("ca 06 02  20 01"))  # merge (105)
    assert merge.WhichOneof("operation") == "merge"
    assert merge.merge.preserves_nullability
    project = transaction_pb2.Transaction.FromString(bytes.fromhex("ea 06 02  10 01"))  # project (109)
    assert project.project.preserves_nullability
    # update (108) { inserted_rows { field_ids: [0], bloom { num_bits: 64, number_of_items: 8 } } }
    update = transaction_pb2.Transaction.FromString(
        bytes.fromhex("e2 06 0b  42 09  0a 01 00  1a 04 10 40 18 08")
    )
    bloom = update.update.inserted_rows
    assert list(bloom.field_ids) == [0]
    assert (bloom.bloom.num_bits, bloom.bloom.number_of_items) == (64, 8)


# -- decode what pylance writes and look for fields our protos do not declare -------------------


def _unknown_fields(message: Message, path: str = "") -> Iterator[str]:
    """Yield ``Message.number`` for every unknown field in ``message`` and its sub-messages."""
    name = message.DESCRIPTOR.full_name
    unknown = UnknownFieldSet(message)
    for i in range(len(unknown)):
        yield f"{path}{name}.{unknown[i].field_number}"
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            if descriptor.name == "inline_row_ids":
                yield from _unknown_fields(rowids_pb2.RowIdSequence.FromString(value), path)
            elif descriptor.name.startswith("inline_") and descriptor.name.endswith("_versions"):
                yield from _unknown_fields(rowids_pb2.RowDatasetVersionSequence.FromString(value), path)
            elif descriptor.full_name == "lance.file.v2.DirectEncoding.encoding":
                yield from _unknown_fields(_unpack(any_pb2.Any.FromString(value)), path)
            continue
        if descriptor.message_type.GetOptions().map_entry:
            has_message_values = descriptor.message_type.fields_by_name["value"].message_type is not None
            children = list(value.values()) if has_message_values else []
        elif descriptor.is_repeated:
            children = list(value)
        else:
            children = [value]
        for child in children:
            yield from _unknown_fields(child, path)


_ENCODINGS: dict[str, type[Message]] = {
    "lance.encodings.ArrayEncoding": encodings_v2_0_pb2.ArrayEncoding,
    "lance.encodings.ColumnEncoding": encodings_v2_0_pb2.ColumnEncoding,
    "lance.encodings21.PageLayout": encodings_v2_1_pb2.PageLayout,
}


def _unpack(packed: any_pb2.Any) -> Message:
    cls = _ENCODINGS.get(packed.type_url.rsplit("/", 1)[-1])
    return cls.FromString(packed.value) if cls is not None else any_pb2.Any()


def _section(data: bytes, position: int) -> bytes:
    (length,) = struct.unpack_from("<I", data, position)
    return data[position + 4 : position + 4 + length]


def _decode_dataset(root: Path) -> Iterator[tuple[str, Message]]:
    """Every metadata message of a dataset: manifests, index sections, transactions, file metadata."""
    for path in sorted(root.rglob("*")):
        data = path.read_bytes() if path.is_file() else b""
        if path.suffix == ".manifest":
            (position,) = struct.unpack_from("<Q", data, len(data) - 16)
            manifest = table_pb2.Manifest.FromString(_section(data, position))
            yield path.name, manifest
            if manifest.HasField("index_section"):
                yield path.name, table_pb2.IndexSection.FromString(_section(data, manifest.index_section))
        elif path.suffix == ".txn":
            yield path.name, transaction_pb2.Transaction.FromString(data)
        elif path.suffix == ".lance" and path.parent.name == "data":
            _, cmo, gbo, _, columns = struct.unpack_from("<QQQII", data, len(data) - 40)
            for i in range(columns):
                start, size = struct.unpack_from("<QQ", data, cmo + 16 * i)
                yield path.name, file2_pb2.ColumnMetadata.FromString(data[start : start + size])
            start, size = struct.unpack_from("<QQ", data, gbo)
            yield path.name, file_pb2.FileDescriptor.FromString(data[start : start + size])


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_pylance_metadata_has_no_unknown_fields(tmp_path: Path, version: str) -> None:
    lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")
    key = {"lance-schema:unenforced-primary-key": "true"}
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False, metadata=key),
            pa.field("s", pa.string()),
            pa.field("l", pa.list_(pa.int32())),
            pa.field("st", pa.struct([("a", pa.int32()), ("b", pa.float64())])),
            pa.field("v", pa.list_(pa.float32(), 4)),
        ]
    )

    def rows(ids: range) -> pa.Table:
        return pa.table(
            {
                "id": list(ids),
                "s": [None if i % 7 == 0 else f"s{i % 13}" for i in ids],
                "l": [None if i % 5 == 0 else list(range(i % 3)) for i in ids],
                "st": [{"a": i, "b": i / 2} for i in ids],
                "v": [[float(i)] * 4 for i in ids],
            },
            schema=schema,
        )

    uri = str(tmp_path / "ds")
    lance.write_dataset(rows(range(300)), uri, data_storage_version=version, enable_stable_row_ids=True)
    ds = lance.dataset(uri)
    ds.delete("id < 10")
    upsert = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    upsert.execute(rows(range(250, 350)))  # Update.inserted_rows
    ds.create_scalar_index("id", "BTREE")  # IndexMetadata.files
    ds.add_columns({"extra": "s"})  # Merge.preserves_nullability (a nullable new column)
    ds.drop_columns(["extra"])  # Project.preserves_nullability
    ds.optimize.compact_files()  # Rewrite.rewritten_indices[].new_index_files

    messages = list(_decode_dataset(tmp_path / "ds"))
    assert [u for name, message in messages for u in _unknown_fields(message, f"{name}: ")] == []
    # The pylance 14 additions were really exercised (so the check above means something).
    manifests = [m for _, m in messages if isinstance(m, table_pb2.Manifest)]
    txns = [m for _, m in messages if isinstance(m, transaction_pb2.Transaction)]
    indices = [i for _, m in messages if isinstance(m, table_pb2.IndexSection) for i in m.indices]
    assert all(m.HasField("transaction_section") for m in manifests)
    assert all(len(i.files) > 0 for i in indices)
    assert any(t.update.HasField("inserted_rows") for t in txns)
    assert any(t.merge.preserves_nullability for t in txns)
    assert any(t.project.preserves_nullability for t in txns)
    assert any(r.new_index_files for t in txns for r in t.rewrite.rewritten_indices)
