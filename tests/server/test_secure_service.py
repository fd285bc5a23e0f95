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


def test_every_rpc_and_action_over_mtls_with_tokens(secure: tuple[str, bytes, Authority]) -> None:
    """The whole surface on the real service behind mTLS and bearer tokens: every RPC kind and
    every action succeeds with a read-write token, and each one is refused without a token."""
    from flight_server._serde import encode_action_request, encode_command, encode_ticket
    from flight_server.requests import ActionRequest, ScanRequest, TakeRequest

    uri, _, ca = secure
    c = _client(uri, ca, RW)
    name = "every"
    assert c.create(name, DATA.schema) == 1
    assert c.write(name, DATA) == 2  # do_put
    staged = c.stage(name, DATA.slice(0, 10))  # do_put, stage mode
    assert c.commit(name, [staged]) == 3  # action commit
    discard = c.stage(name, DATA.slice(0, 5))
    c.action("discard_staged", ActionRequest(name, fragments=discard.fragments))
    assert name in c.list_datasets()  # list_flights
    assert c.schema(name) == DATA.schema  # get_schema
    info = c.flight_info(ScanRequest(name))  # get_flight_info
    assert info.total_records == 60
    assert c.scan(name, filter="id < 5").num_rows == 10  # do_get, scan tickets per endpoint
    assert c.take(name, indices=[59, 0]).column("id").to_pylist() == [9, 0]  # do_get, take ticket
    answers = list(c.take_stream(name, [[0], [1, 2]], by="index"))  # do_exchange
    assert [t.num_rows for t in answers] == [1, 2]
    assert {a for a, _ in c._main.list_actions(c._options)} >= {"create", "commit", "cache_stats"}
    assert [v.version for v in c.versions(name)] == [1, 2, 3]
    c.create_tag(name, "first", 2)
    c.action("update_tag", ActionRequest(name, tag="first", version=3))
    assert c.tags(name) == {"first": 3}
    assert c.checkout(name, "first") == 3
    assert c.delete(name, "id >= 40") == 10
    assert c.add_columns(name, {"twice": "id * 2"}) == 5
    assert c.drop_columns(name, ["twice"]) == 6
    assert c.restore(name, 3) == 7
    c.delete_tag(name, "first")
    assert c.compact(name)["fragments_removed"] >= 0
    assert c.cleanup(name, older_than_seconds=0)["old_versions"] >= 1
    assert c.stats(name)["rows"] == 60
    assert c.scan(name).num_rows == 60  # what cleanup left is the latest version, whole
    assert c.cache_stats()["decoded_capacity"] >= 0
    assert c.health() == "ok"
    c.drop(name)
    assert name not in c.list_datasets()

    # Without a token every kind of call is refused before it does anything.
    anon = _client(uri, ca, None)
    raw = anon._main
    opts = anon._options
    scan = flight.FlightDescriptor.for_command(encode_command(ScanRequest("ds")))
    take = flight.Ticket(encode_ticket(TakeRequest("ds", indices=None)))
    refused = [
        lambda: list(raw.list_flights(b"", opts)),
        lambda: raw.get_flight_info(scan, opts),
        lambda: raw.get_schema(scan, opts),
        lambda: raw.do_get(take, opts).read_all(),
        lambda: raw.do_put(flight.FlightDescriptor.for_path("ds"), DATA.schema, opts)[0].close(),
        lambda: raw.do_exchange(scan, opts)[1].read_all(),
        lambda: list(raw.list_actions(opts)),
        lambda: list(raw.do_action(flight.Action("health", encode_action_request(ActionRequest())), opts)),
    ]
    for call in refused:
        # pyarrow's get_schema raises the status as a plain OSError (it skips the Flight mapping).
        with pytest.raises((flight.FlightUnauthenticatedError, OSError), match="authentication required"):
            call()
