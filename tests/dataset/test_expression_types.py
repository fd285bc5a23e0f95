"""Computed values carry pylance's (DataFusion's) result type as well as its values.

``cells`` compares values as Python objects, where ``Decimal('1') == 1`` and ``-0.0 == 0.0``: the
tests here compare the result type too, and the text of every value, so a ``uint64`` where pylance
has a ``Decimal(20, 0)``, or ``0.0`` for ``-0.0``, is a failure. Found in session 16 probing the
disagreements session 15 left open (``coalesce`` types, ``-0.0`` against ``0.0``, ``concat`` of
lists) and what they led to (decimal results past 38 digits, ``%`` of decimals and floats).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import LanceError
from tests.dataset.test_expression_fuzz import TABLE as FUZZ_TABLE

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop

ZEROS = pa.table(
    {
        "id": pa.array(range(6), pa.int64()),
        "a": pa.array([-0.0, 0.0, -0.0, 0.0, None, float("nan")]),
        "z": pa.array([0.0, -0.0, -0.0, 0.0, 0.0, -0.0]),
        "g": pa.array([-0.0, 0.0, 0.0, -0.0, None, 1.0], pa.float32()),
        "i": pa.array([0, 0, 0, 0, 1, 0], pa.int32()),
    }
)
LISTS = pa.table(
    {
        "id": pa.array(range(4), pa.int64()),
        "s": ["x", None, "", "y"],
        "li": pa.array([[1, 2], [], None, [None, 3]], pa.list_(pa.int32())),
        "lf": pa.array([[1.5, float("nan")], [0.0, -0.0], None, [None, 1e20]], pa.list_(pa.float64())),
        "lf32": pa.array([[1.5, 0.1], [], None, [None, 1e20]], pa.list_(pa.float32())),
        "lls": pa.array([["a", "b,c"], [""], None, [None, "ü"]], pa.list_(pa.string())),
        "lb": pa.array([[True, None], [], None, [False]], pa.list_(pa.bool_())),
        "ll": pa.array([[[1], [2, 3]], [[]], None, [None, [None]]], pa.list_(pa.list_(pa.int64()))),
        "lbig": pa.array([[1, 2], [], None, [None, 3]], pa.large_list(pa.int64())),
        "ld": pa.array([[dt.date(2020, 1, 2)], [], None, [None]], pa.list_(pa.date32())),
        "lts": pa.array(
            [[dt.datetime(2020, 1, 2, 3, 4, 5, 120000)], [], None, [None]], pa.list_(pa.timestamp("us"))
        ),
        "ldec": pa.array([[Decimal("1.50")], [], None, [None]], pa.list_(pa.decimal128(5, 2))),
        "lbin": pa.array([[b"ab", b"\x00\xff"], [b""], None, [None]], pa.list_(pa.binary())),
    }
)


def _uri(tmp_path_factory: pytest.TempPathFactory, name: str, table: pa.Table, rows: int) -> str:
    path = str(tmp_path_factory.mktemp(name) / "d")
    lance.write_dataset(table, path, max_rows_per_file=rows)
    return path


@pytest.fixture(scope="module")
def fuzz_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _uri(tmp_path_factory, "types", FUZZ_TABLE, 5)


@pytest.fixture(scope="module")
def zeros_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _uri(tmp_path_factory, "zeros", ZEROS, 4)


@pytest.fixture(scope="module")
def lists_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _uri(tmp_path_factory, "lists", LISTS, 3)


def _typed(table: pa.Table) -> tuple[str, list[str]]:
    """The result column's type and the repr of every value (``-0.0`` is not ``0.0`` there)."""
    return str(table.schema.field("v").type), [repr(v) for v in table["v"].to_pylist()]


def _same_value(uri: str, expr: str) -> tuple[str, list[str]]:
    columns = {"v": expr, "id": "id"}
    got = _typed(lance_format.dataset(uri).to_table(columns=columns))
    want = _typed(lance.dataset(uri).to_table(columns=columns))
    assert got == want, expr
    return got


def _same_filter(uri: str, sql: str) -> list[Any]:
    got = lance_format.dataset(uri).to_table(filter=sql, columns=["id"])["id"].to_pylist()
    want = lance.dataset(uri).to_table(filter=sql, columns=["id"])["id"].to_pylist()
    assert got == want, sql
    assert lance_format.dataset(uri).count_rows(filter=sql) == len(want), sql
    return got


# -- coalesce: DataFusion's union of the argument types ---------------------------------------

COALESCE_ARGS = ["i8", "i32", "i64", "u64", "f32", "f", "dec", "1", "-1", "300", "1.5", "NULL", "2147483648"]


@pytest.mark.parametrize("second", COALESCE_ARGS)
@pytest.mark.parametrize("first", ["i8", "i32", "u64", "f32", "dec", "1", "1.5"])
def test_coalesce_result_type_like_pylance(fuzz_uri: str, first: str, second: str) -> None:
    # Found: ours typed an integer literal as the column (coalesce(i8, 1) an int8, pylance's int64;
    # coalesce(u64, 1) a uint64, pylance's Decimal(20, 0)) and failed on u64 with a signed value
    # or a float ("Integer value 18446744073709551615 not in range").
    sql = f"coalesce({first}, {second})"
    try:
        want = _typed(lance.dataset(fuzz_uri).to_table(columns={"v": sql, "id": "id"}))
    except (ValueError, OSError):  # NaN does not fit the decimal a float becomes next to dec
        with pytest.raises(LanceError):
            lance_format.dataset(fuzz_uri).to_table(columns={"v": sql, "id": "id"})
        return
    assert _typed(lance_format.dataset(fuzz_uri).to_table(columns={"v": sql, "id": "id"})) == want, sql


