"""Clients of the race generator that go through a Flight server (``--flight N``).

:meth:`FlightOps.serving` starts a :class:`~flight_server.service.LanceFlightService` in this
process on the dataset's root (a local directory or an S3 prefix) and drives some of the run's
clients through :class:`~flight_server.client.LanceFlightClient`, one connection each. The server
opens the latest version for every call, so a Flight client is never stale; the operations the
protocol has no action for (update, merge_insert, index builds) are appends for it, and refresh
does nothing. Its commits share this process's commit lock with the engine handles (one server
process; ``--workers N`` processes race through the store's conditional put, as the schedules'
nested operations model). A nested operation of a step run by a Flight client runs after it: the
server's store calls are not the client's to hook.

What a Flight client is refused must come typed: a Flight error with a status and no traceback;
``INTERNAL`` and ``CORRUPT_DATA`` (damage) are violations, and so is an error of any other kind.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.client import LanceFlightClient
from flight_server.errors import error_code
from flight_server.requests import ActionRequest
from flight_server.service import LanceFlightService
from flight_server.settings import ServerSettings
from tests.race.engine import ROWS, TAG_NAMES, Check, Checker, Place, content_of, ids_of

__all__ = ["FLIGHT_OPS", "FlightOps"]

#: The operations a Flight client has actions for; any other is an append for it.
FLIGHT_OPS = frozenset(
    {"append", "delete", "overwrite", "compact", "restore", "tag_create", "tag_delete", "cleanup"}
    | {"stage_commit", "refresh"}
)
#: Codes (``extra_info``) that mean damage or a bug on the server, not a refusal.
_DAMAGE_CODES = frozenset({"INTERNAL", "CORRUPT_DATA"})
#: What a message must not carry (the server's tracebacks and paths stay on the server).
_TRACEBACK_MARKS = ("Traceback", 'File "', '.py"')
#: Seconds a Flight call may take before the client gives up: far above any operation on a 40-row
#: dataset, so a timeout is a hang worth a violation.
CALL_TIMEOUT_S = 60.0


class FlightOps:
    """The operations of the clients ``clients`` through one Flight server on ``place``'s root."""

    def __init__(self, place: Place, clients: frozenset[int], checker: Checker, location: str) -> None:
        self.place = place
        self.clients = clients
        self.ops = FLIGHT_OPS
        self.checker = checker
        self.connections = {c: LanceFlightClient(location, timeout=CALL_TIMEOUT_S) for c in clients}
        self.next_id = 2_000_000  # ids apart from the engine clients' (1_000_000 up)

    @classmethod
    @contextmanager
    def serving(cls, place: Place, clients: frozenset[int], checker: Checker) -> Iterator[FlightOps]:
        """A server on ``place.root`` for the run, and the Flight clients ``clients`` of it."""
        settings = ServerSettings(
            root=place.root, port=0, metrics_port=-1, storage_options=dict(place.storage_options or {})
        )
        server = LanceFlightService(settings, location="grpc://127.0.0.1:0")
        ops = cls(place, clients, checker, f"grpc://127.0.0.1:{server.port}")
        try:
            yield ops
        finally:
            for conn in ops.connections.values():
                conn.close()
            server.shutdown()

    def refusal(self, error: Exception) -> tuple[str, bool] | None:
        """``(label, damage)`` of a Flight error; ``None`` for anything else (an untyped error)."""
        if not isinstance(error, flight.FlightError | pa.ArrowException | KeyError):
            return None
        code = error_code(error)
        label = f"flight:{code or type(error).__name__}"
        leaked = any(mark in str(error) for mark in _TRACEBACK_MARKS)
        damage = code in _DAMAGE_CODES or isinstance(error, flight.FlightInternalError) or leaked
        return (label + (" with a traceback" if leaked else ""), damage)

    def run(self, client: int, op: str, rng: random.Random) -> Check:
        """Run ``op`` (one of :data:`FLIGHT_OPS`) for ``client`` over Flight."""
        act: Callable[[LanceFlightClient, random.Random], Check] = getattr(self, f"_{op}")
        return act(self.connections[client], rng)

    # -- operations, as the engine clients' (tests.race.engine.Clients) ------------------------
    def _fresh(self, n: int) -> list[int]:
        with self.checker.lock:
            start = self.next_id
            self.next_id += n
        return list(range(start, start + n))

    def _rows(self, rng: random.Random, ids: list[int]) -> pa.Table:
        return pa.table(
            {"id": pa.array(ids, pa.int64()), "v": pa.array([rng.randrange(100) for _ in ids], pa.int64())}
        )

    def _append(self, fc: LanceFlightClient, rng: random.Random) -> Check:
        ids = self._fresh(ROWS)
        version = fc.write(self.place.name, self._rows(rng, ids), "append")
        return version, lambda t: None if set(ids) <= ids_of(t) else "appended rows missing"

    def _stage_commit(self, fc: LanceFlightClient, rng: random.Random) -> Check:
        ids = self._fresh(ROWS)
        staged = fc.stage(self.place.name, self._rows(rng, ids))
        version = fc.commit(self.place.name, [staged])
        return version, lambda t: None if set(ids) <= ids_of(t) else "staged rows missing"

    def _overwrite(self, fc: LanceFlightClient, rng: random.Random) -> Check:
        ids = self._fresh(ROWS)
        version = fc.write(self.place.name, self._rows(rng, ids), "overwrite")
        return version, lambda t: None if ids_of(t) == set(ids) else "overwrite's rows are not the table"

    def _delete(self, fc: LanceFlightClient, rng: random.Random) -> Check:
        seen = sorted(ids_of(fc.scan(self.place.name, columns=["id"])))
        ids = rng.sample(seen, min(3, len(seen)))
        if not ids:
            return None
        req = ActionRequest(self.place.name, filter_sql=f"id IN ({', '.join(map(str, ids))})")
        version = fc.action("delete", req).version
        owed = self.checker.planned_ids(version, ids)
        return (
            version,
            lambda t: f"deleted rows {sorted(owed & ids_of(t))} still there" if owed & ids_of(t) else None,
        )

    def _compact(self, fc: LanceFlightClient, rng: random.Random) -> Check:
        req = ActionRequest(self.place.name, target_rows_per_fragment=rng.choice([4, 64]))
        result = fc.action("compact", req)
        return (result.version, lambda t: None) if result.counters.get("fragments_removed") else None

    def _restore(self, fc: LanceFlightClient, rng: random.Random) -> Check:
        target = rng.choice([v.version for v in fc.versions(self.place.name)])
        want = self.checker.content_at(target)
        version = fc.restore(self.place.name, target)
        if want is None:  # cleaned up before the checker could read it: nothing to compare
            return version, lambda t: None
        return (
            version,
            lambda t: None if content_of(t) == want else f"restore of version {target} reads other rows",
        )

    def _tag_create(self, fc: LanceFlightClient, rng: random.Random) -> Check:
        name = rng.choice(TAG_NAMES)
        target = rng.choice([v.version for v in fc.versions(self.place.name)])
        want = self.checker.content_at(target)
        fc.create_tag(self.place.name, name, target)
        with self.checker.lock:
            self.checker.tags[name] = target
            if want is not None:
                self.checker.contents.setdefault(target, want)
        return None

    def _tag_delete(self, fc: LanceFlightClient, rng: random.Random) -> Check:
        name = rng.choice(TAG_NAMES)
        with self.checker.lock:
            self.checker.tags.pop(name, None)
        fc.delete_tag(self.place.name, name)
        return None

    def _cleanup(self, fc: LanceFlightClient, rng: random.Random) -> Check:
        fc.cleanup(self.place.name, older_than_seconds=0)
        return None

    def _refresh(self, fc: LanceFlightClient, rng: random.Random) -> Check:
        return None
