"""``s3://`` object stores through obstore (the Python binding of Rust's ``object_store``, the
client pylance itself uses), with our own counted retries and conditional puts.

Settings come from, in order of precedence: keyword arguments, ``storage_options`` (pylance's key
names: ``aws_endpoint``, ``aws_access_key_id``, ``aws_secret_access_key``, ``aws_session_token``,
``aws_region``, ``aws_skip_signature`` / ``anonymous``, ``aws_virtual_hosted_style_request``,
``client_max_retries``, ``client_retry_timeout``), then the usual AWS environment variables
(``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, ``AWS_SKIP_SIGNATURE``); whatever is
still unset comes from botocore's chain when botocore is installed (profiles, SSO), else from
``object_store``'s own (instance and container roles).

Why obstore: requests are signed and sent in Rust with the GIL released, so the scheduler's threads
run GETs in parallel; on loopback a 4 KiB ranged GET took ~1 ms against ~6 ms for botocore-signed
urllib3 GETs. Its own retries are switched off: :func:`~lance_format.io.retry.call_with_retries`
owns them, so every attempt is counted and permanent errors surface at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import threading
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, cast

from lance_format.core.errors import InvalidInputError, NotFoundError, NotSupportedError, StorageError
from lance_format.io.retry import DEFAULT_RETRY, RetryPolicy, call_with_retries, retry_policy
from lance_format.io.store import LevelListingStore

__all__ = ["S3Options", "S3Store", "s3_options"]

#: Requests of one read in flight at once. Matches the scheduler's process-wide request bound, so
#: the bound and not the client decides how many GETs run at once.
MAX_POOL_CONNECTIONS = 64
#: Seconds to establish a connection: loopback and in-region endpoints answer in milliseconds, a
#: dead endpoint should fail over to a retry quickly.
CONNECT_TIMEOUT = 5.0
#: Seconds without bytes on an open request before it counts as failed (then retried).
READ_TIMEOUT = 30.0

_TRUE = {"1", "true", "yes", "on"}

#: The process whose obstore runtime our clients run on (``None`` until the first client is made).
#: obstore's Rust runtime does not survive ``fork()``: a forked child's requests, on old clients or
#: new ones, wait forever for worker threads that only the parent has.
_RUNTIME_PID: int | None = None


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


class _BotocoreCredentials:
    """Credentials from botocore's provider chain (profiles, SSO, ...), refreshed as they expire."""

    def __init__(self, credentials: Any) -> None:
        self._credentials = credentials

    def __call__(self) -> dict[str, Any]:
        frozen = self._credentials.get_frozen_credentials()
        out: dict[str, Any] = {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "expires_at": None,
        }
        if frozen.token:
            out["token"] = frozen.token
        expiry = getattr(self._credentials, "_expiry_time", None)  # refreshable credentials only
        if expiry is not None:
            out["expires_at"] = expiry
        return out


def _credential_provider(opts: S3Options) -> Any | None:
    if opts.anonymous or (opts.key and opts.secret):
        return None
    try:
        import botocore.session  # type: ignore[import-untyped]
    except ImportError:
        return None
    credentials = botocore.session.get_session().get_credentials()
    return None if credentials is None else _BotocoreCredentials(credentials)


def _make_client(opts: S3Options, bucket: str) -> Any:
    """An obstore client of the settings and bucket (it owns a connection pool: the session's
    :class:`~lance_format.io.runtime.ClientRegistry` keeps one per settings and bucket)."""
    try:
        from obstore.store import S3Store as ObstoreS3
    except ImportError as e:  # pragma: no cover - obstore is a runtime dependency
        raise NotSupportedError("s3:// needs the obstore package") from e
    config: dict[str, Any] = {}
    if opts.endpoint_url:
        config["endpoint"] = opts.endpoint_url
    config["region"] = opts.region or "us-east-1"
    if opts.anonymous:
        config["skip_signature"] = True
    elif opts.key and opts.secret:
        config["access_key_id"] = opts.key
        config["secret_access_key"] = opts.secret
        if opts.token:
            config["session_token"] = opts.token
    # Custom endpoints (MinIO, SeaweedFS, IP addresses) rarely resolve bucket subdomains.
    config["virtual_hosted_style_request"] = bool(opts.virtual_hosted)
    client_options: dict[str, Any] = {
        "connect_timeout": f"{CONNECT_TIMEOUT}s",
        "read_timeout": f"{READ_TIMEOUT}s",
        "pool_max_idle_per_host": str(MAX_POOL_CONNECTIONS),
    }
    if opts.endpoint_url and opts.endpoint_url.startswith("http://"):
        client_options["allow_http"] = True
    provider = _credential_provider(opts)
    global _RUNTIME_PID
    _RUNTIME_PID = os.getpid()
    return ObstoreS3(
        bucket,
        config=cast(Any, config),
        client_options=cast(Any, client_options),
        # One attempt per call: retries are ours (counted, jittered, bounded by a deadline).
        retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=opts.retry.timeout)},
        credential_provider=provider,
    )