@pytest.mark.parametrize(
    "expr",
    [
        "coalesce(i8, 1) + 127",  # an int64: no int8 overflow
        "-coalesce(u64, 1)",  # a decimal: no uint64 wrap
        "coalesce(u64, s)",  # s read as a number only where u64 is NULL
        "coalesce(1, s)",
        "coalesce(i8, abs(i8))",  # abs only where i8 is NULL (the long fuzz run)
        "f BETWEEN 0 AND NULL",  # NaN against NULL is NULL (the long fuzz run: it was false)
        "coalesce(u64, -1) % 7",
        "coalesce(u64, -1) / 7",
        "coalesce(u64, -1) * 2",
    ],
)
def test_coalesce_values_like_pylance(fuzz_uri: str, expr: str) -> None:
    _same_value(fuzz_uri, expr)


@pytest.mark.parametrize(
    "sql", ["coalesce(u64, -1) > 5", "coalesce(u64, -1) = -1", "coalesce(u64, i8) = -128"]
)
def test_coalesce_filters_like_pylance(fuzz_uri: str, sql: str) -> None:
    assert _same_filter(fuzz_uri, sql)


def test_coalesce_fixed_values(fuzz_uri: str) -> None:
    t, values = _same_value(fuzz_uri, "coalesce(u64, -1)")
    assert t == "decimal128(20, 0)"
    assert values[4] == "Decimal('-1')"


# -- decimal arithmetic past 38 digits, remainders ---------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        "CAST(i64 AS DECIMAL(38,0)) * 2",
        "CAST(id AS DECIMAL(38,0)) + 1",
        "CAST(id AS DECIMAL(30,10)) * CAST(id AS DECIMAL(30,10))",
        "CAST(id AS DECIMAL(38,10)) - dec",
        "CAST(i64 AS DECIMAL(38,0)) * CAST(i64 AS DECIMAL(38,0))",
    ],
)
def test_decimal_results_cap_at_38_digits_like_pylance(fuzz_uri: str, expr: str) -> None:
    # Found: pyarrow refuses a decimal128 result type past 38 digits ("Decimal precision out of
    # range"); DataFusion caps it at 38 and fails only on a value that does not fit.
    assert _same_value(fuzz_uri, expr)[0].startswith("decimal128(38")


@pytest.mark.parametrize(
    "expr",
    [
        "dec % 2",
        "dec % CAST(1.5 AS DECIMAL(3,1))",
        "-dec % 3",
        "f % 2.0",
        "f32 % 2",
        "f % f32",
        "-f % 3",
        "dec % f",
        "i64 % -1",
        "i8 % -1",
        "i32 % 5",
    ],
)
def test_remainders_like_pylance(fuzz_uri: str, expr: str) -> None:
    # Found: ours computed x - (x / y) * y without truncating the quotient for decimals and floats
    # (dec % 2 was 0 for 1.50; f % 2.0 was 0 for 2.5), and i64 % -1 of the least int64 wrapped.
    _same_value(fuzz_uri, expr)


def test_remainders_fixed_values(fuzz_uri: str) -> None:
    assert _same_value(fuzz_uri, "f32 % 2")[1][8] == "0.5"
    assert _same_value(fuzz_uri, "dec % 2")[1][1] == "Decimal('1.50')"
    assert _same_filter(fuzz_uri, "f % 2.0 > 0.5") == [2, 3]


# -- -0.0 against 0.0 -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "a = z", "a < z", "a > z", "a <= z", "a >= z", "a <> z", "a = i", "a < i", "a = -z", "-z < z",
        "g = z", "g < z", "a BETWEEN z AND z", "a IS DISTINCT FROM z", "a IS NOT DISTINCT FROM z",
        "NOT (a = z)", "a IN (z, 1.0)", "a = z AND id >= 0", "round(a) < z", "a * 1 < z",
        "a = 0.0", "a = -0.0", "a < 0.0", "z > -0.0", "a < 0.0 * -1", "a * 1 = 0.0", "-a <= -0.0",
    ],
)  # fmt: skip
def test_signed_zeros_compare_like_pylance(zeros_uri: str, sql: str) -> None:
    # Found: ours took -0.0 = 0.0 everywhere; pylance orders -0.0 below 0.0 when both sides read
    # a column (arrow-rs's total order of two arrays) and not against a constant.
    _same_filter(zeros_uri, sql)
    _same_value(zeros_uri, sql)


def test_signed_zeros_fixed_values(zeros_uri: str) -> None:
    assert _same_filter(zeros_uri, "a = z") == [2, 3]
    assert _same_filter(zeros_uri, "a < z") == [0]
    assert _same_filter(zeros_uri, "a = 0.0") == [0, 1, 2, 3]


@pytest.mark.parametrize("sql", ["i IN (id, 5)", "i NOT IN (id, 5)", "a IN (z)", "NOT (i IN (id, NULL))"])
def test_in_lists_holding_columns_like_pylance(zeros_uri: str, sql: str) -> None:
    # Found: ours refused them ("IN lists must hold literals"); pylance answers.
    _same_filter(zeros_uri, sql)


