"""Run the server: one process, or a supervisor with ``--workers N`` worker processes.

Python Flight handlers hold the GIL, so a server scales with processes. pyarrow's Flight server will
not share a port between processes, so worker *k* listens on ``port + k`` and every worker
advertises all of them as endpoint locations: ``get_flight_info`` fans clients out over the
workers, and any worker answers any call for a client that only knows the first port.

The supervisor owns the side HTTP port (metrics of all workers summed through prometheus-client's
multiprocess directory, ``/healthz``, ``/readyz``), restarts a worker that dies, and on SIGTERM or
SIGINT marks itself unready, forwards SIGTERM to the workers and waits for them to drain.

Every process drains the same way: stop accepting calls, let in-flight calls finish within
``shutdownGraceSeconds``, exit 0.
"""

from __future__ import annotations

import gc
import importlib
import logging
import multiprocessing
import os
import queue
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.auth import Authenticator, AuthMiddlewareFactory, HandshakeAuthHandler, new_session_key
from flight_server.fairness import set_gil_switch
from flight_server.heap import limit_arenas
from flight_server.logging import RequestLogMiddlewareFactory, configure_logging, log_refused
from flight_server.metrics import Metrics, ProcessTreeCollector
from flight_server.penalties import OversizePenalties
from flight_server.settings import ServerSettings
from flight_server.sideport import RootProbe, SidePort
from lance_format.core.errors import LanceError
from lance_format.dataset.session import Session

__all__ = [
    "ServerStartError",
    "ServiceFactory",
    "Supervisor",
    "build_server",
    "default_factory",
    "engine_threads",
    "resolve_advertise",
    "resolve_ports",
    "serve",
]

log = logging.getLogger("lance_flight.server")

#: Signature of LanceFlightService's constructor (tests pass stand-ins).
ServiceFactory = Callable[..., flight.FlightServerBase]

#: How often the supervisor looks at its workers and a worker at its parent.
SUPERVISE_INTERVAL_S = 0.2
#: A worker that keeps dying is a bug or a broken environment, not bad luck: after this many
#: restarts within RESTART_WINDOW_S the supervisor gives up and exits non-zero.
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
#: Seconds between restarts of one worker, so a crash loop does not spin a core.
RESTART_BACKOFF_S = 1.0
#: Added to the drain grace before the supervisor SIGKILLs a worker that did not exit.
KILL_MARGIN_S = 5.0
#: Seconds a starting worker may take to serve (imports pyarrow, opens the root).
WORKER_START_TIMEOUT_S = 120.0
_MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}


class ServerStartError(LanceError):
    """The Flight server could not start (the port is taken, the host unknown, ...)."""


def default_factory() -> ServiceFactory:
    """The real service class (imported late: it pulls in the whole engine)."""
    # By name, so this module (and its tests' stand-ins) import without the engine.
    module = importlib.import_module("flight_server.service")
    return cast(ServiceFactory, module.LanceFlightService)


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host.strip("[]") or "0.0.0.0", 0))
        return int(probe.getsockname()[1])


def resolve_ports(settings: ServerSettings) -> list[int]:
    """Worker *k*'s port: ``port + k``; with port 0, free ports picked now."""
    if settings.port == 0:
        return [_free_port(settings.host) for _ in range(settings.workers)]
    return [settings.port + k for k in range(settings.workers)]


def resolve_advertise(settings: ServerSettings, ports: Sequence[int]) -> tuple[str, ...]:
    """The configured ``advertise`` list, else every worker's location on this host."""
    if settings.advertise:
        return settings.advertise
    host = settings.host
    if host in _WILDCARD_HOSTS:
        # Clients cannot dial a wildcard address; the host name is what other machines resolve.
        host = socket.gethostname()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return tuple(f"{settings.scheme}://{host}:{p}" for p in ports)


def _tls_kwargs(settings: ServerSettings) -> dict[str, Any]:
    if not settings.tls:
        return {}
    pair = flight.CertKeyPair(Path(settings.tls_cert).read_bytes(), Path(settings.tls_key).read_bytes())
    out: dict[str, Any] = {"tls_certificates": [pair]}
    if settings.tls_client_ca:
        out["verify_client"] = True
        out["root_certificates"] = Path(settings.tls_client_ca).read_bytes()
    return out


