"""The server's settings: one frozen dataclass shared by the CLI, the service and the workers.

Loading them from flags, environment and a config file lives in :mod:`flight_server.config`; this
module only says what a setting is and what it defaults to (see ``docs/configuration.md``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CLIENT_ENV", "BasicUser", "ServerSettings", "Token", "client_env"]

#: The embedded default root: a local directory next to where the server starts.
DEFAULT_ROOT = "./lance-data"
#: Loopback by default: exposing the server is a decision, not an accident.
DEFAULT_HOST = "127.0.0.1"
#: Arrow Flight's customary port.
DEFAULT_PORT = 8815
#: Prometheus' customary exporter port.
DEFAULT_METRICS_PORT = 9090
#: Footers, column metadata and manifests of many datasets fit easily; 256 MiB.
DEFAULT_METADATA_CACHE_BYTES = 256 * 1024 * 1024
#: Hot data pages of a served working set; 1 GiB keeps a pod's memory request modest.
DEFAULT_PAGE_CACHE_BYTES = 1024 * 1024 * 1024
#: Decoded batches of finished scans (flight_server.batch_cache): 512 MiB holds a few full scans of
#: typical served tables; warm scans then stream from memory. 0 turns it off.
DEFAULT_BATCH_CACHE_BYTES = 512 * 1024 * 1024
#: Decoded hot row blocks (lance_format.file.decoded): 512 MiB holds the hot columns of several
#: million-row tables (a 1M-row feature table is ~60 MB decoded); repeated takes skip decoding.
DEFAULT_DECODED_CACHE_BYTES = 512 * 1024 * 1024
#: Object-store roots: seconds a resolved latest version of a dataset is reused before listing
#: again. Resolving costs a LIST request (milliseconds, more than a warm take), and a second of
#: staleness for writes made by *other* processes is what eventually consistent Lance servers accept
#: (LanceDB's read_consistency_interval); writes through this process are seen at once. Local roots
#: always list (microseconds).
DEFAULT_LATEST_VERSION_SECONDS = 1.0
#: Seconds a pinned ticket is promised to stay readable (its Flight ``expiration_time``): once a
#: newer version exists, ``cleanup`` may remove the pinned one. An hour bounds how long a client may
#: sit on a plan while leaving operators free to clean up aggressively (the default cleanup keeps
#: 14 days). 0: no expiration_time.
DEFAULT_TICKET_LIFETIME_SECONDS = 3600
#: A take larger than this is a scan in disguise and would buffer too much in one response.
DEFAULT_MAX_TAKE_ROWS = 1_000_000
#: gRPC message ceiling; Arrow batches above it are split by the server.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Concurrent do_get/do_put/do_exchange streams per process before new ones are refused.
DEFAULT_MAX_CONCURRENT_STREAMS = 64
#: Streams one principal (a token or user; a connection without auth) may hold: 0 means half of
#: maxConcurrentStreams, so one client can never take every slot while a heavy one still gets many.
DEFAULT_MAX_STREAMS_PER_PRINCIPAL = 0
#: Bytes of result batches all streams of a process may hold at once (the batch being produced and
#: the one gRPC is sending, per stream): 1 GiB beside the caches' ~2.3 GiB keeps a 4 GiB pod safe.
DEFAULT_MEMORY_BUDGET_BYTES = 1024 * 1024 * 1024
#: Bytes one call may hold at once: four default-size messages; a take streams in chunks below it.
DEFAULT_CALL_MEMORY_BYTES = 256 * 1024 * 1024
#: Working memory one SQL query may take in DataFusion (hash tables of joins and aggregates, sort
#: buffers, array_agg): a query past it fails with INVALID_ARGUMENT instead of growing until the
#: process is killed, and one abandoned by its client (DataFusion keeps computing a blocking
#: operator after the call is cancelled) frees it then. Sorts do not spill to disk (they never did:
#: the pool was unbounded). 256 MiB, one call's share of results, joins and sorts millions of rows.
DEFAULT_SQL_MEMORY_BYTES = 256 * 1024 * 1024
#: Seconds one SQL query may run in DataFusion before it is stopped (DEADLINE_EXCEEDED, code
#: QUERY_TIMEOUT): a statement of the kind this server answers (scans, joins, aggregates of its
#: datasets) takes seconds to minutes; a quarter of an hour stops a runaway one (a cross join, an
#: aggregate over generate_series(1, 1e11)) long before its CPU is missed for hours. 0: no limit.
DEFAULT_SQL_TIMEOUT_SECONDS = 900.0
#: SQL queries that may run in DataFusion at once per process (one principal: half of them). Each
#: may take limits.sqlMemoryBytes, so 4 bound them to 1 GiB together; DataFusion's threads (one per
#: core) are shared by all queries, so more at once would only slow each down.
DEFAULT_MAX_CONCURRENT_SQL_QUERIES = 4
#: Seconds a data file no version references must have existed before any client's ``cleanup``
#: may delete it, ``delete_unverified`` included: until then it may be another client's write in
#: flight (a ``do_put`` between its data files and its commit, a staged fragment awaiting its
#: ``commit`` from a Spark job), and deleting it would commit a version whose files are gone. A
#: day is far above one write of this server and above the Spark jobs it serves, and still leaves a
#: killed writer's leftovers to the next day's cleanup.
DEFAULT_ORPHAN_MIN_AGE_SECONDS = 24 * 3600.0
#: Seconds a stream waits for a slot or memory before RESOURCE_EXHAUSTED: rides out a burst
#: without holding clients long enough to trip their own deadlines (Spark's default is minutes).
DEFAULT_STREAM_WAIT_SECONDS = 5.0
#: Seconds a stream may wait on its client (unread do_get, silent do_put) before its slot goes to
#: another call: far above a slow consumer's gap between two batches, far below a lock-out.
DEFAULT_STREAM_IDLE_SECONDS = 60.0
#: Endpoints get_flight_info may plan by splitting fragments (max_rows_per_endpoint): a FlightInfo
#: of 10,000 endpoints is ~1 MB, more partitions than any Spark job wants per dataset.
DEFAULT_MAX_ENDPOINTS = 10_000
#: CPU work (decoding tickets, planning, producing a stream's next batch) running at once in a process,
#: shared fairly between principals (flight_server.fairness): 0 means one per core the process may
#: use. More only makes the GIL switch between more threads; fewer leaves a core idle during I/O.
DEFAULT_WORK_SLOTS = 0
#: Milliseconds a Python thread runs before a thread waiting for the GIL may take it
#: (``sys.setswitchinterval``), set in each serving process. Python's 5 ms is tuned for throughput:
#: a small take crosses the GIL several times (gRPC callbacks, handler, serialization), and behind
#: a heavy client's thread running Python each crossing may wait the whole interval. 1 ms measured
#: victim p99 under attack several times lower at a few percent of the attacker's throughput.
#: 0 leaves Python's own interval.
DEFAULT_GIL_SWITCH_MS = 1.0
#: Added to the nice value of the threads that run bulk work (a long stream's later batches,
#: flight_server.fairness): the OS then gives a core to the threads serving small calls first and
#: to bulk work every cycle they leave. 10 weighs a bulk thread ~1/10 of a normal one under
#: contention (Linux CFS); bulk work alone still runs at full speed. 0: same priority.
DEFAULT_BULK_NICE = 10
#: Arenas a serving process's C heap (glibc malloc) may use (flight_server.heap). glibc's default,
#: eight per core, lets each of a server's ~80 threads keep its own arena's high-water mark of freed
#: memory: a fuzz run's resident size climbed with its caches flat, the heap keeping 165-190 MiB
#: free from 2,000 calls on (16 arenas). Two kept 13-39 MiB free on the same calls (RSS at 15,000
#: calls 545 MiB against 679 MiB). Arrow's buffers come from its own pool (mimalloc), so what
#: contends for these arenas is Python's bigger objects and gRPC's buffers. 0: glibc's default.
DEFAULT_MALLOC_ARENAS = 2
#: Bytes of recent FlightInfos reused while their dataset version is unchanged: a 10,000-column
#: schema costs tens of milliseconds to plan and serialize, and clients (Spark drivers, dashboards)
#: plan the same scans over and over. 64 MiB holds thousands of ordinary plans, or dozens of
#: 10,000-column ones (~1 MB each). 0: off.
DEFAULT_PLAN_CACHE_BYTES = 64 * 1024 * 1024
#: Back-off for clients that keep sending oversized requests (flight_server.penalties). Refusals of
#: big requests within the window before a back-off starts. One: each oversized request that reached
#: the handler has already stalled every other call of the process (the first back-off is short).
DEFAULT_OVERSIZE_STRIKES = 1
#: Seconds a refusal counts for; a client quiet for this long starts over.
DEFAULT_OVERSIZE_WINDOW_SECONDS = 60.0
#: First back-off (seconds), doubled at each further refusal: a client that retries in a loop sends
#: ever fewer oversized requests, one that stops is served again within seconds.
DEFAULT_OVERSIZE_FIRST_BACKOFF_SECONDS = 2.0
#: Longest back-off (seconds): a client that fixed its requests waits at most this long.
DEFAULT_OVERSIZE_MAX_BACKOFF_SECONDS = 60.0
#: Refused requests smaller than this (bytes) cost little to receive and do not count: a 1 MiB
#: ticket is copied in about a millisecond, a 32 MiB one stalls the process for tens.
DEFAULT_OVERSIZE_MIN_BYTES = 1024 * 1024
#: Bytes of refused oversized requests of anonymous clients held until their back-off ends (the
#: server cannot refuse an anonymous caller before its request is copied, so it slows the caller
#: down instead): each held request keeps its bytes (about three copies) until answered; 128 MiB
#: holds four 32 MiB tickets, the rest are refused at once.
DEFAULT_OVERSIZE_HOLD_BYTES = 128 * 1024 * 1024
#: Seconds SIGTERM waits for in-flight calls before the process exits anyway: below Kubernetes'
#: default terminationGracePeriodSeconds (30) so the kubelet never has to SIGKILL a draining pod.
DEFAULT_SHUTDOWN_GRACE_SECONDS = 25.0


@dataclass(frozen=True)
class Token:
    """A bearer token and whether it may only read."""

    value: str
    read_only: bool = False


@dataclass(frozen=True)
class BasicUser:
    """A user name and password accepted by the basic-auth handshake (which then issues a token)."""

    name: str
    password: str
    read_only: bool = False


@dataclass(frozen=True)
class ServerSettings:
    """Everything ``lance-flight serve`` can be told (names mirror the config keys)."""

    root: str = DEFAULT_ROOT
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    metrics_port: int = DEFAULT_METRICS_PORT
    workers: int = 1
    advertise: tuple[str, ...] = ()
    metadata_cache_bytes: int = DEFAULT_METADATA_CACHE_BYTES
    page_cache_bytes: int = DEFAULT_PAGE_CACHE_BYTES
    batch_cache_bytes: int = DEFAULT_BATCH_CACHE_BYTES
    decoded_cache_bytes: int = DEFAULT_DECODED_CACHE_BYTES
    latest_version_seconds: float = DEFAULT_LATEST_VERSION_SECONDS
    tokens: tuple[Token, ...] = ()
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    s3_endpoint: str = ""
    s3_region: str = ""
    s3_anonymous: bool = False
    max_take_rows: int = DEFAULT_MAX_TAKE_ROWS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS
    ticket_lifetime_seconds: int = DEFAULT_TICKET_LIFETIME_SECONDS
    max_streams_per_principal: int = DEFAULT_MAX_STREAMS_PER_PRINCIPAL
    memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES
    call_memory_bytes: int = DEFAULT_CALL_MEMORY_BYTES
    sql_memory_bytes: int = DEFAULT_SQL_MEMORY_BYTES
    sql_timeout_seconds: float = DEFAULT_SQL_TIMEOUT_SECONDS
    max_concurrent_sql_queries: int = DEFAULT_MAX_CONCURRENT_SQL_QUERIES
    orphan_min_age_seconds: float = DEFAULT_ORPHAN_MIN_AGE_SECONDS
    stream_wait_seconds: float = DEFAULT_STREAM_WAIT_SECONDS
    stream_idle_seconds: float = DEFAULT_STREAM_IDLE_SECONDS
    max_endpoints: int = DEFAULT_MAX_ENDPOINTS
    work_slots: int = DEFAULT_WORK_SLOTS
    gil_switch_ms: float = DEFAULT_GIL_SWITCH_MS
    bulk_nice: int = DEFAULT_BULK_NICE
    malloc_arenas: int = DEFAULT_MALLOC_ARENAS
    plan_cache_bytes: int = DEFAULT_PLAN_CACHE_BYTES
    oversize_strikes: int = DEFAULT_OVERSIZE_STRIKES
    oversize_window_seconds: float = DEFAULT_OVERSIZE_WINDOW_SECONDS
    oversize_first_backoff_seconds: float = DEFAULT_OVERSIZE_FIRST_BACKOFF_SECONDS
    oversize_max_backoff_seconds: float = DEFAULT_OVERSIZE_MAX_BACKOFF_SECONDS
    oversize_min_bytes: int = DEFAULT_OVERSIZE_MIN_BYTES
    oversize_hold_bytes: int = DEFAULT_OVERSIZE_HOLD_BYTES
    log_level: str = "INFO"
    storage_options: dict[str, str] = field(default_factory=dict)
    # Added by server-ops (config keys in docs/configuration.md):
    tokens_file: str = ""  # re-read when it changes, so rotated Secrets apply without a restart
    users: tuple[BasicUser, ...] = ()
    shutdown_grace_seconds: float = DEFAULT_SHUTDOWN_GRACE_SECONDS
    log_format: str = "text"  # text (key=value) or json

    @property
    def streams_per_principal(self) -> int:
        """Streams one principal may hold (``maxStreamsPerPrincipal``, 0 = half the process's)."""
        share = self.max_streams_per_principal or self.max_concurrent_streams // 2
        return max(1, min(share, self.max_concurrent_streams))

    @property
    def tls(self) -> bool:
        """True when the server speaks TLS."""
        return bool(self.tls_cert)

    @property
    def auth(self) -> bool:
        """True when calls need a token."""
        return bool(self.tokens or self.users or self.tokens_file)

    @property
    def scheme(self) -> str:
        """``grpc+tls`` or ``grpc``."""
        return "grpc+tls" if self.tls else "grpc"


#: The client-side variables (the Spark source's default server URI and bearer token); the server's
#: own variables are the options of :mod:`flight_server.config`.
CLIENT_ENV = ("LANCE_FLIGHT_URI", "LANCE_FLIGHT_TOKEN")


def client_env(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """A client-side ``LANCE_FLIGHT_*`` variable (the Spark source's default server and token), or
    None when unset or empty: the one place besides :func:`flight_server.config.load_settings`
    that reads the environment for the service's settings (here, as this module imports nothing a
    Spark executor lacks).

    Raises
    ------
    ValueError
        ``name`` is not one of :data:`CLIENT_ENV`.
    """
    if name not in CLIENT_ENV:
        raise ValueError(f"not a client-side LANCE_FLIGHT_ variable: {name!r}")
    value = (os.environ if env is None else env).get(name, "")
    return value or None