# -- lists written as text --------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [f"concat(s, {c})" for c in LISTS.column_names[2:]]
    + ["concat(li)", "concat(li, s)", "s || li", "li || s", "concat(s, [1, 2])", "concat(s, ['a'])"]
    + ["CAST(li AS STRING)", "CAST(ll AS STRING)", "concat(s, li, li)"],
)
def test_lists_as_text_like_pylance(lists_uri: str, expr: str) -> None:
    # Found: ours refused them ("values as text"); pylance writes arrow-rs's text of the list.
    _same_value(lists_uri, expr)


def test_lists_as_text_fixed_values(lists_uri: str) -> None:
    assert _same_value(lists_uri, "concat(s, li)")[1] == ["'x[1, 2]'", "'[]'", "''", "'y[, 3]'"]
    assert _same_filter(lists_uri, "concat(s, ll) = 'x[[1], [2, 3]]'") == [0]


@pytest.mark.parametrize(
    "sql",
    [
        "array_has(li, i64)",  # in int64s
        "array_has(li, f)",  # in floats
        "array_has(li, f32)",
        "array_has(li, 2147483648)",
        "array_has(li, 1.5)",
        "array_has(li, u64)",  # no common type: refused, as by pylance
        "array_has(li, dec)",
        "array_has(li, s)",
        "array_has(li, array_length(li))",
    ],
)
def test_array_has_in_the_common_type_like_pylance(fuzz_uri: str, sql: str) -> None:
    # Found by the widened fuzzer: ours cast the value to the list's item type (i64 failed past
    # int32, 1.5 failed truncating) and answered array_has(li, u64), which pylance refuses.
    try:
        want = lance.dataset(fuzz_uri).to_table(filter=sql, columns=["id"])["id"].to_pylist()
    except (ValueError, OSError):
        with pytest.raises(LanceError):
            lance_format.dataset(fuzz_uri).to_table(filter=sql)
        return
    assert lance_format.dataset(fuzz_uri).to_table(filter=sql, columns=["id"])["id"].to_pylist() == want


@pytest.mark.parametrize(
    "sql",
    [
        "i8 > 0 AND abs(i8) > 0",
        "i8 <> -128 AND abs(i8) > 0 AND id >= 0",
        "i8 < 0 OR abs(i8) > 0",
        "(i8 > 0 AND abs(i8) > 0) OR id > 100",
        "i8 IS NULL OR i8 > 0 AND CAST(s AS INT) > 0",
        "i8 > 0 AND CAST(s AS INT) > 0",  # fails: row 7's i8 is NULL, so its 'z' is cast
    ],
)
@pytest.mark.parametrize("rows", [8, 3, 1])
def test_and_or_evaluate_their_right_side_row_by_row(
    tmp_path_factory: pytest.TempPathFactory, sql: str, rows: int
) -> None:
    # Found: ours failed whenever the right side failed on any row; pylance skips it for a batch
    # whose left side is false throughout (of OR: true), so its answer depends on the layout.
    # Ours is pylance's answer with batches of one row, on every layout (test_found_defects).
    table = pa.table(
        {
            "id": pa.array(range(8), pa.int64()),
            "i8": pa.array([1, -128, 2, 3, -128, -1, 5, None], pa.int8()),
            "s": ["1", "x", "2", "3", "y", None, "5", "z"],
        }
    )
    uri = _uri(tmp_path_factory, "short", table, rows)
    ours = lance_format.dataset(uri)
    try:
        want = lance.dataset(uri).to_table(filter=sql, batch_size=1)["id"].to_pylist()
    except (ValueError, OSError):
        with pytest.raises(LanceError):
            ours.to_table(filter=sql)
        return
    assert ours.to_table(filter=sql)["id"].to_pylist() == want
    assert ours.count_rows(filter=sql) == len(want)
    values = ours.to_table(columns={"v": sql, "id": "id"})["v"].to_pylist()
    assert (
        values == lance.dataset(uri).to_table(columns={"v": sql, "id": "id"}, batch_size=1)["v"].to_pylist()
    )


@pytest.mark.parametrize(
    "expr",
    [
        "round(dec)", "round(dec, 1)", "round(dec, 3)", "round(dec, -1)", "round(CAST(dec AS DECIMAL(38,2)))",
        "trunc(f)", "trunc(-f)", "trunc(f32)", "sqrt(dec)",
        "u64 + i8", "u64 - i64", "u64 * i32", "array_length(li) + 1", "-(u64 + 1)", "-(u64 * 2)",
    ],
)  # fmt: skip
def test_decimal_and_float_functions_like_pylance(fuzz_uri: str, expr: str) -> None:
    # Found probing session 16: round(dec) was a float64 (pylance: the decimal, rounded to the
    # digits asked), trunc(-0.0) was -0.0 (pylance: 0.0), sqrt(dec) failed, uint64 with a signed
    # integer was a decimal256 (pylance: decimal128, capped at 38 digits).
    _same_value(fuzz_uri, expr)


