"""Retries for object-store calls: exponential backoff with full jitter, transient errors only.

Throttling, 5xx answers, connection resets/refusals and timeouts are retried until the attempt or
time budget runs out; anything else (missing object, denied access, bad request) surfaces at once.
Either way the final error is a :mod:`lance_format.core.errors` type naming the object's path.
"""

from __future__ import annotations

import dataclasses
import errno
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from lance_format.core.errors import InvalidInputError, LanceError, NotFoundError, StorageError

__all__ = [
    "DEFAULT_RETRY",
    "RetryPolicy",
    "TransientStorageError",
    "call_with_retries",
    "is_transient",
    "retry_count",
    "retry_policy",
]

T = TypeVar("T")

#: Attempts per call, first included. Lance's object store client retries 10 times (3 by default in
#: older releases); 10 attempts with the backoff below ride out a ~20 s outage (a server restart).
DEFAULT_MAX_ATTEMPTS = 10
#: First backoff: long enough for a throttling response to mean something, short enough that a
#: single dropped connection costs a user ~0.1 s.
DEFAULT_BASE_DELAY = 0.1
#: Backoff cap: beyond a few seconds a retry only adds latency without raising the success odds.
DEFAULT_MAX_DELAY = 5.0
#: Wall-clock budget of one call including its retries (pylance's ``client_retry_timeout`` is 180 s;
#: a query server would rather fail in a minute than hold a client for three).
DEFAULT_TIMEOUT = 60.0

# S3 error codes that mean "try again later" whatever the HTTP status says.
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "InternalError",
        "ServiceUnavailable",
        "ConditionalRequestConflict",
        "OperationAborted",
    }
)
_TRANSIENT_ERRNOS = frozenset(
    {
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.EAGAIN,
        errno.EBUSY,  # s3fs maps 503 SlowDown and 409 conflicts to EBUSY
        getattr(errno, "EREMOTEIO", 121),  # s3fs maps 500 InternalError to EREMOTEIO
    }
)
# Exception class names (from botocore, aiohttp, urllib3, ...) that mean the connection failed or
# timed out; matched by name so this module needs none of those packages.
_TRANSIENT_CLASS_NAMES = frozenset(
    {
        "EndpointConnectionError",
        "ConnectionClosedError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ProxyConnectionError",
        "HTTPClientError",
        "ResponseStreamingError",
        "IncompleteReadError",
        "ClientConnectorError",
        "ClientConnectionError",
        "ClientOSError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ClientPayloadError",
        "ConnectionTimeoutError",
        "SocketTimeoutError",
        "IncompleteRead",
        "ProtocolError",
        "FSTimeoutError",
        "NewConnectionError",
        "MaxRetryError",
    }
)


class TransientStorageError(StorageError):
    """A transient failure that outlasted the retry budget."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to retry transient failures.

    Attributes
    ----------
    max_attempts:
        Attempts per call, the first included (1 = no retries).
    base_delay, max_delay:
        Backoff before attempt ``n`` is uniform in ``[0, min(max_delay, base_delay * 2**n))``.
    timeout:
        No retry starts after this many seconds since the first attempt.
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    base_delay: float = DEFAULT_BASE_DELAY
    max_delay: float = DEFAULT_MAX_DELAY
    timeout: float = DEFAULT_TIMEOUT

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """The (jittered) sleeps between attempts; ``max_attempts - 1`` of them."""
        r = rng or random
        for n in range(self.max_attempts - 1):
            # Full jitter: spreads the retries of many clients hit by the same outage.
            yield r.uniform(0.0, min(self.max_delay, self.base_delay * (2**n)))


DEFAULT_RETRY = RetryPolicy()


def retry_policy(max_retries: object = None, timeout: object = None) -> RetryPolicy:
    """:data:`DEFAULT_RETRY` with pylance's ``client_max_retries`` / ``client_retry_timeout``
    storage options applied (``None`` keeps a default).

    Raises
    ------
    InvalidInputError
        When a value is not a number.
    """
    retry = DEFAULT_RETRY
    try:
        if max_retries is not None:
            retry = dataclasses.replace(retry, max_attempts=int(str(max_retries)) + 1)
        if timeout is not None:
            retry = dataclasses.replace(retry, timeout=float(str(timeout)))
    except ValueError:
        raise InvalidInputError(
            f"bad retry settings in storage_options: {max_retries!r}, {timeout!r}"
        ) from None
    return retry


_counter_lock = threading.Lock()
_retries = 0


def retry_count() -> int:
    """Retries made by this process so far (all stores)."""
    return _retries


def _count_retry() -> None:
    global _retries
    with _counter_lock:
        _retries += 1


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _client_error_transient(e: BaseException) -> bool | None:
    response = getattr(e, "response", None)
    if not isinstance(response, dict):
        return None
    err = response.get("Error") or {}
    code = str(err.get("Code", ""))
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    if code in _TRANSIENT_CODES:
        return True
    if isinstance(status, int) or (isinstance(code, str) and code.isdigit()):
        st = status if isinstance(status, int) else int(code)
        return st >= 500 or st in (408, 429)
    return False


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the call that raised ``exc`` can succeed."""
    for e in _chain(exc):
        if isinstance(e, LanceError) and not isinstance(e, TransientStorageError):
            return False
        verdict = _client_error_transient(e)
        if verdict is not None:
            return verdict
        if type(e).__name__ in _TRANSIENT_CLASS_NAMES:
            return True
        if isinstance(e, ConnectionError | TimeoutError):
            return True
        if isinstance(e, FileNotFoundError | PermissionError | FileExistsError | IsADirectoryError):
            return False
        if isinstance(e, OSError) and e.errno in _TRANSIENT_ERRNOS:
            return True
    return False


def _permanent(exc: BaseException, path: str) -> LanceError:
    if isinstance(exc, LanceError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return NotFoundError(f"{path}: not found")
    if isinstance(exc, PermissionError):
        return StorageError(f"{path}: access denied ({exc})")
    return StorageError(f"{path}: {type(exc).__name__}: {exc}")


def call_with_retries(
    fn: Callable[[], T],
    path: str,
    policy: RetryPolicy = DEFAULT_RETRY,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    passthrough: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``fn``, retrying transient failures per ``policy``.

    Parameters
    ----------
    fn:
        The operation (one request).
    path:
        The object's URI, for error messages.
    policy:
        Attempts, backoff and time budget.
    sleep, clock:
        Injectable for tests.
    passthrough:
        Exception types the caller handles itself (re-raised unchanged, never retried).

    Raises
    ------
    NotFoundError
        The object does not exist.
    TransientStorageError
        Transient failures outlasted the budget.
    StorageError
        Any other failure (at once, no retry).
    """
    start = clock()
    delays = policy.delays()
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except passthrough:
            raise
        except Exception as e:
            if not is_transient(e):
                raise _permanent(e, path) from e
            delay = next(delays, None)
            if delay is None or clock() - start + delay > policy.timeout:
                raise TransientStorageError(
                    f"{path}: gave up after {attempt} attempts over {clock() - start:.1f} s: "
                    f"{type(e).__name__}: {e}"
                ) from e
            _count_retry()
            sleep(delay)
