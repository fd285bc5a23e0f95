"""pylance's scanner options against pylance cell by cell: ``order_by``, ``strict_batch_size``,
``include_deleted_rows``, system columns in ``columns=`` and filters, tuning options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_format
from lance_format.core.errors import NotSupportedError
from lance_format.dataset import ColumnOrdering

lance = pytest.importorskip("lance")
from lance.dataset import ColumnOrdering as PylanceOrdering  # noqa: E402


@pytest.fixture
def uri(tmp_path: Path) -> str:
    path = str(tmp_path / "ds")
    t = pa.table(
        {
            "a": pa.array([3, 1, None, 2, 5, 4, 6, 0], pa.int64()),  # one null: ties order freely
            "b": ["x", "y", "z", "w", "v", "u", "t", "s"],
            "f": [1.5, float("nan"), None, -1.0, 2.0, 2.5, 0.0, 3.0],  # no ties: their order is free
        }
    )
    lance.write_dataset(t, path, max_rows_per_file=3)
    lance.dataset(path).delete("b = 'w'")
    return path


def _both(uri: str, **kwargs: Any) -> tuple[Any, Any]:
    ours = lance_format.dataset(uri).to_table(**kwargs)
    theirs = lance.dataset(uri).to_table(**kwargs)
    return ours, theirs


def _same(uri: str, **kwargs: Any) -> pa.Table:
    ours, theirs = _both(uri, **kwargs)
    assert ours.schema.names == theirs.schema.names
    assert ours.to_pydict().__repr__() == theirs.to_pydict().__repr__()  # NaN == NaN in repr
    return ours


@pytest.mark.parametrize(
    "order",
    [
        [("a", True, False)],
        [("a", False, True)],
        [("a", False, False)],
        [("a", True, True)],
        [("f", True, False)],
        [("f", False, True)],
        [("b", False, False), ("a", True, False)],
    ],
)
def test_order_by(uri: str, order: list[tuple[str, bool, bool]]) -> None:
    ours = [ColumnOrdering(*o) for o in order]
    theirs = [PylanceOrdering(*o) for o in order]
    for kwargs in ({}, {"limit": 3, "offset": 1}, {"filter": "a > 0 or a is null"}):
        a = lance_format.dataset(uri).to_table(columns=["a", "b", "f"], order_by=ours, **kwargs)
        b = lance.dataset(uri).to_table(columns=["a", "b", "f"], order_by=theirs, **kwargs)
        assert repr(a.to_pydict()) == repr(b.to_pydict())


def test_order_by_names_and_pylance_orderings(uri: str) -> None:
    _same(uri, order_by=["b"])
    ours = lance_format.dataset(uri).to_table(columns=["a"], order_by=[PylanceOrdering("a", False)])
    assert ours.column("a").to_pylist() == [6, 5, 4, 3, 1, 0, None]


def test_order_by_a_column_outside_the_projection(uri: str) -> None:
    # pylance plans this as a take by row id: with with_row_id it works there too.
    _same(uri, columns=["b"], order_by=[PylanceOrdering("a")], with_row_id=True)
    ours = lance_format.dataset(uri).to_table(columns=["b"], order_by=[ColumnOrdering("a")])
    assert ours.column_names == ["b"]


def test_order_by_unknown_column(uri: str) -> None:
    with pytest.raises(ValueError, match="zz"):
        lance_format.dataset(uri).to_table(order_by=["zz"])


def test_strict_batch_size(uri: str) -> None:
    for strict in (True, False):
        ours = lance_format.dataset(uri).to_batches(batch_size=2, strict_batch_size=strict)
        theirs = lance.dataset(uri).to_batches(batch_size=2, strict_batch_size=strict)
        assert [b.num_rows for b in ours] == [b.num_rows for b in theirs]


def test_include_deleted_rows(uri: str) -> None:
    _same(uri, columns=["a"], include_deleted_rows=True, with_row_id=True)
    _same(uri, columns=["a"], include_deleted_rows=True, with_row_id=True, with_row_address=True)
    _same(uri, columns=["a"], include_deleted_rows=True, with_row_id=True, filter="a > 1")
    _same(uri, columns=["a"], include_deleted_rows=True, with_row_id=True, limit=3, offset=1)
    ours = lance_format.dataset(uri).scanner(columns=["a"], include_deleted_rows=True, with_row_id=True)
    assert ours.count_rows() == 8
    for mod in (lance_format, lance):
        with pytest.raises(ValueError, match="with_row_id"):
            mod.dataset(uri).to_table(include_deleted_rows=True)


@pytest.mark.parametrize(
    "columns", [["_rowid", "a"], ["b", "_rowaddr", "a"], ["a", "_rowid", "_rowaddr"], ["_rowaddr"]]
)
def test_system_columns_in_columns(uri: str, columns: list[str]) -> None:
    _same(uri, columns=columns)
    _same(uri, columns=columns, with_row_id=True)
    _same(uri, columns=columns, filter="_rowid > 1 and _rowaddr < 4294967298")


def test_tuning_options_do_not_change_results(uri: str) -> None:
    _same(
        uri,
        columns=["a"],
        filter="a > 1",
        scan_in_order=False,
        prefilter=True,
        late_materialization=["b"],
        batch_readahead=2,
        fragment_readahead=1,
        io_buffer_size=1 << 20,
    )
    for mod in (lance_format, lance):
        with pytest.raises(ValueError, match="batch_readahead"):
            mod.dataset(uri).to_table(batch_readahead=0)


def test_fragment_scans_take_the_options(uri: str) -> None:
    ours = lance_format.dataset(uri).get_fragments()[1]
    theirs = lance.dataset(uri).get_fragments()[1]
    kwargs: dict[str, Any] = {"columns": ["a", "_rowid"], "with_row_id": True, "include_deleted_rows": True}
    assert ours.to_table(**kwargs).to_pydict() == theirs.to_table(**kwargs).to_pydict()


def test_unsupported_options_are_refused(uri: str) -> None:
    ds = lance_format.dataset(uri)
    with pytest.raises(NotSupportedError, match="nearest"):
        ds.scanner(nearest={"column": "v", "q": [1.0]})
    with pytest.raises(NotSupportedError, match="full_text_query"):
        ds.to_table(full_text_query="hello")


def test_batches_combine_chunks_whose_dictionaries_hold_nulls() -> None:
    # Found by the differential seed 1601 (session 16, not rebuilt end to end): to_batches over a
    # fragment whose dictionary column came in chunks with different dictionaries holding a null
    # item raised an untyped "ArrowInvalid: Cannot yet unify dictionaries with nulls" from
    # combine_chunks; the batches are now combined as values and encoded again.
    from lance_format.dataset.scan_options import combine_table

    chunks = [
        pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["a", None])),
        pa.DictionaryArray.from_arrays(pa.array([1, 0], pa.int32()), pa.array([None, "c"])),
    ]
    table = pa.table({"ds": pa.chunked_array(chunks), "id": pa.chunked_array([[0, 1, 2], [3, 4]])})
    with pytest.raises(pa.ArrowInvalid, match="unify dictionaries with nulls"):
        table.combine_chunks()
    combined = combine_table(table)
    assert combined.schema == table.schema
    assert combined["ds"].num_chunks == 1
    assert combined.to_pylist() == table.to_pylist()


#: Struct members with ties, NULLs, NaN, and NULL parents (row 5's ``s``, rows 3 and 9's ``s.in``).
_STRUCTS = pa.table(
    {
        "id": pa.array(range(12), pa.int64()),
        "s": pa.array(
            [
                None
                if i == 5
                else {
                    "a": [3, 1, None, 2, 1, 0, 5, 3, None, 2, 7, 1][i],
                    "b": "qwertyqwerty"[i],
                    "in": None if i in (3, 9) else {"z": [0.5, float("nan"), -1.0, None, 2.0, 0.5][i % 6]},
                }
                for i in range(12)
            ],
            pa.struct(
                [
                    pa.field("a", pa.int32()),
                    pa.field("b", pa.string()),
                    pa.field("in", pa.struct([pa.field("z", pa.float64())])),
                ]
            ),
        ),
    }
)


@pytest.fixture(scope="module")
def struct_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("sortmembers") / "ds")
    lance.write_dataset(_STRUCTS, path, max_rows_per_file=5)
    lance.dataset(path).delete("id = 7")
    return path


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    keys=st.lists(
        st.tuples(st.sampled_from(["s.a", "s.b", "s.in.z", "s.in"]), st.booleans(), st.booleans()),
        min_size=1,
        max_size=3,
        unique_by=lambda k: k[0],
    ),
    columns=st.sampled_from([["id"], ["id", "s"], ["s.a", "id"], ["id", "s.in.z"]]),
    window=st.sampled_from([{}, {"limit": 4}, {"limit": 3, "offset": 2}, {"filter": "id > 1"}]),
)
def test_order_by_struct_members_as_pylance(
    struct_uri: str, keys: list[tuple[str, bool, bool]], columns: list[str], window: dict[str, Any]
) -> None:
    """Before: ours refused a member path ("order_by: column s.a not found"). ``id`` breaks ties;
    with_row_id because pylance 14.0.2 cannot plan sort keys outside the projection without it."""
    keys = [k for k in keys if k[0] != "s.in"] or [("s.a", True, False)]  # a struct is no sort key
    order = [*keys, ("id", True, False)]
    kwargs = {"columns": columns, "with_row_id": True, **window}
    ours = lance_format.dataset(struct_uri).to_table(order_by=[ColumnOrdering(*o) for o in order], **kwargs)
    theirs = lance.dataset(struct_uri).to_table(order_by=[PylanceOrdering(*o) for o in order], **kwargs)
    assert ours.schema == theirs.schema
    assert repr(ours.to_pydict()) == repr(theirs.to_pydict())  # NaN == NaN in repr


def test_order_by_a_missing_member_is_refused(struct_uri: str) -> None:
    for engine in (lance, lance_format):
        with pytest.raises(ValueError, match=r"s\.nope"):
            engine.dataset(struct_uri).to_table(order_by=["s.nope"])
