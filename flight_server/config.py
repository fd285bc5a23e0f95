"""Load :class:`~flight_server.settings.ServerSettings` from flags, environment and a YAML file.

Precedence, per key: command-line flag > environment variable > YAML config file > default. The
config file is ``--config PATH`` or ``$LANCE_FLIGHT_CONFIG``. Every key, flag and variable is listed
once, in :data:`OPTIONS`; ``docs/configuration.md`` documents the same table (a test keeps the two
in step). Bad values raise :class:`ConfigError` naming the key and where the value came from.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from flight_server.settings import BasicUser, ServerSettings, Token
from lance_format.core.errors import InvalidInputError

__all__ = [
    "CONFIG_ENV",
    "OPTIONS",
    "ConfigError",
    "Option",
    "build_parser",
    "load_settings",
    "parse_tokens_file",
]

CONFIG_ENV = "LANCE_FLIGHT_CONFIG"
#: Levels the standard logging module knows by name.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
#: One process per core is the useful ceiling; more than this is a typo, not a plan.
MAX_WORKERS = 256
ADVERTISE_SCHEMES = ("grpc", "grpc+tcp", "grpc+tls")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}
_UNITS |= {"ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}
_BYTES_RE = re.compile(r"^\s*(\d+)\s*([kmgt]i?)?b?\s*$", re.IGNORECASE)


class ConfigError(InvalidInputError):
    """A configuration value is malformed, out of range or contradicts another one."""


# --- value parsers: raw value (str from flags/env, any YAML scalar) -> typed value ------------------


def _str(raw: Any) -> str:
    if isinstance(raw, (dict, list)):
        raise ValueError("expected a string")
    return "" if raw is None else str(raw)


def _int_in(lo: int, hi: int) -> Callable[[Any], int]:
    def parse(raw: Any) -> int:
        if isinstance(raw, (bool, float)):
            raise ValueError("expected an integer")
        value = int(str(raw).strip())
        if not lo <= value <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return value

    return parse


def _bytes(raw: Any) -> int:
    """A byte count: an integer, optionally with a unit (``64MiB``, ``1G``, ``512k``)."""
    if isinstance(raw, (bool, float)):
        raise ValueError("expected a byte count")
    match = _BYTES_RE.match(str(raw))
    if not match:
        raise ValueError("expected a byte count such as 268435456 or 256MiB")
    return int(match.group(1)) * _UNITS[(match.group(2) or "").lower()]


def _positive_bytes(raw: Any) -> int:
    value = _bytes(raw)
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def _bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("expected true or false")


def _seconds(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError("expected a number of seconds")
    value = float(str(raw).strip())
    if not 0 <= value <= 3600:
        raise ValueError("must be between 0 and 3600 seconds")
    return value


def _float_in(lo: float, hi: float) -> Callable[[Any], float]:
    def parse(raw: Any) -> float:
        if isinstance(raw, bool):
            raise ValueError("expected a number")
        value = float(str(raw).strip())
        if not lo <= value <= hi:  # NaN fails too
            raise ValueError(f"must be between {lo:g} and {hi:g}")
        return value

    return parse


def _choice(choices: Sequence[str], upper: bool) -> Callable[[Any], str]:
    def parse(raw: Any) -> str:
        text = str(raw).strip()
        text = text.upper() if upper else text.lower()
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    return parse


def _list(raw: Any) -> list[str]:
    """A comma-separated string or a YAML list of strings."""
    if raw is None:
        return []
    items = raw if isinstance(raw, list) else str(raw).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def _advertise(raw: Any) -> tuple[str, ...]:
    out = []
    for uri in _list(raw):
        parsed = urlparse(uri)
        if parsed.scheme not in ADVERTISE_SCHEMES or not parsed.hostname or parsed.port is None:
            raise ValueError(f"{uri!r} is not a grpc://host:port or grpc+tls://host:port location")
        out.append(uri)
    return tuple(out)


def _tokens(raw: Any) -> tuple[Token, ...]:
    """``tok`` or ``tok:ro`` items (comma-separated or a YAML list)."""
    out = []
    for item in _list(raw):
        value, _, flag = item.rpartition(":") if item.endswith(":ro") else (item, "", "")
        if not value or any(c.isspace() for c in value):
            raise ValueError("tokens are non-empty and contain no whitespace")
        out.append(Token(value, read_only=flag == "ro"))
    return tuple(out)


def _users(raw: Any) -> tuple[BasicUser, ...]:
    """``user:password`` or ``user:password:ro`` items (comma-separated or a YAML list)."""
    out = []
    for item in _list(raw):
        read_only = item.endswith(":ro")
        body = item[: -len(":ro")] if read_only else item
        name, sep, password = body.partition(":")
        if not sep or not name or not password:
            raise ValueError("users are written user:password or user:password:ro")
        out.append(BasicUser(name, password, read_only))
    return tuple(out)


def parse_tokens_file(path: str) -> tuple[Token, ...]:
    """Tokens from a file: one per line, ``token`` or ``token ro``; blank lines and ``#`` comments skipped.

    Raises
    ------
    ConfigError
        When the file cannot be read or a line is malformed.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"auth.tokensFile: cannot read {path!r}: {exc.strerror or exc}") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) > 2 or (len(words) == 2 and words[1].lower() != "ro"):
            raise ConfigError(f"auth.tokensFile {path}:{number}: expected `token` or `token ro`")
        out.append(Token(words[0], read_only=len(words) == 2))
    return tuple(out)


