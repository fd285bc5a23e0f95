"""Issue 15 defects 2-12, each checked against pylance 14 (the oracle), both directions, cell by cell."""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format._proto import rowids_pb2
from lance_format.core.errors import InvalidInputError, NotSupportedError
from lance_format.table.rowids import decode_row_ids

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop

VERSIONS = ["2.0", "2.1", "2.2"]


def _same(ours: pa.Table, theirs: pa.Table) -> None:
    assert ours.schema.names == theirs.schema.names
    for name in ours.schema.names:
        assert ours[name].type == theirs[name].type, name
        assert ours[name].to_pylist() == theirs[name].to_pylist(), name


# -- defect 2: dictionary columns of non-string values ------------------------------------------------


def _dict_table() -> pa.Table:
    def d(values: list[Any], typ: pa.DataType, index: pa.DataType | None = None) -> pa.Array:
        key = index or pa.int32()
        return pa.array(values * 60, typ).dictionary_encode().cast(pa.dictionary(key, typ))

    return pa.table(
        {
            "i32": d([1, 2, 3, None, 5], pa.int32()),
            "i64_i8": d([10, None, 30, 10, 20], pa.int64(), pa.int8()),
            "u8": d([1, 2, None, 1, 3], pa.uint8()),
            "f64": d([1.5, None, 2.5, 1.5, -0.0], pa.float64(), pa.int16()),
            "f16": d([1.0, 2.0, None, 1.0, 2.0], pa.float16()),
            "b": d([True, False, None, True, True], pa.bool_()),
            "s": d(["a", "b", None, "a", "c"], pa.string()),
            "st": pa.StructArray.from_arrays(
                [d([7, 8, 9, None, 7], pa.int32())],
                names=["x"],
                mask=pa.array([False, False, True, False, False] * 60),
            ),
        }
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_reads_our_non_string_dictionaries(tmp_path: Path, version: str) -> None:
    t = _dict_table()
    if version == "2.0":
        t = t.drop_columns(["st"])  # 2.0 has no struct validity (pylance refuses it too)
    lance_format.write_dataset(t, tmp_path, data_storage_version=version)
    _same(lance.dataset(tmp_path).to_table(), t)
    _same(lance_format.dataset(tmp_path).to_table(), t)


@pytest.mark.parametrize("version", VERSIONS)
def test_we_read_pylance_non_string_dictionaries(tmp_path: Path, version: str) -> None:
    t = _dict_table()
    if version == "2.0":
        t = t.drop_columns(["st"])
    lance.write_dataset(t, tmp_path, data_storage_version=version)
    _same(lance_format.dataset(tmp_path).to_table(), lance.dataset(tmp_path).to_table())


@pytest.mark.parametrize("typ", [pa.timestamp("us"), pa.date32(), pa.decimal128(20, 2), pa.binary(4)])
def test_dictionaries_pylance_cannot_store_are_refused(tmp_path: Path, typ: pa.DataType) -> None:
    # pylance refuses these ("the logical type ... does not parse back"); we must not write files it
    # cannot open.
    t = pa.table({"d": pa.array([None], typ).dictionary_encode()})
    with pytest.raises(OSError, match="does not parse back"):
        lance.write_dataset(t, tmp_path / "theirs")
    with pytest.raises(NotSupportedError, match="dictionary"):
        lance_format.write_dataset(t, tmp_path / "ours")


# -- defect 3: stable row-id sequences of every segment kind -------------------------------------------


def _segment_kinds(ds: Any) -> set[str]:
    kinds = set()
    for f in ds.get_fragments():
        meta = f.metadata.to_json()["row_id_meta"]
        seq = rowids_pb2.RowIdSequence()
        seq.ParseFromString(bytes(meta["Inline"]))
        kinds |= {s.WhichOneof("segment") for s in seq.segments}
    return kinds


@pytest.mark.parametrize(
    ("predicate", "kind"), [("a % 11 = 3", "range_with_bitmap"), ("a = 5 OR a = 1700", "range_with_holes")]
)
def test_we_read_pylance_row_ids_after_delete_and_compact(tmp_path: Path, predicate: str, kind: str) -> None:
    t = pa.table({"a": np.arange(3000, dtype=np.int64)})
    lance.write_dataset(t, tmp_path, enable_stable_row_ids=True, max_rows_per_file=1000)
    theirs = lance.dataset(tmp_path)
    theirs.delete(predicate)
    theirs.optimize.compact_files()
    theirs = lance.dataset(tmp_path)
    assert kind in _segment_kinds(theirs)
    ours = lance_format.dataset(tmp_path)
    _same(ours.to_table(with_row_id=True), theirs.to_table(with_row_id=True))
    ids = theirs.to_table(with_row_id=True)["_rowid"].to_pylist()[::97]
    _same(ours.take_rows(ids), theirs._take_rows(ids))


@pytest.mark.parametrize(
    ("predicate", "kind"),
    [
        ("a % 11 = 3", "range_with_bitmap"),
        ("a = 5 OR a = 1700", "range_with_holes"),
        ("a % 500 <> 7", "sorted_array"),
        ("a < 1500", "range"),
    ],
)
def test_pylance_reads_our_row_ids_after_delete_and_compact(
    tmp_path: Path, predicate: str, kind: str
) -> None:
    t = pa.table({"a": np.arange(3000, dtype=np.int64)})
    ours = lance_format.write_dataset(t, tmp_path, enable_stable_row_ids=True, max_rows_per_file=1000)
    ours.delete(predicate)
    ours.optimize.compact_files()
    ours = lance_format.dataset(tmp_path)
    theirs = lance.dataset(tmp_path)
    assert kind in _segment_kinds(theirs)
    _same(theirs.to_table(with_row_id=True), ours.to_table(with_row_id=True))
    ids = ours.to_table(with_row_id=True)["_rowid"].to_pylist()[::7]
    _same(theirs._take_rows(ids), ours.take_rows(ids))


@pytest.mark.parametrize(
    ("ids", "kind"),
    [
        (np.arange(5, 50), "range"),
        (np.delete(np.arange(1000), [3, 500]), "range_with_holes"),
        (np.arange(3000)[np.arange(3000) % 11 != 3], "range_with_bitmap"),
        (np.arange(0, 10**6, 977), "sorted_array"),
        (np.array([1, 2**40]), "sorted_array"),
        (np.array([9, 3, 7, 100000]), "array"),
        (np.array([2**40, 1]), "array"),
        (np.array([], dtype=np.uint64), "array"),
    ],
)
def test_row_id_sequences_are_written_compactly(ids: np.ndarray, kind: str) -> None:
    from lance_format.table.rowids import encode_row_ids

    data = encode_row_ids(ids.astype(np.uint64))
    seq = rowids_pb2.RowIdSequence()
    seq.ParseFromString(data)
    assert [s.WhichOneof("segment") for s in seq.segments] == [kind]
    assert decode_row_ids(data, "test").tolist() == ids.tolist()


def _u64(values: list[int]) -> rowids_pb2.EncodedU64Array:
    a = rowids_pb2.EncodedU64Array()
    a.u64_array.values = np.array(values, "<u8").tobytes()
    return a


def test_every_segment_kind_decodes() -> None:
    seq = rowids_pb2.RowIdSequence()
    rng = seq.segments.add().range
    rng.start, rng.end = 3, 6
    holes = seq.segments.add().range_with_holes
    holes.start, holes.end = 10, 16
    holes.holes.u16_array.base = 10
    holes.holes.u16_array.offsets = np.array([1, 4], "<u2").tobytes()
    bm = seq.segments.add().range_with_bitmap
    bm.start, bm.end = 20, 30
    # Ids 20, 21, 23 and 28 present; bit i of the range is bit i % 8 of byte i // 8 (LSB first).
    bm.bitmap = bytes([0b0000_1011, 0b0000_0001])
    seq.segments.add().sorted_array.CopyFrom(_u64([40, 44]))
    arr = seq.segments.add().array
    arr.u32_array.base = 100
    arr.u32_array.offsets = np.array([9, 0, 5], "<u4").tobytes()
    got = decode_row_ids(seq.SerializeToString(), "test").tolist()
    assert got == [3, 4, 5, 10, 12, 13, 15, 20, 21, 23, 28, 40, 44, 109, 100, 105]


# -- defect 6: "legacy" storage version ----------------------------------------------------------------


@pytest.mark.parametrize("version", ["legacy", "0.1", "LEGACY"])
def test_legacy_storage_version_is_refused(tmp_path: Path, version: str) -> None:
    with pytest.raises(NotSupportedError, match="not supported"):
        lance_format.write_dataset(pa.table({"a": [1]}), tmp_path, data_storage_version=version)
    assert not (tmp_path / "data").exists()  # refused before any file is written


# -- defect 8: commit message property ------------------------------------------------------------------


def test_commit_message_is_stored_where_pylance_stores_it(tmp_path: Path) -> None:
    lance_format.write_dataset(pa.table({"a": [1]}), tmp_path, commit_message="ours")
    lance.write_dataset(pa.table({"a": [2]}), tmp_path, mode="append", commit_message="theirs")
    props = lance.dataset(tmp_path).read_transaction(1).transaction_properties
    assert props == {"__lance_commit_message": "ours"}
    ours = lance_format.dataset(tmp_path)
    assert ours.read_transaction(1).properties == {"__lance_commit_message": "ours"}
    assert ours.read_transaction(1).commit_message == "ours"
    assert ours.read_transaction(2).commit_message == "theirs"


def test_commit_message_of_older_versions_is_still_read() -> None:
    from lance_format.table.model import Append, Transaction

    old = Transaction(0, "u", Append(()), properties={"lance.commit.message": "before issue 15"})
    assert old.commit_message == "before issue 15"


# -- defect 9: ~ in URIs ---------------------------------------------------------------------------------


def test_tilde_expands_to_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    t = pa.table({"a": [1, 2]})
    lance_format.write_dataset(t, "~/ours")
    lance.write_dataset(t, "~/theirs")
    assert sorted(os.listdir(home)) == ["ours", "theirs"]
    assert os.listdir(cwd) == []
    _same(lance_format.dataset("~/theirs").to_table(), t)
    _same(lance.dataset(str(home / "ours")).to_table(), t)


# -- defect 10: non-UTF-8 metadata -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        pa.schema([pa.field("a", pa.int64())], metadata={b"k": b"\xff\xfe"}),
        pa.schema([pa.field("a", pa.int64())], metadata={b"\xff": b"v"}),
        pa.schema([pa.field("a", pa.int64(), metadata={b"k": b"\xff"})]),
        pa.schema([pa.field("s", pa.struct([pa.field("x", pa.int64(), metadata={b"\xfe": b"v"})]))]),
    ],
    ids=["schema-value", "schema-key", "field-value", "nested-field-key"],
)
def test_non_utf8_metadata_is_refused_like_pylance(tmp_path: Path, schema: pa.Schema) -> None:
    t = pa.table([pa.nulls(1, f.type) for f in schema], schema=schema)
    with pytest.raises(ValueError, match="utf"):
        lance.write_dataset(t, tmp_path / "theirs")
    with pytest.raises(InvalidInputError, match="UTF-8"):
        lance_format.write_dataset(t, tmp_path / "ours")
    assert not (tmp_path / "ours" / "_versions").exists()


