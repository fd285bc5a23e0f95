"""Projections of struct members by path (``"ss.in.z"``), compared with pylance 14.0.2 cell by cell:
scans return a flat column named by the path, takes return the struct reduced to the members named."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError

lance = pytest.importorskip("lance")

_S = pa.struct([pa.field("x", pa.int32(), nullable=False, metadata={"k": "v"}), ("y", pa.string())])
_SS = pa.struct([("in", pa.struct([("z", pa.int64()), ("w", pa.float64())]))])
_SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("s", _S), pa.field("ss", _SS, nullable=False)],
    metadata={"m": "1"},
)


@pytest.fixture(params=["2.1", "2.2"])
def uri(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A pylance-written table whose structs hold nulls at every level; two fragments, one delete."""
    u = str(tmp_path / "ds")
    table = pa.table(
        {
            "id": list(range(6)),
            "s": [
                {"x": 1, "y": "a"},
                {"x": 2, "y": None},
                None,
                {"x": 4, "y": "d"},
                None,
                {"x": 6, "y": "f"},
            ],
            "ss": [
                {"in": {"z": 1, "w": 2.0}},
                {"in": None},
                {"in": {"z": 3, "w": None}},
                {"in": {"z": None, "w": 4.0}},
                {"in": {"z": 5, "w": 5.0}},
                {"in": None},
            ],
        },
        schema=_SCHEMA,
    )
    lance.write_dataset(table, u, max_rows_per_file=4, data_storage_version=request.param)
    lance.dataset(u).delete("id = 1")
    return u


def _same(uri: str, read: Callable[[Any], pa.Table]) -> pa.Table:
    ours, theirs = read(lance_format.dataset(uri)), read(lance.dataset(uri))
    assert ours.schema.equals(theirs.schema, check_metadata=True), (ours.schema, theirs.schema)
    assert ours.to_pylist() == theirs.to_pylist()
    return ours


_SCANS = [
    ["ss.in.z"],
    ["id", "ss.in.z"],
    ["ss.in.z", "id"],
    ["ss.in"],
    ["ss.in", "ss.in.z"],
    ["ss", "ss.in.z"],
    ["s.x", "s.y"],
    ["s.y", "s.x", "s"],
    ["s.x", "ss.in.w", "id"],
]


@pytest.mark.parametrize("columns", _SCANS, ids=lambda c: ",".join(c))
def test_scans_return_members_as_flat_columns(uri: str, columns: list[str]) -> None:
    """Before: ours refused every member path ("no column 'ss.in.z'")."""
    got = _same(uri, lambda ds: ds.to_table(columns=columns))
    assert got.schema.names == columns
    _same(uri, lambda ds: ds.to_table(columns=columns, filter="id > 0", limit=3, offset=1, with_row_id=True))
    _same(uri, lambda ds: ds.scanner(columns=columns, filter="ss.in.z IS NOT NULL").to_table())
    _same(
        uri,
        lambda ds: pa.Table.from_batches(
            list(ds.to_batches(columns=columns)), ds.scanner(columns=columns).projected_schema
        ),
    )
    _same(uri, lambda ds: ds.get_fragments()[1].to_table(columns=columns))
    _same(uri, lambda ds: ds.head(2, columns=columns))
    ours = lance_format.dataset(uri).scanner(columns=columns, filter="id > 2").count_rows()
    assert ours == lance.dataset(uri).scanner(columns=columns, filter="id > 2").count_rows()


def test_member_nullability_follows_its_parents(uri: str) -> None:
    """``s.x`` is non-null in a nullable ``s``: the flat column is nullable; ``ss`` is non-null."""
    got = _same(uri, lambda ds: ds.to_table(columns=["s.x", "ss.in", "id"]))
    assert got.schema.field("s.x").nullable
    assert got.schema.field("s.x").metadata == {b"k": b"v"}
    assert not got.schema.field("id").nullable


