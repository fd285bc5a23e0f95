"""Casts and string functions answer as pylance's (DataFusion's), value by value.

Each expression is computed as a column (``to_table(columns={"v": ...})``) by our engine and by
pylance 14 on the same dataset, and the key cases are also checked against fixed values, so a test
fails on the old behaviour even where pylance is not installed to compare with.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import InvalidInputError, NotSupportedError
from tests.dataset.test_filter_interop import cells

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop

LONG_FRACTION = "-0." + "5" * 40
TABLE = pa.table(
    {
        "i8": pa.array([1, -1, None, 127, 0, -128], pa.int8()),
        "i16": pa.array([1, -1, None, 300, 0, -32768], pa.int16()),
        "i32": pa.array([1, -1, None, 70000, 0, 2**31 - 1], pa.int32()),
        "u8": pa.array([1, 255, None, 3, 0, 128], pa.uint8()),
        "u64": pa.array([1, 2**64 - 1, None, 3, 0, 2**63], pa.uint64()),
        "i64": pa.array([1, -1, None, 2**40, 0, -(2**63)], pa.int64()),
        "f": pa.array([1.005, 0.125, None, float("nan"), 99.995, -2.5]),
        "f32": pa.array([1.005, 0.125, None, 2.5, 99.995, -2.5], pa.float32()),
        "txt": pa.array(["1." + "1" * 39, "0." + "9" * 39, None, LONG_FRACTION, "." + "0" * 50 + "1", "1e2"]),
        "s": pa.array(["abcabc", "", None, "ünïcödé", "Straße", "xyz"]),
        "t": pa.array(["b", "", "a", "ï", "ß", None]),
        "n": pa.array([2, 0, 1, None, -3, 5], pa.int64()),
        "b": pa.array([True, False, None, True, False, True]),
        "d": pa.array([dt.date(2020, 1, 2), None, dt.date(1970, 1, 1), None, None, dt.date(1999, 12, 31)]),
        "bin": pa.array([b"x", b"", None, b"\xff", b"ab", b"\x00"]),
        "dec": pa.array(
            [Decimal("1.50"), None, Decimal("-2.25"), None, None, Decimal("0.00")], pa.decimal128(5, 2)
        ),
        "ts": pa.array([dt.datetime(2020, 1, 1, 1, 2, 3), None, None, None, None, None], pa.timestamp("us")),
    }
)


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("parity") / "d")
    lance.write_dataset(TABLE, path)
    return path


def _ours(uri: str, expr: str) -> list[Any]:
    return cells(lance_format.dataset(uri).to_table(columns={"v": expr, "key": "i8"}))


def _same(uri: str, expr: str) -> list[Any]:
    got = _ours(uri, expr)
    want = cells(lance.dataset(uri).to_table(columns={"v": expr, "key": "i8"}))
    assert got == want, expr
    return [r["v"] for r in got]


def _fails_alike(uri: str, expr: str) -> None:
    with pytest.raises((ValueError, OSError)):
        lance.dataset(uri).to_table(columns={"v": expr, "key": "i8"})
    with pytest.raises((InvalidInputError, NotSupportedError)):
        lance_format.dataset(uri).to_table(columns={"v": expr, "key": "i8"})


# -- CAST(integer AS BINARY) -------------------------------------------------------------------


@pytest.mark.parametrize("column", ["i8", "i16", "i32", "i64", "u8", "u64"])
def test_integer_cast_to_binary_is_its_little_endian_bytes(uri: str, column: str) -> None:
    """Defect: pyarrow has no integer-to-binary cast, so this was refused; DataFusion writes the
    value's little-endian bytes, as many as the type's width."""
    got = _same(uri, f"CAST({column} AS BINARY)")
    t = TABLE.schema.field(column).type
    width = t.bit_width // 8
    signed = pa.types.is_signed_integer(t)
    want = [
        None if v is None else v.to_bytes(width, "little", signed=signed) for v in TABLE[column].to_pylist()
    ]
    assert got == want


def test_integer_binary_cast_in_filters_and_literals(uri: str) -> None:
    """Defect: refused as above; a literal's bytes are an int64's (8 of them)."""
    flt = "CAST(i32 AS BINARY) = X'01000000'"
    assert lance_format.dataset(uri).count_rows(filter=flt) == lance.dataset(uri).count_rows(filter=flt) == 1
    assert _same(uri, "CAST(i32 AS BINARY) = CAST(1 AS BINARY)") == [False, False, None, False, False, False]


@pytest.mark.parametrize("column", ["f", "b", "d", "dec"])
def test_other_casts_to_binary_are_refused_like_pylance(uri: str, column: str) -> None:
    _fails_alike(uri, f"CAST({column} AS BINARY)")


# -- casts to decimals -------------------------------------------------------------------------


@pytest.mark.parametrize("to", ["DECIMAL(38,38)", "DECIMAL(10,2)", "DECIMAL(38,0)", "DECIMAL(5,0)"])
def test_text_with_long_fractions_casts_to_decimal(uri: str, to: str) -> None:
    """Defect: text with more than 38 fraction digits gave NULL; DataFusion reads any number of
    them and rounds on the first one past the scale."""
    _same(uri, f"TRY_CAST(txt AS {to})")


def test_text_with_long_fraction_rounds_half_away_from_zero(uri: str) -> None:
    got = _same(uri, "TRY_CAST(txt AS DECIMAL(38,38))")
    assert got[3] == Decimal("-0." + "5" * 37 + "6")
    assert got[4] == Decimal(0)


@pytest.mark.parametrize("to", ["DECIMAL(10,2)", "DECIMAL(38,0)", "DECIMAL(3,2)", "DECIMAL(38,10)"])
@pytest.mark.parametrize("column", ["f", "f32"])
def test_float_try_cast_to_decimal_rounds_like_pylance(uri: str, column: str, to: str) -> None:
    """Defect: pyarrow's float-to-decimal cast rounds half to even (0.125 -> 0.12, 2.5 -> 2);
    DataFusion rounds ``x * 10^scale`` half away from zero in float64 (0.13, 3)."""
    _same(uri, f"TRY_CAST({column} AS {to})")


def test_float_cast_to_decimal_fixed_values(uri: str) -> None:
    got = _same(uri, "TRY_CAST(f AS DECIMAL(10,2))")
    assert got == [Decimal("1.00"), Decimal("0.13"), None, None, Decimal("100.00"), Decimal("-2.50")]
    assert _same(uri, "TRY_CAST(f AS DECIMAL(3,2))")[4] is None  # 100.00 is past 3 digits


@pytest.mark.parametrize("expr", ["CAST(f AS DECIMAL(10,2))", "CAST(f32 AS DECIMAL(3,2))"])
def test_float_cast_to_decimal_fails_like_pylance(uri: str, expr: str) -> None:
    """NaN, or a value past the precision, fails a CAST (TRY_CAST gives NULL)."""
    _fails_alike(uri, expr)


# -- concatenation of other types ---------------------------------------------------------------

CONCATS = [
    "concat(s, n)", "concat(s, f)", "concat(s, f32)", "concat(s, b)", "concat(s, d)", "concat(s, dec)",
    "concat(s, ts)", "concat(s, arrow_cast(t, 'Binary'))", "concat(n, u64)", "concat(s, 1.5)",
    "concat(s, TRUE)",
    "concat(s, NULL, n)", "concat(arrow_cast(t, 'Binary'), arrow_cast(s, 'Binary'))",
    "s || n", "s || f", "n || s", "s || b", "s || d", "(n + 1) || 'x'", "'x' || (n + 1)",
    "upper(s) || 1", "s || NULL", "NULL || s", "bin || bin", "bin || X'01'", "bin || NULL",
]  # fmt: skip


@pytest.mark.parametrize("expr", CONCATS)
def test_concatenation_writes_other_types_as_text(uri: str, expr: str) -> None:
    """Defect: concat() and ``||`` took strings only (a number, boolean, date or byte string was
    refused); DataFusion writes other types as text, and joins two byte strings as bytes."""
    _same(uri, expr)


def test_concatenation_fixed_values(uri: str) -> None:
    assert _same(uri, "concat(s, f)")[:2] == ["abcabc1.005", "0.125"]
    assert _same(uri, "s || n")[:3] == ["abcabc2", "0", None]


@pytest.mark.parametrize(
    "expr",
    [
        "s || 1",
        "n || 'x'",
        "'x' || n",
        "s || bin",
        "bin || s",
        "n || n",
        "n || NULL",
        "s || X'01'",
        "concat(s, bin)",
    ],
)
def test_concatenation_refused_like_pylance(uri: str, expr: str) -> None:
    """A literal next to a column must convert to its type; strings and bytes do not mix; bytes
    that are not UTF-8 do not convert to text."""
    _fails_alike(uri, expr)


# -- NULL arguments, binary casts as arguments, list literals first ---------------------------


@pytest.mark.parametrize(
    "expr", ["coalesce(n, NULL)", "coalesce(NULL, n)", "coalesce(NULL, NULL, s)", "coalesce(NULL, 1)"]
)
def test_coalesce_takes_untyped_nulls(uri: str, expr: str) -> None:
    """Defect: an untyped NULL argument made coalesce fail ("no kernel matching (int64, null)");
    it takes the other arguments' type."""
    _same(uri, expr)