# --- the option table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One setting: its dataclass field, YAML key, flag, environment variables and parser."""

    field: str
    key: str  # dotted YAML path, e.g. "cache.pageBytes"
    flag: str | None  # None: not settable on the command line (secrets)
    envs: tuple[str, ...]
    parse: Callable[[Any], Any]
    help: str


OPTIONS: tuple[Option, ...] = (
    Option("root", "root", "--root", ("LANCE_FLIGHT_ROOT",), _str, "local directory, memory:// or s3://"),
    Option("host", "host", "--host", ("LANCE_FLIGHT_HOST",), _str, "interface to listen on"),
    Option("port", "port", "--port", ("LANCE_FLIGHT_PORT",), _int_in(0, 65535), "Flight port (0 = free)"),
    Option(
        "metrics_port",
        "metricsPort",
        "--metrics-port",
        ("LANCE_FLIGHT_METRICS_PORT",),
        _int_in(-1, 65535),
        "side HTTP port for /metrics, /healthz, /readyz (0 = free, -1 = off)",
    ),
    Option(
        "workers",
        "workers",
        "--workers",
        ("LANCE_FLIGHT_WORKERS",),
        _int_in(1, MAX_WORKERS),
        "server processes; worker k listens on port + k",
    ),
    Option(
        "advertise",
        "advertise",
        "--advertise",
        ("LANCE_FLIGHT_ADVERTISE",),
        _advertise,
        "comma-separated locations endpoints list",
    ),
    Option(
        "metadata_cache_bytes",
        "cache.metadataBytes",
        "--metadata-cache-bytes",
        ("LANCE_FLIGHT_METADATA_CACHE_BYTES",),
        _bytes,
        "metadata cache capacity",
    ),
    Option(
        "page_cache_bytes",
        "cache.pageBytes",
        "--page-cache-bytes",
        ("LANCE_FLIGHT_PAGE_CACHE_BYTES",),
        _bytes,
        "data page cache capacity",
    ),
    Option(
        "batch_cache_bytes",
        "cache.batchBytes",
        "--batch-cache-bytes",
        ("LANCE_FLIGHT_BATCH_CACHE_BYTES",),
        _bytes,
        "decoded scan batch cache capacity",
    ),
    Option(
        "decoded_cache_bytes",
        "cache.decodedBytes",
        "--decoded-cache-bytes",
        ("LANCE_FLIGHT_DECODED_CACHE_BYTES",),
        _bytes,
        "decoded hot-block cache capacity (repeated takes)",
    ),
    Option(
        "latest_version_seconds",
        "cache.latestVersionSeconds",
        "--latest-version-seconds",
        ("LANCE_FLIGHT_LATEST_VERSION_SECONDS",),
        _seconds,
        "object-store roots: seconds a resolved latest version is reused",
    ),
    Option(
        "tokens_file",
        "auth.tokensFile",
        "--tokens-file",
        ("LANCE_FLIGHT_TOKENS_FILE",),
        _str,
        "file of bearer tokens (`token` or `token ro` per line)",
    ),
    Option("tokens", "auth.tokens", None, ("LANCE_FLIGHT_TOKENS",), _tokens, "bearer tokens"),
    Option("users", "auth.users", None, ("LANCE_FLIGHT_USERS",), _users, "basic-auth users"),
    Option("tls_cert", "tls.certFile", "--tls-cert", ("LANCE_FLIGHT_TLS_CERT",), _str, "PEM certificate"),
    Option("tls_key", "tls.keyFile", "--tls-key", ("LANCE_FLIGHT_TLS_KEY",), _str, "PEM private key"),
    Option(
        "tls_client_ca",
        "tls.clientCaFile",
        "--tls-client-ca",
        ("LANCE_FLIGHT_TLS_CLIENT_CA",),
        _str,
        "PEM CA bundle: require client certificates it signed (mTLS)",
    ),
    Option(
        "s3_endpoint",
        "s3.endpoint",
        "--s3-endpoint",
        ("LANCE_FLIGHT_S3_ENDPOINT", "AWS_ENDPOINT_URL"),
        _str,
        "S3-compatible endpoint URL",
    ),
    Option("s3_region", "s3.region", "--s3-region", ("LANCE_FLIGHT_S3_REGION", "AWS_REGION"), _str, "region"),
    Option(
        "s3_anonymous",
        "s3.anonymous",
        "--s3-anonymous",
        ("LANCE_FLIGHT_S3_ANONYMOUS",),
        _bool,
        "unsigned S3 requests",
    ),
    Option(
        "max_take_rows",
        "limits.maxTakeRows",
        "--max-take-rows",
        ("LANCE_FLIGHT_MAX_TAKE_ROWS",),
        _int_in(1, 2**40),
        "rows one take may ask for",
    ),
    Option(
        "max_message_bytes",
        "limits.maxMessageBytes",
        "--max-message-bytes",
        ("LANCE_FLIGHT_MAX_MESSAGE_BYTES",),
        _positive_bytes,
        "largest gRPC message",
    ),
    Option(
        "max_concurrent_streams",
        "limits.maxConcurrentStreams",
        "--max-concurrent-streams",
        ("LANCE_FLIGHT_MAX_CONCURRENT_STREAMS",),
        _int_in(1, 1_000_000),
        "concurrent streams per process",
    ),
    Option(
        "ticket_lifetime_seconds",
        "limits.ticketLifetimeSeconds",
        "--ticket-lifetime-seconds",
        ("LANCE_FLIGHT_TICKET_LIFETIME_SECONDS",),
        _int_in(0, 14 * 24 * 3600),
        "seconds pinned tickets stay valid (Flight expiration_time; 0: none)",
    ),
    Option(
        "max_streams_per_principal",
        "limits.maxStreamsPerPrincipal",
        "--max-streams-per-principal",
        ("LANCE_FLIGHT_MAX_STREAMS_PER_PRINCIPAL",),
        _int_in(0, 1_000_000),
        "concurrent streams of one token, user or connection (0 = half)",
    ),
    Option(
        "memory_budget_bytes",
        "limits.memoryBudgetBytes",
        "--memory-budget-bytes",
        ("LANCE_FLIGHT_MEMORY_BUDGET_BYTES",),
        _positive_bytes,
        "result bytes all streams of a process may hold",
    ),
    Option(
        "call_memory_bytes",
        "limits.callMemoryBytes",
        "--call-memory-bytes",
        ("LANCE_FLIGHT_CALL_MEMORY_BYTES",),
        _positive_bytes,
        "result bytes one call may hold",
    ),
    Option(
        "sql_memory_bytes",
        "limits.sqlMemoryBytes",
        "--sql-memory-bytes",
        ("LANCE_FLIGHT_SQL_MEMORY_BYTES",),
        _positive_bytes,
        "working memory of one SQL query (joins, aggregates, sorts)",
    ),
    Option(
        "sql_timeout_seconds",
        "limits.sqlTimeoutSeconds",
        "--sql-timeout",
        ("LANCE_FLIGHT_SQL_TIMEOUT_SECONDS",),
        _float_in(0, 7 * 24 * 3600),
        "seconds one SQL query may run before it is stopped (0: no limit)",
    ),
    Option(
        "orphan_min_age_seconds",
        "limits.orphanMinAgeSeconds",
        "--orphan-min-age",
        ("LANCE_FLIGHT_ORPHAN_MIN_AGE_SECONDS",),
        _float_in(0, 365 * 24 * 3600),
        "seconds an unreferenced data file is kept from any cleanup (writes in flight)",
    ),
    Option(
        "max_concurrent_sql_queries",
        "limits.maxConcurrentSqlQueries",
        "--max-concurrent-sql-queries",
        ("LANCE_FLIGHT_MAX_CONCURRENT_SQL_QUERIES",),
        _int_in(1, 1024),
        "SQL queries that may run in DataFusion at once",
    ),
    Option(
        "stream_wait_seconds",
        "limits.streamWaitSeconds",
        "--stream-wait",
        ("LANCE_FLIGHT_STREAM_WAIT_SECONDS",),
        _seconds,
        "seconds a stream waits for a slot or memory",
    ),
    Option(
        "stream_idle_seconds",
        "limits.streamIdleSeconds",
        "--stream-idle",
        ("LANCE_FLIGHT_STREAM_IDLE_SECONDS",),
        _seconds,
        "seconds a stream may wait on its client before losing its slot",
    ),
    Option(
        "max_endpoints",
        "limits.maxEndpoints",
        "--max-endpoints",
        ("LANCE_FLIGHT_MAX_ENDPOINTS",),
        _int_in(1, 10_000_000),
        "endpoints get_flight_info may plan by splitting fragments",
    ),
    Option(
        "work_slots",
        "limits.workSlots",
        "--work-slots",
        ("LANCE_FLIGHT_WORK_SLOTS",),
        _int_in(0, 4096),
        "CPU work running at once, shared fairly between principals (0 = one per core)",
    ),
    Option(
        "gil_switch_ms",
        "limits.gilSwitchMs",
        "--gil-switch-ms",
        ("LANCE_FLIGHT_GIL_SWITCH_MS",),
        _float_in(0.0, 100.0),
        "milliseconds a thread holds the GIL before a waiting one may take it (0 = Python's default)",
    ),
    Option(
        "bulk_nice",
        "limits.bulkNice",
        "--bulk-nice",
        ("LANCE_FLIGHT_BULK_NICE",),
        _int_in(0, 19),
        "nice value added to the threads running long streams' later batches (0 = same priority)",
    ),
    Option(
        "malloc_arenas",
        "limits.mallocArenas",
        "--malloc-arenas",
        ("LANCE_FLIGHT_MALLOC_ARENAS",),
        _int_in(0, 1024),
        "arenas the serving processes' C heap (glibc malloc) may use (0 = glibc's default)",
    ),
    Option(
        "plan_cache_bytes",
        "cache.planBytes",
        "--plan-cache-bytes",
        ("LANCE_FLIGHT_PLAN_CACHE_BYTES",),
        _bytes,
        "bytes of recent FlightInfos reused while their dataset version is unchanged (0 = off)",
    ),
    Option(
        "oversize_strikes",
        "limits.oversizeStrikes",
        "--oversize-strikes",
        ("LANCE_FLIGHT_OVERSIZE_STRIKES",),
        _int_in(1, 1_000_000),
        "refusals of oversized requests within the window before a client's back-off starts",
    ),
    Option(
        "oversize_window_seconds",
        "limits.oversizeWindowSeconds",
        "--oversize-window",
        ("LANCE_FLIGHT_OVERSIZE_WINDOW_SECONDS",),
        _seconds,
        "seconds a refusal of an oversized request counts for",
    ),
    Option(
        "oversize_first_backoff_seconds",
        "limits.oversizeFirstBackoffSeconds",
        "--oversize-first-backoff",
        ("LANCE_FLIGHT_OVERSIZE_FIRST_BACKOFF_SECONDS",),
        _seconds,
        "first back-off (doubled at each further refusal); 0 turns the back-off off",
    ),
    Option(
        "oversize_max_backoff_seconds",
        "limits.oversizeMaxBackoffSeconds",
        "--oversize-max-backoff",
        ("LANCE_FLIGHT_OVERSIZE_MAX_BACKOFF_SECONDS",),
        _seconds,
        "longest back-off",
    ),
    Option(
        "oversize_min_bytes",
        "limits.oversizeMinBytes",
        "--oversize-min-bytes",
        ("LANCE_FLIGHT_OVERSIZE_MIN_BYTES",),
        _bytes,
        "refused requests smaller than this do not count",
    ),
    Option(
        "oversize_hold_bytes",
        "limits.oversizeHoldBytes",
        "--oversize-hold-bytes",
        ("LANCE_FLIGHT_OVERSIZE_HOLD_BYTES",),
        _bytes,
        "bytes of anonymous clients' refused requests held until their back-off ends (0 = none)",
    ),
    Option(
        "shutdown_grace_seconds",
        "shutdownGraceSeconds",
        "--shutdown-grace",
        ("LANCE_FLIGHT_SHUTDOWN_GRACE_SECONDS",),
        _seconds,
        "seconds SIGTERM waits for in-flight calls",
    ),
    Option(
        "log_level",
        "logLevel",
        "--log-level",
        ("LANCE_FLIGHT_LOG_LEVEL",),
        _choice(LOG_LEVELS, upper=True),
        "log level",
    ),
    Option(
        "log_format",
        "logFormat",
        "--log-format",
        ("LANCE_FLIGHT_LOG_FORMAT",),
        _choice(LOG_FORMATS, upper=False),
        "text (key=value) or json lines",
    ),
)