@pytest.mark.parametrize("expr", ["-(array_length(li))", "-(u64)", "-(CAST(i8 AS TINYINT UNSIGNED))"])
def test_negating_any_unsigned_value_is_refused_like_pylance(fuzz_uri: str, expr: str) -> None:
    # Found by the widened fuzzer: -(array_length(li)) wrapped around in uint64; pylance refuses it.
    with pytest.raises((ValueError, OSError)):
        lance.dataset(fuzz_uri).to_table(columns={"v": expr, "id": "id"})
    with pytest.raises(LanceError, match="negate"):
        lance_format.dataset(fuzz_uri).to_table(columns={"v": expr, "id": "id"})


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("f32 = 1e300", True),  # the literal taken as float32: infinity
        ("f32 = 1e-50", True),  # zero
        ("f32 IN (1e300)", False),
        ("f32 BETWEEN 1e300 AND 1e301", False),
        ("NOT (f32 = 1e300)", False),  # not under NOT
        ("f32 * 2 = 1e300", False),  # nor for an expression
        ("((i8 = array_length(li)) AND (s <> s)) AND (dec = f)", False),  # a decimal-float cast
        ("((i8 - i32) = 0) OR (((i8 - i32) = 0) AND (CAST(s AS TINYINT) = i8))", True),  # absorbed
        ("(i8 > 0) AND ((i8 > 0) OR CAST(s AS INT) > 1)", False),
    ],
)
def test_found_by_the_long_fuzz_run(fuzz_uri: str, sql: str, value: bool) -> None:
    # Found by LANCE_FUZZ_EXAMPLES=2000 in session 16: a float64 literal against a float32 column
    # compared in float64 (pylance narrows it to float32); the implicit cast of a decimal against
    # a float was evaluated on rows the AND's left side had ruled out; `a OR (a AND c)`
    # evaluated c, which DataFusion's simplifier drops (absorption), so its failure failed ours.
    # ``value``: whether it is used as a computed column too (a filter only otherwise).
    _same_filter(fuzz_uri, sql)
    if value:
        _same_value(fuzz_uri, sql)


@pytest.mark.parametrize(
    "sql",
    [
        "(dec = f) AND (coalesce(u64, -1) IS NULL)",
        "(coalesce(u64, -1) IS NULL) AND (dec = f)",
        "(dec = f) OR (coalesce(u64, -1) IS NOT NULL)",
        "NOT ((dec = f) AND (coalesce(u64, 0) IS NULL)) AND (i8 > 0)",
        "((dec = f) AND (s LIKE '%') AND (coalesce(i8, 1) IS NULL)) OR (i8 > 0)",
    ],
)
def test_a_constant_the_planner_folds_decides_its_and_or_like_pylance(fuzz_uri: str, sql: str) -> None:
    # Found by LANCE_FUZZ_EXAMPLES=1500 in session 18: DataFusion folds `x IS NULL` of an x that
    # cannot be NULL (coalesce with a literal) to false, which decides the AND, so pylance never
    # casts f's NaN to a decimal for `dec = f`; ours evaluated it and refused the filter.
    _same_filter(fuzz_uri, sql)


@pytest.mark.parametrize(
    "sql", ["(isnan(abs(f))) AND (abs(i8) BETWEEN 0 AND 0)", "(isnan(abs(f))) AND (abs(i8) > 0)"]
)
def test_abs_of_a_float_does_not_keep_an_and_from_deciding_like_pylance(fuzz_uri: str, sql: str) -> None:
    # Found by LANCE_FUZZ_EXAMPLES=5000 in session 18: abs counted as a function that may fail
    # whatever its argument, so isnan(abs(f)) did not decide the AND's rows and abs(-128) on the
    # right was evaluated where the left is false (pylance never does: ours refused).
    _same_filter(fuzz_uri, sql)


@pytest.mark.parametrize(
    "sql",
    [
        "btrim(ls, NULL) = 'a'",
        "s = ltrim(ls, NULL)",
        "btrim(ls, NULL) IN (s, 'b')",
        "btrim(ls, NULL) BETWEEN 'a' AND 'b'",
        "NOT ((CAST(i8 AS BIGINT) IN (0)) AND (btrim(rtrim(ls, s), NULL) NOT IN (s, 'b')))",
    ],
)
def test_a_null_large_string_compared_with_a_string_like_pylance(fuzz_uri: str, sql: str) -> None:
    # Found by LANCE_FUZZ_EXAMPLES=1500 in session 18 (the last case): the process died of a
    # segmentation fault binding the filter. trim with a NULL set of characters is a NULL of the
    # large string's type, and pyarrow 26 crashes casting such a NULL scalar implicitly to compare
    # it with a string; the string side is now cast to the large type explicitly.
    _same_filter(fuzz_uri, sql)


@pytest.mark.parametrize("expr", ["dec + 0.5", "dec * 0.5", "0.5 - dec", "dec % 0.5"])
def test_a_decimal_column_with_a_float_literal_value_is_refused_like_pylance(
    fuzz_uri: str, expr: str
) -> None:
    # Found probing session 16: ours computed it in float64; pylance refuses the literal
    # ("Received literal Float64(0.5) and could not convert to literal of type 'Decimal128(10, 2)'").
    with pytest.raises((ValueError, OSError)):
        lance.dataset(fuzz_uri).to_table(columns={"v": expr, "id": "id"})
    with pytest.raises(LanceError, match="does not convert"):
        lance_format.dataset(fuzz_uri).to_table(columns={"v": expr, "id": "id"})


# -- session 18: folding, array_has's coercion, temporal unions, regexes, lengths of lists -----

