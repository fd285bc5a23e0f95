"""A stand-in for LanceFlightService with the same constructor, for testing the serving machinery.

It serves one in-memory table under the name ``t``; ``get_flight_info`` lists one endpoint per
advertised location; the action ``sleep`` holds a call open (for drain tests); ``do_put`` needs a
read-write caller (:func:`flight_server.auth.require_write`) and counts rows through ``metrics``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.auth import require_write
from flight_server.metrics import Metrics
from flight_server.settings import ServerSettings

TABLE = pa.table({"id": pa.array(range(100), pa.int64()), "v": pa.array([float(i) for i in range(100)])})


class StandInService(flight.FlightServerBase):  # type: ignore[misc]
    def __init__(
        self,
        settings: ServerSettings,
        *,
        location: str,
        advertise: Sequence[str] = (),
        middleware: Mapping[str, flight.ServerMiddlewareFactory] | None = None,
        auth_handler: Any = None,
        tls_certificates: Any = (),
        verify_client: bool = False,
        root_certificates: bytes | None = None,
        metrics: Metrics | None = None,
        session: Any = None,  # the engine session build_server passes (unused: no engine here)
    ) -> None:
        super().__init__(
            location,
            auth_handler=auth_handler,
            tls_certificates=list(tls_certificates),
            verify_client=verify_client,
            root_certificates=root_certificates,
            middleware=dict(middleware or {}),
        )
        self.settings = settings
        self.advertise = list(advertise)
        self.metrics = metrics

    def _info(self, descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        locations = self.advertise or [f"grpc://127.0.0.1:{self.port}"]
        endpoints = [flight.FlightEndpoint(b"all", [loc]) for loc in locations]
        return flight.FlightInfo(TABLE.schema, descriptor, endpoints, TABLE.num_rows, TABLE.nbytes)

    def list_flights(self, context: Any, criteria: bytes) -> Iterator[flight.FlightInfo]:
        yield self._info(flight.FlightDescriptor.for_path("t"))

    def get_flight_info(self, context: Any, descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        return self._info(descriptor)

    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.RecordBatchStream:
        if self.metrics is not None:
            self.metrics.rows_served("scan", TABLE.num_rows, TABLE.nbytes)
        return flight.RecordBatchStream(TABLE)

    def do_put(self, context: Any, descriptor: Any, reader: Any, writer: Any) -> None:
        require_write(context)
        rows = sum(chunk.data.num_rows for chunk in reader)
        if self.metrics is not None:
            self.metrics.rows_served("put", rows, 0)

    def do_action(self, context: Any, action: flight.Action) -> Iterator[bytes]:
        if action.type == "sleep":
            time.sleep(float(action.body.to_pybytes().decode() or "1"))
            yield b"slept"
        elif action.type == "pid":
            yield str(os.getpid()).encode()
        elif action.type == "request_id":
            from flight_server.logging import current_request_id

            yield (current_request_id() or "").encode()
        elif action.type == "conflict":
            if self.metrics is not None:
                self.metrics.commit_conflict()
            raise flight.FlightServerError("commit conflict", extra_info=b"retryable")
        else:
            raise flight.FlightServerError(f"unknown action {action.type}")