def test_utf8_metadata_round_trips(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("a", pa.int64(), metadata={"ключ": "значение"})], metadata={"k": "ü"})
    t = pa.table({"a": [1]}, schema=schema)
    lance_format.write_dataset(t, tmp_path)
    assert lance.dataset(tmp_path).schema.metadata == {b"k": "ü".encode()}
    assert lance.dataset(tmp_path).schema.field("a").metadata == {"ключ".encode(): "значение".encode()}


# -- defect 11: cleanup_old_versions signature, tags and CleanupStats ------------------------------------


def _versions_twins(tmp_path: Path, n: int = 5, tag: int | None = None) -> tuple[str, str]:
    """Two identical pylance datasets of ``n`` overwrite versions: one for pylance, one for us."""
    uris = []
    for name in ("theirs", "ours"):
        uri = str(tmp_path / name)
        for i in range(n):
            lance.write_dataset(pa.table({"a": [i]}), uri, mode="overwrite" if i else "create")
        if tag is not None:
            lance.dataset(uri).tags.create("t", tag)
        uris.append(uri)
    return uris[0], uris[1]


def _version_list(uri: str) -> list[int]:
    return [v["version"] for v in lance.dataset(uri).versions()]


def test_cleanup_refuses_tagged_old_versions_by_default(tmp_path: Path) -> None:
    theirs, ours = _versions_twins(tmp_path, tag=2)
    with pytest.raises(OSError, match="tagged version"):
        lance.dataset(theirs).cleanup_old_versions(older_than=datetime.timedelta(0))
    with pytest.raises(InvalidInputError, match="tagged version"):
        lance_format.dataset(ours).cleanup_old_versions(older_than=datetime.timedelta(0))
    assert _version_list(ours) == _version_list(theirs) == [1, 2, 3, 4, 5]
    # A tag the policy does not reach is no error.
    lance.dataset(theirs).cleanup_old_versions(retain_versions=4)
    lance_format.dataset(ours).cleanup_old_versions(retain_versions=4)
    assert _version_list(ours) == _version_list(theirs) == [2, 3, 4, 5]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"older_than": datetime.timedelta(0), "error_if_tagged_old_versions": False},
        {"retain_versions": 2, "error_if_tagged_old_versions": False},
        {"older_than": datetime.timedelta(days=1), "retain_versions": 1},
        {"older_than": datetime.timedelta(0), "retain_versions": 3, "error_if_tagged_old_versions": False},
        {},
    ],
)
def test_cleanup_matches_pylance(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    theirs, ours = _versions_twins(tmp_path, tag=2)
    expected = lance.dataset(theirs).cleanup_old_versions(**kwargs)
    got = lance_format.dataset(ours).cleanup_old_versions(**kwargs)
    assert _version_list(ours) == _version_list(theirs)
    fields = {"bytes_removed", "old_versions", "data_files_removed", "transaction_files_removed"}
    fields |= {"index_files_removed", "deletion_files_removed", "failed_deletes"}
    assert {f for f in dir(expected) if not f.startswith("_")} == fields
    for f in fields - {"bytes_removed"}:  # manifests differ in size between writers
        assert getattr(got, f) == getattr(expected, f), f
    assert (got.bytes_removed > 0) == (expected.bytes_removed > 0)
    assert len(os.listdir(Path(ours) / "data")) == len(os.listdir(Path(theirs) / "data")) > 0
    _same(lance.dataset(ours).to_table(), lance.dataset(theirs).to_table())


def test_cleanup_from_an_older_checkout_keeps_newer_versions(tmp_path: Path) -> None:
    theirs, ours = _versions_twins(tmp_path, n=4)
    lance.dataset(theirs, version=2).cleanup_old_versions(older_than=datetime.timedelta(0))
    lance_format.dataset(ours, version=2).cleanup_old_versions(older_than=datetime.timedelta(0))
    assert _version_list(ours) == _version_list(theirs) == [2, 3, 4]


@pytest.mark.parametrize("kwargs", [{"retain_versions": 0}, {"retain_versions": -1}, {"older_than": 5}])
def test_cleanup_bad_arguments(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    theirs, ours = _versions_twins(tmp_path, n=2)
    with pytest.raises((OSError, TypeError, OverflowError)):
        lance.dataset(theirs).cleanup_old_versions(**kwargs)
    with pytest.raises(InvalidInputError):
        lance_format.dataset(ours).cleanup_old_versions(**kwargs)


# -- defects 7 and 12: drop_columns removes orphaned data files; all-null add_columns writes none -------


def _files(uri: str) -> list[list[tuple[list[int], list[int]]]]:
    """Per fragment, ``(fields, column_indices)`` of each data file, as pylance reads the manifest."""
    frags = lance.dataset(uri).get_fragments()
    return [[(d.fields, d.column_indices) for d in f.data_files()] for f in frags]


def _evolve_twins(tmp_path: Path, version: str, writer: Any) -> tuple[str, str]:
    uris = []
    for name in ("theirs", "ours"):
        uri = str(tmp_path / name)
        t = pa.table({"a": np.arange(5, dtype=np.int64), "b": [f"s{i}" for i in range(5)]})
        writer.write_dataset(t, uri, max_rows_per_file=3, data_storage_version=version)
        uris.append(uri)
    return uris[0], uris[1]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("writer", [lance, lance_format], ids=["pylance-written", "our-written"])
def test_drop_columns_drops_data_files_like_pylance(tmp_path: Path, version: str, writer: Any) -> None:
    theirs, ours = _evolve_twins(tmp_path, version, writer)
    lance.dataset(theirs).add_columns({"d": "a * 2", "e": "a + 1"})
    lance.dataset(ours).add_columns({"d": "a * 2", "e": "a + 1"})
    lance.dataset(theirs).drop_columns(["d"])
    lance_format.dataset(ours).drop_columns(["d"])
    assert _files(ours) == _files(theirs)  # the file holds e too: kept
    lance.dataset(theirs).drop_columns(["e", "b"])
    lance_format.dataset(ours).drop_columns(["e", "b"])
    assert _files(ours) == _files(theirs)
    assert all(len(files) == 1 for files in _files(ours))  # d/e's files are gone
    _same(lance.dataset(ours).to_table(), lance.dataset(theirs).to_table())
    _same(lance_format.dataset(ours).to_table(), lance.dataset(theirs).to_table())
    _same(lance_format.dataset(theirs).to_table(), lance.dataset(theirs).to_table())


NULL_COLUMNS = [
    pa.field("n", pa.int64()),
    [pa.field("m", pa.string()), pa.field("l", pa.list_(pa.int32()))],
    pa.schema([pa.field("s", pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())]))]),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("columns", NULL_COLUMNS, ids=["field", "fields", "schema"])