NS = pa.timestamp("ns")
UTC_US, NEW_YORK_NS = pa.timestamp("us", tz="UTC"), pa.timestamp("ns", tz="America/New_York")
DATES = [dt.date(2024, 2, 29), dt.date(2000, 1, 1), dt.date(2100, 1, 1), dt.date(1999, 5, 5)]
DATETIMES = [dt.datetime(2000, 2, 29, 0, 0, 1), dt.datetime(2020, 1, 1), None]
DATETIMES += [dt.datetime(1969, 12, 31, 23, 59), dt.datetime(2100, 1, 1)]
PROBE = pa.table(
    {
        "id": pa.array(range(8), pa.int64()),
        "dec": pa.array(
            [Decimal(v) if v else None for v in ["1.50", None, "-2.25", "0", "9999.99", "0.01", "2.5", None]],
            pa.decimal128(10, 2),
        ),
        "u64": pa.array([0, 1, 2**64 - 1, None, 2**63, 3, 5, 7], pa.uint64()),
        "i8": pa.array([0, 1, -1, 127, -128, None, 5, 2], pa.int8()),
        "li": pa.array([[1, 2], [], None, [None, 3], [-1], [0], [2**31 - 1], [5, 5]], pa.list_(pa.int32())),
        "d": pa.array([dt.date(2020, 1, 1), dt.date(1970, 1, 1), None, dt.date(1969, 12, 31), *DATES]),
        # nanoseconds a microsecond cast truncates, before and after 1970
        "ts": pa.array([-1, None, 1_500, -1_000_000_001, 0, None, 5, 10**18], NS),
        "tsu": pa.array(
            [dt.datetime(2020, 1, 1, 12, 30), dt.datetime(1970, 1, 1), None, *DATETIMES], pa.timestamp("us")
        ),
        "s": pa.array(["abc", "a.c", None, "", "xyz", "ABC", "ünï", "a1b2"]),
        "p": pa.array(["a", "^a", "b", None, ".*", "c$", "ï", "[0-9]"]),
        "ls": pa.array(["abc", None, "", "ünï", "Straße", "x", " a ", "A"], pa.large_string()),
        "f": pa.array([1.5, float("nan"), None, 0.0, -2.25, 1e300, 2.5, 0.01]),
        "tz": pa.array([dt.datetime(2020, 1, 1, 12, 30), None, dt.datetime(1970, 1, 1), *DATETIMES], UTC_US),
        "tzn": pa.array(
            [dt.datetime(2020, 1, 1, 12, 30), None, dt.datetime(1970, 1, 1), *DATETIMES], NEW_YORK_NS
        ),
        "lts": pa.array(
            [[dt.datetime(2020, 1, 1, 12, 30)], [], None, [None], *[[]] * 4], pa.list_(pa.timestamp("us"))
        ),
    }
)


@pytest.fixture(scope="module")
def probe_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _uri(tmp_path_factory, "probe", PROBE, 3)


@pytest.mark.parametrize(
    "sql",
    [
        "(dec = f) AND (coalesce(u64, -1) IS NULL)",
        "(coalesce(u64, -1) IS NULL) AND (dec = f)",
        "(dec = f) OR (coalesce(u64, -1) IS NOT NULL)",
        "NOT ((dec = f) AND (coalesce(u64, 1.5) IS NULL))",
        "((dec = f) AND (coalesce(i8, -1) IS NULL)) OR i8 > 0",
        "(dec = f) AND false",
    ],
)
def test_constant_operands_decide_and_or_before_evaluation_like_pylance(probe_uri: str, sql: str) -> None:
    # Found probing session 18: pylance folds coalesce(x, <non-null literal>) IS NULL to false
    # (IS NOT NULL to true) before evaluating, so the AND is false and dec = f (a NaN cast to a
    # decimal, which fails) never runs; ours evaluated it and failed.
    _same_filter(probe_uri, sql)
    _same_value(probe_uri, sql)


@pytest.mark.parametrize(
    "sql",
    [
        "dec = f",
        "(dec = f) AND (coalesce(u64, NULL) IS NULL)",
        "((dec = f) AND (coalesce(i8, abs(i8)) IS NULL)) OR i8 > 0",  # abs may be NULL: not folded
    ],
)
def test_a_decimal_float_comparison_that_runs_fails_like_pylance(probe_uri: str, sql: str) -> None:
    with pytest.raises((ValueError, OSError), match="Decimal128"):
        lance.dataset(probe_uri).to_table(filter=sql)
    with pytest.raises(LanceError, match="decimal128"):
        lance_format.dataset(probe_uri).to_table(filter=sql)


@pytest.mark.parametrize(
    "expr",
    [
        "array_has(li, u64 + i8)",  # a Decimal(21, 0): the list is cast to it
        "array_has(li, u64 + i8 - 4)",  # holds on row 7 ([5, 5], 7 + 2 - 4)
        "array_has(li, CAST(5 AS DECIMAL(30,0)))",
        "array_has(li, i8)",
        "array_has(li, NULL)",
    ],
)
def test_array_has_takes_the_union_of_item_and_value_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: ours refused "no common type int32/decimal128(21,0)"; DataFusion
    # casts both to the union of the item and value types when the value reaches it implicitly.
    _same_value(probe_uri, expr)
    _same_filter(probe_uri, expr)


@pytest.mark.parametrize(
    "expr",
    [
        "array_has(li, u64)",
        "array_has(li, dec)",
        "array_has(li, CAST(i8 AS DECIMAL(5,2)))",
        "array_has(li, CAST(i8 AS DECIMAL(3,0)))",  # narrower than int32's Decimal(10, 0)
        "array_has(li, s)",
    ],
)
def test_array_has_refuses_a_value_that_does_not_coerce_like_pylance(probe_uri: str, expr: str) -> None:
    # the union is a decimal (or an int32 for text) the value would have to be narrowed to
    with pytest.raises((ValueError, OSError), match="coerce"):
        lance.dataset(probe_uri).to_table(columns={"v": expr})
    with pytest.raises(LanceError, match="array_has"):
        lance_format.dataset(probe_uri).to_table(columns={"v": expr})