def build_server(
    settings: ServerSettings,
    port: int,
    advertise: Sequence[str],
    metrics: Metrics | None,
    session_key: bytes | None = None,
    factory: ServiceFactory | None = None,
) -> flight.FlightServerBase:
    """One serving Flight server with auth, call logging, metrics and TLS wired in.

    Middleware order matters: auth first, so a refused call never starts the others (pyarrow does
    not tell middleware that already started when a later one refuses); refusals are logged and
    counted by the auth middleware's ``on_refused`` hook instead.
    """
    # Every serving process (the single server, each worker) hands the GIL over this often.
    set_gil_switch(settings.gil_switch_ms)
    # The worker's engine session, from the server's settings (flag > environment > YAML > default,
    # resolved by flight_server.config), passed to the service, which opens every dataset with it.
    # It is also the process's default session.
    session = Session.for_process(
        metadata_cache_bytes=settings.metadata_cache_bytes,
        page_cache_bytes=settings.page_cache_bytes,
        decoded_cache_bytes=settings.decoded_cache_bytes,
    )
    if settings.bulk_nice > 0:
        # Bulk work runs on threads of a higher nice value, which threads they start would inherit:
        # the engine's threads start here, at the serving priority, so none serves small calls at
        # the bulk priority later.
        session.start_threads()
    if metrics is not None:
        metrics.watch(session)  # its caches are what the metrics report, as the cache_stats action
    # pyarrow imports pandas (when installed) on its first conversion of a Python or NumPy object
    # (~0.3 s); pay that before serving, not inside the first take that converts row positions.
    pa.array([0])
    middleware: dict[str, flight.ServerMiddlewareFactory] = {}
    extra = _tls_kwargs(settings)
    if settings.auth:

        def refused(method: str, reason: str) -> None:
            log_refused(method, reason)
            if metrics is not None:
                metrics.rpcs.labels(method, "UNAUTHENTICATED").inc()

        middleware["auth"] = AuthMiddlewareFactory(
            Authenticator(settings, session_key), on_refused=refused, penalties=OversizePenalties.of(settings)
        )
        extra["auth_handler"] = HandshakeAuthHandler()
    middleware["log"] = RequestLogMiddlewareFactory()
    if metrics is not None:
        middleware["metrics"] = metrics.middleware()
    bind_host = (
        settings.host if ":" not in settings.host or settings.host.startswith("[") else f"[{settings.host}]"
    )
    location = f"{settings.scheme}://{bind_host}:{port}"
    make = factory or default_factory()
    try:
        return make(
            settings,
            location=location,
            advertise=tuple(advertise),
            middleware=middleware,
            metrics=metrics,
            session=session,
            **extra,
        )
    except pa.ArrowException as exc:
        # gRPC's reason (address in use, unknown host) went to stderr; pyarrow only says "did not start".
        raise ServerStartError(f"cannot serve on {location}: {exc} (is the port in use?)") from exc


def engine_threads() -> list[str]:
    """Names of the engine's threads alive in this process (its sessions' I/O, decode, encode and
    dataset threads: every one is named ``lance-*``)."""
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("lance-"))


def _drain(server: flight.FlightServerBase, grace: float, who: str) -> bool:
    """Stop accepting, wait up to ``grace`` seconds for in-flight calls (the service then closes
    its engine session); True when all finished."""
    log.info("draining", extra={"who": who, "grace_s": grace})
    done = threading.Thread(target=server.shutdown, name="drain", daemon=True)
    done.start()
    done.join(grace)
    if done.is_alive():
        log.warning("drain timed out; exiting with calls still open", extra={"who": who})
        return False
    # The service closed the engine session after the last call: no engine thread is left.
    log.info("drained", extra={"who": who, "engine_threads": len(engine_threads())})
    return True


