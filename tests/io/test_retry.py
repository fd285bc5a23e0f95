"""Retries: transient errors are retried with jittered backoff, permanent ones surface at once."""

from __future__ import annotations

import errno
import random

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from lance_format.core.errors import NotFoundError, StorageError
from lance_format.io.retry import (
    RetryPolicy,
    TransientStorageError,
    call_with_retries,
    is_transient,
    retry_count,
)


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "GetObject",
    )


def translated(err: ClientError, exc: OSError) -> OSError:
    # What s3fs raises: a built-in error whose cause is botocore's.
    exc.__cause__ = err
    return exc


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (client_error("SlowDown", 503), True),
        (client_error("ServiceUnavailable", 503), True),
        (client_error("InternalError", 500), True),
        (client_error("BadGateway", 502), True),
        (client_error("TooManyRequests", 429), True),
        (client_error("RequestTimeout", 400), True),
        (client_error("NoSuchKey", 404), False),
        (client_error("AccessDenied", 403), False),
        (client_error("InvalidArgument", 400), False),
        (translated(client_error("BadGateway", 502), OSError(errno.EIO, "bad gateway")), True),
        (translated(client_error("NoSuchKey", 404), FileNotFoundError("gone")), False),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), True),
        (ConnectionResetError(errno.ECONNRESET, "reset"), True),
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), True),
        (TimeoutError("slow"), True),
        (OSError(errno.EBUSY, "slow down"), True),
        (PermissionError("denied"), False),
        (ValueError("bug"), False),
    ],
)
def test_classification(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_transient_errors_are_retried_then_succeed() -> None:
    calls: list[int] = []
    sleeps: list[float] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 4:
            raise client_error("SlowDown", 503)
        return "ok"

    before = retry_count()
    out = call_with_retries(
        flaky, "s3://b/k", RetryPolicy(max_attempts=5, base_delay=0.01), sleep=sleeps.append
    )
    assert out == "ok"
    assert len(calls) == 4
    assert len(sleeps) == 3
    assert retry_count() - before == 3
    # Full jitter: each sleep is within [0, base * 2**n).
    for n, s in enumerate(sleeps):
        assert 0 <= s <= 0.01 * 2**n


def test_permanent_error_surfaces_at_once_with_the_path() -> None:
    calls: list[int] = []

    def denied() -> None:
        calls.append(1)
        raise translated(client_error("AccessDenied", 403), PermissionError("Access Denied"))

    with pytest.raises(StorageError, match="s3://b/secret") as info:
        call_with_retries(denied, "s3://b/secret", sleep=lambda _: None)
    assert len(calls) == 1
    assert not isinstance(info.value, TransientStorageError)

    def missing() -> None:
        raise FileNotFoundError("nope")

    with pytest.raises(NotFoundError, match="s3://b/missing"):
        call_with_retries(missing, "s3://b/missing", sleep=lambda _: None)


def test_gives_up_after_max_attempts_with_a_typed_error() -> None:
    calls: list[int] = []

    def down() -> None:
        calls.append(1)
        raise ConnectionRefusedError(errno.ECONNREFUSED, "refused")

    with pytest.raises(TransientStorageError, match=r"s3://b/k.*3 attempts"):
        call_with_retries(down, "s3://b/k", RetryPolicy(max_attempts=3), sleep=lambda _: None)
    assert len(calls) == 3


def test_time_budget_stops_retries() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    def sleep(s: float) -> None:
        now[0] += s

    def down() -> None:
        now[0] += 1.0  # each attempt takes a second
        raise TimeoutError("slow")

    policy = RetryPolicy(max_attempts=100, base_delay=1.0, max_delay=1.0, timeout=5.0)
    with pytest.raises(TransientStorageError):
        call_with_retries(down, "p", policy, sleep=sleep, clock=clock)
    assert now[0] <= 5.0 + 1.0


def test_delays_are_jittered_and_capped() -> None:
    policy = RetryPolicy(max_attempts=12, base_delay=0.1, max_delay=2.0)
    a = list(policy.delays(random.Random(1)))
    b = list(policy.delays(random.Random(2)))
    assert len(a) == 11
    assert a != b
    assert all(0 <= d <= 2.0 for d in a + b)