def test_array_has_in_the_union_fixed_values(probe_uri: str) -> None:
    assert _same_value(probe_uri, "array_has(li, u64 + i8 - 4)") == (
        "bool",
        ["False", "False", "None", "None", "False", "None", "False", "True"],
    )


@pytest.mark.parametrize(
    "expr",
    [
        "coalesce(ts, d)",
        "coalesce(d, tsu)",  # nanoseconds whatever the timestamp's unit
        "coalesce(tsu, ts)",  # the coarser unit, nanoseconds truncated
        "coalesce(ts, tsu)",
        "coalesce(tsu, ts, d)",
        "coalesce(d, CAST(tsu AS TIMESTAMP(0)))",
        "coalesce(CAST(tsu AS TIMESTAMP(3)), ts)",
    ],
)
def test_coalesce_of_dates_and_timestamps_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: ours refused a date with a timestamp, and timestamps of two units.
    _same_value(probe_uri, expr)


def test_coalesce_of_dates_and_timestamps_fixed_values(probe_uri: str) -> None:
    kind, values = _same_value(probe_uri, "coalesce(ts, d)")
    assert kind == "timestamp[ns]"
    assert values[1] == "Timestamp('1970-01-01 00:00:00')"  # row 1's date, at midnight
    assert _same_value(probe_uri, "coalesce(tsu, ts)")[0] == "timestamp[us]"


@pytest.mark.parametrize(
    "expr",
    [
        "regexp_like(s, p)",
        "regexp_like(s, p, 'i')",
        "regexp_like(s, upper(p))",
        "regexp_like(ls, p)",
        "regexp_like(p, s)",
        "regexp_like(s, NULL)",
        "regexp_match(s, 'a(.)?c')",
        "regexp_match(s, '(a)(x)?')",  # a group that takes no part is left out
        "regexp_match(s, '(a)|(b)')",
        "regexp_match(s, '(?P<x>a)(b)')",
        "regexp_match(s, 'a(?:b)')",  # no capturing group: the whole match
        "regexp_match(s, '')",
        "regexp_match(s, 'A', 'i')",
        "regexp_match(s, p)",
        "regexp_match(s, p, 'i')",
        "regexp_match(ls, 'a')",  # string views: DataFusion coerces a mix of string types to them
        "regexp_match(ls, ls)",
        "regexp_match(s, ls)",
        "regexp_match(s, NULL)",
        "regexp_match(s, '(a)(.)')[2]",
        "array_length(regexp_match(s, '(a)(.)'))",
    ],
)
def test_regexps_with_column_patterns_and_captures_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: ours refused a pattern from a column, and regexp_match as a value.
    _same_value(probe_uri, expr)


@pytest.mark.parametrize(
    "sql",
    ["regexp_like(s, p)", "i8 > 0 AND regexp_like(s, p)", "regexp_match(s, p) IS NULL", "regexp_match(s, p)"],
)
def test_regexp_filters_with_column_patterns_like_pylance(probe_uri: str, sql: str) -> None:
    _same_filter(probe_uri, sql)


def test_regexps_fixed_values(probe_uri: str) -> None:
    assert _same_value(probe_uri, "regexp_match(s, p)")[1] == [
        "['a']", "['a']", "None", "None", "['xyz']", "None", "['ï']", "['1']"
    ]  # fmt: skip
    assert _same_value(probe_uri, "regexp_match(s, '(a)(x)?')")[1][:2] == ["['a']", "['a']"]
    assert _same_value(probe_uri, "regexp_like(s, p)")[1][:3] == ["True", "True", "None"]


def test_a_column_pattern_that_does_not_compile_fails_like_pylance(probe_uri: str) -> None:
    expr = "regexp_like(s, concat(p, '['))"
    with pytest.raises((ValueError, OSError), match="compile"):
        lance.dataset(probe_uri).to_table(columns={"v": expr})
    with pytest.raises(LanceError):
        lance_format.dataset(probe_uri).to_table(columns={"v": expr})


@pytest.mark.parametrize("expr", ["length(li)", "char_length(li)", "length(li) > 3"])
def test_length_of_a_list_is_its_texts_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: ours refused; DataFusion measures the list's text ('[1, 2]': 6).
    _same_value(probe_uri, expr)


def test_length_of_a_list_fixed_values(probe_uri: str) -> None:
    assert _same_value(probe_uri, "length(li)") == ("int32", ["6", "2", "None", "5", "4", "3", "12", "6"])


@pytest.mark.parametrize(
    "expr",
    [
        "concat_ws('-', s, s)",
        "concat_ws('-', ls, s)",
        "concat_ws('-', s, NULL, i8)",  # NULL arguments skipped
        "concat_ws(s, i8, i8)",  # a NULL separator: NULL; every argument NULL: ''
        "concat_ws('-', li, s)",
        "concat_ws('-', 1.5, f)",
        "concat_ws(NULL, s)",
        "concat_ws('-', NULL)",
        "concat_ws(p, s, i8, ls)",
    ],
)
def test_concat_ws_joins_with_its_separator_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: sqlglot's ConcatWs is a Concat, so ours answered concat_ws('-',
    # a, b) as concat('-', a, b): '-ab' where pylance has 'a-b' (a silent wrong answer).
    _same_value(probe_uri, expr)


