"""Arrow <-> Spark type mapping for the ``lance`` data source.

Reading: every Arrow type a Lance dataset can hold maps to the closest Spark type that keeps the
values (vectors = ``fixed_size_list`` become ``ArrayType``, unsigned integers widen, dictionaries
decode, timestamps with a zone become ``TimestampType``, without one ``TimestampNTZType``). Spark's
Python data source checks that each batch has *exactly* the Arrow schema it derives from the Spark
schema, so :func:`to_spark_batch` casts every batch to that schema.

Writing: Spark hands the writer Arrow batches; :func:`to_dataset_batch` casts them to the target
dataset's schema (e.g. Spark arrays back into fixed-size vectors), and :func:`check_writable` refuses
Spark types a Lance dataset cannot store before any task starts. Every refusal names the column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lance_format.core.errors import NotSupportedError, SchemaMismatchError

__all__ = [
    "arrow_to_spark_schema",
    "arrow_to_spark_type",
    "check_writable",
    "spark_arrow_schema",
    "spark_to_arrow_schema",
    "to_dataset_batch",
    "to_spark_batch",
]

# Spark's largest decimal: DecimalType(38, s).
SPARK_MAX_DECIMAL_PRECISION = 38
# Spark's Python data sources exchange TimestampType as Arrow timestamp[us, tz=UTC].
SPARK_ARROW_TZ = "UTC"

_SIMPLE_TO_SPARK: dict[pa.DataType, DataType] = {
    pa.null(): NullType(),
    pa.bool_(): BooleanType(),
    pa.int8(): ByteType(),
    pa.int16(): ShortType(),
    pa.int32(): IntegerType(),
    pa.int64(): LongType(),
    # Unsigned integers widen to the next signed type so every value fits.
    pa.uint8(): ShortType(),
    pa.uint16(): IntegerType(),
    pa.uint32(): LongType(),
    # uint64 (row ids, hashes) maps to long; values above 2**63-1 fail the checked cast by name.
    pa.uint64(): LongType(),
    pa.float16(): FloatType(),
    pa.float32(): FloatType(),
    pa.float64(): DoubleType(),
    pa.string(): StringType(),
    pa.large_string(): StringType(),
    pa.string_view(): StringType(),
    pa.binary(): BinaryType(),
    pa.large_binary(): BinaryType(),
    pa.binary_view(): BinaryType(),
    pa.date32(): DateType(),
    pa.date64(): DateType(),
}


def _unsupported(column: str, t: pa.DataType, why: str = "") -> NotSupportedError:
    extra = f" ({why})" if why else ""
    return NotSupportedError(f"column {column!r} has Arrow type {t}, which Spark cannot hold{extra}")


def arrow_to_spark_type(t: pa.DataType, column: str = "?") -> DataType:
    """The Spark type that holds values of Arrow type ``t``.

    Parameters
    ----------
    t : pyarrow.DataType
        The Arrow type (as served by the Flight server).
    column : str
        Dotted column path, used in the error message.

    Raises
    ------
    NotSupportedError
        When Spark has no type for ``t`` (unions, month-day-nano intervals, decimals wider than 38
        digits, ...); the message names ``column``.
    """
    simple = _SIMPLE_TO_SPARK.get(t)
    if simple is not None:
        return simple
    if pa.types.is_fixed_size_binary(t):
        return BinaryType()
    if pa.types.is_decimal(t):
        if t.precision > SPARK_MAX_DECIMAL_PRECISION:
            raise _unsupported(column, t, f"Spark decimals hold at most {SPARK_MAX_DECIMAL_PRECISION} digits")
        return DecimalType(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        return TimestampType() if t.tz is not None else TimestampNTZType()
    if pa.types.is_duration(t):
        return DayTimeIntervalType()
    if pa.types.is_dictionary(t):
        return arrow_to_spark_type(t.value_type, column)
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        item = t.value_field
        return ArrayType(arrow_to_spark_type(item.type, f"{column}[]"), containsNull=item.nullable)
    if pa.types.is_struct(t):
        return StructType(
            [
                StructField(f.name, arrow_to_spark_type(f.type, f"{column}.{f.name}"), nullable=f.nullable)
                for f in t
            ]
        )
    raise _unsupported(column, t)


def arrow_to_spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of a dataset's Arrow schema (see :func:`arrow_to_spark_type`)."""
    return StructType(
        [StructField(f.name, arrow_to_spark_type(f.type, f.name), nullable=f.nullable) for f in schema]
    )


def spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects a Python data source to yield for ``schema``."""
    return to_arrow_schema(schema, timezone=SPARK_ARROW_TZ)


def _cast(array: pa.Array | pa.ChunkedArray, target: pa.DataType, column: str) -> pa.Array:
    if array.type == target:
        return array
    if pa.types.is_dictionary(array.type):
        return _cast(array.dictionary_decode(), target, column)
    try:
        if pa.types.is_timestamp(target) or pa.types.is_duration(target):
            # Spark holds microseconds: nanosecond values are truncated, like Spark's own readers.
            return pc.cast(array, target, safe=False)
        return pc.cast(array, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaMismatchError(
            f"column {column!r}: cannot convert Arrow {array.type} to {target}: {e}"
        ) from None


def to_spark_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Cast a served batch to the Arrow schema Spark expects (``spark_arrow_schema``), by name."""
    if batch.schema.equals(target):
        return batch
    columns = [_cast(batch.column(f.name), f.type, f.name) for f in target]
    return pa.RecordBatch.from_arrays(columns, schema=target)


def spark_to_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema a new dataset gets for a Spark schema (after :func:`check_writable`)."""
    check_writable(schema)
    return pa.schema(
        [pa.field(f.name, to_arrow_type(f.dataType, timezone=SPARK_ARROW_TZ), f.nullable) for f in schema]
    )


def _check_writable(dt: DataType, column: str) -> None:
    if isinstance(dt, ArrayType):
        _check_writable(dt.elementType, f"{column}[]")
        return
    if isinstance(dt, StructType):
        for f in dt.fields:
            _check_writable(f.dataType, f"{column}.{f.name}")
        return
    allowed = (
        NullType,
        BooleanType,
        ByteType,
        ShortType,
        IntegerType,
        LongType,
        FloatType,
        DoubleType,
        DecimalType,
        StringType,
        BinaryType,
        DateType,
        TimestampType,
        TimestampNTZType,
        DayTimeIntervalType,
    )
    if not isinstance(dt, allowed):
        raise NotSupportedError(
            f"column {column!r} has Spark type {dt.simpleString()}, which a Lance dataset cannot store"
        )


def check_writable(schema: StructType) -> None:
    """Raise :class:`NotSupportedError` naming the first column a Lance dataset cannot store."""
    for f in schema.fields:
        _check_writable(f.dataType, f.name)


def _vector_type(array: pa.Array, column: str, size: int | None) -> pa.DataType:
    """``fixed_size_list`` type for a list column written as a vector (``size`` None: inferred)."""
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        raise SchemaMismatchError(f"vector column {column!r} must be an array, got {array.type}")
    if size is None:
        lengths = pc.list_value_length(array).drop_null()
        if len(lengths) == 0:
            raise SchemaMismatchError(
                f"vector column {column!r}: cannot infer the dimension of all-null data"
            )
        lo, hi = pc.min_max(lengths).values()
        if lo != hi:
            raise SchemaMismatchError(
                f"vector column {column!r}: rows have {lo.as_py()} to {hi.as_py()} values; "
                "a vector needs one length"
            )
        size = int(lo.as_py())
    return pa.list_(array.type.value_field, size)


def to_dataset_batch(
    batch: pa.RecordBatch,
    target: pa.Schema | None,
    vectors: Mapping[str, int | None] | None = None,
) -> pa.RecordBatch:
    """Cast a batch from Spark to the dataset's schema ``target`` (None: a new dataset).

    Columns are matched by name; arrays become ``fixed_size_list`` where the dataset (or
    ``vectors``, for a new dataset: column -> dimension, None = inferred) says so.

    Raises
    ------
    SchemaMismatchError
        A column is missing, extra, or not convertible; the message names it.
    """
    vectors = vectors or {}
    if target is None:
        arrays: list[pa.Array] = []
        fields: list[pa.Field] = []
        for f, col in zip(batch.schema, batch.columns, strict=True):
            t = f.type
            if pa.types.is_timestamp(t) and t.tz is not None:
                t = pa.timestamp(t.unit, SPARK_ARROW_TZ)
            if f.name in vectors:
                t = _vector_type(col, f.name, vectors[f.name])
            fields.append(pa.field(f.name, t, f.nullable))
            arrays.append(_cast(col, t, f.name))
        unknown = sorted(set(vectors) - set(batch.schema.names))
        if unknown:
            raise SchemaMismatchError(f"vector columns {unknown} are not in the data")
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    _check_same_columns(batch.schema.names, target.names)
    if batch.schema.equals(target):
        return batch
    columns = [_cast(batch.column(f.name), f.type, f.name) for f in target]
    return pa.RecordBatch.from_arrays(columns, schema=target)


def _check_same_columns(got: Sequence[str], want: Sequence[str]) -> None:
    missing = [n for n in want if n not in got]
    extra = [n for n in got if n not in want]
    if missing or extra:
        raise SchemaMismatchError(
            f"the data's columns do not match the dataset's: missing {missing}, not in the dataset {extra}"
        )
