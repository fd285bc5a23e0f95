"""Auth: every call without a valid token is refused; read-only tokens cannot write; basic handshake."""

from __future__ import annotations

import base64
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import flight_server.auth as auth
from flight_server.auth import SESSION_TTL_S, Authenticator, Principal
from flight_server.config import load_settings
from flight_server.settings import BasicUser, ServerSettings, Token
from tests.server.helpers import bearer, location, standin_server

SETTINGS = ServerSettings(
    tokens=(Token("writer"), Token("reader", read_only=True)),
    users=(BasicUser("ann", "s3cret"), BasicUser("rita", "pw", read_only=True)),
)


def _put(client: flight.FlightClient, options: flight.FlightCallOptions) -> None:
    table = pa.table({"x": [1, 2, 3]})
    writer, _ = client.do_put(flight.FlightDescriptor.for_path("t"), table.schema, options=options)
    writer.write_table(table)
    writer.close()


@pytest.fixture
def client() -> flight.FlightClient:
    with standin_server(SETTINGS) as server, flight.FlightClient(location(server)) as c:
        yield c


def test_calls_without_valid_token_are_refused(client: flight.FlightClient) -> None:
    refused = [
        lambda o: list(client.list_flights(options=o)),
        lambda o: client.get_flight_info(flight.FlightDescriptor.for_path("t"), o),
        lambda o: client.do_get(flight.Ticket(b"all"), o).read_all(),
        lambda o: list(client.do_action(flight.Action("pid", b""), o)),
        lambda o: list(client.list_actions(o)),
        lambda o: _put(client, o),
    ]
    headers = [
        [],
        [(b"authorization", b"Bearer wrong")],
        [(b"authorization", b"Token writer")],
        [(b"authorization", b"Basic !!!")],
        [(b"authorization", b"Bearer lfs1.e30.AAAA")],
    ]
    for h in headers:
        options = flight.FlightCallOptions(headers=h, timeout=10)
        for call in refused:
            with pytest.raises(flight.FlightUnauthenticatedError):
                call(options)
    # The same calls with a valid token work.
    assert len(list(client.list_flights(options=bearer("writer")))) == 1
    assert client.do_get(flight.Ticket(b"all"), bearer("reader")).read_all().num_rows == 100


def test_read_only_token_cannot_write(client: flight.FlightClient) -> None:
    _put(client, bearer("writer"))
    with pytest.raises(flight.FlightUnauthorizedError, match="read-only"):
        _put(client, bearer("reader"))


def test_basic_handshake_issues_a_session_token(client: flight.FlightClient) -> None:
    key, value = client.authenticate_basic_token("ann", "s3cret")
    assert key == b"authorization"
    assert value.startswith(b"Bearer lfs1.")
    options = flight.FlightCallOptions(headers=[(key, value)], timeout=10)
    assert len(list(client.list_flights(options=options))) == 1
    _put(client, options)
    # A token works as the password of any user name, and keeps its read-only flag.
    ro = flight.FlightCallOptions(headers=[client.authenticate_basic_token("someone", "reader")])
    assert len(list(client.list_flights(options=ro))) == 1
    with pytest.raises(flight.FlightUnauthorizedError):
        _put(client, ro)
    rita = flight.FlightCallOptions(headers=[client.authenticate_basic_token("rita", "pw")])
    with pytest.raises(flight.FlightUnauthorizedError):
        _put(client, rita)
    for user, password in [("ann", "wrong"), ("nobody", "s3cret"), ("", "")]:
        with pytest.raises(flight.FlightUnauthenticatedError):
            client.authenticate_basic_token(user, password)


def test_basic_credentials_on_an_ordinary_call(client: flight.FlightClient) -> None:
    good = b"Basic " + base64.b64encode(b"ann:s3cret")
    options = flight.FlightCallOptions(headers=[(b"authorization", good)])
    assert len(list(client.list_flights(options=options))) == 1
    bad = b"Basic " + base64.b64encode(b"ann-no-colon")
    with pytest.raises(flight.FlightUnauthenticatedError, match="malformed"):
        list(client.list_flights(options=flight.FlightCallOptions(headers=[(b"authorization", bad)])))


def test_session_tokens_are_shared_by_key_and_expire() -> None:
    now = [1_000_000.0]
    key = b"k" * 32
    a = Authenticator(SETTINGS, key, clock=lambda: now[0])
    b = Authenticator(SETTINGS, key, clock=lambda: now[0])
    other = Authenticator(SETTINGS, b"x" * 32, clock=lambda: now[0])
    token = a.issue(Principal("ann", read_only=True))
    assert b.bearer(token) == Principal("ann", True)  # another worker of the same server
    assert other.bearer(token) is None  # another server
    tampered = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    assert a.bearer(tampered) is None
    now[0] += SESSION_TTL_S + 1
    assert a.bearer(token) is None


def test_tokens_file_is_reloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "TOKENS_FILE_CHECK_S", 0.0)
    path = tmp_path / "tokens"
    path.write_text("first\n")
    a = Authenticator(load_settings(["--tokens-file", str(path)], env={"LANCE_FLIGHT_TOKENS": "static"}))
    assert a.bearer("static") == Principal("token", False)
    assert a.bearer("first") == Principal("token", False)
    assert a.bearer("second") is None
    path.write_text("second ro\n# first was revoked\n")
    assert a.bearer("second") == Principal("token", True)
    assert a.bearer("first") is None
    path.write_text("bad line here\n")  # a broken file keeps the last good tokens
    assert a.bearer("second") == Principal("token", True)
    path.unlink()
    assert a.bearer("second") == Principal("token", True)


def test_no_auth_means_everything_allowed() -> None:
    with standin_server(ServerSettings()) as server, flight.FlightClient(location(server)) as c:
        assert len(list(c.list_flights())) == 1
        _put(c, flight.FlightCallOptions())
