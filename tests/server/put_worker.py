"""A client process for the kill test: starts a do_put, sends some batches, then waits to be killed."""

from __future__ import annotations

import sys
import time

import pyarrow as pa
import pyarrow.flight as flight

from flight_server._serde import encode_command
from flight_server.requests import WriteRequest


def main(location: str, mode: str) -> None:
    client = flight.connect(location)
    batch = pa.record_batch({"id": pa.array(range(1000), pa.int64())})
    descriptor = flight.FlightDescriptor.for_command(
        encode_command(WriteRequest("ds", mode, max_rows_per_file=1000, end_marker=True))
    )  # type: ignore[arg-type]
    writer, _ = client.do_put(descriptor, batch.schema)
    for _ in range(5):
        writer.write_batch(batch)
    print("sent", flush=True)
    time.sleep(600)  # killed here, mid-stream


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
