"""The floor of the Spark design: a bare in-memory Flight server and a minimal Python data source.

:class:`BareFlightServer` serves one in-memory table, sliced into ``partitions`` endpoints (ticket =
``b"start:stop"``), and accepts ``do_put`` streams that it only counts. :class:`BareFlightSource`
(short name ``bareflight``) is the least a PySpark data source can do against it: one partition per
endpoint, ``read`` yields the ``do_get`` batches untouched, and the writer streams each task's
batches with one ``do_put``. Whatever the ``lance`` data source costs above these two is overhead of
our design; ``loadtest.bench_spark`` measures both in one run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from flight_server.spark.types import arrow_to_spark_schema

__all__ = ["BareFlightServer", "BareFlightSource"]


class BareFlightServer(flight.FlightServerBase):  # type: ignore[misc]
    """Serves ``table`` from memory in ``partitions`` row ranges; counts rows put to it."""

    def __init__(self, table: pa.Table, partitions: int, location: str = "grpc://127.0.0.1:0") -> None:
        super().__init__(location)
        self.table = table
        self.partitions = max(1, partitions)
        self.rows_put = 0
        self._lock = threading.Lock()

    def get_flight_info(self, context: Any, descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        n = self.table.num_rows
        step = -(-n // self.partitions)
        location = flight.Location.for_grpc_tcp("127.0.0.1", self.port)
        endpoints = [
            flight.FlightEndpoint(f"{lo}:{min(n, lo + step)}".encode(), [location])
            for lo in range(0, n, step)
        ]
        return flight.FlightInfo(self.table.schema, descriptor, endpoints, n, -1)

    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.RecordBatchStream:
        lo, hi = (int(x) for x in ticket.ticket.decode().split(":"))
        return flight.RecordBatchStream(self.table.slice(lo, hi - lo))

    def do_put(
        self,
        context: Any,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        rows = 0
        for chunk in reader:
            rows += chunk.data.num_rows
        with self._lock:
            self.rows_put += rows


class _Partition(InputPartition):
    def __init__(self, ticket: bytes) -> None:
        self.ticket = ticket


class _Reader(DataSourceReader):
    def __init__(self, uri: str, schema: StructType) -> None:
        self.uri = uri

    def partitions(self) -> list[InputPartition]:
        info = flight.FlightClient(self.uri).get_flight_info(flight.FlightDescriptor.for_path("t"))
        return [_Partition(ep.ticket.ticket) for ep in info.endpoints]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Partition)
        reader = flight.FlightClient(self.uri).do_get(flight.Ticket(partition.ticket))
        for chunk in reader:
            yield chunk.data


class _Done(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class _Writer(DataSourceArrowWriter):
    def __init__(self, uri: str) -> None:
        self.uri = uri

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        client = flight.FlightClient(self.uri)
        writer: flight.FlightStreamWriter | None = None
        rows = 0
        for batch in iterator:
            if writer is None:
                writer, _ = client.do_put(flight.FlightDescriptor.for_path("t"), batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
        if writer is not None:
            writer.close()
        return _Done(rows)


class BareFlightSource(DataSource):
    """Minimal Python data source over :class:`BareFlightServer` (option ``uri``)."""

    @classmethod
    def name(cls) -> str:
        return "bareflight"

    def schema(self) -> StructType:
        info = flight.FlightClient(self.options["uri"]).get_flight_info(flight.FlightDescriptor.for_path("t"))
        return arrow_to_spark_schema(info.schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(self.options["uri"], schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return _Writer(self.options["uri"])
