"""The real LanceFlightService behind TLS, mTLS and bearer tokens, driven by LanceFlightClient."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.client import LanceFlightClient
from flight_server.config import load_settings
from flight_server.metrics import Metrics
from flight_server.settings import Token
from flight_server.workers import build_server
from tests.server.certs import Authority, write

RW, RO = "rw-token-0123456789", "ro-token-0123456789"
DATA = pa.table({"id": pa.array(range(50), pa.int64()), "s": [f"v{i}" for i in range(50)]})


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, bytes, Authority]]:
    tmp = tmp_path_factory.mktemp("secure")
    ca = Authority.create("test-ca")
    server_cert = ca.issue("server", server=True)
    flags = [
        "--root", str(tmp / "root"),
        "--tls-cert", write(tmp, "server.pem", server_cert.cert),
        "--tls-key", write(tmp, "server.key", server_cert.key),
        "--tls-client-ca", write(tmp, "ca.pem", ca.pem),
    ]  # fmt: skip
    settings = replace(load_settings(flags, env={}), port=0, tokens=(Token(RW), Token(RO, read_only=True)))
    server = build_server(settings, 0, (), Metrics())
    try:
        yield f"grpc+tls://localhost:{server.port}", ca.pem, ca
    finally:
        server.shutdown()


def _client(uri: str, ca: Authority, token: str | None) -> LanceFlightClient:
    cert = ca.issue("client", server=False)
    # mTLS: present a client certificate signed by the server's client CA.
    return LanceFlightClient(
        uri, token=token, tls_root_certs=ca.pem, timeout=20, cert_chain=cert.cert, private_key=cert.key
    )


def test_tokens_over_mtls_on_the_real_service(secure: tuple[str, bytes, Authority]) -> None:
    uri, _, ca = secure
    rw = _client(uri, ca, RW)
    assert rw.write("ds", DATA, mode="create") == 1
    assert rw.scan("ds").sort_by("id").equals(DATA)
    ro = _client(uri, ca, RO)
    assert ro.take("ds", indices=[3, 1]).column("id").to_pylist() == [3, 1]
    with pytest.raises(flight.FlightUnauthorizedError):
        ro.write("ds", DATA, mode="append")
    with pytest.raises(flight.FlightUnauthorizedError):
        ro.delete("ds", "id < 10")
    for token in (None, "wrong-token"):
        with pytest.raises(flight.FlightUnauthenticatedError):
            _client(uri, ca, token).list_datasets()
    assert rw.versions("ds")[-1].version == 1  # nothing the refused calls tried was committed


def test_a_client_without_a_certificate_is_refused(secure: tuple[str, bytes, Authority]) -> None:
    uri, ca_pem, _ = secure
    plain_tls = LanceFlightClient(uri, token=RW, tls_root_certs=ca_pem, timeout=5)
    with pytest.raises(flight.FlightUnavailableError):
        plain_tls.list_datasets()