@pytest.mark.parametrize(
    "expr",
    ["concat(CAST(s AS BINARY))", "coalesce(CAST(n AS BINARY), bin)", "octet_length(CAST(s AS BINARY))"],
)
def test_binary_cast_as_a_function_argument_is_refused_like_pylance(uri: str, expr: str) -> None:
    """Defect: answered; pylance's planner refuses a cast to BINARY inside a function's arguments
    ("Unsupported SQL type BINARY") while it takes one at the top or in a comparison."""
    _fails_alike(uri, expr)
    _same(uri, "CAST(CAST(s AS BINARY) AS STRING)")
    _same(uri, "CAST(s AS BINARY) || X'01'")


@pytest.mark.parametrize(
    "expr", ["array_has([X'01', X'ff'], bin)", "array_has([1, 2], n)", "array_has(['b', ''], t)"]
)
def test_array_has_of_a_list_literal_and_a_column(uri: str, expr: str) -> None:
    """Defect: a list literal with a column of values raised an untyped ValueError ("Mask is a
    different length"), or refused an int32 column in an int64 list."""
    _same(uri, expr)


# -- string functions whose pattern is a column -------------------------------------------------

PER_ROW = [
    "replace(s, 'a', t)", "replace(s, t, 'X')", "replace(s, t, t)", "replace(t, s, '-')",
    "replace(upper(s), upper(t), '')", "starts_with(s, t)", "ends_with(s, t)", "contains(s, t)",
    "contains(t, s)", "strpos(s, t)", "instr(s, t)", "starts_with(s, upper(t))", "btrim(s, t)",
    "ltrim(s, t)", "rtrim(s, t)", "btrim(t, s)", "contains(s, NULL)", "strpos(s, NULL)",
    "starts_with(s, NULL)", "ends_with(lower(s), t)",
]  # fmt: skip


