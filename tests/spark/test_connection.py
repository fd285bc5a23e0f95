"""The data source's connection: the one LanceFlightClient, over mutual TLS, errors by status."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from flight_server.client import LanceFlightClient
from flight_server.config import load_settings
from flight_server.metrics import Metrics
from flight_server.spark.connection import client_for, dataset_info
from flight_server.spark.options import parse_read_options
from flight_server.workers import build_server
from tests.server.certs import Authority, write


@pytest.fixture(scope="module")
def mtls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Authority, Path]]:
    tmp = tmp_path_factory.mktemp("mtls")
    ca = Authority.create("spark-ca")
    cert = ca.issue("server", server=True)
    flags = [
        "--root", str(tmp / "root"),
        "--tls-cert", write(tmp, "server.pem", cert.cert),
        "--tls-key", write(tmp, "server.key", cert.key),
        "--tls-client-ca", write(tmp, "ca.pem", ca.pem),
    ]  # fmt: skip
    server = build_server(replace(load_settings(flags, env={}), port=0), 0, (), Metrics())
    try:
        yield f"grpc+tls://localhost:{server.port}", ca, tmp
    finally:
        server.shutdown()


def test_reads_over_mutual_tls_with_certificates_from_files(mtls_server: tuple[str, Authority, Path]) -> None:
    uri, ca, tmp = mtls_server
    client_cert = ca.issue("spark-executor", server=False)
    options = {
        "uri": uri,
        "dataset": "events",
        "tls_root_certs": write(tmp, "roots.pem", ca.pem),
        "tls_cert_chain": write(tmp, "client.pem", client_cert.cert),
        "tls_private_key": client_cert.key.decode(),  # PEM text works as well as a path
    }
    source = parse_read_options(options).source
    assert dataset_info(source, None) is None  # NOT_FOUND: no such dataset yet
    with LanceFlightClient(
        uri, tls_root_certs=ca.pem, cert_chain=client_cert.cert, private_key=client_cert.key
    ) as writer:
        writer.write("events", pa.table({"id": [1, 2, 3]}), mode="create")
    info = dataset_info(source, None)
    assert info is not None
    assert (info.schema.names, info.version) == (["id"], 1)
    client = client_for(source)
    assert client is client_for(replace(source, dataset="other"))  # one connection per server
    endpoints = client.scan_endpoints("events")
    assert sum(b.num_rows for ep in endpoints for b in client.read_endpoint(ep)) == 3


def test_without_a_client_certificate_the_server_refuses(mtls_server: tuple[str, Authority, Path]) -> None:
    uri, ca, _ = mtls_server
    source = parse_read_options({"uri": uri, "dataset": "x", "tls_root_certs": ca.pem.decode()}).source
    with pytest.raises(Exception):  # noqa: B017, PT011 - refused at the TLS handshake (UNAVAILABLE)
        dataset_info(replace(source, timeout=5.0), None)


def test_only_not_found_means_missing(tmp_path: Path) -> None:
    from tests.server.service_fixtures import start, stop

    served = start(tmp_path / "root")
    try:
        source = parse_read_options({"uri": served.location, "dataset": "absent"}).source
        assert dataset_info(source, None) is None
        # An invalid name is bad input, whatever its message says: an error, not "missing".
        with pytest.raises(ValueError, match="invalid dataset name"):
            dataset_info(replace(source, dataset="not found"), None)
        served.client.write("present", pa.table({"id": [1]}), mode="create")
        with pytest.raises(KeyError):  # a missing version of an existing dataset stays an error
            dataset_info(replace(source, dataset="present"), 5)
    finally:
        stop(served)


def test_mutual_tls_options_come_in_pairs() -> None:
    from lance_format.core.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="tls_cert_chain"):
        parse_read_options({"dataset": "x", "tls_cert_chain": "-----BEGIN CERTIFICATE-----"})