def test_add_all_null_columns_is_metadata_only(tmp_path: Path, version: str, columns: Any) -> None:
    theirs, ours = _evolve_twins(tmp_path, version, lance)
    before = sorted(os.listdir(Path(ours) / "data"))
    lance.dataset(theirs).add_columns(columns)
    lance_format.dataset(ours).add_columns(columns)
    assert sorted(os.listdir(Path(ours) / "data")) == before
    assert _files(ours) == _files(theirs)
    assert lance.dataset(ours).schema == lance.dataset(theirs).schema
    assert lance.dataset(ours).read_transaction(2).operation.__class__.__name__ == "Merge"
    expected = lance.dataset(theirs).to_table()
    _same(lance.dataset(ours).to_table(), expected)
    _same(lance_format.dataset(ours).to_table(), expected)
    _same(lance_format.dataset(theirs).to_table(), expected)
    # The next schema change numbers fields the same way on both sides.
    lance.dataset(theirs).add_columns({"z": "a + 1"})
    lance_format.dataset(ours).add_columns({"z": "a + 1"})
    assert _files(ours) == _files(theirs)
    _same(lance.dataset(ours).to_table(), lance.dataset(theirs).to_table())


@pytest.mark.parametrize(
    ("column", "message"),
    [(pa.field("a", pa.int64()), "already exists"), (pa.field("n", pa.int64(), nullable=False), "nullable")],
)
def test_add_null_columns_refuses_like_pylance(tmp_path: Path, column: pa.Field, message: str) -> None:
    theirs, ours = _evolve_twins(tmp_path, "2.2", lance)
    with pytest.raises(OSError, match=message):
        lance.dataset(theirs).add_columns(column)
    with pytest.raises(InvalidInputError, match=message):
        lance_format.dataset(ours).add_columns(column)


