"""Authentication: bearer tokens, the basic-auth handshake, read-only tokens.

With auth on (any token, tokens file or user configured) every call must carry
``authorization: Bearer <token>``; anything else is refused with ``UNAUTHENTICATED`` before a
handler runs. Tokens come from the static list (``auth.tokens``) and the tokens file
(``auth.tokensFile``, re-read when it changes, so a rotated Secret applies without a restart).

The basic-auth handshake (``FlightClient.authenticate_basic_token(user, password)``) accepts a
configured user (``auth.users``) or any user name with a valid token as the password, and answers
with a *session token*: ``lfs1.<claims>.<hmac>``, signed with a key every worker process of one
server shares, so a session token opened on worker 0 is accepted by the endpoints on worker k.
Session tokens carry the read-only flag of what issued them and expire after
:data:`SESSION_TTL_S`.

Handlers that write call :func:`require_write`, which refuses read-only callers with
``UNAUTHORIZED``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow.flight as flight

from flight_server import callinfo
from flight_server.config import ConfigError, parse_tokens_file
from flight_server.errors import ResourceExhausted
from flight_server.penalties import OversizePenalties
from flight_server.settings import ServerSettings, Token

__all__ = [
    "SESSION_TTL_S",
    "AuthMiddleware",
    "AuthMiddlewareFactory",
    "Authenticator",
    "HandshakeAuthHandler",
    "Principal",
    "new_session_key",
    "require_write",
]

log = logging.getLogger("lance_flight.auth")

#: Session tokens from the handshake live this long: a client re-handshakes after an
#: UNAUTHENTICATED, and a token removed from the tokens file stops opening sessions within this time.
SESSION_TTL_S = 3600.0
#: The tokens file is stat()ed at most this often: cheap enough per call, quick enough for rotation.
TOKENS_FILE_CHECK_S = 1.0
SESSION_PREFIX = "lfs1."
_AUTH_HEADER = "authorization"


@dataclass(frozen=True)
class Principal:
    """Who a call runs as: a token (named ``token``), a basic-auth user, or a session of either."""

    name: str
    read_only: bool
    #: Tells principals of the same name apart for fair shares (a digest of a static token).
    key: str = field(default="", compare=False)


def new_session_key() -> bytes:
    """A fresh key for signing session tokens (one per server, shared by its workers)."""
    return secrets.token_bytes(32)


def _digest(value: str) -> bytes:
    # Tokens are looked up by their hash so the lookup time says nothing about the token bytes.
    return hashlib.sha256(value.encode()).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Authenticator:
    """Checks bearer tokens and basic credentials; issues and verifies session tokens.

    Parameters
    ----------
    settings:
        ``tokens`` (already including the tokens file's at start), ``tokens_file`` and ``users``.
    session_key:
        HMAC key of session tokens; a fresh one when omitted (then only this process accepts them).
    clock:
        Seconds since the epoch (tests move it to expire sessions).
    """

    def __init__(
        self,
        settings: ServerSettings,
        session_key: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._static = {_digest(t.value): t for t in settings.tokens}
        self._users = {u.name: u for u in settings.users}
        self._file = settings.tokens_file
        self._file_tokens: dict[bytes, Token] = {}
        self._file_stamp: tuple[int, int] | None = None
        self._file_checked = 0.0
        self._lock = threading.Lock()
        self._key = session_key or new_session_key()
        self._clock = clock
        if self._file:
            self._reload_file(force=True)

    # --- tokens file --------------------------------------------------------------------------
    def _reload_file(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if not force and now - self._file_checked < TOKENS_FILE_CHECK_S:
                return
            self._file_checked = now
            try:
                st = os.stat(self._file)
            except OSError as exc:
                # A Secret being re-mounted vanishes for a moment: keep the last good tokens.
                log.warning("tokens file unreadable, keeping previous tokens: %s", exc)
                return
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp == self._file_stamp:
                return
            try:
                tokens = parse_tokens_file(self._file)
            except ConfigError as exc:
                log.error("tokens file rejected, keeping previous tokens: %s", exc)
                return
            self._file_tokens = {_digest(t.value): t for t in tokens}
            self._file_stamp = stamp
            if not force:
                log.info("tokens file reloaded: %d tokens", len(tokens))

    def _token(self, value: str) -> Token | None:
        if self._file:
            self._reload_file()
        key = _digest(value)
        return self._static.get(key) or self._file_tokens.get(key)

    # --- checks ---------------------------------------------------------------------------------
    def bearer(self, value: str) -> Principal | None:
        """The principal of a bearer token (static, file or session), or ``None``."""
        if value.startswith(SESSION_PREFIX):
            return self._verify_session(value)
        token = self._token(value)
        if token is None:
            return None
        return Principal("token", token.read_only, key=f"token:{_digest(value).hex()[:16]}")

    def basic(self, user: str, password: str) -> Principal | None:
        """A configured user, or any user name with a valid token as the password; else ``None``."""
        known = self._users.get(user)
        if known is not None and hmac.compare_digest(known.password.encode(), password.encode()):
            return Principal(user, known.read_only)
        token = self._token(password)
        return None if token is None else Principal(user or "token", token.read_only)

    # --- session tokens -------------------------------------------------------------------------
    def issue(self, principal: Principal) -> str:
        """A signed session token for ``principal``, valid for :data:`SESSION_TTL_S`."""
        claims = {"u": principal.name, "ro": principal.read_only, "exp": int(self._clock() + SESSION_TTL_S)}
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        mac = hmac.new(self._key, body.encode(), hashlib.sha256).digest()
        return f"{SESSION_PREFIX}{body}.{_b64(mac)}"

    def _verify_session(self, value: str) -> Principal | None:
        try:
            body, mac = value[len(SESSION_PREFIX) :].split(".")
            expected = hmac.new(self._key, body.encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(expected, _unb64(mac)):
                return None
            claims = json.loads(_unb64(body))
            if float(claims["exp"]) < self._clock():
                return None
            return Principal(str(claims["u"]), bool(claims["ro"]))
        except (ValueError, KeyError, TypeError):
            return None


class AuthMiddleware(flight.ServerMiddleware):  # type: ignore[misc]
    """The per-call result of authentication; handlers read it as ``context.get_middleware("auth")``."""

    def __init__(self, principal: Principal, issued: str | None = None) -> None:
        self.principal = principal
        self.read_only = principal.read_only
        #: Who the call runs as for stream fairness (flight_server.streams.principal_of).
        self.principal_key = principal.key or f"user:{principal.name}"
        self._issued = issued

    def sending_headers(self) -> dict[str, str]:
        # The handshake's answer: the client library reads the session token from this header.
        return {_AUTH_HEADER: f"Bearer {self._issued}"} if self._issued else {}


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    values = headers.get(name) or headers.get(name.title())
    if not values:
        return None
    value = values[0] if isinstance(values, (list, tuple)) else values
    return value.decode() if isinstance(value, bytes) else str(value)


class AuthMiddlewareFactory(flight.ServerMiddlewareFactory):  # type: ignore[misc]
    """Refuses every call without valid credentials; register it under the key ``"auth"``."""

    def __init__(
        self,
        authenticator: Authenticator,
        on_refused: Callable[[str, str], None] | None = None,
        penalties: OversizePenalties | None = None,
    ) -> None:
        super().__init__()
        self.authenticator = authenticator
        # Registered first, a refusal here means no later middleware (log, metrics) saw the call.
        self.on_refused = on_refused
        #: Principals in a back-off for oversized requests (the service reports refusals here):
        #: their calls are refused now, before pyarrow copies the request under the GIL.
        self.penalties = penalties if penalties is not None else OversizePenalties()

    def start_call(self, info: flight.CallInfo, headers: Mapping[str, Any]) -> AuthMiddleware:
        method = str(info.method.name).lower()
        try:
            middleware = self._authenticate(headers)
        except flight.FlightUnauthenticatedError as exc:
            if self.on_refused is not None:
                self.on_refused(method, str(exc))
            raise
        wait = self.penalties.remaining(middleware.principal_key, method)
        if wait > 0:
            raise ResourceExhausted(
                f"this client's recent {method} requests were refused for their size: its {method} "
                f"calls are refused for {wait:.1f} s more (send smaller requests, e.g. split takes)"
            )
        callinfo.clear()  # a new call on this thread
        callinfo.annotate(principal=middleware.principal.name)
        return middleware

    def _authenticate(self, headers: Mapping[str, Any]) -> AuthMiddleware:
        raw = _header(headers, _AUTH_HEADER)
        if raw is None:
            raise flight.FlightUnauthenticatedError(
                "authentication required: send 'authorization: Bearer <token>'"
            )
        scheme, _, credentials = raw.strip().partition(" ")
        scheme = scheme.lower()
        credentials = credentials.strip()
        if scheme == "bearer":
            principal = self.authenticator.bearer(credentials)
            if principal is None:
                raise flight.FlightUnauthenticatedError("invalid or expired token")
            return AuthMiddleware(principal)
        if scheme == "basic":
            try:
                user, sep, password = base64.b64decode(credentials, validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                sep = ""
            if not sep:
                raise flight.FlightUnauthenticatedError("malformed basic credentials")
            principal = self.authenticator.basic(user, password)
            if principal is None:
                raise flight.FlightUnauthenticatedError("invalid user name or password")
            # Basic credentials open a session: later calls carry the issued bearer token.
            return AuthMiddleware(principal, issued=self.authenticator.issue(principal))
        raise flight.FlightUnauthenticatedError(f"unsupported authorization scheme {scheme!r}")


class HandshakeAuthHandler(flight.ServerAuthHandler):  # type: ignore[misc]
    """Lets the Handshake RPC through to :class:`AuthMiddlewareFactory`, which does the checking.

    pyarrow answers Handshake with UNIMPLEMENTED unless an auth handler is installed; the basic-auth
    handshake of ``FlightClient.authenticate_basic_token`` is carried entirely in headers, so this
    handler exchanges no messages and accepts every call the middleware already let in.
    """

    def authenticate(self, outgoing: Any, incoming: Any) -> None:
        return None

    def is_valid(self, token: bytes) -> str:
        return ""


def require_write(context: flight.ServerCallContext) -> None:
    """Refuse the call with ``UNAUTHORIZED`` when it runs with a read-only token.

    Call it at the start of every handler that changes data. Without auth (no ``"auth"``
    middleware) everything is allowed.

    Raises
    ------
    pyarrow.flight.FlightUnauthorizedError
        The caller's token is read-only.
    """
    middleware = context.get_middleware("auth")
    if middleware is not None and getattr(middleware, "read_only", False):
        raise flight.FlightUnauthorizedError("this token is read-only; writes need a read-write token")
