"""The read side of the ``lance`` data source: planning on the driver, streaming on executors.

``partitions()`` asks the server for a scan plan (``get_flight_info``): one endpoint per fragment or
row range, every ticket pinned to the version the DataFrame was created at. ``read()`` runs on an
executor, streams one endpoint with ``do_get`` and hands the Arrow batches to Spark after casting
them to the exact Arrow schema Spark derives from the DataFrame's schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from flight_server.client import ScanEndpoint
from flight_server.spark.connection import ROW_ID, client_for
from flight_server.spark.filters import split_filters
from flight_server.spark.options import ReadOptions
from flight_server.spark.types import spark_arrow_schema, to_spark_batch

__all__ = ["LanceInputPartition", "LanceReader", "LanceReaderNoPushdown"]


class LanceInputPartition(InputPartition):
    """One endpoint of the server's scan plan: an opaque ticket and the locations serving it."""

    def __init__(self, index: int, ticket: bytes, locations: Sequence[str]) -> None:
        super().__init__(index)
        self.ticket = ticket
        self.locations = tuple(locations)


class LanceReaderNoPushdown(DataSourceReader):
    """Reader without ``pushFilters``: Spark filters every row itself.

    Chosen when pushdown is off (option ``pushdown``, see
    :data:`flight_server.spark.datasource.PUSHDOWN_SCOPED_PER_SCAN`). It also works in sessions
    with ``spark.sql.python.filterPushdown.enabled`` off, where Spark refuses a reader that
    implements ``pushFilters``.
    """

    def __init__(self, options: ReadOptions, dataset_schema: pa.Schema, schema: StructType) -> None:
        self.options = options
        # The dataset's Arrow schema (before projection): the types pushed filters are checked against.
        self.dataset_schema = dataset_schema
        self.columns = tuple(schema.fieldNames())
        self.target = spark_arrow_schema(schema)
        self.filter_sql: str | None = options.filter

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per endpoint of the server's scan plan (big fragments split by the server)."""
        opts = self.options
        endpoints = client_for(opts.source).scan_endpoints(
            opts.source.dataset,
            columns=[c for c in self.columns if c != ROW_ID],
            filter=self.filter_sql,
            version=opts.version,
            batch_size=opts.batch_size,
            with_row_id=opts.with_row_id,
            min_endpoints=opts.min_partitions,
        )
        return [LanceInputPartition(i, ep.ticket, ep.locations) for i, ep in enumerate(endpoints)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Stream one endpoint (runs on an executor)."""
        assert isinstance(partition, LanceInputPartition)
        target = self.target
        endpoint = ScanEndpoint(partition.ticket, partition.locations)
        for batch in client_for(self.options.source).read_endpoint(endpoint, partition.value):
            if batch.num_rows:
                yield to_spark_batch(batch, target)


class LanceReader(LanceReaderNoPushdown):
    """Reader that also takes Spark's filters: the exactly-expressible ones go to the server."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Push what the server can evaluate exactly; yield the rest back to Spark."""
        split = split_filters(filters, self.dataset_schema)
        if split.sql is not None:
            self.filter_sql = split.sql if self.filter_sql is None else f"({self.filter_sql}) AND {split.sql}"
        yield from split.rejected