_BY_KEY = {opt.key: opt for opt in OPTIONS}
_SETTING_FIELDS = {f.name for f in fields(ServerSettings)}
assert all(opt.field in _SETTING_FIELDS for opt in OPTIONS)


#: What ``serve --help`` shows as each flag's value (choices are spelled out instead).
_METAVARS = {
    "root": "URI",
    "host": "HOST",
    "port": "PORT",
    "metrics_port": "PORT",
    "workers": "N",
    "advertise": "URI[,URI...]",
    "latest_version_seconds": "SECONDS",
    "shutdown_grace_seconds": "SECONDS",
    "tokens_file": "PATH",
    "tls_cert": "PATH",
    "tls_key": "PATH",
    "tls_client_ca": "PATH",
    "s3_endpoint": "URL",
    "s3_region": "REGION",
    "max_take_rows": "ROWS",
    "max_concurrent_streams": "N",
    "ticket_lifetime_seconds": "SECONDS",
    "max_streams_per_principal": "N",
    "stream_wait_seconds": "SECONDS",
    "sql_timeout_seconds": "SECONDS",
    "orphan_min_age_seconds": "SECONDS",
    "max_concurrent_sql_queries": "N",
    "stream_idle_seconds": "SECONDS",
    "max_endpoints": "N",
    "work_slots": "N",
    "gil_switch_ms": "MS",
    "bulk_nice": "N",
    "malloc_arenas": "N",
    "oversize_strikes": "N",
    "oversize_window_seconds": "SECONDS",
    "oversize_first_backoff_seconds": "SECONDS",
    "oversize_max_backoff_seconds": "SECONDS",
}
_CHOICES = {"log_level": LOG_LEVELS, "log_format": LOG_FORMATS}


