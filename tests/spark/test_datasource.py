"""The ``lance`` data source end to end: a real local Spark (``local[2]``) against a real server."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import lance  # the test-only oracle
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flight_server.spark import save, take_rows
from lance_format.dataset import dataset, write_dataset

pytestmark = pytest.mark.spark

N = 6


def _nulls(values: list[Any]) -> list[Any]:
    return [*values[:-1], None]


def all_types() -> pa.Table:
    """One column per Arrow type a dataset holds and Spark maps; the last row is null where allowed."""
    utc = dt.UTC
    cols: dict[str, pa.Array] = {
        "id": pa.array(range(N), pa.int64()),
        "b": pa.array(_nulls([True, False, True, False, True, False])),
        "i8": pa.array(_nulls([-128, 127, 0, 1, 2, 3]), pa.int8()),
        "i16": pa.array(_nulls([-32768, 32767, 0, 1, 2, 3]), pa.int16()),
        "i32": pa.array(_nulls([-(2**31), 2**31 - 1, 0, 1, 2, 3]), pa.int32()),
        "i64": pa.array(_nulls([-(2**63), 2**63 - 1, 0, 1, 2, 3]), pa.int64()),
        "u8": pa.array(_nulls([0, 255, 1, 2, 3, 4]), pa.uint8()),
        "u16": pa.array(_nulls([0, 65535, 1, 2, 3, 4]), pa.uint16()),
        "u32": pa.array(_nulls([0, 2**32 - 1, 1, 2, 3, 4]), pa.uint32()),
        "u64": pa.array(_nulls([0, 2**63 - 1, 1, 2, 3, 4]), pa.uint64()),
        "f32": pa.array(_nulls([0.5, -1.5, 3.25, 0.0, float("nan"), 3.0]), pa.float32()),
        "f64": pa.array(_nulls([0.1, -1e300, 3.25, 0.0, float("inf"), 3.0]), pa.float64()),
        "dec": pa.array(
            _nulls([decimal.Decimal(x) for x in ("1.23", "-99999999.99", "0", "0.01", "5.5", "0")]),
            pa.decimal128(10, 2),
        ),
        "dec38": pa.array(_nulls([decimal.Decimal("1" * 28 + ".1234567891")] * N), pa.decimal128(38, 10)),
        "s": pa.array(_nulls(["a", "", "héllo", "x" * 100, "'quote", "z"])),
        "ls": pa.array(_nulls(["a", "b", "c", "d", "e", "f"]), pa.large_string()),
        "bin": pa.array(_nulls([b"\x00\x01", b"", b"abc", b"x", b"y", b"z"])),
        "d": pa.array(
            _nulls([dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(1, 1, 1), dt.date(9999, 12, 31)] * 2)[
                :N
            ]
        ),
        "ts_utc": pa.array(_nulls([dt.datetime(2024, 1, 1, 12, tzinfo=utc)] * N), pa.timestamp("us", "UTC")),
        "ts_ny": pa.array(
            _nulls([dt.datetime(2024, 7, 1, 12, 0, 0, 123456, tzinfo=utc)] * N),
            pa.timestamp("us", "America/New_York"),
        ),
        "ts_ntz": pa.array(_nulls([dt.datetime(2024, 1, 1, 12, 0, 0, 1)] * N), pa.timestamp("us")),
        "ts_ms": pa.array(_nulls([1_700_000_000_123] * N), pa.timestamp("ms", "UTC")),
        "lst": pa.array(_nulls([[1, 2], [], None, [3], [4, None], [5]]), pa.list_(pa.int32())),
        "vec": pa.array(_nulls([[1.0, 2.0, 3.0, float(i)] for i in range(N)]), pa.list_(pa.float32(), 4)),
        "st": pa.array(
            [{"x": i, "y": None if i % 2 else f"s{i}", "inner": {"z": float(i)}} for i in range(N)],
            pa.struct([("x", pa.int32()), ("y", pa.string()), ("inner", pa.struct([("z", pa.float64())]))]),
        ),
        "dict": pa.array(_nulls(["p", "q", "p", "q", "p", "q"])).dictionary_encode(),
    }
    return pa.table(cols)


def _spark_view(table: pa.Table) -> pa.Table:
    """``table`` as Spark must give it back: the values, in Spark's Arrow types."""
    out = {}
    for f, col in zip(table.schema, table.columns, strict=True):
        t = f.type
        if pa.types.is_dictionary(t):
            col = col.cast(t.value_type)
        elif pa.types.is_fixed_size_list(t):
            col = col.cast(pa.list_(t.value_type))
        elif pa.types.is_timestamp(t) and t.tz is not None:
            col = col.cast(pa.timestamp("us", "UTC"))
        out[f.name] = col
    return pa.table(out)