# -- defect 4: empty struct columns ------------------------------------------------------------------------


def _empty_struct_table(nested: bool = False) -> pa.Table:
    empty = pa.struct([])
    t = pa.table({"a": [1, 2, 3, 4], "e": pa.array([{}] * 4, empty)})
    if nested:
        inner = pa.array([{}] * 4, empty)
        t = t.append_column(
            "o", pa.StructArray.from_arrays([pa.array([1, 2, 3, 4]), inner], names=["x", "e"])
        )
    return t


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("writer", [lance, lance_format], ids=["pylance-written", "our-written"])
def test_empty_struct_columns_both_ways(tmp_path: Path, version: str, writer: Any) -> None:
    t = _empty_struct_table()
    writer.write_dataset(t, tmp_path, data_storage_version=version, max_rows_per_file=3)
    theirs, ours = lance.dataset(tmp_path), lance_format.dataset(tmp_path)
    _same(ours.to_table(), t)
    _same(theirs.to_table(), t)
    _same(ours.take([3, 0]), theirs.take([3, 0]))
    _same(ours.to_table(columns=["e"]), theirs.to_table(columns=["e"]))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("writer", [lance, lance_format], ids=["pylance-written", "our-written"])
def test_nested_empty_structs(tmp_path: Path, version: str, writer: Any) -> None:
    # pylance 14 panics reading a nested struct<> from 2.1+ files (its own too), so only we read.
    t = _empty_struct_table(nested=True)
    writer.write_dataset(t, tmp_path, data_storage_version=version, max_rows_per_file=3)
    _same(lance_format.dataset(tmp_path).to_table(), t)
    if version == "2.0":
        _same(lance.dataset(tmp_path).to_table(), t)