def _split_s3(uri: str) -> tuple[str, str]:
    rest = uri.split("://", 1)[1] if "://" in uri else uri
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise InvalidInputError(f"no bucket in S3 URI {uri!r}")
    return bucket, prefix.strip("/")


_STATUS = re.compile(r"status code: (\d{3})")


def _status(exc: BaseException) -> int | None:
    match = _STATUS.search(str(exc))
    return int(match.group(1)) if match else None


def _short(exc: BaseException) -> str:
    # obstore appends a multi-line debug dump; the first part says what failed.
    return str(exc).split("\n\nDebug source", 1)[0].strip()


class S3RequestError(OSError):
    """A failed S3 request, with the HTTP status in botocore's shape so retries classify it."""

    def __init__(self, message: str, status: int | None, transient: bool) -> None:
        super().__init__(message)
        code = str(status) if status is not None else ("ServiceUnavailable" if transient else "Unknown")
        self.response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}


def _translate(exc: BaseException) -> BaseException:
    """obstore's exception as one :func:`~lance_format.io.retry.call_with_retries` classifies."""
    name = type(exc).__name__
    if isinstance(exc, FileNotFoundError) or name == "NotFoundError":
        return FileNotFoundError(_short(exc))
    if name in ("PermissionDeniedError", "UnauthenticatedError"):
        return PermissionError(_short(exc))
    if name in ("AlreadyExistsError", "PreconditionError"):
        return FileExistsError(_short(exc))
    status = _status(exc)
    if status in (401, 403):
        return PermissionError(_short(exc))
    if status == 404:
        return FileNotFoundError(_short(exc))
    if status is not None:
        return S3RequestError(_short(exc), status, status >= 500 or status in (408, 429))
    text = str(exc).lower()
    if any(w in text for w in ("error sending request", "connection", "timed out", "timeout", "reset")):
        return ConnectionError(_short(exc))
    return S3RequestError(_short(exc), None, False)


def _translated(exc: Exception) -> Exception:
    """obstore's exceptions translated (:func:`_translate`), any other as it is."""
    return cast(Exception, _translate(exc)) if type(exc).__module__.startswith("obstore") else exc


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        translated = _translated(e)
        if translated is e:
            raise
        raise translated from None