def _install_stop_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: Any) -> None:
        log.info("signal received", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _wait(stop: threading.Event) -> None:
    # Short waits: the main thread must come back to the interpreter for signal handlers to run.
    while not stop.wait(SUPERVISE_INTERVAL_S):
        pass


def serve(
    settings: ServerSettings,
    factory: ServiceFactory | None = None,
    stop: threading.Event | None = None,
    on_ready: Callable[[Mapping[str, Any]], None] | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT (or ``stop`` is set); return the exit status.

    Parameters
    ----------
    settings:
        What to serve and how.
    factory:
        The service class; :class:`~flight_server.service.LanceFlightService` by default.
    stop:
        Set it to stop (in-process use); when omitted, SIGTERM and SIGINT handlers are installed.
    on_ready:
        Called once everything serves with ``{"locations": [...], "metrics_port": int | None}``.
    """
    if "://" not in settings.root or settings.root.startswith("file://"):
        os.makedirs(settings.root.removeprefix("file://"), exist_ok=True)
    # Without a stop event this process is the server (the signals are ours): its heap may be frozen.
    owns_process = stop is None
    if owns_process:
        # Before the server's threads start: each would otherwise take an arena of its own.
        limit_arenas(settings.malloc_arenas)
    if stop is None:
        stop = threading.Event()
        _install_stop_signals(stop)
    kernels = KernelWarmup("server", freeze=owns_process)
    ports = resolve_ports(settings)
    advertise = resolve_advertise(settings, ports)
    if settings.workers == 1:
        return _serve_single(settings, ports[0], advertise, factory, stop, on_ready, kernels)
    return Supervisor(settings, ports, advertise, factory).run(stop, on_ready, kernels)


class KernelWarmup:
    """Compiles the engine's kernels (or loads them from the kernel cache) on a background thread.

    A cold compile takes tens of seconds on a busy node (more than a startup probe allows), a
    warm cache a few. The process serves ``/healthz`` meanwhile, and ``/readyz`` stays 503 until
    :meth:`ready`, so no routed request pays the JIT time; a request that arrives anyway waits
    for the kernel it needs (numba compiles under one lock). A failure is logged, and the kernels
    then compile on first use.
    """

    def __init__(self, who: str, freeze: bool = False) -> None:
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(who, freeze), name="kernel-warmup", daemon=True
        )
        self._thread.start()

    def _run(self, who: str, freeze: bool) -> None:
        try:
            _compile_kernels(who)
            if freeze:
                freeze_heap()
        except Exception:
            log.exception("kernel compilation failed; kernels compile on first use", extra={"who": who})
        finally:
            self._done.set()

    def ready(self) -> bool:
        """Whether the kernels are compiled (or compilation gave up)."""
        return self._done.is_set()

    def wait(self, stop: threading.Event) -> bool:
        """Wait until ready (True) or ``stop`` is set (False)."""
        while not self._done.wait(SUPERVISE_INTERVAL_S):
            if stop.is_set():
                return False
        return True


def freeze_heap() -> None:
    """Move every object alive now out of the garbage collector's generations (a serving process,
    once its kernels are in).

    What is alive then (modules, kernels, the session: ~150k objects) lives as long as the process;
    frozen, it is no longer walked by every full collection, each a 60-100 ms stall of all calls in
    flight. Only for a process that is the server: in a host process it would keep that host's
    garbage of the moment from ever being collected.
    """
    gc.collect()
    gc.freeze()


def _compile_kernels(who: str) -> None:
    """Compile the engine's kernels (or load them from the kernel cache), so no request pays the
    JIT time."""
    from lance_format.core.jit import kernel_cache_dir, kernel_cache_enabled
    from lance_format.encodings import compile_kernels

    seconds = compile_kernels()
    log.info(
        "kernels ready",
        extra={
            "who": who,
            "seconds": round(seconds, 3),
            "cache": kernel_cache_dir() if kernel_cache_enabled() else "off",
        },
    )


def _announce(settings: ServerSettings, advertise: Sequence[str], side: SidePort | None) -> dict[str, Any]:
    info = {"locations": list(advertise), "metrics_port": side.port if side else None}
    log.info(
        "serving",
        extra={
            "root": settings.root,
            "workers": settings.workers,
            "locations": ",".join(advertise),
            "metrics": f"http://{settings.host}:{side.port}/metrics" if side else "off",
            "auth": settings.auth,
            "tls": settings.tls,
            "mtls": bool(settings.tls_client_ca),
        },
    )
    return info


def _serve_single(
    settings: ServerSettings,
    port: int,
    advertise: Sequence[str],
    factory: ServiceFactory | None,
    stop: threading.Event,
    on_ready: Callable[[Mapping[str, Any]], None] | None,
    kernels: KernelWarmup | None = None,
) -> int:
    metrics = Metrics()
    server = build_server(settings, port, advertise, metrics, factory=factory)
    draining = threading.Event()
    probe = RootProbe(settings.root, settings.storage_options)
    side = None
    if settings.metrics_port >= 0:
        side = SidePort(
            settings.host,
            settings.metrics_port,
            metrics.registry,
            ready=lambda: not draining.is_set() and (kernels is None or kernels.ready()) and probe(),
            before_scrape=metrics.poll_engine,
        )
    # Announced (and ready) once the kernels are compiled; /healthz answers meanwhile.
    if kernels is None or kernels.wait(stop):
        info = _announce(settings, advertise, side)
        if on_ready is not None:
            on_ready(info)
        _wait(stop)
    draining.set()
    _drain(server, settings.shutdown_grace_seconds, "server")
    if side is not None:
        side.close()
    return 0


# --- multi-process ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _WorkerSpec:
    settings: ServerSettings
    index: int
    port: int
    advertise: tuple[str, ...]
    session_key: bytes
    factory: ServiceFactory | None


def _worker_main(spec: _WorkerSpec, events: Any) -> None:
    """Entry point of a worker process (spawned: a fresh interpreter)."""
    s = spec.settings
    limit_arenas(s.malloc_arenas)  # a worker is a serving process of its own (flight_server.heap)
    configure_logging(s.log_level, s.log_format)
    stop = threading.Event()
    _install_stop_signals(stop)
    parent = os.getppid()
    _compile_kernels(f"worker {spec.index}")  # loads what the supervisor compiled into the cache
    freeze_heap()
    metrics = Metrics()
    try:
        server = build_server(s, spec.port, spec.advertise, metrics, spec.session_key, spec.factory)
    except Exception as exc:
        log.exception("worker failed to start", extra={"worker": spec.index, "port": spec.port})
        events.put(("failed", spec.index, f"{type(exc).__name__}: {exc}"))
        sys.exit(1)
    metrics.start_polling()
    events.put(("ready", spec.index, os.getpid()))

    def orphan_watch() -> None:
        # A SIGKILLed supervisor cannot forward SIGTERM; workers must not outlive it holding ports.
        while not stop.wait(1.0):
            if os.getppid() != parent:
                log.warning("supervisor gone; stopping", extra={"worker": spec.index})
                stop.set()

    threading.Thread(target=orphan_watch, name="orphan-watch", daemon=True).start()
    _wait(stop)
    finished = _drain(server, s.shutdown_grace_seconds, f"worker {spec.index}")
    metrics.stop_polling()
    logging.shutdown()
    if not finished:
        os._exit(0)  # open streams keep gRPC threads alive; the grace period is over


class Supervisor:
    """Starts, watches and stops the worker processes; serves the side HTTP port for all of them."""

    def __init__(
        self,
        settings: ServerSettings,
        ports: Sequence[int],
        advertise: Sequence[str],
        factory: ServiceFactory | None = None,
    ) -> None:
        self.settings = settings
        self.ports = list(ports)
        self.advertise = tuple(advertise)
        self.factory = factory
        self.session_key = new_session_key()
        self._ctx = multiprocessing.get_context("spawn")
        self._events: Any = self._ctx.Queue()
        self.procs: dict[int, Any] = {}
        self.ready: set[int] = set()
        self._ever_ready: set[int] = set()
        self._restarts: list[float] = []
        self._draining = threading.Event()
        self._metrics_dir = ""

    def _spawn(self, index: int) -> None:
        spec = _WorkerSpec(
            self.settings, index, self.ports[index], self.advertise, self.session_key, self.factory
        )
        proc = self._ctx.Process(
            target=_worker_main, args=(spec, self._events), name=f"lance-flight-worker-{index}"
        )
        # A spawned worker copies os.environ at start(): prometheus-client reads the directory from
        # it when imported. Set only around start(), so the supervisor's own environment is untouched.
        previous = os.environ.get(_MULTIPROC_ENV)
        os.environ[_MULTIPROC_ENV] = self._metrics_dir
        try:
            proc.start()
        finally:
            if previous is None:
                os.environ.pop(_MULTIPROC_ENV, None)
            else:
                os.environ[_MULTIPROC_ENV] = previous
        self.procs[index] = proc
        log.info("worker started", extra={"worker": index, "pid": proc.pid, "port": self.ports[index]})

    def _is_ready(self, probe: RootProbe) -> bool:
        alive = all(p.is_alive() for p in self.procs.values())
        return not self._draining.is_set() and alive and len(self.ready) == len(self.ports) and probe()

    def _side_port(self, probe: RootProbe) -> SidePort | None:
        if self.settings.metrics_port < 0:
            return None
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self._metrics_dir)  # type: ignore[no-untyped-call]
        registry.register(
            ProcessTreeCollector(lambda: [os.getpid(), *(p.pid for p in self.procs.values() if p.pid)])
        )
        return SidePort(
            self.settings.host, self.settings.metrics_port, registry, lambda: self._is_ready(probe)
        )

    def _handle_events(self) -> str | None:
        """Apply worker messages; a fatal message's text when a worker could not start."""
        while True:
            try:
                kind, index, detail = self._events.get_nowait()
            except queue.Empty:
                return None
            if kind == "ready":
                self.ready.add(index)
                self._ever_ready.add(index)
            elif kind == "failed" and index not in self._ever_ready:
                return f"worker {index} (port {self.ports[index]}) failed to start: {detail}"

    def _check_workers(self) -> str | None:
        """Restart dead workers; a reason to give up when they keep dying."""
        from prometheus_client.multiprocess import mark_process_dead

        for index, proc in list(self.procs.items()):
            if proc.is_alive():
                continue
            self.ready.discard(index)
            mark_process_dead(proc.pid, self._metrics_dir)  # type: ignore[no-untyped-call]
            now = time.monotonic()
            self._restarts = [t for t in self._restarts if now - t < RESTART_WINDOW_S] + [now]
            log.error("worker died", extra={"worker": index, "pid": proc.pid, "exitcode": proc.exitcode})
            if len(self._restarts) > MAX_RESTARTS:
                return f"workers died {len(self._restarts)} times within {RESTART_WINDOW_S:.0f}s"
            time.sleep(RESTART_BACKOFF_S)
            self._spawn(index)
        return None

    def run(
        self,
        stop: threading.Event,
        on_ready: Callable[[Mapping[str, Any]], None] | None = None,
        kernels: KernelWarmup | None = None,
    ) -> int:
        """Supervise until ``stop`` is set; return the exit status.

        With ``kernels``, the side port answers ``/healthz`` while they compile and workers start
        once they are in the kernel cache (each worker then loads them in a second or two).
        """
        # One directory per supervisor run: the workers' metric files, summed by the side port.
        self._metrics_dir = tempfile.mkdtemp(prefix="lance-flight-metrics-")
        status = 0
        side = None
        try:
            probe = RootProbe(self.settings.root, self.settings.storage_options)
            side = self._side_port(probe)
            if kernels is not None and not kernels.wait(stop):
                return status
            for index in range(len(self.ports)):
                self._spawn(index)
            started = time.monotonic()
            announced = False
            while not stop.wait(SUPERVISE_INTERVAL_S):
                problem = self._handle_events()
                if problem is None and self._ever_ready == set(range(len(self.ports))):
                    problem = self._check_workers()
                    if not announced:
                        announced = True
                        info = _announce(self.settings, self.advertise, side)
                        if on_ready is not None:
                            on_ready(info)
                elif problem is None and time.monotonic() - started > WORKER_START_TIMEOUT_S:
                    problem = f"workers not serving after {WORKER_START_TIMEOUT_S:.0f}s"
                elif problem is None and any(
                    not p.is_alive() and i not in self._ever_ready for i, p in self.procs.items()
                ):
                    self._handle_events()
                    problem = "a worker exited before serving"
                if problem is not None:
                    log.error("giving up", extra={"reason": problem})
                    status = 1
                    break
        finally:
            self._draining.set()
            self._stop_workers()
            if side is not None:
                side.close()
            shutil.rmtree(self._metrics_dir, ignore_errors=True)
        return status

    def _stop_workers(self) -> None:
        for proc in self.procs.values():
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.settings.shutdown_grace_seconds + KILL_MARGIN_S
        for index, proc in self.procs.items():
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                log.error("worker did not stop; killing it", extra={"worker": index, "pid": proc.pid})
                proc.kill()
                proc.join()
        log.info("workers stopped", extra={"exitcodes": [p.exitcode for p in self.procs.values()]})