_NULL_EMPTY = pa.array([{}, None], pa.struct([]))
_LIST_EMPTY = pa.array([[{}], [], None, [{}, {}]], pa.list_(pa.struct([])))


@pytest.mark.parametrize(
    ("version", "column"),
    [(v, _NULL_EMPTY) for v in VERSIONS] + [("2.1", _LIST_EMPTY), ("2.2", _LIST_EMPTY)],
    ids=["null-2.0", "null-2.1", "null-2.2", "in-list-2.1", "in-list-2.2"],
)
def test_empty_structs_pylance_refuses_are_refused(tmp_path: Path, version: str, column: pa.Array) -> None:
    t = pa.table({"e": column})
    with pytest.raises(OSError, match=r"does not encode|not yet supported"):
        lance.write_dataset(t, tmp_path / "theirs", data_storage_version=version)
    with pytest.raises((InvalidInputError, NotSupportedError)):
        lance_format.write_dataset(t, tmp_path / "ours", data_storage_version=version)


@pytest.mark.parametrize("writer", [lance, lance_format], ids=["pylance-written", "our-written"])
def test_lists_of_empty_structs_at_2_0(tmp_path: Path, writer: Any) -> None:
    t = pa.table({"e": _LIST_EMPTY})
    writer.write_dataset(t, tmp_path, data_storage_version="2.0")
    _same(lance.dataset(tmp_path).to_table(), t)
    _same(lance_format.dataset(tmp_path).to_table(), t)