class _ThreadLoop:
    """One thread's asyncio event loop for obstore's async calls, closed when the thread ends."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.loop.close()


_LOOPS = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop | None:
    """The calling thread's event loop for async client calls (made on first use, again in a
    forked child); ``None`` when the thread runs an event loop of its own (it cannot block)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return None
    mine: _ThreadLoop | None = getattr(_LOOPS, "loop", None)
    if mine is None or mine.pid != os.getpid():
        mine = _LOOPS.loop = _ThreadLoop()
    return mine.loop


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

    io_parallelism = MAX_POOL_CONNECTIONS
    remote = True

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None, **overrides: Any) -> None:
        self.bucket, self.prefix = _split_s3(uri)
        self.options = s3_options(storage_options, **overrides)

    @property
    def _client(self) -> Any:
        """The obstore client: the session's for these settings and bucket (made on first use,
        once the store is bound to its session's runtime)."""
        if _RUNTIME_PID is not None and os.getpid() != _RUNTIME_PID:
            raise NotSupportedError(
                f"{self.uri}: s3:// I/O in a process forked after its parent used S3 would hang "
                "(the S3 client's runtime does not survive fork()); start worker processes with the "
                "'spawn' or 'forkserver' method, or use S3 only after forking"
            )
        return self._bound_client

    @functools.cached_property
    def _bound_client(self) -> Any:
        return self.runtime.clients.get(
            (self.options, self.bucket), functools.partial(_make_client, self.options, self.bucket)
        )

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _path(self, key: str) -> str:
        return f"{self.uri}/{key}"

    def _retry(self, key: str, fn: Any, passthrough: tuple[type[BaseException], ...] = ()) -> Any:
        # Every request holds a permit of its session's gate (reentrant: data reads that the
        # scheduler issues hold one already), so metadata reads and writes count against the bound.
        with self.runtime.scheduler.gate.hold():
            return call_with_retries(fn, self._path(key), self.options.retry, passthrough=passthrough)

    def _head(self, key: str) -> dict[str, Any]:
        import obstore

        return dict(self._retry(key, lambda: _call(obstore.head, self._client, self._key(key))))

    # -- reads ---------------------------------------------------------------------------------
    def size(self, key: str) -> int:
        return int(self._head(key)["size"])

    def modified(self, key: str) -> float | None:
        try:
            stamp = self._head(key).get("last_modified")
        except NotFoundError:
            return None
        return float(stamp.timestamp()) if stamp is not None else None

    def read_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        import obstore

        def get() -> bytes:
            try:
                return bytes(_call(obstore.get_range, self._client, self._key(key), start=start, end=end))
            except S3RequestError as e:
                if _is_invalid_range(e):  # starts at or past the end: no bytes there
                    return b""
                raise

        return bytes(self._retry(key, get))

    def read_range_view(self, key: str, start: int, end: int) -> memoryview:
        if end <= start:
            return memoryview(b"")
        import obstore

        def get() -> memoryview:
            try:
                got = _call(obstore.get_range, self._client, self._key(key), start=start, end=end)
            except S3RequestError as e:
                if _is_invalid_range(e):  # starts at or past the end: no bytes there
                    return memoryview(b"")
                raise
            # The response's own buffer (obstore.Bytes exports it read-only): no copy. A full
            # scan moves the whole file through here, and ``bytes(...)`` of it cost as much CPU
            # as decoding it.
            return memoryview(got)

        view: memoryview = self._retry(key, get)
        return view

    def read_range_into(self, key: str, start: int, out: memoryview) -> int:
        if not len(out):
            return 0
        import obstore

        def get() -> int:
            try:
                end = start + len(out)
                got = _call(obstore.get_range, self._client, self._key(key), start=start, end=end)
            except S3RequestError as e:
                if _is_invalid_range(e):  # starts at or past the end: no bytes there
                    return 0
                raise
            view = memoryview(got)  # the response's own buffer: one copy, into ``out``
            out[: len(view)] = view
            return len(view)

        return int(self._retry(key, get))

    def read_spans_together(self, key: str, spans: Sequence[tuple[int, int]]) -> list[memoryview] | None:
        # obstore runs the GETs concurrently in Rust with the GIL released: no hand-offs to
        # Python threads (a one-row take of 4 columns: ~half the CPU of 4 threaded GETs).
        # coalesce=0: the planner already merged what is worth merging; each span stays one GET.
        return self._spans_with_retries(key, spans, None)

    def read_span_waves(
        self, key: str, waves: Sequence[Sequence[tuple[int, int]]], in_flight: int
    ) -> list[list[memoryview] | None] | None:
        # Each wave is one call of obstore's async API awaited on this thread's event loop: the
        # GETs run on obstore's Rust runtime and only a finished wave wakes this thread. Waves
        # issued from our own threads through the blocking API cost two thread hand-offs each
        # and a wake-up of the blocked thread per response (a cold take of 100 rows, 182 GETs:
        # 1.32-1.37x pylance's CPU that way, 1.09-1.25x this way). A failed wave's first attempt
        # goes on through the blocking call's retries.
        loop = _thread_loop()
        if loop is None:
            return None
        if not waves:
            return []
        import obstore

        client, path = self._client, self._key(key)
        got: list[Any] = [None] * len(waves)
        futures: list[asyncio.Future[Any] | None] = [None] * len(waves)
        queue = iter(range(len(waves)))

        async def every() -> None:
            # Each call's future wakes this loop once, through a done callback that stores the
            # wave's parts and sends the next wave: no task or semaphore per wave (those cost ~30%
            # of this thread's CPU in the 19 waves a cold 100-row take had when waves held <= 10 GETs).
            done = loop.create_future()
            left = [len(waves)]

            def send() -> None:
                i = next(queue, None)
                if i is None:
                    return
                spans = waves[i]
                try:
                    # A future already (returned as it is); any other awaitable becomes a task,
                    # referenced until it ends (the loop holds its tasks weakly).
                    fut = futures[i] = asyncio.ensure_future(
                        obstore.get_ranges_async(
                            client, path, starts=[s for s, _ in spans], ends=[e for _, e in spans], coalesce=0
                        )
                    )
                except Exception as e:
                    land(i, e)
                    return
                fut.add_done_callback(functools.partial(landed, i))

            def landed(i: int, fut: asyncio.Future[Any]) -> None:
                try:
                    out = fut.result()
                except Exception as e:
                    out = e
                land(i, out)

            def land(i: int, out: Any) -> None:
                got[i] = out
                left[0] -= 1
                if left[0]:
                    send()
                elif not done.done():
                    done.set_result(None)

            for _ in range(min(max(1, in_flight), len(waves))):
                send()
            await done

        loop.run_until_complete(every())
        return [
            self._spans_with_retries(key, spans, out)
            if isinstance(out, Exception)
            else [memoryview(p) for p in out]  # the responses' own buffers: no copy
            for spans, out in zip(waves, got, strict=True)
        ]

    def _spans_with_retries(
        self, key: str, spans: Sequence[tuple[int, int]], failed: Exception | None
    ) -> list[memoryview] | None:
        """:meth:`read_spans_together` through the blocking call and our retries; ``failed``: the
        error of a first attempt made elsewhere (the async call), which counts as attempt one."""
        import obstore

        first = [failed] if failed is not None else []

        def get() -> list[memoryview]:
            if first:
                raise _translated(first.pop())
            parts = _call(
                obstore.get_ranges,
                self._client,
                self._key(key),
                starts=[s for s, _ in spans],
                ends=[e for _, e in spans],
                coalesce=0,
            )
            return [memoryview(p) for p in parts]  # the responses' own buffers: no copy

        try:
            got: list[memoryview] = self._retry(key, get)
        except StorageError as e:
            if not _is_invalid_range(e):
                raise
            return None  # a span past the end: the one-by-one path reports each
        return got

    def read_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        wanted = [(i, s, e) for i, (s, e) in enumerate(ranges) if e > s]
        out = [b""] * len(ranges)
        if not wanted:
            return out
        import obstore

        def get() -> list[bytes]:
            parts = _call(
                obstore.get_ranges,
                self._client,
                self._key(key),
                starts=[s for _, s, _ in wanted],
                ends=[e for _, _, e in wanted],
            )
            return [bytes(p) for p in parts]

        try:
            got: list[bytes] = self._retry(key, get)
        except StorageError as e:
            if not _is_invalid_range(e):
                raise
            # One bad range (e.g. past the end) fails the batch: let read_range sort each one out.
            got = [self.read_range(key, s, e) for _, s, e in wanted]
        for (i, _, _), part in zip(wanted, got, strict=True):
            out[i] = part
        return out

    def read_all(self, key: str) -> bytes:
        import obstore

        def get() -> bytes:
            return bytes(_call(obstore.get, self._client, self._key(key)).bytes())

        return bytes(self._retry(key, get))

    def read_tail(self, key: str, nbytes: int) -> tuple[int, bytes]:
        """One suffix-range GET; the total size comes from its Content-Range header."""
        import obstore

        def get() -> tuple[int, bytes]:
            result = _call(
                obstore.get, self._client, self._key(key), options={"range": {"suffix": max(1, nbytes)}}
            )
            return int(result.meta["size"]), bytes(result.bytes())

        try:
            out: tuple[int, bytes] = self._retry(key, get)
        except StorageError as e:
            if not _is_invalid_range(e):
                raise
            return 0, b""  # an empty object has no suffix to return
        return out

    def _list_level(self, prefix: str) -> tuple[str, list[tuple[str, int, Hashable]], list[str]]:
        """``(base, objects, folders)`` one level under the folder ``prefix`` (all pages)."""
        import obstore

        base = prefix.strip("/")
        full = self._key(base) if base else self.prefix
        list_prefix = f"{full}/" if full else ""

        def listing() -> tuple[list[tuple[str, int, Hashable]], list[str]]:
            result = _call(obstore.list_with_delimiter, self._client, full or None)
            objects: list[tuple[str, int, Hashable]] = []
            for meta in result["objects"]:
                name = str(meta["path"])[len(list_prefix) :]
                if name and "/" not in name:
                    objects.append((name, int(meta["size"]), meta.get("e_tag")))
            folders = [str(p)[len(list_prefix) :].rstrip("/") for p in result["common_prefixes"]]
            return objects, [f for f in folders if f]

        objects, folders = self._retry(base or ".", listing)
        return base, objects, folders

    # -- writes --------------------------------------------------------------------------------
    def _put(self, key: str, data: bytes, create: bool) -> None:
        import obstore

        def attempt() -> None:
            try:
                mode = "create" if create else "overwrite"
                _call(obstore.put, self._client, self._key(key), data, mode=mode)
            except FileExistsError:
                if create:
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
        import obstore

        with contextlib.suppress(NotFoundError):
            self._retry(key, lambda: _call(obstore.delete, self._client, self._key(key)))


def _is_invalid_range(exc: BaseException) -> bool:
    cur: BaseException | None = exc
    while cur is not None:
        response = getattr(cur, "response", None)
        if isinstance(response, dict):
            code = str((response.get("Error") or {}).get("Code", ""))
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            return code in ("InvalidRange", "416") or status == 416
        cur = cur.__cause__ or cur.__context__
    return False