_TAKES = [
    ["ss.in.z"],
    ["ss.in.z", "id"],
    ["s.y", "id", "s.x"],
    ["ss", "ss.in.z"],
    ["s.x", "s"],
    ["ss.in.z", "ss.in.z"],
    ["ss.in.w", "ss.in.z"],
    ["ss.in", "s.y"],
    # A struct named whole after a member: a fragment's take keeps the named member first, at
    # every level (found by the differential run).
    ["ss.in.w", "ss"],
    ["ss.in.w", "ss.in", "id"],
    ["s.y", "s"],
]


@pytest.mark.parametrize("columns", _TAKES, ids=lambda c: ",".join(c))
def test_takes_return_the_struct_reduced_to_the_members(uri: str, columns: list[str]) -> None:
    """Before: ours refused every member path in ``take`` and a fragment's ``take``."""
    _same(uri, lambda ds: ds.take([0, 2, 4], columns=columns))
    _same(uri, lambda ds: ds.get_fragments()[0].take([0, 2], columns=columns))
    # Unsorted: pylance 14.0.2 drops the schema metadata there (a known defect); compare the rest.
    ours = lance_format.dataset(uri).take([4, 0, 2], columns=columns)
    theirs = lance.dataset(uri).take([4, 0, 2], columns=columns)
    assert ours.schema.remove_metadata() == theirs.schema
    assert ours.to_pylist() == theirs.to_pylist()
    row_ids = [0, 2, (1 << 32) | 1]
    assert (
        lance_format.dataset(uri).take_rows(row_ids, columns=columns).to_pylist()
        == lance.dataset(uri)._take_rows(row_ids, columns=columns).to_pylist()
    )


@pytest.mark.parametrize("columns", [["s.nope"], ["id.x"], ["ss.in.z.q"], ["nope.x"], ["s['x']"]])
def test_unknown_member_paths_are_refused_by_both(uri: str, columns: list[str]) -> None:
    with pytest.raises(ValueError, match=r"No field named|Cannot access field"):
        lance.dataset(uri).to_table(columns=columns)
    with pytest.raises(InvalidInputError, match="no column"):
        lance_format.dataset(uri).to_table(columns=columns)
    with pytest.raises(InvalidInputError, match="no column"):
        lance_format.dataset(uri).take([0], columns=columns)


def test_a_member_named_twice_is_refused_by_scans(uri: str) -> None:
    with pytest.raises(ValueError, match="Duplicate column name"):
        lance.dataset(uri).to_table(columns=["ss.in.z", "ss.in.z"])
    with pytest.raises(InvalidInputError, match="Duplicate column name"):
        lance_format.dataset(uri).to_table(columns=["ss.in.z", "ss.in.z"])


def test_null_structs_with_non_null_members_read_over_fragments(uri: str) -> None:
    """A null ``s`` holds null in its non-null member ``x``; a read over two fragments cast the
    result to the schema and pyarrow's cast refused it. Before: ``ArrowInvalid`` (untyped) from
    ``to_table()``, ``to_table(columns=["s"])`` and ``take_rows`` across fragments."""
    _same(uri, lambda ds: ds.to_table())
    _same(uri, lambda ds: ds.to_table(columns=["s"]))
    _same(uri, lambda ds: ds.head(5, columns=["s", "id"]))
    ids = [(1 << 32) | 1, 2]
    assert (
        lance_format.dataset(uri).take_rows(ids, columns=["s"]).to_pylist()
        == lance.dataset(uri)._take_rows(ids, columns=["s"]).to_pylist()
    )


_COMPUTED = [
    {"twice": "id * 2", "x": "s.x", "id": "id"},
    {"z1": "ss.in.z + 1"},
    {"r": "_rowid", "i": "id"},
    {"a": "_rowaddr", "w": "ss.in.w"},
    {"id": "id + 1", "other": "id"},
]


def _cells(t: pa.Table) -> tuple[list[str], list[pa.DataType], list[dict[str, Any]]]:
    # Types and values; pylance infers non-null for arithmetic over non-null columns, ours marks
    # computed columns nullable (docs/pylance-api.md), so nullability is left out here.
    return t.schema.names, [f.type for f in t.schema], t.to_pylist()


