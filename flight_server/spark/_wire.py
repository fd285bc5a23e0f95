"""How the data source's requests are encoded: the server's protocol messages (``lance_flight.v1``).

Kept apart from :mod:`flight_server.spark._remote` (the call logic). The messages are built as the
dataclasses of :mod:`flight_server.requests` and converted by :mod:`flight_server._serde`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

from flight_server import _serde
from flight_server.requests import (
    END_OF_WRITE,
    ActionRequest,
    ActionResult,
    ScanRequest,
    TakeRequest,
    WriteRequest,
)
from flight_server.spark.options import ReadOptions, WriteOptions

if TYPE_CHECKING:
    from flight_server.spark._remote import DatasetInfo

# Flight action types the data source uses (see the server's list_actions).
ACTION_DESCRIBE = "checkout"
ACTION_COMMIT = "commit"
ACTION_DISCARD = "discard_staged"

_MODES = {"append": "append", "overwrite": "overwrite", "create": "create"}


def _action(
    client: flight.FlightClient, options: flight.FlightCallOptions, kind: str, req: ActionRequest
) -> ActionResult:
    results = list(client.do_action(flight.Action(kind, _serde.encode_action_request(req)), options))
    return _serde.decode_action_result(results[0].body.to_pybytes()) if results else ActionResult()


def is_not_found(error: Exception) -> bool:
    """Whether a Flight error means "no such dataset/version" (gRPC NOT_FOUND)."""
    return isinstance(error, KeyError) or "not found" in str(error).lower()


def _version(version: int | str | None) -> tuple[int | None, str | None]:
    if version is None:
        return None, None
    if isinstance(version, int):
        return version, None
    return None, version


def dataset_info(
    client: flight.FlightClient, options: flight.FlightCallOptions, dataset: str, version: int | str | None
) -> DatasetInfo:
    from flight_server.spark._remote import DatasetInfo

    number, tag = _version(version)
    res = _action(
        client, options, ACTION_DESCRIBE, ActionRequest(dataset=dataset, version=number, tag=tag or "")
    )
    if res.schema is None:
        raise pa.ArrowInvalid(f"the server described dataset {dataset!r} without a schema")
    return DatasetInfo(res.schema, res.version)


def plan_scan(
    client: flight.FlightClient,
    options: flight.FlightCallOptions,
    read: ReadOptions,
    columns: Sequence[str],
    max_rows_per_endpoint: int = 0,
) -> flight.FlightInfo:
    number, tag = _version(read.version)
    req = ScanRequest(
        dataset=read.source.dataset,
        version=number,
        tag=tag,
        columns=tuple(c for c in columns if c != "_rowid"),
        filter_sql=read.filter,
        batch_size=read.batch_size,
        with_row_id=read.with_row_id,
        max_rows_per_endpoint=max_rows_per_endpoint,
    )
    return client.get_flight_info(flight.FlightDescriptor.for_command(_serde.encode_command(req)), options)


def stage_descriptor(write: WriteOptions) -> flight.FlightDescriptor:
    req = WriteRequest(
        dataset=write.source.dataset,
        mode="stage",
        max_rows_per_file=write.max_rows_per_file,
        data_storage_version=write.data_storage_version,
        # The stream then counts only if it ends with END_OF_WRITE: a worker killed mid-put
        # cannot pass for a finished one.
        end_marker=True,
    )
    return flight.FlightDescriptor.for_command(_serde.encode_command(req))


def end_of_write() -> pa.Buffer:
    """The app_metadata message that ends a stage-mode put."""
    return pa.py_buffer(END_OF_WRITE)


def staged(metadata: bytes) -> tuple[tuple[bytes, ...], pa.Schema | None]:
    """The staged fragments (opaque documents) and their schema, from a stage-mode put's answer."""
    res = _serde.decode_write_result(metadata)
    return res.fragments, res.schema


def commit(
    client: flight.FlightClient,
    options: flight.FlightCallOptions,
    dataset: str,
    mode: str,
    fragments: Sequence[bytes],
    schema: pa.Schema,
    read_version: int | None,
) -> int:
    req = ActionRequest(
        dataset=dataset,
        mode=_MODES[mode],  # type: ignore[arg-type]
        fragments=tuple(fragments),
        schema=schema,
        read_version=read_version,
    )
    return _action(client, options, ACTION_COMMIT, req).version


def discard(
    client: flight.FlightClient, options: flight.FlightCallOptions, dataset: str, fragments: Sequence[bytes]
) -> None:
    _action(client, options, ACTION_DISCARD, ActionRequest(dataset=dataset, fragments=tuple(fragments)))


def take(
    client: flight.FlightClient,
    options: flight.FlightCallOptions,
    dataset: str,
    version: int,
    columns: Sequence[str],
    row_ids: pa.Array,
) -> pa.RecordBatch:
    ids = np.asarray(row_ids.to_numpy(zero_copy_only=False), dtype=np.uint64)
    req = TakeRequest(dataset=dataset, version=version, row_ids=ids, columns=tuple(columns))
    table = client.do_get(flight.Ticket(_serde.encode_ticket(req)), options).read_all()
    if not table.num_rows:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    return table.combine_chunks().to_batches()[0]
