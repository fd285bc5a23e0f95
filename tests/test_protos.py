"""Generated protobuf code is current, and our messages are wire-compatible with Lance's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lance_format._proto import encodings_v2_0_pb2, file_pb2, rowids_pb2, table_pb2

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_is_up_to_date() -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools (test extra) regenerates the code")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_row_id_sequence_bytes_match_pylance() -> None:
    # Bytes pylance 14.0.2 wrote for a fragment holding row ids 100..149.
    raw = bytes.fromhex("0a070a050864109601")
    seq = rowids_pb2.RowIdSequence.FromString(raw)
    assert seq.segments[0].WhichOneof("segment") == "range"
    assert (seq.segments[0].range.start, seq.segments[0].range.end) == (100, 150)
    assert seq.SerializeToString() == raw


def test_version_sequence_bytes_match_pylance() -> None:
    raw = bytes.fromhex("0a080a040a0210641001")
    seq = rowids_pb2.RowDatasetVersionSequence.FromString(raw)
    run = seq.runs[0]
    assert (run.span.range.start, run.span.range.end, run.version) == (0, 100, 1)
    assert seq.SerializeToString() == raw


def test_presence_of_optional_and_empty_submessages() -> None:
    # pylance writes max_fragment_id even when 0 and needs `buffer {}` present in Flat.
    m = table_pb2.Manifest(max_fragment_id=0)
    assert m.HasField("max_fragment_id")
    assert table_pb2.Manifest.FromString(m.SerializeToString()).HasField("max_fragment_id")
    flat = encodings_v2_0_pb2.Flat(bits_per_value=32)
    flat.buffer.SetInParent()
    assert encodings_v2_0_pb2.Flat.FromString(flat.SerializeToString()).HasField("buffer")


def test_field_parent_id_minus_one_is_a_ten_byte_varint() -> None:
    f = file_pb2.Field(name="a", id=0, parent_id=-1, logical_type="int32")
    raw = f.SerializeToString()
    assert bytes.fromhex("20ffffffffffffffffff01") in raw  # field 4, varint of -1 as 64-bit
