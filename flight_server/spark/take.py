"""Rows by id, fetched on executors: the training-data case.

A DataFrame of row ids (e.g. a sampled or shuffled index, read with ``with_row_id=true``) becomes
the rows themselves: each Spark partition streams its ids to the server (``do_exchange``) and gets
the rows back in the order asked, so the output keeps the input's order within and across
partitions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from flight_server.spark.connection import client_for, dataset_info, projected_schema
from flight_server.spark.options import parse_read_options
from flight_server.spark.types import arrow_to_spark_schema, spark_arrow_schema, to_spark_batch
from lance_format.core.errors import InvalidInputError

__all__ = ["take_rows"]


def take_rows(
    ids: DataFrame,
    dataset: str,
    *,
    uri: str | None = None,
    row_id_column: str = "_rowid",
    columns: Sequence[str] | None = None,
    version: int | str | None = None,
    token: str | None = None,
    tls_root_certs: str | None = None,
) -> DataFrame:
    """Fetch the rows whose ids are in ``ids[row_id_column]``, in that order, on the executors.

    Parameters
    ----------
    ids : pyspark.sql.DataFrame
        Holds the row ids (Lance ``_rowid`` values, as read with option ``with_row_id=true``).
    dataset : str
        Dataset name on the server.
    uri : str, optional
        Server location (default: env ``LANCE_FLIGHT_URI``, then ``grpc://127.0.0.1:8815``).
    row_id_column : str
        The id column of ``ids``; it is kept as the first output column.
    columns : sequence of str, optional
        Columns to fetch (default: all).
    version : int or str, optional
        Version number or tag (default: the latest, pinned now so every task reads one snapshot).
    token, tls_root_certs : str, optional
        As the data source options of the same names.

    Returns
    -------
    pyspark.sql.DataFrame
        ``row_id_column`` followed by the fetched columns, one row per input id, in input order.
    """
    if row_id_column not in ids.columns:
        raise InvalidInputError(f"no column {row_id_column!r} in the ids DataFrame; it has {ids.columns}")
    raw = {
        "dataset": dataset,
        "uri": uri,
        "version": version,
        "token": token,
        "tls_root_certs": tls_root_certs,
    }
    opts = parse_read_options({k: str(v) for k, v in raw.items() if v is not None})
    if columns is not None:
        opts = opts.with_columns(tuple(columns))
    info = dataset_info(opts.source, opts.version)
    if info is None:
        raise InvalidInputError(f"dataset {dataset!r} does not exist on {opts.source.uri}")
    fetched = projected_schema(info.schema, opts.columns, with_row_id=False)
    if row_id_column in fetched.names:
        raise InvalidInputError(f"column {row_id_column!r} is both the id column and a fetched column")
    out = StructType([ids.schema[row_id_column], *arrow_to_spark_schema(fetched).fields])
    target = spark_arrow_schema(out)
    source, pinned, wanted = opts.source, info.version, tuple(fetched.names)

    def fetch(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        client = client_for(source)
        for batch in batches:
            id_array = batch.column(0)
            if id_array.null_count:
                raise InvalidInputError("row ids must not be null")
            ids = id_array.cast(pa.uint64()).to_numpy(zero_copy_only=False)
            rows = client.take(source.dataset, row_ids=ids, columns=wanted, version=pinned)
            if rows.num_rows != len(id_array):
                got = rows.num_rows
                raise InvalidInputError(f"asked for {len(id_array)} rows, the server returned {got}")
            columns = [id_array, *(rows.column(name).combine_chunks() for name in wanted)]
            yield to_spark_batch(pa.RecordBatch.from_arrays(columns, names=target.names), target)

    return ids.select(row_id_column).mapInArrow(fetch, out)