def _values(table: pa.Table) -> list[dict[str, Any]]:
    rows = table.sort_by("id").to_pylist()
    for r in rows:  # NaN != NaN: compare its text
        for k, v in r.items():
            if isinstance(v, float) and v != v:
                r[k] = "nan"
    return rows


def test_round_trip_of_every_supported_type(spark: Any, server: Any, uri: str, name: str) -> None:
    table = all_types()
    write_dataset(table, str(server.root / name))
    df = spark.read.format("lance").option("uri", uri).load(name)
    got = df.toArrow()
    assert _values(got) == _values(_spark_view(table))

    # ... and back: Spark writes a new dataset; vectors are kept as vectors when asked.
    out = f"{name}_back"
    save(df, out, uri=uri, vector_columns="vec")
    written = dataset(str(server.root / out)).to_table()
    assert written.schema.field("vec").type == pa.list_(pa.float32(), 4)
    assert written.schema.field("ts_ny").type == pa.timestamp("us", "UTC")
    assert _values(_spark_view(written)) == _values(_spark_view(table).cast(_spark_view(written).schema))
    # Appending Spark rows to the original dataset casts them to its exact types.
    df.write.format("lance").option("uri", uri).mode("append").save(name)
    appended = dataset(str(server.root / name))
    assert appended.schema == table.schema
    assert appended.count_rows() == 2 * N


def test_a_type_spark_cannot_hold_is_named(spark: Any, server: Any, uri: str, name: str) -> None:
    table = pa.table({"id": [1], "clock": pa.array([dt.time(1, 2)], pa.time64("us"))})
    write_dataset(table, str(server.root / name))
    with pytest.raises(Exception, match="clock"):
        spark.read.format("lance").option("uri", uri).load(name)
    # Projecting it away reads the rest.
    df = spark.read.format("lance").option("uri", uri).option("columns", "id").load(name)
    assert df.collect()[0].id == 1


def test_filters_are_pushed_to_the_server(spark: Any, server: Any, uri: str, name: str) -> None:
    n = 20_000
    table = pa.table({"id": pa.array(range(n), pa.int64()), "tag": [f"t{i % 10}" for i in range(n)]})
    write_dataset(table, str(server.root / name), max_rows_per_file=5_000)
    df = spark.read.format("lance").option("uri", uri).option("pushdown", "true").load(name)

    before = server.rows_served
    rows = df.filter("id < 150 AND tag = 't3'").collect()
    assert sorted(r.id for r in rows) == list(range(3, 150, 10))
    assert server.rows_served - before == 15  # only matching rows left the server

    # Not expressible on the server (arithmetic): Spark filters, the server sends every row.
    before = server.rows_served
    assert df.filter("id % 1000 = 7").count() == 20
    assert server.rows_served - before == n


def test_a_reused_dataframe_sees_every_row_by_default(spark: Any, server: Any, uri: str, name: str) -> None:
    # Spark <= 4.3 would hand the filtered query's read plan to the unfiltered one if the default
    # reader pushed filters (see PUSHDOWN_SCOPED_PER_SCAN); the default must stay correct.
    write_dataset(pa.table({"id": pa.array(range(100), pa.int64())}), str(server.root / name))
    df = spark.read.format("lance").option("uri", uri).load(name)
    assert df.filter("id >= 90").count() == 10
    assert df.count() == 100


def test_multi_partition_read_equals_pylance(spark: Any, server: Any, uri: str, name: str) -> None:
    n = 10_000
    table = pa.table({"id": pa.array(range(n), pa.int64()), "x": pc.multiply(pa.array(range(n)), 0.5)})
    path = str(server.root / name)
    write_dataset(table, path, max_rows_per_file=2_000)
    dataset(path).delete("id % 7 = 0")
    df = spark.read.format("lance").option("uri", uri).option("batch_size", 500).load(name)
    assert df.rdd.getNumPartitions() == 5
    expected = lance.dataset(path).to_table().sort_by("id")
    assert df.toArrow().sort_by("id").equals(expected)
    # Fewer fragments than wanted partitions: the big ones are split into row ranges.
    split = spark.read.format("lance").option("uri", uri).option("min_partitions", 8).load(name)
    assert split.rdd.getNumPartitions() >= 8
    assert split.toArrow().sort_by("id").equals(expected)


def test_version_projection_and_row_ids(spark: Any, server: Any, uri: str, name: str) -> None:
    path = str(server.root / name)
    write_dataset(pa.table({"id": [1, 2], "v": ["a", "b"]}), path)
    write_dataset(pa.table({"id": [3], "v": ["c"]}), path, mode="append")
    old = (
        spark.read.format("lance")
        .option("uri", uri)
        .option("version", "1")
        .option("columns", "v")
        .option("with_row_id", "true")
        .load(name)
    )
    assert old.columns == ["v", "_rowid"]
    got = sorted((r.v, r._rowid) for r in old.collect())
    assert got == [("a", 0), ("b", 1)]
    assert spark.read.format("lance").option("uri", uri).load(name).count() == 3


