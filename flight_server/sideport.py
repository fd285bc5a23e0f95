"""The side HTTP port: ``/metrics`` (Prometheus text format), ``/healthz`` and ``/readyz``.

``/healthz`` answers 200 while the process runs (liveness). ``/readyz`` answers 200 only while the
``ready`` callable says so (the Flight server accepts calls, the root is reachable, no drain under
way) and 503 otherwise, so load balancers stop sending traffic before a shutdown.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from lance_format.io import store_for_uri

__all__ = ["READY_CHECK_S", "RootProbe", "SidePort"]

log = logging.getLogger("lance_flight.http")

#: Seconds a root reachability answer is reused: probes come every few seconds, and listing an
#: S3 prefix on each would be a request per probe per pod.
READY_CHECK_S = 5.0


class RootProbe:
    """Is the storage root reachable? Cached for :data:`READY_CHECK_S`."""

    def __init__(self, root: str, storage_options: dict[str, str] | None = None) -> None:
        self.root = root
        self.storage_options = storage_options or {}
        self._checked = -READY_CHECK_S
        self._ok = False
        self._lock = threading.Lock()

    def _check(self) -> bool:
        if "://" not in self.root or self.root.startswith("file://"):
            return os.path.isdir(self.root.removeprefix("file://"))
        store = store_for_uri(self.root, self.storage_options)
        try:
            next(iter(store.list("")), None)
        finally:
            store.close()
        return True

    def __call__(self) -> bool:
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= READY_CHECK_S:
                try:
                    self._ok = self._check()
                except Exception as exc:  # any failure means "not ready", never a crashed probe
                    log.warning("root %s unreachable: %s", self.root, exc)
                    self._ok = False
                self._checked = now
            return self._ok


class SidePort:
    """A small threaded HTTP server for metrics and probes.

    Parameters
    ----------
    host, port:
        Where to listen; port 0 picks a free one (see :attr:`port`).
    registry:
        What ``/metrics`` exposes.
    ready:
        Called per ``/readyz`` request.
    before_scrape:
        Called before each ``/metrics`` render (to poll the engine's counters).
    """

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        ready: Callable[[], bool],
        before_scrape: Callable[[], None] | None = None,
    ) -> None:
        side = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    if before_scrape is not None:
                        before_scrape()
                    self._answer(200, generate_latest(side.registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    self._answer(200, b"ok\n")
                elif path == "/readyz":
                    ok = side.ready()
                    self._answer(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
                else:
                    self._answer(404, b"not found\n")

            def _answer(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                # Probes every few seconds would drown the call log.
                log.debug("http %s", format % args)

        self.registry = registry
        self.ready = ready
        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="side-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
