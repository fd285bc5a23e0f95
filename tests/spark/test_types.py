"""Arrow <-> Spark type mapping, without a JVM."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DecimalType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from flight_server.spark.types import (
    arrow_to_spark_schema,
    arrow_to_spark_type,
    check_writable,
    spark_arrow_schema,
    to_dataset_batch,
    to_spark_batch,
)
from lance_format.core.errors import NotSupportedError, SchemaMismatchError

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    ("arrow", "spark"),
    [
        (pa.uint8(), ShortType()),
        (pa.uint32(), LongType()),
        (pa.uint64(), LongType()),
        (pa.float16(), FloatType()),
        (pa.large_string(), StringType()),
        (pa.dictionary(pa.int32(), pa.string()), StringType()),
        (pa.binary(4), BinaryType()),
        (pa.decimal128(38, 10), DecimalType(38, 10)),
        (pa.timestamp("ns", "America/New_York"), TimestampType()),
        (pa.timestamp("ms"), TimestampNTZType()),
        (pa.list_(pa.float32(), 128), ArrayType(FloatType(), True)),
        (pa.large_list(pa.field("x", pa.int32(), nullable=False)), ArrayType(IntegerType(), False)),
        (
            pa.struct([pa.field("a", pa.int32(), nullable=False)]),
            StructType([StructField("a", IntegerType(), False)]),
        ),
    ],
)
def test_arrow_to_spark(arrow: pa.DataType, spark: object) -> None:
    assert arrow_to_spark_type(arrow) == spark


@pytest.mark.parametrize(
    "arrow",
    [
        pa.decimal256(50, 2),
        pa.month_day_nano_interval(),
        pa.dense_union([pa.field("a", pa.int32())]),
        pa.struct([("inner", pa.list_(pa.month_day_nano_interval()))]),
    ],
)
def test_unsupported_arrow_type_names_the_column(arrow: pa.DataType) -> None:
    schema = pa.schema([("ok", pa.int32()), ("bad_col", arrow)])
    with pytest.raises(NotSupportedError, match="bad_col"):
        arrow_to_spark_schema(schema)


def test_batches_are_cast_to_sparks_exact_arrow_schema() -> None:
    batch = pa.record_batch(
        {
            "u": pa.array([1, None], pa.uint64()),
            "vec": pa.array([[1.0, 2.0], None], pa.list_(pa.float32(), 2)),
            "d": pa.array(["a", "b"]).dictionary_encode(),
            "ts": pa.array([1_500, None], pa.timestamp("ns", "Asia/Tokyo")),
            "dec": pa.array([decimal.Decimal("1.5"), None], pa.decimal128(5, 1)),
        }
    )
    target = spark_arrow_schema(arrow_to_spark_schema(batch.schema))
    out = to_spark_batch(batch, target)
    assert out.schema.equals(target)
    assert out.column("vec").to_pylist() == [[1.0, 2.0], None]
    assert out.column("d").to_pylist() == ["a", "b"]
    assert out.column("ts").to_pylist()[0] == dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC)


def test_uint64_overflow_names_the_column() -> None:
    batch = pa.record_batch({"big": pa.array([2**64 - 1], pa.uint64())})
    with pytest.raises(SchemaMismatchError, match="big"):
        to_spark_batch(batch, spark_arrow_schema(arrow_to_spark_schema(batch.schema)))


def test_unwritable_spark_types_are_refused_by_name() -> None:
    schema = StructType(
        [StructField("fine", LongType()), StructField("m", MapType(StringType(), LongType()))]
    )
    with pytest.raises(NotSupportedError, match="'m'"):
        check_writable(schema)
    nested = StructType([StructField("s", StructType([StructField("v", VariantType())]))])
    with pytest.raises(NotSupportedError, match=r"s\.v"):
        check_writable(nested)


def test_writes_cast_to_the_dataset_schema_by_name() -> None:
    target = pa.schema([("id", pa.uint64()), ("vec", pa.list_(pa.float32(), 2))])
    batch = pa.record_batch(
        {"vec": pa.array([[1.0, 2.0]], pa.list_(pa.float32())), "id": pa.array([7], pa.int64())}
    )
    out = to_dataset_batch(batch, target)
    assert out.schema.equals(target)
    assert out.to_pylist() == [{"id": 7, "vec": [1.0, 2.0]}]
    with pytest.raises(SchemaMismatchError, match=r"missing \['vec'\]"):
        to_dataset_batch(batch.select(["id"]), target)
    wrong_dim = pa.record_batch({"id": [1], "vec": pa.array([[1.0, 2.0, 3.0]], pa.list_(pa.float32()))})
    with pytest.raises(SchemaMismatchError, match="vec"):
        to_dataset_batch(wrong_dim, target)


def test_new_dataset_vectors_and_time_zone() -> None:
    batch = pa.record_batch(
        {
            "emb": pa.array([[1.0, 2.0, 3.0], None], pa.list_(pa.float32())),
            "t": pa.array([0, 1], pa.timestamp("us", "Etc/UTC")),
        }
    )
    out = to_dataset_batch(batch, None, {"emb": None})
    assert out.schema.field("emb").type == pa.list_(pa.float32(), 3)
    assert out.schema.field("t").type == pa.timestamp("us", "UTC")
    ragged = pa.record_batch({"emb": pa.array([[1.0], [1.0, 2.0]], pa.list_(pa.float32()))})
    with pytest.raises(SchemaMismatchError, match="emb"):
        to_dataset_batch(ragged, None, {"emb": None})
    with pytest.raises(SchemaMismatchError, match="emb"):
        to_dataset_batch(ragged, None, {"emb": 2})