@pytest.mark.parametrize("expr", PER_ROW)
def test_string_functions_take_a_pattern_per_row(uri: str, expr: str) -> None:
    """Defect: a pattern that was not a string literal was refused (NotSupportedError); pylance
    evaluates it row by row."""
    _same(uri, expr)


def test_string_functions_per_row_fixed_values(uri: str) -> None:
    # s: abcabc, '', NULL, ünïcödé, Straße, xyz; t: b, '', a, ï, ß, NULL
    assert _same(uri, "strpos(s, t)") == [2, 1, None, 3, 5, None]
    assert _same(uri, "replace(s, t, '-')") == ["a-ca-c", "-", None, "ün-cödé", "Stra-e", None]
    assert _same(uri, "rtrim(s, t)") == ["abcabc", "", None, "ünïcödé", "Straße", None]


@pytest.mark.parametrize(
    "where", ["contains(s, t)", "strpos(s, t) > 1", "NOT starts_with(s, t)", "replace(s, t, '') = s"]
)
def test_per_row_patterns_filter_and_count_like_pylance(uri: str, where: str) -> None:
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert cells(ours.to_table(filter=where)) == cells(theirs.to_table(filter=where)), where
    assert ours.count_rows(filter=where) == theirs.count_rows(filter=where), where


# -- found by tests/dataset/test_expression_fuzz.py -------------------------------------------


