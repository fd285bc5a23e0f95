"""A client process for the kill test: starts a do_put, sends some batches, then waits to be killed.

``mode`` is a WriteRequest mode (``append``, ``overwrite``, ``stage``: our client's command with the
end-of-write marker) or ``plain``: a plain Flight client's path descriptor, which has no marker.
"""

from __future__ import annotations

import sys
import time
from typing import cast

import pyarrow as pa
import pyarrow.flight as flight

from flight_server._serde import encode_command
from flight_server.requests import WriteMode, WriteRequest


def descriptor_for(mode: str) -> flight.FlightDescriptor:
    """The do_put descriptor of ``mode``: a path for ``plain``, else a WriteRequest command."""
    if mode == "plain":
        return flight.FlightDescriptor.for_path("ds")
    req = WriteRequest("ds", cast(WriteMode, mode), max_rows_per_file=1000, end_marker=True)
    return flight.FlightDescriptor.for_command(encode_command(req))


def main(location: str, mode: str) -> None:
    client = flight.connect(location)
    batch = pa.record_batch({"id": pa.array(range(1000), pa.int64())})
    writer, _ = client.do_put(descriptor_for(mode), batch.schema)
    for _ in range(5):
        writer.write_batch(batch)
    print("sent", flush=True)
    time.sleep(600)  # killed here, mid-stream


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