def test_save_modes(spark: Any, server: Any, uri: str, name: str) -> None:
    path = server.root / name
    df1 = spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string")
    df2 = spark.createDataFrame([(3, "c")], "id long, v string")
    writer = df1.write.format("lance").option("uri", uri)
    writer.mode("append").save(name)  # creates
    df2.write.format("lance").option("uri", uri).mode("append").save(name)
    ds = dataset(str(path))
    assert sorted(ds.to_table().column("id").to_pylist()) == [1, 2, 3]
    assert ds.version == 2

    with pytest.raises(Exception, match="already exists"):
        save(df2, name, uri=uri, mode="errorifexists")
    save(df2, name, uri=uri, mode="ignore")
    assert dataset(str(path)).version == 2  # unchanged by both

    df2.write.format("lance").option("uri", uri).mode("overwrite").save(name)
    ds = dataset(str(path))
    assert ds.to_table().column("id").to_pylist() == [3]
    assert ds.version == 3
    # An overwrite may change the schema.
    spark.createDataFrame([("x",)], "other string").write.format("lance").option("uri", uri).mode(
        "overwrite"
    ).save(name)
    assert dataset(str(path)).schema.names == ["other"]

    fresh = f"{name}_new"
    save(df1, fresh, uri=uri)  # errorifexists on a new dataset: created
    assert dataset(str(server.root / fresh)).count_rows() == 2


def _files(path: Path) -> set[str]:
    return {p.name for p in (path / "data").glob("*")}


def test_failed_task_leaves_dataset_and_files_unchanged(spark: Any, server: Any, uri: str, name: str) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    path = server.root / name
    write_dataset(pa.table({"id": pa.array([-1], pa.int64())}), str(path))
    files = _files(path)

    @F.udf(LongType())  # type: ignore[misc]
    def explode_late(i):  # type: ignore[no-untyped-def]  # no hints: they would make it a pandas UDF
        if i == 9_000:
            raise ValueError("boom at row 9000")
        return i

    # Two partitions: one task finishes (its staged files must be discarded by abort), the other
    # fails after having streamed batches (its put must be discarded by the task itself).
    df = spark.range(0, 10_000, numPartitions=2).select(explode_late("id").alias("id"))
    with pytest.raises(Exception, match="boom"):
        df.write.format("lance").option("uri", uri).option("batch_size", 1000).mode("append").save(name)
    ds = dataset(str(path))
    assert ds.version == 1
    assert ds.to_table().column("id").to_pylist() == [-1]
    assert _files(path) == files


def test_take_rows_keeps_the_order(spark: Any, server: Any, uri: str, name: str) -> None:
    n = 1_000
    table = pa.table({"id": pa.array(range(n), pa.int64()), "s": [f"r{i}" for i in range(n)]})
    write_dataset(table, str(server.root / name), max_rows_per_file=300)
    df = spark.read.format("lance").option("uri", uri).option("with_row_id", "true").load(name)
    row_id = {r.id: r._rowid for r in df.select("id", "_rowid").collect()}
    wanted = [999, 5, 5, 301, 0, 640, 299]  # across fragments, repeats, any order
    ids = [row_id[i] for i in wanted]
    ids_df = spark.createDataFrame([(i,) for i in ids], "_rowid long").coalesce(1)
    rows = take_rows(ids_df, name, uri=uri, columns=["s", "id"]).collect()
    assert [r._rowid for r in rows] == ids
    assert [(r.s, r.id) for r in rows] == [(f"r{i}", i) for i in wanted]


def test_token_option_reaches_a_secured_server(spark: Any, tmp_path: Path) -> None:
    from flight_server.auth import Authenticator, AuthMiddlewareFactory
    from flight_server.service import LanceFlightService
    from flight_server.settings import ServerSettings, Token

    settings = ServerSettings(root=str(tmp_path), tokens=(Token("s3cret"),))
    auth = AuthMiddlewareFactory(Authenticator(settings))
    service = LanceFlightService(settings, location="grpc://127.0.0.1:0", middleware={"auth": auth})
    try:
        write_dataset(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), str(tmp_path / "sec"))
        uri = f"grpc://127.0.0.1:{service.port}"
        reader = spark.read.format("lance").option("uri", uri)
        assert reader.option("token", "s3cret").load("sec").count() == 3
        with pytest.raises(Exception, match=r"(?i)unauthenticated|authentication required"):
            spark.read.format("lance").option("uri", uri).option("token", "wrong").load("sec")
    finally:
        service.shutdown()
