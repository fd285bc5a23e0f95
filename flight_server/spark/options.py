"""Options of the ``lance`` data source, parsed once on the driver into a picklable dataclass.

Read and write: ``uri`` (``grpc://host:port`` or ``grpc+tls://...``; env ``LANCE_FLIGHT_URI``),
``dataset`` (or the ``load(name)`` / ``save(name)`` path), ``token`` (bearer token; env
``LANCE_FLIGHT_TOKEN``), ``tls_root_certs`` (PEM text or a path to a PEM file), ``tls_cert_chain``
and ``tls_private_key`` (the client certificate and key for servers that require mutual TLS; PEM
text or paths), ``timeout`` (seconds per call).

Read: ``version`` (number or tag), ``columns`` (comma-separated projection), ``filter`` (a SQL
predicate the server applies in addition to Spark's pushed filters), ``batch_size`` (rows per Arrow
batch), ``with_row_id`` (adds the ``_rowid`` column), ``min_partitions`` (split big fragments until
there are at least this many partitions; default: this machine's core count).

Write: ``max_rows_per_file``, ``data_storage_version`` (for a new dataset), ``vector_columns``
(``"emb"`` or ``"emb:128,other"``: array columns stored as fixed-size vectors in a new dataset).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from flight_server.settings import client_env
from lance_format.core.errors import InvalidInputError

__all__ = ["ReadOptions", "SourceOptions", "WriteOptions", "parse_read_options", "parse_write_options"]

ENV_URI = "LANCE_FLIGHT_URI"
ENV_TOKEN = "LANCE_FLIGHT_TOKEN"
DEFAULT_URI = "grpc://127.0.0.1:8815"
# Rows per Arrow batch streamed to Spark: big enough to amortise the per-batch Python and JVM
# hand-off costs, small enough that a batch of wide rows stays a few MB.
DEFAULT_BATCH_SIZE = 65536
# Per-call deadline (seconds): long, since one do_get streams a whole partition.
DEFAULT_TIMEOUT = 600.0


def _get(options: Mapping[str, str], key: str) -> str | None:
    value = options.get(key)
    return None if value is None or value == "" else str(value)


def _int(options: Mapping[str, str], key: str, default: int | None, minimum: int = 1) -> int | None:
    text = _get(options, key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidInputError(f"option {key!r} must be an integer, got {text!r}") from None
    if value < minimum:
        raise InvalidInputError(f"option {key!r} must be >= {minimum}, got {value}")
    return value


def _bool(options: Mapping[str, str], key: str) -> bool:
    text = (_get(options, key) or "false").lower()
    if text not in ("true", "false", "1", "0", "yes", "no"):
        raise InvalidInputError(f"option {key!r} must be true or false, got {text!r}")
    return text in ("true", "1", "yes")


def _pem(options: Mapping[str, str], key: str) -> bytes | None:
    text = _get(options, key)
    if text is None:
        return None
    if "-----BEGIN" in text:
        return text.encode()
    try:
        return Path(text).read_bytes()
    except OSError as e:
        raise InvalidInputError(f"option {key!r}: cannot read {text!r}: {e.strerror}") from None


@dataclass(frozen=True)
class SourceOptions:
    """Where the server and dataset are, and how to reach them."""

    uri: str
    dataset: str
    token: str | None = None
    tls_root_certs: bytes | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    tls_cert_chain: bytes | None = field(default=None, repr=False)
    tls_private_key: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ReadOptions:
    """What to read (see the module docstring for each option)."""

    source: SourceOptions
    version: int | str | None = None
    columns: tuple[str, ...] | None = None
    filter: str | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    with_row_id: bool = False
    min_partitions: int = 1

    def pinned(self, version: int | str | None) -> ReadOptions:
        """These options reading exactly ``version`` (the snapshot the schema came from)."""
        return replace(self, version=version)

    def with_columns(self, columns: tuple[str, ...] | None) -> ReadOptions:
        """These options projecting ``columns`` (None: all)."""
        return replace(self, columns=columns)


@dataclass(frozen=True)
class WriteOptions:
    """How to write (see the module docstring for each option)."""

    source: SourceOptions
    max_rows_per_file: int | None = None
    data_storage_version: str | None = None
    vector_columns: dict[str, int | None] = field(default_factory=dict)


def _source(options: Mapping[str, str]) -> SourceOptions:
    uri = _get(options, "uri") or client_env(ENV_URI) or DEFAULT_URI
    dataset = _get(options, "dataset") or _get(options, "path")
    if dataset is None:
        raise InvalidInputError("option 'dataset' is required (or pass the name to load()/save())")
    timeout_text = _get(options, "timeout")
    try:
        timeout = float(timeout_text) if timeout_text is not None else DEFAULT_TIMEOUT
    except ValueError:
        raise InvalidInputError(f"option 'timeout' must be a number, got {timeout_text!r}") from None
    if timeout <= 0:
        raise InvalidInputError(f"option 'timeout' must be > 0, got {timeout}")
    cert_chain, private_key = _pem(options, "tls_cert_chain"), _pem(options, "tls_private_key")
    if (cert_chain is None) != (private_key is None):
        raise InvalidInputError("mutual TLS needs both options 'tls_cert_chain' and 'tls_private_key'")
    return SourceOptions(
        uri=uri,
        dataset=dataset,
        token=_get(options, "token") or client_env(ENV_TOKEN),
        tls_root_certs=_pem(options, "tls_root_certs"),
        timeout=timeout,
        tls_cert_chain=cert_chain,
        tls_private_key=private_key,
    )


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Validate the reader's options; errors name the option."""
    version_text = _get(options, "version")
    version: int | str | None = version_text
    if version_text is not None and version_text.isdigit():
        version = int(version_text)
    columns_text = _get(options, "columns")
    columns = None
    if columns_text is not None:
        columns = tuple(c.strip() for c in columns_text.split(",") if c.strip())
        if not columns:
            raise InvalidInputError("option 'columns' names no column")
    return ReadOptions(
        source=_source(options),
        version=version,
        columns=columns,
        filter=_get(options, "filter"),
        batch_size=_int(options, "batch_size", DEFAULT_BATCH_SIZE) or DEFAULT_BATCH_SIZE,
        with_row_id=_bool(options, "with_row_id"),
        min_partitions=_int(options, "min_partitions", os.cpu_count() or 1) or 1,
    )


def _vectors(text: str | None) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, _, dim = item.partition(":")
        if dim and not dim.strip().isdigit():
            raise InvalidInputError(f"option 'vector_columns': bad dimension in {item!r}")
        out[name.strip()] = int(dim) if dim else None
    return out


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate the writer's options; errors name the option."""
    return WriteOptions(
        source=_source(options),
        max_rows_per_file=_int(options, "max_rows_per_file", None),
        data_storage_version=_get(options, "data_storage_version"),
        vector_columns=_vectors(_get(options, "vector_columns")),
    )
