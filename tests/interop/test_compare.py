"""The comparison helper itself: it must catch every kind of difference and name where it is."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tests.interop.compare import assert_tables_equal

pytestmark = pytest.mark.interop


def test_equal_tables_pass_whatever_the_chunking() -> None:
    t = pa.table({"a": list(range(10)), "s": [str(i) for i in range(10)]})
    rechunked = pa.Table.from_batches(t.to_batches(max_chunksize=3))
    assert_tables_equal(rechunked, t)


def test_value_difference_names_column_and_row() -> None:
    t = pa.table({"a": [1, 2, 3, 4]})
    u = pa.table({"a": [1, 2, 9, 4]})
    with pytest.raises(AssertionError, match=r"column 'a'.*row 2.*ours=3, theirs=9"):
        assert_tables_equal(t, u)


def test_validity_difference() -> None:
    with pytest.raises(AssertionError, match="row 1: validity"):
        assert_tables_equal(pa.table({"a": [1, None]}), pa.table({"a": [1, 0]}))


def test_floats_nan_equal_but_signed_zero_not() -> None:
    nan = pa.table({"f": pa.array([np.nan, 1.0], pa.float32())})
    assert_tables_equal(nan, pa.table({"f": pa.array([np.nan, 1.0], pa.float32())}))
    with pytest.raises(AssertionError, match="row 0"):
        assert_tables_equal(pa.table({"f": [-0.0]}), pa.table({"f": [0.0]}))
    with pytest.raises(AssertionError, match="row 1"):
        assert_tables_equal(
            pa.table({"f": pa.array([1, 2], pa.float16())}), pa.table({"f": pa.array([1, 3], pa.float16())})
        )


def test_schema_differences() -> None:
    t = pa.table({"a": pa.array([1], pa.int32())})
    with pytest.raises(AssertionError, match="type int32 != int64"):
        assert_tables_equal(t, pa.table({"a": pa.array([1], pa.int64())}))
    with pytest.raises(AssertionError, match="names"):
        assert_tables_equal(t, pa.table({"b": pa.array([1], pa.int32())}))
    with pytest.raises(AssertionError, match="metadata"):
        assert_tables_equal(t, t.replace_schema_metadata({"k": "v"}))
    assert_tables_equal(t, t.replace_schema_metadata({"k": "v"}), check_metadata=False)
    required = pa.schema([pa.field("a", pa.int32(), nullable=False)])
    with pytest.raises(AssertionError, match="field"):
        assert_tables_equal(t, t.cast(required))


def test_nested_list_difference_reports_path_and_top_level_row() -> None:
    typ = pa.list_(pa.struct([("x", pa.list_(pa.int8()))]))
    a = pa.table({"l": pa.array([[{"x": [1]}], None, [{"x": [1, 2]}, {"x": [3]}]], typ)})
    b = pa.table({"l": pa.array([[{"x": [1]}], None, [{"x": [1, 2]}, {"x": [4]}]], typ)})
    with pytest.raises(AssertionError, match=r"l\[1\]\.x\[0\].*row 2"):
        assert_tables_equal(a, b)


def test_list_lengths_and_large_list() -> None:
    a = pa.table({"l": pa.array([[1], [2, 3]], pa.large_list(pa.int64()))})
    b = pa.table({"l": pa.array([[1], [2]], pa.large_list(pa.int64()))})
    with pytest.raises(AssertionError, match="row 1: list lengths"):
        assert_tables_equal(a, b)


def test_hidden_values_under_nulls_are_ignored() -> None:
    # Struct: child values under a null parent differ; list: a null row backed by items.
    a = pa.StructArray.from_arrays([pa.array([1, 2])], ["x"], mask=pa.array([False, True]))
    b = pa.StructArray.from_arrays([pa.array([1, 99])], ["x"], mask=pa.array([False, True]))
    assert_tables_equal(pa.table({"s": a}), pa.table({"s": b}))
    la = pa.ListArray.from_arrays(pa.array([0, 1, 3]), pa.array([1, 2, 3]), mask=pa.array([False, True]))
    lb = pa.ListArray.from_arrays(pa.array([0, 1, 1]), pa.array([1]), mask=pa.array([False, True]))
    assert_tables_equal(pa.table({"l": la}), pa.table({"l": lb}))
    fa = pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4]), 2, mask=pa.array([True, False]))
    fb = pa.FixedSizeListArray.from_arrays(pa.array([0, 0, 3, 4]), 2, mask=pa.array([True, False]))
    assert_tables_equal(pa.table({"v": fa}), pa.table({"v": fb}))
    fc = pa.FixedSizeListArray.from_arrays(pa.array([0, 0, 3, 5]), 2, mask=pa.array([True, False]))
    with pytest.raises(AssertionError, match=r"v\[1\].*row 1"):
        assert_tables_equal(pa.table({"v": fa}), pa.table({"v": fc}))


def test_dictionaries_compare_logically_but_types_strictly() -> None:
    a = pa.DictionaryArray.from_arrays(pa.array([0, 1, None], pa.int32()), pa.array(["x", "y"]))
    b = pa.DictionaryArray.from_arrays(pa.array([1, 0, 2], pa.int32()), pa.array(["y", "x", None]))
    assert_tables_equal(pa.table({"d": a}), pa.table({"d": b}))
    c = pa.DictionaryArray.from_arrays(pa.array([1, 1, None], pa.int32()), pa.array(["x", "y"]))
    with pytest.raises(AssertionError, match="row 0"):
        assert_tables_equal(pa.table({"d": a}), pa.table({"d": c}))
    with pytest.raises(AssertionError, match="type"):
        assert_tables_equal(
            pa.table({"d": a}), pa.table({"d": a.cast(pa.dictionary(pa.int8(), pa.string()))})
        )
    chunked = pa.chunked_array([a, b])
    assert_tables_equal(pa.table({"d": chunked}), pa.table({"d": pa.chunked_array([b, a])}))


def test_row_count_difference() -> None:
    with pytest.raises(AssertionError, match="row counts"):
        assert_tables_equal(pa.table({"a": [1, 2]}), pa.table({"a": [1]}))


def test_other_leaf_types() -> None:
    import decimal

    cases = [
        (pa.array([b"ab", b"cd"], pa.binary(2)), pa.array([b"ab", b"ce"], pa.binary(2))),
        (
            pa.array([decimal.Decimal("1.5"), decimal.Decimal("2.5")]),
            pa.array([decimal.Decimal("1.5"), decimal.Decimal("2.4")]),
        ),
        (pa.array([1, 2], pa.timestamp("ns", tz="UTC")), pa.array([1, 3], pa.timestamp("ns", tz="UTC"))),
        (pa.array([True, False]), pa.array([True, True])),
        (pa.array(["a", "b"], pa.large_string()), pa.array(["a", "c"], pa.large_string())),
        (pa.array([1, 2], pa.duration("s")), pa.array([1, 5], pa.duration("s"))),
    ]
    for a, b in cases:
        assert_tables_equal(pa.table({"c": a}), pa.table({"c": a}))
        with pytest.raises(AssertionError, match="row 1"):
            assert_tables_equal(pa.table({"c": a}), pa.table({"c": b}))
    assert_tables_equal(pa.table({"n": pa.nulls(3)}), pa.table({"n": pa.nulls(3)}))
