"""The data source's connection to the server: one :class:`~flight_server.client.LanceFlightClient`
per process and server, and the few facts the source derives from the server's answers.

The reader, writer and take helper talk to the server only through that client (retries of reads,
TLS and mutual TLS, status-based errors). They run in Spark's Python workers, which are reused
between tasks, so clients are cached per process.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

from flight_server.client import LanceFlightClient
from flight_server.spark.options import SourceOptions
from lance_format.core.errors import InvalidInputError

__all__ = ["ROW_ID", "DatasetInfo", "client_for", "dataset_info", "projected_schema"]

ROW_ID = "_rowid"

_clients: dict[SourceOptions, LanceFlightClient] = {}
_clients_lock = threading.Lock()


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset's Arrow schema at one version."""

    schema: pa.Schema
    version: int


def client_for(source: SourceOptions) -> LanceFlightClient:
    """The client of this process for ``source``'s server and credentials (created once)."""
    key = replace(source, dataset="")  # one connection serves every dataset
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = LanceFlightClient(
                source.uri,
                source.token,
                source.tls_root_certs,
                timeout=source.timeout,
                cert_chain=source.tls_cert_chain,
                private_key=source.tls_private_key,
            )
            _clients[key] = client
        return client


def dataset_info(source: SourceOptions, version: int | str | None) -> DatasetInfo | None:
    """The dataset's schema and resolved version; None when the latest is asked and it does not exist.

    A missing version or tag of an existing dataset stays an error (the server's NOT_FOUND).
    """
    try:
        schema, number = client_for(source).describe(source.dataset, version)
    except KeyError:  # gRPC NOT_FOUND (pyarrow.ArrowKeyError)
        if version is None:
            return None
        raise
    return DatasetInfo(schema, number)


def projected_schema(schema: pa.Schema, columns: Sequence[str] | None, with_row_id: bool) -> pa.Schema:
    """The schema a scan returns: ``columns`` (in that order) and, if asked, ``_rowid`` last."""
    if columns is not None:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise InvalidInputError(f"no column(s) {missing} in the dataset; it has {schema.names}")
        schema = pa.schema([schema.field(c) for c in columns])
    if with_row_id:
        schema = schema.append(pa.field(ROW_ID, pa.uint64(), nullable=False))
    return schema
