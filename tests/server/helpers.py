"""Shared helpers of the server tests: in-process servers on free ports, HTTP probes."""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pyarrow.flight as flight

from flight_server.metrics import Metrics
from flight_server.settings import ServerSettings
from flight_server.workers import build_server
from tests.server.standin import StandInService


@contextmanager
def standin_server(
    settings: ServerSettings | None = None,
    metrics: Metrics | None = None,
    session_key: bytes | None = None,
) -> Iterator[flight.FlightServerBase]:
    """A stand-in service wired like the real one (auth, log, metrics, TLS) on a free port."""
    s = replace(settings or ServerSettings(), port=0)
    server = build_server(s, 0, (), metrics, session_key, StandInService)
    try:
        yield server
    finally:
        server.shutdown()


def location(server: flight.FlightServerBase, tls: bool = False, host: str = "127.0.0.1") -> str:
    return f"{'grpc+tls' if tls else 'grpc'}://{host}:{server.port}"


def bearer(token: str) -> flight.FlightCallOptions:
    return flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {token}".encode())], timeout=10)


def http_get(url: str) -> tuple[int | None, str]:
    """Status and body of a GET (None when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None, ""
    except http.client.HTTPException:  # a poll of a port not yet bound can connect to itself
        return None, ""