# -- defect 5: Lance's JSON type -----------------------------------------------------------------------


_JSON_VALUES = [
    '{"b": [1, 2, {"c": null}], "a": 1}',
    None,
    '"str \\u0001 \\" é 😀"',
    "3.5",
    "[]",
    "{}",
    "true",
    "false",
    "null",
    '{"k": "ü", "n": -12345678901234, "f": 1e300, "u": 18446744073709551615, "z": 0}',
    "-129",
    "65536",
    "1e-6",
    "0.00001",
    "1e16",
    "1000000000000000",
    "18446744073709551616",
    "-0.0",
    "[[], {}, [1.5, -2]]",
    '{"é": 1, "z": 2, "A": 3, "aa": 4}',
]


def _json_table() -> pa.Table:
    n = len(_JSON_VALUES)
    j = pa.array(_JSON_VALUES, pa.json_())
    return pa.table(
        {
            "j": j,
            "i": pa.array(range(n), pa.int64()),
            "s": pa.StructArray.from_arrays([j, pa.array(range(n))], names=["x", "y"]),
            "l": pa.ListArray.from_arrays(pa.array(range(n + 1), pa.int32()), j),
        }
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("writer", [lance, lance_format], ids=["pylance-written", "our-written"])
def test_json_columns_both_ways(tmp_path: Path, version: str, writer: Any) -> None:
    writer.write_dataset(_json_table(), tmp_path, data_storage_version=version, max_rows_per_file=7)
    theirs, ours = lance.dataset(tmp_path), lance_format.dataset(tmp_path)
    expected = theirs.to_table()
    assert expected.schema.field("j").type == pa.json_()
    _same(ours.to_table(), expected)
    assert ours.schema == theirs.schema
    idx = [19, 0, 4, 9]
    _same(ours.take(idx), theirs.take(idx))
    _same(ours.to_table(columns=["j"], filter="i >= 15"), theirs.to_table(columns=["j"], filter="i >= 15"))


def test_our_jsonb_bytes_are_pylances(tmp_path: Path) -> None:
    from lance.file import LanceFileReader

    def raw(uri: Path) -> list[Any]:
        ds = lance.dataset(uri)
        path = uri / "data" / ds.get_fragments()[0].data_files()[0].path
        return LanceFileReader(str(path)).read_all().to_table()["j"].to_pylist()

    t = _json_table().select(["j"])
    lance.write_dataset(t, tmp_path / "theirs", data_storage_version="2.1")
    lance_format.write_dataset(t, tmp_path / "ours", data_storage_version="2.1")
    assert raw(tmp_path / "ours") == raw(tmp_path / "theirs")
    # The manifest's field (logical type, extension metadata, legacy encoding) as pylance writes it.
    ours = lance_format.dataset(tmp_path / "ours").lance_schema
    assert ours == lance_format.dataset(tmp_path / "theirs").lance_schema


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', "{bad", "[1,"])
def test_invalid_json_is_refused_like_pylance(tmp_path: Path, text: str) -> None:
    t = pa.table({"j": pa.array([text], pa.json_())})
    with pytest.raises(OSError, match="JSON"):
        lance.write_dataset(t, tmp_path / "theirs")
    with pytest.raises(InvalidInputError, match="JSON"):
        lance_format.write_dataset(t, tmp_path / "ours")


def test_appending_json_to_a_pylance_dataset(tmp_path: Path) -> None:
    t = _json_table()
    lance.write_dataset(t, tmp_path)
    lance_format.write_dataset(t, tmp_path, mode="append")
    lance.write_dataset(t, tmp_path, mode="append")
    _same(lance_format.dataset(tmp_path).to_table(), lance.dataset(tmp_path).to_table())