@pytest.mark.parametrize("columns", _COMPUTED, ids=lambda c: ",".join(c))
def test_takes_accept_computed_columns(uri: str, columns: dict[str, str]) -> None:
    """Before: ours read the dict's keys as column names ("no column 'twice'")."""
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    for idx in ([0, 2, 4], [4, 0, 2, 2]):
        assert _cells(ours.take(idx, columns=columns)) == _cells(theirs.take(idx, columns=columns))
    # pylance's take has no with_row_id; ours adds the column after the computed ones.
    got = ours.take([1, 3], columns=columns, with_row_id=True)
    assert _cells(got.drop_columns(["_rowid"])) == _cells(theirs.take([1, 3], columns=columns))
    assert got.column("_rowid").to_pylist() == [2, 1 << 32]  # row 1 is deleted
    assert got.schema.metadata == {b"m": b"1"}
    ids = [2, (1 << 32) | 1, 0]
    assert _cells(ours.take_rows(ids, columns=columns)) == _cells(theirs._take_rows(ids, columns=columns))
    # Scans too: _rowid / _rowaddr in an expression were refused before ("no column '_rowid'").
    assert _cells(ours.to_table(columns=columns, filter="id > 1")) == _cells(
        theirs.to_table(columns=columns, filter="id > 1")
    )


@pytest.mark.parametrize("columns", [{}, {"a": "nope + 1"}, {"a": "id +"}, {"a": 5}])
def test_bad_computed_takes_are_refused_by_both(uri: str, columns: dict[str, Any]) -> None:
    with pytest.raises((OSError, TypeError)):
        lance.dataset(uri).take([0], columns=columns)
    with pytest.raises(InvalidInputError):
        lance_format.dataset(uri).take([0], columns=columns)


def test_a_fragment_take_refuses_computed_columns(uri: str) -> None:
    with pytest.raises(TypeError):
        lance.dataset(uri).get_fragments()[0].take([0], columns={"a": "id"})
    with pytest.raises(InvalidInputError, match="column names"):
        lance_format.dataset(uri).get_fragments()[0].take([0], columns={"a": "id"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "drop",
    [["s.y"], ["s.x", "s.y"], ["ss.in.z"], ["ss.in"], ["ss.in.z", "ss.in.w"], ["s.y", "s"], ["s.x", "id"]],
    ids=lambda c: ",".join(c),
)
def test_drop_columns_of_struct_members(tmp_path: Path, uri: str, drop: list[str]) -> None:
    """pylance drops a member from its struct (a struct left empty goes too), metadata only.
    Before: ours refused every member path ("cannot drop 's.y': no such column")."""
    theirs_uri = str(tmp_path / "theirs")
    lance.write_dataset(lance.dataset(uri).to_table(), theirs_uri, data_storage_version="2.1")
    lance.dataset(theirs_uri).drop_columns(drop)
    ours_uri = str(tmp_path / "ours")
    lance.write_dataset(lance.dataset(uri).to_table(), ours_uri, data_storage_version="2.1")
    lance_format.dataset(ours_uri).drop_columns(drop)
    expected = lance.dataset(theirs_uri)
    for read in (lance.dataset(ours_uri), lance_format.dataset(ours_uri), lance_format.dataset(theirs_uri)):
        assert read.schema == expected.schema
        assert read.version == expected.version
        assert read.to_table().to_pylist() == expected.to_table().to_pylist()
    files = [[f.fields for f in fr.data_files()] for fr in lance.dataset(ours_uri).get_fragments()]
    assert files == [[f.fields for f in fr.data_files()] for fr in expected.get_fragments()]


@pytest.mark.parametrize("drop", [["s.nope"], ["id.x"], ["ss.in.z.q"]])
def test_dropping_an_unknown_member_is_refused_by_both(uri: str, drop: list[str]) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        lance.dataset(uri).drop_columns(drop)
    with pytest.raises(InvalidInputError, match="no such column"):
        lance_format.dataset(uri).drop_columns(drop)
