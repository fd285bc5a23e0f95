"""Manifest container, serde, naming and feature flags (no data files needed)."""

from __future__ import annotations

import struct
from dataclasses import replace

import pyarrow as pa
import pytest

from lance_format.core.errors import CorruptFileError, NotFoundError, NotSupportedError
from lance_format.core.types import fields_from_arrow
from lance_format.io.store import MemoryStore
from lance_format.table import _serde
from lance_format.table.flags import check_reader_flags, check_writer_flags, compute_flags
from lance_format.table.manifest_file import decode_manifest_file, encode_manifest_file, read_manifest
from lance_format.table.model import (
    Append,
    Clone,
    DataFile,
    DataFragment,
    DataStorageFormat,
    Delete,
    DeletionFile,
    DeletionFileType,
    Manifest,
    Operation,
    Overwrite,
    Transaction,
    WriterVersion,
)
from lance_format.table.naming import (
    ManifestNaming,
    data_file_name,
    list_versions,
    manifest_key,
    parse_manifest_name,
)
from lance_format.table.versions import load_manifest

SCHEMA = fields_from_arrow(
    pa.schema([pa.field("a", pa.int32(), False), pa.field("l", pa.list_(pa.string()))]),
)


def _frag(fid: int, rows: int = 10, deletion: DeletionFile | None = None) -> DataFragment:
    return DataFragment(fid, (DataFile(f"f{fid}.lance", (0, 1, 2), (0, 1, 2), 2, 0, 123),), rows, deletion)


def _manifest(**kw: object) -> Manifest:
    base = Manifest(
        schema=SCHEMA,
        fragments=(_frag(0), _frag(1, 5, DeletionFile(DeletionFileType.BITMAP, 2, 77, 3))),
        version=3,
        data_format=DataStorageFormat("lance", "2.0"),
        writer_version=WriterVersion("lance", "14.0.2"),
        timestamp_ns=1_700_000_000_123_456_789,
        reader_feature_flags=1,
        writer_feature_flags=1,
        max_fragment_id=1,
        transaction_file="2-abc.txn",
        config={"k": "v"},
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_manifest_roundtrip_all_fields() -> None:
    m = _manifest(next_row_id=7, table_metadata={"x": "y"}, branch="b")
    txn = Transaction(2, "abc", Append((_frag(9),)), properties={"p": "q"})
    data = encode_manifest_file(m, txn)
    pos, back = decode_manifest_file(data, "m")
    assert back == replace(m, transaction_section=0)
    assert data[-4:] == b"LANC"
    assert struct.unpack_from("<QHH", data, len(data) - 16) == (pos, 0, 2)
    # The manifest message ends exactly at the footer.
    (length,) = struct.unpack_from("<I", data, pos)
    assert pos + 4 + length == len(data) - 16
    (tlen,) = struct.unpack_from("<I", data, 0)
    assert _serde.transaction_from_bytes(data[4 : 4 + tlen], "t") == txn


def test_index_section_goes_first() -> None:
    m = _manifest()
    data = encode_manifest_file(m, Transaction(2, "u", Append(())), index_section=b"\x0a\x00")
    _, back = decode_manifest_file(data, "m")
    assert back.index_section == 0
    assert back.transaction_section == 6


def test_transaction_ops_roundtrip() -> None:
    ops: list[Operation] = [
        Append((_frag(0),)),
        Delete((_frag(1, 5, DeletionFile(DeletionFileType.ARROW_ARRAY, 1, 2, 1)),), (3, 4), "a > 1"),
        Overwrite((_frag(0),), SCHEMA, {"c": "d"}),
        Clone(True, None, 3, "s3://bucket/src.lance"),
        Clone(False, "tagged", 7, "/data/src.lance", "dev"),
    ]
    for op in ops:
        t = Transaction(5, "u-u-i-d", op, "tag", {"a": "b"})
        assert _serde.transaction_from_bytes(_serde.transaction_to_bytes(t), "t") == t


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d[:-4] + b"LANX", "magic"),
        (lambda d: d[:-16] + struct.pack("<QHH", 999_999, 0, 2) + b"LANC", "outside"),
        (lambda d: d[:10] + b"\x00" + d[10:], "footer"),
        (lambda d: d[-12:], "too small"),
    ],
)
def test_corrupt_manifest(mutate: object, needle: str) -> None:
    data = encode_manifest_file(_manifest(), None)
    bad = mutate(data)  # type: ignore[operator]
    with pytest.raises(CorruptFileError, match=needle):
        decode_manifest_file(bad, "m")


def test_garbage_manifest_body_is_corrupt() -> None:
    body = b"\xff\xff\xff"
    data = struct.pack("<I", len(body)) + body + struct.pack("<QHH", 0, 0, 2) + b"LANC"
    with pytest.raises(CorruptFileError):
        decode_manifest_file(data, "m")


def test_naming() -> None:
    assert manifest_key(1) == "_versions/18446744073709551614.manifest"
    assert manifest_key(2, ManifestNaming.V1) == "_versions/2.manifest"
    assert parse_manifest_name("18446744073709551613.manifest") == (2, ManifestNaming.V2)
    assert parse_manifest_name("12.manifest") == (12, ManifestNaming.V1)
    for ignored in (
        "d123.manifest",
        "latest_version_hint.json",
        ".tmp-x",
        "3.manifest-uuid",
        "_latest.manifest",
    ):
        assert parse_manifest_name(ignored) is None
    name = data_file_name()
    assert len(name) == 56
    assert name.endswith(".lance")
    assert set(name[:24]) <= {"0", "1"}
    int(name[24:50], 16)


def test_mixed_naming_refused_and_latest_found() -> None:
    store = MemoryStore(f"naming-{id(object())}")
    for v in (1, 2, 3):
        store.write(manifest_key(v), encode_manifest_file(_manifest(version=v), None))
    found, naming = list_versions(store)
    assert sorted(found) == [1, 2, 3]
    assert naming is ManifestNaming.V2
    assert load_manifest(store)[0].version == 3
    assert read_manifest(store, manifest_key(2)).version == 2
    with pytest.raises(NotFoundError):
        load_manifest(store, 9)
    store.write(manifest_key(4, ManifestNaming.V1), encode_manifest_file(_manifest(version=4), None))
    with pytest.raises(CorruptFileError, match="naming schemes"):
        load_manifest(store)


def test_missing_dataset() -> None:
    with pytest.raises(NotFoundError):
        load_manifest(MemoryStore(f"empty-{id(object())}"))


def test_feature_flags() -> None:
    m = _manifest(reader_feature_flags=1 | 2 | 8, writer_feature_flags=1 | 8)
    check_reader_flags(m, "x")
    check_writer_flags(m, "x")
    with pytest.raises(NotSupportedError, match="unknown flag 1024"):
        check_reader_flags(replace(m, reader_feature_flags=1024), "x")
    with pytest.raises(NotSupportedError, match="overlay"):
        check_reader_flags(replace(m, reader_feature_flags=64), "x")
    with pytest.raises(NotSupportedError):
        check_writer_flags(replace(m, writer_feature_flags=512), "x")
    assert compute_flags(m) == (1 | 2, 1 | 2 | 8)  # stable row ids stay on
    plain = replace(m, fragments=(_frag(0),), config={}, reader_feature_flags=0)
    assert compute_flags(plain) == (0, 0)
