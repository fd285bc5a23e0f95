"""A lean S3 GET path: SigV4-signed ranged GETs over a urllib3 connection pool, on the caller's thread.

Why: aiobotocore spends ~5 ms of CPU per request in the single event-loop thread that s3fs runs all
requests on, so a take that needs 200 ranged GETs is bound by that one thread, not by the server.
Signing a GET with botocore's signer costs ~0.1 ms and urllib3 releases the GIL while waiting, so
the scheduler's threads run GETs truly in parallel. Writes, listings and conditional puts stay on
s3fs (rare, and they need its error translation).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

__all__ = ["HttpGetter", "S3HttpError", "make_getter"]


class S3HttpError(OSError):
    """A non-success HTTP answer; ``response`` has botocore's shape so retries classify it."""

    def __init__(self, status: int, code: str, url: str) -> None:
        super().__init__(f"HTTP {status} {code} for {url}")
        self.status = status
        self.response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}


def _code(body: bytes) -> str:
    start = body.find(b"<Code>")
    end = body.find(b"</Code>")
    if start < 0 or end < start:
        return ""
    return body[start + 6 : end].decode(errors="replace")


class HttpGetter:
    """Signed ranged GETs for one set of S3 settings."""

    def __init__(
        self,
        endpoint: str | None,
        region: str,
        credentials: Any | None,
        path_style: bool,
        pool_size: int,
        connect_timeout: float,
        read_timeout: float,
    ) -> None:
        import urllib3

        self.region = region
        self.endpoint = endpoint.rstrip("/") if endpoint else None
        self.credentials = credentials
        self.path_style = path_style or endpoint is not None
        self.pool = urllib3.PoolManager(
            num_pools=8,
            maxsize=pool_size,
            retries=False,  # retries are ours (counted, jittered)
            timeout=urllib3.Timeout(connect=connect_timeout, read=read_timeout),
        )

    def url(self, bucket: str, key: str) -> str:
        path = quote(key, safe="/~")
        if self.endpoint is not None:
            return f"{self.endpoint}/{bucket}/{path}"
        if self.path_style:
            return f"https://s3.{self.region}.amazonaws.com/{bucket}/{path}"
        return f"https://{bucket}.s3.{self.region}.amazonaws.com/{path}"

    def get(self, bucket: str, key: str, range_header: str | None) -> tuple[dict[str, str], bytes]:
        """``(response headers, body)``; raises :class:`FileNotFoundError`, :class:`S3HttpError`."""
        url = self.url(bucket, key)
        headers: dict[str, str] = {}
        if range_header is not None:
            headers["Range"] = range_header
        if self.credentials is not None:
            from botocore.auth import S3SigV4Auth  # type: ignore[import-untyped]
            from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]

            req = AWSRequest(method="GET", url=url, headers=headers)
            S3SigV4Auth(self.credentials.get_frozen_credentials(), "s3", self.region).add_auth(req)
            headers = dict(req.headers.items())
        resp = self.pool.request("GET", url, headers=headers, preload_content=True)
        if resp.status in (200, 206):
            return {k.lower(): v for k, v in resp.headers.items()}, bytes(resp.data)
        code = _code(resp.data)
        if resp.status == 404:
            raise FileNotFoundError(f"{url}: {code or 'not found'}")
        if resp.status == 403:
            raise PermissionError(f"{url}: {code or 'access denied'}")
        raise S3HttpError(resp.status, code or str(resp.status), url)


def make_getter(
    endpoint: str | None,
    region: str | None,
    key: str | None,
    secret: str | None,
    token: str | None,
    anonymous: bool,
    path_style: bool,
    pool_size: int,
    connect_timeout: float,
    read_timeout: float,
) -> HttpGetter | None:
    """A getter for these settings, or ``None`` when credentials cannot be resolved up front
    (then s3fs, with botocore's full provider chain, does the reads)."""
    try:
        import botocore.session  # type: ignore[import-untyped]
        from botocore.credentials import Credentials  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - botocore comes with s3fs
        return None
    session = botocore.session.get_session()
    credentials: Any | None
    if anonymous:
        credentials = None
    elif key and secret:
        credentials = Credentials(key, secret, token)
    else:
        credentials = session.get_credentials()
        if credentials is None:
            return None
    resolved_region = region or session.get_config_variable("region") or "us-east-1"
    return HttpGetter(
        endpoint, resolved_region, credentials, path_style, pool_size, connect_timeout, read_timeout
    )