def _metavar(opt: Option) -> str:
    if opt.field in _CHOICES:
        return "{" + ",".join(_CHOICES[opt.field]) + "}"
    if opt.parse in (_bytes, _positive_bytes):
        return "BYTES"
    return _METAVARS.get(opt.field, "VALUE")


def _shown_default(opt: Option, defaults: ServerSettings) -> str:
    value = getattr(defaults, opt.field)
    if value in ("", (), None):
        return "none"
    if opt.parse in (_bytes, _positive_bytes) and value:
        for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2)):
            if value % scale == 0:
                return f"{value} = {value // scale} {unit}"
    return str(value)


class _HelpFormatter(argparse.HelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=40, width=110)


def build_parser(prog: str = "lance-flight serve") -> argparse.ArgumentParser:
    """The ``serve`` flags; every default is ``None`` so "not given" falls through to env and YAML."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Serve Lance datasets over Arrow Flight (docs/configuration.md lists every setting).",
        epilog="Precedence: flag > environment variable > config file > default.",
        argument_default=None,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--config", metavar="PATH", help=f"YAML config file (env {CONFIG_ENV})")
    defaults = ServerSettings()
    for opt in OPTIONS:
        if opt.flag is None:
            continue
        env = ", ".join(opt.envs)
        shown = f"{opt.help} (default: {_shown_default(opt, defaults)}; env {env})"
        if opt.parse is _bool:
            parser.add_argument(opt.flag, dest=opt.field, action=argparse.BooleanOptionalAction, help=shown)
        else:
            parser.add_argument(opt.flag, dest=opt.field, metavar=_metavar(opt), help=shown)
    return parser


def _flatten(tree: Mapping[str, Any], prefix: str, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in tree.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            out |= _flatten(value, f"{key}.", path)
        elif key in _BY_KEY:
            out[key] = value
        else:
            known = ", ".join(sorted(_BY_KEY))
            raise ConfigError(f"{path}: unknown key {key!r} (known keys: {known})")
    return out


def _read_yaml(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path!r}: {exc.strerror or exc}") from None
    try:
        tree = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path!r} is not valid YAML: {exc}") from None
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise ConfigError(f"config file {path!r} must hold a mapping of keys, not {type(tree).__name__}")
    return _flatten(tree, "", path)


def load_settings(
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    config_file: str | None = None,
) -> ServerSettings:
    """Resolve every setting: flag > environment variable > YAML config file > default.

    Parameters
    ----------
    argv:
        The ``serve`` arguments (without the program and subcommand names); ``None`` = none.
    env:
        Environment variables; default ``os.environ``.
    config_file:
        A YAML file; when ``None``, ``--config`` in ``argv`` or ``$LANCE_FLIGHT_CONFIG`` names it.

    Raises
    ------
    ConfigError
        A malformed or out-of-range value, an unknown YAML key, a missing file, or contradicting
        settings (a TLS key without its certificate, ...). The message names the key and its source.
    """
    env = os.environ if env is None else env
    parser = build_parser()
    try:
        flags = vars(parser.parse_args(list(argv or [])))
    except SystemExit as exc:  # argparse already printed the problem to stderr
        raise ConfigError(f"bad command line: {' '.join(argv or [])}") from exc
    path = config_file or flags.pop("config", None) or env.get(CONFIG_ENV) or None
    flags.pop("config", None)
    from_yaml = _read_yaml(path) if path else {}

    values: dict[str, Any] = {}
    for opt in OPTIONS:
        source, raw = None, None
        if flags.get(opt.field) is not None:
            source, raw = f"flag {opt.flag}", flags[opt.field]
        else:
            for name in opt.envs:
                if env.get(name, "") != "":
                    source, raw = f"environment variable {name}", env[name]
                    break
            else:
                if opt.key in from_yaml:
                    source, raw = f"config file {path} key {opt.key}", from_yaml[opt.key]
        if source is None:
            continue
        try:
            values[opt.field] = opt.parse(raw)
        except ValueError as exc:
            raise ConfigError(f"{opt.key} from {source}: {raw!r}: {exc}") from None
    return _finish(replace(ServerSettings(), **values))


def _finish(s: ServerSettings) -> ServerSettings:
    """Cross-field checks, the tokens file, and storage options derived from the s3 settings."""
    if not s.root:
        raise ConfigError("root must not be empty")
    if not s.host:
        raise ConfigError("host must not be empty")
    if s.port and s.port + s.workers - 1 > 65535:
        raise ConfigError(f"port {s.port} + workers {s.workers} runs past port 65535")
    if bool(s.tls_cert) != bool(s.tls_key):
        raise ConfigError("tls.certFile and tls.keyFile go together: set both or neither")
    if s.tls_client_ca and not s.tls_cert:
        raise ConfigError("tls.clientCaFile (mTLS) needs tls.certFile and tls.keyFile")
    for key, file in (
        ("tls.certFile", s.tls_cert),
        ("tls.keyFile", s.tls_key),
        ("tls.clientCaFile", s.tls_client_ca),
    ):
        if file and not Path(file).is_file():
            raise ConfigError(f"{key}: no such file {file!r}")
    tls_schemes = {urlparse(uri).scheme == "grpc+tls" for uri in s.advertise}
    if s.advertise and tls_schemes != {s.tls}:
        raise ConfigError(
            f"advertise: locations must all use {s.scheme}:// when TLS is {'on' if s.tls else 'off'}"
        )
    # Read the tokens file now so a broken one stops the start; the auth middleware re-reads it as it
    # changes (its tokens are not copied into ``tokens``, or a revoked token would stay valid).
    if s.tokens_file and not parse_tokens_file(s.tokens_file) and not s.tokens and not s.users:
        raise ConfigError(f"auth.tokensFile {s.tokens_file!r} holds no token: every call would be refused")
    options = dict(s.storage_options)
    if s.s3_endpoint:
        options["aws_endpoint"] = s.s3_endpoint
    if s.s3_region:
        options["aws_region"] = s.s3_region
    if s.s3_anonymous:
        options["anonymous"] = "true"
    return replace(s, storage_options=options)