def test_concat_ws_fixed_values(probe_uri: str) -> None:
    assert _same_value(probe_uri, "concat_ws('-', s, NULL, i8)")[1][:3] == ["'abc-0'", "'a.c-1'", "'-1'"]
    assert _same_filter(probe_uri, "concat_ws('-', s, s) = 'abc-abc'") == [0]


@pytest.mark.parametrize(
    "expr",
    [
        "concat(ls, s)",  # string views, as DataFusion coerces a mix of string types
        "concat(s, NULL)",
        "concat(ls, ls)",  # one type: its own
        "concat(ls, i8)",  # a number: strings
        "upper(concat(ls, s))",
        "length(concat(ls, s))",  # a view measures as a string: int32
        "concat(concat(ls, s), s)",
        "concat(ls, s) || 'x'",
        "regexp_match(ls, 'a')[1]",
        "concat(ls, s) NOT IN ('')",  # computed as strings: pyarrow's kernels take no views
    ],
)
def test_string_view_results_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: concat of a large string and a string was a large string; pylance
    # gives a string view.
    _same_value(probe_uri, expr)


@pytest.mark.parametrize(
    "expr",
    [
        "d - d",  # the days between, an int64
        "d - DATE '2020-01-01'",
        "(d - d) + 1",
        "ts - tsu",  # a duration in the coarser unit
        "tsu - ts",
        "tsu - CAST(tsu AS TIMESTAMP(0))",
        "ts - ts",
    ],
)
def test_differences_of_dates_and_timestamps_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: d - d was pyarrow's duration in seconds (pylance: an int64 of
    # days), ts_ns - ts_us a duration in nanoseconds (pylance: microseconds).
    _same_value(probe_uri, expr)


def test_differences_of_dates_fixed_values(probe_uri: str) -> None:
    assert _same_value(probe_uri, "d - DATE '2020-01-01'")[1][:3] == ["0", "-18262", "None"]
    assert _same_filter(probe_uri, "d - DATE '2020-01-01' > 0") == [4, 6]


@pytest.mark.parametrize(
    "expr",
    [
        "coalesce(ts, CAST(tsu AS TIMESTAMP))",  # nanoseconds: DataFusion's TIMESTAMP
        "coalesce(CAST(ts AS TIMESTAMP), tsu)",
        "coalesce(TIMESTAMP '2020-01-01 00:00:00.123456789', ts)",  # all nine digits kept
        "coalesce(ts, CAST(tsu AS TIMESTAMP(6)))",  # a precision is the same to both planners
        "CAST(ts AS TIMESTAMP)",  # outside a function: pylance's microseconds
        "array_has(lts, tsu)",
    ],
)
def test_timestamp_casts_in_function_arguments_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: pylance hands a function's arguments to DataFusion's SQL planner,
    # where TIMESTAMP (no precision) is nanoseconds, not pylance's own microseconds: ours cut
    # coalesce(ts_ns, CAST(x AS TIMESTAMP)) to microseconds.
    _same_value(probe_uri, expr)


@pytest.mark.parametrize(
    "expr",
    [
        "array_has(lts, CAST(tsu AS TIMESTAMP))",  # nanoseconds do not coerce to microseconds
        "array_has(lts, TIMESTAMP '2020-01-01 12:30:00')",
        "array_has(lts, ts)",  # a column of nanoseconds alike
        "coalesce(CAST(ts AS DATETIME), tsu)",  # DataFusion's planner has no DATETIME
    ],
)
def test_timestamp_casts_in_function_arguments_pylance_refuses(probe_uri: str, expr: str) -> None:
    with pytest.raises((ValueError, OSError)):
        lance.dataset(probe_uri).to_table(columns={"v": expr})
    with pytest.raises(LanceError):
        lance_format.dataset(probe_uri).to_table(columns={"v": expr})


def test_timestamp_casts_in_function_arguments_fixed_values(probe_uri: str) -> None:
    kind, values = _same_value(probe_uri, "coalesce(TIMESTAMP '2020-01-01 00:00:00.123456789', ts)")
    assert kind == "timestamp[ns]"
    assert values[0] == "Timestamp('2020-01-01 00:00:00.123456789')"


@pytest.mark.parametrize(
    "expr",
    [
        "coalesce(tz, tsu)",  # the zone; a plain timestamp is its wall time there
        "coalesce(tsu, tzn)",
        "coalesce(tz, tzn)",  # the second one's zone, the coarser unit
        "coalesce(tzn, tz)",
        "coalesce(tzn, d)",  # a date: plain nanoseconds (the instant, not the wall time)
        "coalesce(d, tzn, tsu)",
        "coalesce(tzn, TIMESTAMP '2020-01-01 00:00:00')",
        "array_has(lts, tz)",
        "array_has(lts, tzn)",  # the list's plain timestamps as wall times in New York
    ],
)
def test_zoned_timestamps_in_unions_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: ours refused every union with a zoned timestamp.
    _same_value(probe_uri, expr)