@pytest.mark.parametrize(
    "flt",
    [
        "d > '2020-01-01'",
        "d IN ('2020-01-01')",
        "d BETWEEN '1970-01-01' AND '2020-01-01'",
        "'2020-01-01' >= d",
    ],
)
def test_text_compared_with_a_date_column_is_refused_like_pylance(uri: str, flt: str) -> None:
    """Defect: the text was read as a date; pylance's planner refuses it ("Received literal
    Utf8("2020-01-01") and could not convert to literal of type 'Date32'"), in a filter and a
    computed column alike. ``CAST(d AS DATE) > '..'`` and ``NOT (d > '..')`` it takes."""
    with pytest.raises(ValueError, match="could not convert"):
        lance.dataset(uri).to_table(filter=flt)
    with pytest.raises(InvalidInputError):
        lance_format.dataset(uri).to_table(filter=flt)
    _fails_alike(uri, flt)
    for taken in ("CAST(d AS DATE) > '2020-01-01'", "NOT (d > '2020-01-01')"):
        ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
        assert cells(ours.to_table(filter=taken)) == cells(theirs.to_table(filter=taken)), taken


@pytest.mark.parametrize("expr", ["i8 < 1000", "(i8 < 1000) OR b", "s = 1"])
def test_computed_columns_check_literals_like_filters(uri: str, expr: str) -> None:
    """Defect: ``i8 < 1000`` as a computed column was answered; pylance refuses it as in a filter."""
    _fails_alike(uri, expr)


@pytest.mark.parametrize("expr", ["-(u64)", "-u8 > 1", "abs(-(u64))", "-CAST(i8 AS TINYINT UNSIGNED)"])
def test_negating_unsigned_integers_is_refused_like_pylance(uri: str, expr: str) -> None:
    """Defect: answered (wrapping); DataFusion refuses to negate an unsigned type."""
    _fails_alike(uri, expr)


@pytest.mark.parametrize("text", ["''", "'-'", "'+'", "'.'", "' '", "concat(t, '.')"])
def test_text_without_digits_casts_to_decimal_zero(uri: str, text: str) -> None:
    """Defect: NULL; arrow-rs reads text without a digit ('', a sign, a point) as 0, to a scale
    above 0 (at scale 0 it is NULL)."""
    got = _same(uri, f"TRY_CAST({text} AS DECIMAL(5,2))")
    assert _same(uri, f"TRY_CAST({text} AS DECIMAL(5,0))")[0] is None
    if not text.startswith("concat"):
        assert got[0] == Decimal("0.00")


def test_binary_cast_under_operators_inside_no_function_is_taken(uri: str) -> None:
    """Defect of this session's first refusal: sqlglot models AND/OR/NOT and comparisons as
    functions, so a cast to BINARY under them was refused."""
    flt = "(NOT (CAST(s AS BINARY) = X'61')) AND (i8 > 0)"
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert cells(ours.to_table(filter=flt)) == cells(theirs.to_table(filter=flt))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"columns": {"v": "1"}},
        {"columns": {"v": "1 + 1", "w": "NULL"}},
        {"columns": {"v": "1"}, "filter": "i8 > 0"},
    ],
)
def test_a_projection_of_only_literals_is_refused_like_pylance(uri: str, kwargs: dict[str, Any]) -> None:
    """Defect: answered; pylance refuses a scan whose expressions read no column ("Scans must
    request at least one column"), unless it asks for row ids or addresses."""
    with pytest.raises(ValueError, match="at least one column"):
        lance.dataset(uri).to_table(**kwargs)
    with pytest.raises(NotSupportedError):
        lance_format.dataset(uri).to_table(**kwargs)
    ours = lance_format.dataset(uri).to_table(columns={"v": "1"}, with_row_id=True)
    assert ours.to_pylist() == lance.dataset(uri).to_table(columns={"v": "1"}, with_row_id=True).to_pylist()


@pytest.mark.parametrize("expr", ["f32 + 1e300", "f32 + 0.1", "0.1 * f32", "f - 0.1"])
def test_computed_float32_column_with_a_float_literal_computes_in_float32(uri: str, expr: str) -> None:
    """Defect: computed in float64 (f32 + 0.1 gave 0.1, f32 + 1e300 gave 1e300); pylance's
    computed column gives the literal the column's float type (0.10000000149011612, inf)."""
    got = _same(uri, expr)
    if expr == "f32 + 1e300":
        assert got[0] == float("inf")
