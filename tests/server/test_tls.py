"""TLS and mTLS: certificates generated in the test, servers wired by build_server."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow.flight as flight
import pytest

from flight_server.config import load_settings
from flight_server.settings import ServerSettings
from tests.server.certs import Authority, write
from tests.server.helpers import location, standin_server


@pytest.fixture(scope="module")
def pki() -> dict[str, object]:
    ca = Authority.create("test-ca")
    rogue = Authority.create("rogue-ca")
    return {
        "ca": ca,
        "server": ca.issue("server", server=True),
        "client": ca.issue("client", server=False),
        "rogue_client": rogue.issue("intruder", server=False),
    }


def _settings(tmp_path: Path, pki: dict[str, object], mtls: bool) -> ServerSettings:
    ca, server = pki["ca"], pki["server"]
    flags = [
        "--tls-cert", write(tmp_path, "server.pem", server.cert),  # type: ignore[attr-defined]
        "--tls-key", write(tmp_path, "server.key", server.key),  # type: ignore[attr-defined]
    ]  # fmt: skip
    if mtls:
        flags += ["--tls-client-ca", write(tmp_path, "ca.pem", ca.pem)]  # type: ignore[attr-defined]
    return replace(load_settings(flags, env={}), port=0)


def _count(uri: str, **kwargs: object) -> int:
    with flight.FlightClient(uri, **kwargs) as client:
        return len(list(client.list_flights(options=flight.FlightCallOptions(timeout=5))))


def test_tls(tmp_path: Path, pki: dict[str, object]) -> None:
    settings = _settings(tmp_path, pki, mtls=False)
    assert settings.scheme == "grpc+tls"
    ca_pem = pki["ca"].pem  # type: ignore[attr-defined]
    with standin_server(settings) as server:
        assert _count(location(server, tls=True), tls_root_certs=ca_pem) == 1
        assert _count(location(server, tls=True, host="localhost"), tls_root_certs=ca_pem) == 1
        # A client that does not trust the CA, or speaks plaintext, gets nothing.
        with pytest.raises(flight.FlightUnavailableError):
            _count(location(server, tls=True))
        with pytest.raises(flight.FlightUnavailableError):
            _count(location(server, tls=False))


def test_mtls_requires_a_client_certificate_from_the_ca(tmp_path: Path, pki: dict[str, object]) -> None:
    settings = _settings(tmp_path, pki, mtls=True)
    ca_pem = pki["ca"].pem  # type: ignore[attr-defined]
    client, rogue = pki["client"], pki["rogue_client"]
    with standin_server(settings) as server:
        uri = location(server, tls=True)
        assert _count(uri, tls_root_certs=ca_pem, cert_chain=client.cert, private_key=client.key) == 1  # type: ignore[attr-defined]
        with pytest.raises(flight.FlightUnavailableError):
            _count(uri, tls_root_certs=ca_pem)
        with pytest.raises(flight.FlightUnavailableError):
            _count(uri, tls_root_certs=ca_pem, cert_chain=rogue.cert, private_key=rogue.key)  # type: ignore[attr-defined]