@pytest.mark.parametrize(
    "expr",
    [
        "ts = CAST(ts AS TIMESTAMP)",  # in microseconds: the nanoseconds truncated, so equal
        "ts > CAST(ts AS TIMESTAMP)",
        "ts <> CAST(ts AS TIMESTAMP(3))",
        "tz = tzn",  # instants
        "tz > tzn",
        "tzn = tsu",  # tsu as a wall time in New York
        "tz < tsu",
        "tzn IN (tsu)",
        "tz - tsu",
        "tsu - tz",
    ],
)
def test_timestamps_of_two_types_compare_in_their_union_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: ts_ns = CAST(ts_ns AS TIMESTAMP) compared in nanoseconds (false
    # where pylance, comparing in microseconds, has true: a silent wrong answer); zoned with other
    # timestamps were refused ("no kernel matching").
    _same_value(probe_uri, expr)
    if "-" not in expr:
        _same_filter(probe_uri, expr)


def test_timestamps_of_two_zones_do_not_subtract_like_pylance(probe_uri: str) -> None:
    with pytest.raises((ValueError, OSError), match="coerce"):
        lance.dataset(probe_uri).to_table(columns={"v": "tzn - tz"})
    with pytest.raises(LanceError, match="zones"):
        lance_format.dataset(probe_uri).to_table(columns={"v": "tzn - tz"})


def test_timestamps_of_two_units_fixed_values(probe_uri: str) -> None:
    # row 0 is -1 ns, 1969-12-31 23:59:59.999999999: truncated toward zero, 1970-01-01 in us
    assert _same_value(probe_uri, "ts = CAST(ts AS TIMESTAMP)")[1][0] == "True"


@pytest.mark.parametrize(
    "sql",
    [
        "s LIKE p",
        "s NOT LIKE p",
        "s ILIKE upper(p)",
        "s LIKE concat(p, '%')",
        "NOT (s ILIKE concat('%', p, '%'))",
        "ls LIKE p",
        "s LIKE NULL",
    ],
)
def test_like_with_a_pattern_per_row_like_pylance(probe_uri: str, sql: str) -> None:
    # Found probing session 18: ours refused a pattern that is not a literal ("LIKE needs a string
    # pattern"), and LIKE NULL.
    _same_value(probe_uri, sql)
    _same_filter(probe_uri, sql)


def test_like_with_a_pattern_per_row_fixed_values(probe_uri: str) -> None:
    assert _same_filter(probe_uri, "s LIKE concat(p, '%')") == [0, 3]  # row 3: concat skips the NULL


@pytest.mark.parametrize(
    "expr",
    [
        "power(i8, 2)", "pow(f, 0.5)", "power(u64, 2)", "ln(f)", "ln(i8)", "ln(u64)", "exp(dec)",
        "log(f)",  # ln(x) / ln(10): 299.99999999999994 of 1e300
        "log10(f)",  # exact: 300 (sqlglot reads log10(x) as log(10, x))
        "log2(f)", "log(2, f)", "sqrt(u64)", "round(u64)",
        "greatest(i8, 1)", "least(i8, u64)", "greatest(s, 'b')", "greatest(f, i8)", "least(f, i8)",
        "greatest(i8, NULL)", "greatest(ts, d)",
        "nullif(i8, 1)", "nullif(s, 'abc')", "nullif(i8, u64)", "nullif(f, f)",
        "ln(i8) > 0",  # NaN of a negative number sorts above every number
    ],
)  # fmt: skip
def test_math_functions_and_greatest_least_nullif_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: ours refused power, ln, log, log10, log2, exp, greatest, least and
    # nullif, and sqrt/round of a uint64 past 2**53 (a safe cast to float64).
    _same_value(probe_uri, expr)


@pytest.mark.parametrize("sql", ["ln(i8) > 0", "greatest(f, 1) > 2", "nullif(i8, 0) IS NULL", "exp(f) > 1"])
def test_math_functions_in_filters_like_pylance(probe_uri: str, sql: str) -> None:
    _same_filter(probe_uri, sql)


def test_math_functions_fixed_values(probe_uri: str) -> None:
    # f's row 5 is 1e300
    assert _same_value(probe_uri, "log(f)")[1][5] == "299.99999999999994"
    assert _same_value(probe_uri, "log10(f)")[1][5] == "300.0"
    assert _same_value(probe_uri, "greatest(f, i8)")[1][1] == "nan"  # NaN above 1


@pytest.mark.parametrize(
    "expr",
    ["trunc(f, 1)", "trunc(dec, 1)", "trunc(i8, 1)", "trunc(f, -1)", "trunc(-f, 1)", "array_length(li, 1)"],
)
def test_trunc_to_digits_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: trunc(f, 1) dropped its digits (1.5 gave 1.0: a silent wrong
    # answer, sqlglot's Trunc keeps them apart from the value).
    _same_value(probe_uri, expr)


@pytest.mark.parametrize(
    "expr",
    [
        "strpos(s, 'a', 2)",
        "instr(s, 'a', 2)",
        "round(f, 1, 2)",
        "length(s, 1)",
        "regexp_like(s, 'a', 'i', 1)",
        "array_has(li, 1, 2)",
    ],
)
def test_arguments_sqlglot_reads_aside_are_refused_like_pylance(probe_uri: str, expr: str) -> None:
    # Found probing session 18: ours dropped the argument and answered; pylance refuses the call.
    with pytest.raises((ValueError, OSError)):
        lance.dataset(probe_uri).to_table(columns={"v": expr})
    with pytest.raises(LanceError, match="too many arguments"):
        lance_format.dataset(probe_uri).to_table(columns={"v": expr})


def test_array_length_of_a_second_dimension_is_refused(probe_uri: str) -> None:
    # pylance answers NULL (a list of int32 has one dimension); ours dropped the 2 and answered
    # the length: refused now, a known difference (docs/filters.md)
    assert lance.dataset(probe_uri).to_table(columns={"v": "array_length(li, 2)"})["v"].null_count == 8
    with pytest.raises(LanceError, match="too many arguments"):
        lance_format.dataset(probe_uri).to_table(columns={"v": "array_length(li, 2)"})
