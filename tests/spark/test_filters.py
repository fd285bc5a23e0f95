"""Spark filters -> the server's SQL predicate, checked by evaluating it with the engine's parser."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from flight_server.spark.filters import split_filters
from lance_format.dataset.filters import parse_filter

pytestmark = pytest.mark.spark

TABLE = pa.table(
    {
        "a": pa.array([1, 2, 3, None], pa.int64()),
        'we"ird': ["x", "y'z", "%", None],
        "s": pa.array([{"b": 1.5}, {"b": 2.5}, {"b": None}, {"b": 4.0}]),
        "d": pa.array([dt.date(2020, 1, 1), dt.date(2021, 1, 1), None, dt.date(2022, 1, 1)]),
        "ntz": pa.array(
            [dt.datetime(2020, 1, 1), dt.datetime(2021, 1, 1, 5), None, None], pa.timestamp("ns")
        ),
        "tz": pa.array([0, 1, 2, 3], pa.timestamp("us", "UTC")),
        "flag": pa.array([True, False, None, True]),
        "dec": pa.array([decimal.Decimal(1)] * 4, pa.decimal128(5, 2)),
        "f": pa.array([0.5, float("nan"), 2.0, None], pa.float32()),
    }
)


def rows(flt: Filter) -> list[int]:
    split = split_filters([flt], TABLE.schema)
    assert split.sql is not None, f"{flt} was not pushed"
    assert split.pushed == (flt,)
    assert split.rejected == ()
    expr = parse_filter(split.sql, TABLE.schema).expression
    kept = TABLE.append_column("_i", pa.array(range(TABLE.num_rows))).filter(expr)
    return kept.column("_i").to_pylist()


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (EqualTo(("a",), 2), [1]),
        (GreaterThan(("a",), 1), [1, 2]),
        (GreaterThanOrEqual(("a",), 2), [1, 2]),
        (LessThan(("a",), 2), [0]),
        (LessThanOrEqual(("a",), 2), [0, 1]),
        (Not(EqualTo(("a",), 2)), [0, 2]),  # NULL stays out, as in Spark
        (In(("a",), (1, None, 3)), [0, 2]),
        (IsNull(("a",)), [3]),
        (IsNotNull(("a",)), [0, 1, 2]),
        (EqualNullSafe(("a",), None), [3]),
        (EqualNullSafe(("a",), 1), [0]),
        (EqualTo(('we"ird',), "y'z"), [1]),
        (StringStartsWith(('we"ird',), "y'"), [1]),
        (StringEndsWith(('we"ird',), "z"), [1]),
        (StringContains(('we"ird',), "'"), [1]),
        (LessThan(("s", "b"), 2.0), [0]),
        (GreaterThanOrEqual(("d",), dt.date(2021, 1, 1)), [1, 3]),
        (LessThan(("ntz",), dt.datetime(2020, 6, 1)), [0]),
        (EqualTo(("flag",), True), [0, 3]),
        (Not(EqualTo(("flag",), True)), [1]),
        (GreaterThan(("f",), 1.0), [1, 2]),  # Spark: NaN is above every number
        (GreaterThanOrEqual(("f",), 2.0), [1, 2]),
        (Not(GreaterThan(("f",), 1.0)), [0]),
        (LessThan(("f",), 1.0), [0]),
    ],
)
def test_pushed_filter_selects_what_spark_would(flt: Filter, expected: list[int]) -> None:
    assert rows(flt) == expected


@pytest.mark.parametrize(
    "flt",
    [
        EqualTo(("missing",), 1),
        EqualTo(("a",), "1"),  # type mismatch: Spark would cast; leave it to Spark
        StringContains(('we"ird',), "%"),  # LIKE metacharacter
        StringStartsWith(('we"ird',), "a_"),
        EqualTo(("tz",), dt.datetime(1970, 1, 1, tzinfo=dt.UTC)),  # zoned timestamp
        EqualTo(("dec",), decimal.Decimal(1)),
        GreaterThan(("f",), float("nan")),
        EqualTo(("a",), [1, 2]),
        Not(EqualTo(("missing",), 1)),
        In(("a",), (None,)),
    ],
)
def test_inexact_filters_stay_with_spark(flt: Filter) -> None:
    split = split_filters([flt], TABLE.schema)
    assert split.sql is None
    assert split.rejected == (flt,)


def test_conjunction_keeps_the_rejected_ones_by_reference() -> None:
    keep = EqualTo(("dec",), decimal.Decimal(1))
    flts = [GreaterThan(("a",), 1), keep, IsNotNull(("d",))]
    split = split_filters(flts, TABLE.schema)
    assert split.rejected[0] is keep
    assert split.sql == '("a" > 1) AND ("d" IS NOT NULL)'
