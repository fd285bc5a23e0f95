"""``s3://`` object stores through s3fs, with our own retries and conditional puts.

Settings come from, in order of precedence: keyword arguments, ``storage_options`` (pylance's key
names: ``aws_endpoint``, ``aws_access_key_id``, ``aws_secret_access_key``, ``aws_session_token``,
``aws_region``, ``aws_skip_signature`` / ``anonymous``, ``aws_virtual_hosted_style_request``,
``client_max_retries``, ``client_retry_timeout``), then the usual AWS environment variables
(``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, ``AWS_SKIP_SIGNATURE``); whatever is
still unset is left to botocore's own chain (profiles, instance roles).

botocore's and s3fs's retries are switched off: :func:`~lance_format.io.retry.call_with_retries`
owns them, so every attempt is counted and permanent errors surface at once.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from lance_format.core.errors import InvalidInputError, NotFoundError, NotSupportedError, StorageError
from lance_format.io.planner import OBJECT_STORE_PLAN
from lance_format.io.retry import DEFAULT_RETRY, RetryPolicy, call_with_retries, retry_policy
from lance_format.io.s3_http import HttpGetter, make_getter
from lance_format.io.scheduler import io_gate
from lance_format.io.store import LevelListingStore

__all__ = ["S3Options", "S3Store", "s3_options"]

#: Connections per client. Matches the scheduler's process-wide request bound, so the bound and not
#: the pool decides how many GETs run at once (aiobotocore's default of 10 would throttle scans).
MAX_POOL_CONNECTIONS = 64
#: Seconds to establish a connection: loopback and in-region endpoints answer in milliseconds, a
#: dead endpoint should fail over to a retry quickly.
CONNECT_TIMEOUT = 5.0
#: Seconds without bytes on an open request before it counts as failed (then retried).
READ_TIMEOUT = 30.0

_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class S3Options:
    """Resolved client settings of one S3 store (hashable: clients are shared per settings)."""

    endpoint_url: str | None = None
    key: str | None = None
    secret: str | None = None
    token: str | None = None
    region: str | None = None
    anonymous: bool = False
    virtual_hosted: bool = False
    retry: RetryPolicy = DEFAULT_RETRY


def _flag(v: str | bool | None) -> bool:
    return v if isinstance(v, bool) else (v is not None and str(v).strip().lower() in _TRUE)


def _pick(opts: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        v = opts.get(n)
        if v is not None and str(v) != "":
            return str(v)
    return None


def s3_options(
    storage_options: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> S3Options:
    """Resolve settings: ``overrides`` > ``storage_options`` > ``env`` (default ``os.environ``).

    ``overrides`` take the field names of :class:`S3Options` (``endpoint_url``, ``key``, ``secret``,
    ``token``, ``region``, ``anonymous``, ``virtual_hosted``, ``retry``).
    """
    so = {str(k).lower(): v for k, v in (storage_options or {}).items()}
    env = os.environ if env is None else env
    unknown = set(overrides) - set(S3Options.__dataclass_fields__)
    if unknown:
        raise InvalidInputError(f"unknown S3 settings: {sorted(unknown)}")
    retry = retry_policy(
        _pick(so, "client_max_retries", "max_retries"), _pick(so, "client_retry_timeout", "retry_timeout")
    )
    opts = S3Options(
        endpoint_url=_pick(so, "aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url")
        or _pick(env, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"),
        key=_pick(so, "aws_access_key_id", "access_key_id", "key") or _pick(env, "AWS_ACCESS_KEY_ID"),
        secret=_pick(so, "aws_secret_access_key", "secret_access_key", "secret")
        or _pick(env, "AWS_SECRET_ACCESS_KEY"),
        token=_pick(so, "aws_session_token", "session_token", "aws_token", "token")
        or _pick(env, "AWS_SESSION_TOKEN"),
        region=_pick(so, "aws_region", "region") or _pick(env, "AWS_REGION", "AWS_DEFAULT_REGION"),
        anonymous=_flag(_pick(so, "aws_skip_signature", "skip_signature", "anonymous", "anon"))
        or _flag(_pick(env, "AWS_SKIP_SIGNATURE")),
        virtual_hosted=_flag(_pick(so, "aws_virtual_hosted_style_request", "virtual_hosted_style_request")),
        retry=retry,
    )
    if overrides:
        opts = replace(opts, **overrides)
    if opts.endpoint_url is not None and not re.match(r"^https?://", opts.endpoint_url):
        raise InvalidInputError(f"S3 endpoint must be an http(s) URL, got {opts.endpoint_url!r}")
    return opts


_clients: dict[S3Options, Any] = {}
_getters: dict[S3Options, HttpGetter | None] = {}
_clients_lock = threading.Lock()


def _forget_clients() -> None:
    # A forked child must not share the parent's pooled sockets: it builds its own clients.
    global _clients_lock
    _clients.clear()
    _getters.clear()
    _clients_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_clients)


def _getter(opts: S3Options) -> HttpGetter | None:
    """One signed-GET client per settings and process (it owns the connection pool)."""
    with _clients_lock:
        if opts not in _getters:
            _getters[opts] = make_getter(
                opts.endpoint_url,
                opts.region,
                opts.key,
                opts.secret,
                opts.token,
                opts.anonymous,
                not opts.virtual_hosted,
                MAX_POOL_CONNECTIONS,
                CONNECT_TIMEOUT,
                READ_TIMEOUT,
            )
        return _getters[opts]


def _filesystem(opts: S3Options) -> Any:
    """One s3fs client per settings and process (it owns the connection pool)."""
    with _clients_lock:
        fs = _clients.get(opts)
        if fs is not None:
            return fs
        try:
            import s3fs
        except ImportError as e:  # pragma: no cover - s3fs is a runtime dependency
            raise NotSupportedError("s3:// needs the s3fs package") from e
        client_kwargs: dict[str, Any] = {}
        if opts.endpoint_url:
            client_kwargs["endpoint_url"] = opts.endpoint_url
        if opts.region:
            client_kwargs["region_name"] = opts.region
        config: dict[str, Any] = {
            "max_pool_connections": MAX_POOL_CONNECTIONS,
            "connect_timeout": CONNECT_TIMEOUT,
            "read_timeout": READ_TIMEOUT,
            # One attempt per call: retries are ours (counted, jittered, bounded by a deadline).
            "retries": {"total_max_attempts": 1},
        }
        if opts.endpoint_url and not opts.virtual_hosted:
            # Custom endpoints (MinIO, SeaweedFS, IP addresses) rarely resolve bucket subdomains.
            config["s3"] = {"addressing_style": "path"}
        fs = s3fs.S3FileSystem(
            anon=opts.anonymous,
            key=None if opts.anonymous else opts.key,
            secret=None if opts.anonymous else opts.secret,
            token=None if opts.anonymous else opts.token,
            client_kwargs=client_kwargs,
            config_kwargs=config,
            use_listings_cache=False,  # listings must be fresh: they find new versions
            skip_instance_cache=True,
        )
        fs.retries = 1
        _clients[opts] = fs
        return fs


def _split_s3(uri: str) -> tuple[str, str]:
    rest = uri.split("://", 1)[1] if "://" in uri else uri
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise InvalidInputError(f"no bucket in S3 URI {uri!r}")
    return bucket, prefix.strip("/")


def _is_precondition_failed(exc: BaseException) -> bool:
    cur: BaseException | None = exc
    while cur is not None:
        if isinstance(cur, FileExistsError):
            return True
        response = getattr(cur, "response", None)
        if isinstance(response, dict):
            code = str((response.get("Error") or {}).get("Code", ""))
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "412") or status == 412:
                return True
        cur = cur.__cause__ or cur.__context__
    return False


def _is_invalid_range(exc: BaseException) -> bool:
    cur: BaseException | None = exc
    while cur is not None:
        response = getattr(cur, "response", None)
        if isinstance(response, dict):
            code = str((response.get("Error") or {}).get("Code", ""))
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            return code == "InvalidRange" or status == 416
        cur = cur.__cause__ or cur.__context__
    return False


class _Exists(Exception):
    """Internal: a conditional put found the object present."""


class S3Store(LevelListingStore):
    """Objects under ``s3://bucket/prefix``.

    Parameters
    ----------
    uri:
        ``s3://bucket[/prefix]``.
    storage_options:
        Client settings (see the module docstring).
    **overrides:
        Settings that win over ``storage_options`` and the environment (:class:`S3Options` fields).
    """

    plan_limits = OBJECT_STORE_PLAN
    io_parallelism = MAX_POOL_CONNECTIONS
    remote = True

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None, **overrides: Any) -> None:
        self.bucket, self.prefix = _split_s3(uri)
        self.options = s3_options(storage_options, **overrides)
        self._fs = _filesystem(self.options)
        self._http = _getter(self.options)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _path(self, key: str) -> str:
        return f"{self.uri}/{key}"

    def _run(self, coro_fn: Any, *args: Any) -> Any:
        from fsspec.asyn import sync

        return sync(self._fs.loop, coro_fn, *args)

    def _retry(self, key: str, fn: Any, passthrough: tuple[type[BaseException], ...] = ()) -> Any:
        # Every request holds a permit of the process-wide gate (reentrant: data reads that the
        # scheduler issues hold one already), so metadata reads and writes count against the bound.
        with io_gate().hold():
            return call_with_retries(fn, self._path(key), self.options.retry, passthrough=passthrough)

    async def _get(self, key: str, range_header: str | None) -> tuple[dict[str, Any], bytes]:
        kw: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key)}
        if range_header is not None:
            kw["Range"] = range_header
        resp = await self._fs._call_s3("get_object", **kw)
        try:
            data = await resp["Body"].read()
        finally:
            resp["Body"].close()
        return resp, data

    def _fetch(self, key: str, range_header: str | None) -> tuple[str, bytes]:
        """``(Content-Range header, body)`` of one GET (the lean path when available)."""
        if self._http is not None:
            headers, data = self._http.get(self.bucket, self._key(key), range_header)
            return headers.get("content-range", ""), data
        resp, body = self._run(self._get, key, range_header)
        return str(resp.get("ContentRange", "")), bytes(body)

    # -- reads ---------------------------------------------------------------------------------
    def size(self, key: str) -> int:
        async def head() -> int:
            resp = await self._fs._call_s3("head_object", Bucket=self.bucket, Key=self._key(key))
            return int(resp["ContentLength"])

        return int(self._retry(key, lambda: self._run(head)))

    def modified(self, key: str) -> float | None:
        async def head() -> float | None:
            resp = await self._fs._call_s3("head_object", Bucket=self.bucket, Key=self._key(key))
            stamp = resp.get("LastModified")
            return float(stamp.timestamp()) if stamp is not None else None

        try:
            value = self._retry(key, lambda: self._run(head))
        except FileNotFoundError:
            return None
        return None if value is None else float(value)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""

        def get() -> bytes:
            try:
                return self._fetch(key, f"bytes={start}-{end - 1}")[1]
            except Exception as e:
                if _is_invalid_range(e):  # starts at or past the end: no bytes there
                    return b""
                raise

        return bytes(self._retry(key, get))

    def read_all(self, key: str) -> bytes:
        return bytes(self._retry(key, lambda: self._fetch(key, None)[1]))

    def read_tail(self, key: str, nbytes: int) -> tuple[int, bytes]:
        """One suffix-range GET; the total size comes from its Content-Range header."""

        def get() -> tuple[int, bytes]:
            content_range, data = self._fetch(key, f"bytes=-{max(1, nbytes)}")
            total = content_range.rpartition("/")[2]
            size = int(total) if total.isdigit() else len(data)
            return size, bytes(data)

        try:
            result: tuple[int, bytes] = self._retry(key, get)
        except StorageError as e:
            if not _is_invalid_range(e):
                raise
            return 0, b""  # an empty object has no suffix to return
        return result

    def _list_level(self, prefix: str) -> tuple[str, list[tuple[str, int, Hashable]], list[str]]:
        """``(base, objects, folders)`` one level under the folder ``prefix`` (all pages)."""
        base = prefix.strip("/")
        full = self._key(base) if base else self.prefix
        list_prefix = f"{full}/" if full else ""

        async def listing() -> tuple[list[tuple[str, int, Hashable]], list[str]]:
            objects: list[tuple[str, int, Hashable]] = []
            folders: list[str] = []
            token: str | None = None
            while True:
                kw: dict[str, Any] = {"Bucket": self.bucket, "Prefix": list_prefix, "Delimiter": "/"}
                if token:
                    kw["ContinuationToken"] = token
                resp = await self._fs._call_s3("list_objects_v2", **kw)
                for obj in resp.get("Contents", []):
                    name = obj["Key"][len(list_prefix) :]
                    if name and "/" not in name:
                        objects.append((name, int(obj["Size"]), obj.get("ETag")))
                for common in resp.get("CommonPrefixes", []):
                    name = str(common["Prefix"])[len(list_prefix) :].rstrip("/")
                    if name:
                        folders.append(name)
                if not resp.get("IsTruncated"):
                    return objects, folders
                token = resp.get("NextContinuationToken")

        objects, folders = self._retry(base or ".", lambda: self._run(listing))
        return base, objects, folders

    # -- writes --------------------------------------------------------------------------------
    def _put(self, key: str, data: bytes, create: bool) -> None:
        async def put() -> None:
            kw: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key), "Body": data}
            if create:
                kw["IfNoneMatch"] = "*"  # S3 (and SeaweedFS) refuse with 412 when the key exists
            await self._fs._call_s3("put_object", **kw)

        def attempt() -> None:
            try:
                self._run(put)
            except Exception as e:
                if create and _is_precondition_failed(e):
                    raise _Exists() from None
                raise

        self._retry(key, attempt, passthrough=(_Exists,))

    def write(self, key: str, data: bytes) -> None:
        self._put(key, bytes(data), create=False)

    def put_if_not_exists(self, key: str, data: bytes) -> bool:
        data = bytes(data)
        try:
            self._put(key, data, create=True)
        except _Exists:
            # A retried put whose first attempt landed before the connection broke finds its own
            # object. Equal bytes mean it was ours: manifests and transactions carry a fresh uuid
            # and timestamp, so two writers never produce the same bytes for one key.
            try:
                return self.read_all(key) == data
            except NotFoundError:
                return False
        return True

    def delete(self, key: str) -> None:
        async def rm() -> None:
            await self._fs._call_s3("delete_object", Bucket=self.bucket, Key=self._key(key))

        with contextlib.suppress(NotFoundError):
            self._retry(key, lambda: self._run(rm))
