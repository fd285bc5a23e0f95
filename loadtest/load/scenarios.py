"""The scenarios of the latency suite: what one request does, for each arm.

Arms:

* ``flight``: the lance-flight server through :class:`~flight_server.client.LanceFlightClient`;
* ``engine``: our engine (:mod:`lance_format`) in the client process, on the same dataset files
  when the load test started the server itself (else on a local copy of the same rows);
* ``pylance``: pylance in the client process on the same files (the oracle; load tests may use it).

The ``sql_*`` scenarios send SQL: the ``flight`` arm through the ADBC Flight SQL driver (what
JDBC/ODBC and BI tools speak) to the server's Flight SQL, the ``engine`` arm through DataFusion in
the client process over our ``LanceDataset`` (the same engine the server runs).

A :class:`Session` belongs to one client thread and keeps its connection or open dataset between
requests, as a real client would. ``call(rng)`` performs one request and returns the rows it read
or wrote; it raises whatever the arm raises (the generator counts errors by status).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = [
    "APPEND_ROWS",
    "ARMS",
    "BATCH_TAKE_ROWS",
    "MAIN_DATASET",
    "MIXED_DATASET",
    "SCENARIOS",
    "SMALL_SCAN_ROWS",
    "SQL_FILTER_SPAN",
    "ClientEnv",
    "Scenario",
    "Session",
    "build_table",
    "open_session",
    "write_dataset_name",
]

ARMS = ("flight", "engine", "pylance")
#: Dataset the read scenarios use (written once at set-up, never changed by the suite).
MAIN_DATASET = "loadtest_main"
#: Dataset of the mixed workload: reads and appends on the same dataset, so appends invalidate
#: what readers cached, as in production.
MIXED_DATASET = "loadtest_mixed"
#: Rows per batch take and per streaming-take message: a typical feature-lookup batch.
BATCH_TAKE_ROWS = 100
#: Rows of a small scan (at a random offset): a page of results.
SMALL_SCAN_ROWS = 1000
#: Rows per append: a small micro-batch, so the commit dominates, which is what appends cost.
APPEND_ROWS = 100
#: Ids a ``sql_filter`` query's range covers (about half pass its second predicate).
SQL_FILTER_SPAN = 1000
#: Shares of the mixed workload: mostly lookups, some short scans, a tenth writes.
MIXED_SHARES = (("point_take", 0.45), ("batch_take", 0.35), ("small_scan", 0.10), ("append", 0.10))


def write_dataset_name(scenario: str, arm: str) -> str:
    """The dataset a writing scenario appends to (one per scenario and arm: no cross-talk)."""
    return f"loadtest_{scenario}_{arm}"


@dataclass(frozen=True)
class Scenario:
    """One kind of request.

    Attributes
    ----------
    name, description:
        Shown in reports.
    writes:
        Whether it writes (its datasets are created at set-up).
    threads:
        Concurrent requests per client process in closed-loop runs (``writers`` uses many).
    arms:
        The arms it runs on (in-process arms only where the operation exists in-process).
    """

    name: str
    description: str
    writes: bool
    threads: int
    arms: tuple[str, ...]


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("point_take", "take 1 random row by offset (do_get take ticket)", False, 2, ARMS),
        Scenario("batch_take", f"take {BATCH_TAKE_ROWS} random rows by offset", False, 2, ARMS),
        Scenario(
            "stream_take",
            f"do_exchange: {BATCH_TAKE_ROWS} random offsets per message on a long-lived stream",
            False,
            2,
            ("flight",),
        ),
        Scenario("small_scan", f"scan {SMALL_SCAN_ROWS} rows at a random offset", False, 2, ARMS),
        Scenario("large_scan", "scan the whole dataset (all columns)", False, 1, ARMS),
        Scenario("append", f"append {APPEND_ROWS} rows (one commit each)", True, 1, ARMS),
        Scenario(
            "mixed",
            "45% point take, 35% batch take, 10% small scan, 10% append, on one dataset",
            True,
            2,
            ("flight",),
        ),
        Scenario(
            "writers", f"many concurrent writers appending {APPEND_ROWS} rows each", True, 4, ("flight",)
        ),
        Scenario(
            "sql_point",
            "Flight SQL (ADBC): SELECT * ... WHERE id = <random> (zone map on id)",
            False,
            2,
            ("flight", "engine"),
        ),
        Scenario(
            "sql_filter",
            f"Flight SQL (ADBC): SELECT id, x ... WHERE id in a random {SQL_FILTER_SPAN}-id span AND x > 0.5",
            False,
            2,
            ("flight", "engine"),
        ),
    )
}


def build_table(rows: int, seed: int = 0) -> pa.Table:
    """Ids, floats, short strings and a small vector: a typical feature table."""
    rng = np.random.default_rng(seed)
    vec = rng.random(rows * 8, dtype=np.float32)
    ids = np.arange(rows, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "x": pa.array(rng.random(rows)),
            "name": pa.array(np.char.add("row-", ids.astype(str)).astype(object)),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vec), 8),
        }
    )


@dataclass(frozen=True)
class ClientEnv:
    """Where the arms find their data; sent to every client process.

    Attributes
    ----------
    target:
        Flight location of the server.
    token:
        Bearer token for the server (``None``: auth off).
    rows:
        Rows of the read datasets (random offsets are drawn below this).
    local_root:
        Directory holding ``MAIN_DATASET`` for the in-process arms (the server's own root when the
        load test started the server) and their write datasets.
    timeout_s:
        Seconds one Flight call may take.
    targets:
        Every worker location of the server: client process ``i`` talks to ``targets[i % n]``,
        as clients following the advertised endpoints spread over ``--workers`` (empty: ``target``).
    """

    target: str
    token: str | None
    rows: int
    local_root: str
    timeout_s: float
    targets: tuple[str, ...] = ()

    def for_process(self, index: int) -> ClientEnv:
        """The environment of client process ``index`` (its own worker location)."""
        if not self.targets:
            return self
        return replace(self, target=self.targets[index % len(self.targets)])


class Session:
    """One client thread's connection or open dataset for one scenario and arm."""

    def __init__(self, call: Callable[[np.random.Generator], int], close: Callable[[], None]) -> None:
        self.call = call
        self.close = close


def _offsets(rng: np.random.Generator, rows: int, k: int) -> np.ndarray:
    return rng.integers(0, rows, k, dtype=np.int64)


def _append_batch(rng: np.random.Generator) -> pa.Table:
    return build_table(APPEND_ROWS, seed=int(rng.integers(0, 2**31)))


def sql_statement(scenario: str, rng: np.random.Generator, rows: int) -> str:
    """The SQL text one request of a ``sql_*`` scenario sends."""
    if scenario == "sql_point":
        return f"SELECT * FROM {MAIN_DATASET} WHERE id = {int(rng.integers(0, rows))}"
    lo = int(rng.integers(0, max(1, rows - SQL_FILTER_SPAN)))
    return f"SELECT id, x FROM {MAIN_DATASET} WHERE id >= {lo} AND id < {lo + SQL_FILTER_SPAN} AND x > 0.5"


def _adbc_session(scenario: str, env: ClientEnv) -> Session:
    """A Flight SQL connection through the ADBC driver (one per client thread)."""
    import adbc_driver_flightsql
    import adbc_driver_flightsql.dbapi as adbc

    kwargs = {}
    if env.token:
        kwargs[adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value] = f"Bearer {env.token}"
    kwargs[adbc_driver_flightsql.DatabaseOptions.TIMEOUT_QUERY.value] = str(env.timeout_s)
    # autocommit: the server runs no transactions (Flight SQL SqlInfo says so).
    conn = adbc.connect(env.target, db_kwargs=kwargs, autocommit=True)

    def call(rng: np.random.Generator) -> int:
        with conn.cursor() as cur:
            cur.execute(sql_statement(scenario, rng, env.rows))
            return int(cur.fetch_arrow_table().num_rows)

    return Session(call, conn.close)


def _flight_session(scenario: str, env: ClientEnv) -> Session:
    from flight_server.client import LanceFlightClient

    if scenario.startswith("sql_"):
        return _adbc_session(scenario, env)

    client = LanceFlightClient(env.target, env.token, timeout=env.timeout_s)
    rows = env.rows
    target_ds = MIXED_DATASET if scenario == "mixed" else MAIN_DATASET

    def point(rng: np.random.Generator) -> int:
        return int(client.take(target_ds, indices=_offsets(rng, rows, 1)).num_rows)

    def batch(rng: np.random.Generator) -> int:
        return int(client.take(target_ds, indices=_offsets(rng, rows, BATCH_TAKE_ROWS)).num_rows)

    def small(rng: np.random.Generator) -> int:
        offset = int(rng.integers(0, max(1, rows - SMALL_SCAN_ROWS)))
        return int(client.scan(target_ds, limit=SMALL_SCAN_ROWS, offset=offset).num_rows)

    def large(rng: np.random.Generator) -> int:
        return int(client.scan(target_ds).num_rows)

    def append_to(name: str) -> Callable[[np.random.Generator], int]:
        def append(rng: np.random.Generator) -> int:
            client.write(name, _append_batch(rng), mode="append")
            return APPEND_ROWS

        return append

    if scenario == "stream_take":
        return _stream_session(client, rows, env.timeout_s)
    calls: dict[str, Callable[[np.random.Generator], int]] = {
        "point_take": point,
        "batch_take": batch,
        "small_scan": small,
        "large_scan": large,
        "append": append_to(write_dataset_name("append", "flight")),
        "writers": append_to(write_dataset_name("writers", "flight")),
    }
    if scenario == "mixed":
        by_name = {**calls, "append": append_to(MIXED_DATASET)}
        return Session(_mix(by_name), client.close)
    return Session(calls[scenario], client.close)


def _mix(calls: dict[str, Callable[[np.random.Generator], int]]) -> Callable[[np.random.Generator], int]:
    names = [n for n, _ in MIXED_SHARES]
    cum = np.cumsum([share for _, share in MIXED_SHARES])

    def call(rng: np.random.Generator) -> int:
        pick = int(np.searchsorted(cum, rng.random() * cum[-1], side="right"))
        return calls[names[min(pick, len(names) - 1)]](rng)

    return call


def _stream_session(client: Any, rows: int, timeout_s: float) -> Session:
    """One do_exchange stream per thread, reopened after an error; a request = one message.

    The call timeout bounds the whole stream (a gRPC deadline), so a stream is replaced once it
    has lived half of it, as a long-running client would.
    """
    state: dict[str, Any] = {"stream": None, "ids": None, "opened": 0.0}

    def source() -> Iterator[np.ndarray]:
        while True:
            yield state["ids"]

    def call(rng: np.random.Generator) -> int:
        state["ids"] = _offsets(rng, rows, BATCH_TAKE_ROWS).astype(np.uint64)
        if state["stream"] is not None and time.monotonic() - state["opened"] > timeout_s / 2:
            _close_stream(state)
        if state["stream"] is None:
            state["stream"] = client.take_stream(MAIN_DATASET, source(), by="index")
            state["opened"] = time.monotonic()
        try:
            return int(next(state["stream"]).num_rows)
        except BaseException:
            _close_stream(state)
            raise

    def close() -> None:
        _close_stream(state)
        client.close()

    return Session(call, close)


def _close_stream(state: dict[str, Any]) -> None:
    stream, state["stream"] = state["stream"], None
    if stream is not None:
        with contextlib.suppress(Exception):  # a broken stream is being discarded anyway
            stream.close()


def _local_session(scenario: str, arm: str, env: ClientEnv) -> Session:
    """The in-process arms: our engine or pylance over the same files."""
    if arm == "pylance":
        import lance  # the oracle: load tests and tests only

        opener: Callable[[str], Any] = lance.dataset
        writer: Callable[..., Any] = lance.write_dataset
    else:
        import lance_format

        opener = lance_format.dataset
        writer = lance_format.write_dataset
    rows = env.rows
    uri = f"{env.local_root}/{MAIN_DATASET}"
    ds: Any = opener(uri) if scenario != "append" else None
    if scenario.startswith("sql_"):
        import datafusion

        ctx = datafusion.SessionContext()
        ctx.register_dataset(MAIN_DATASET, ds)

        def sql(rng: np.random.Generator) -> int:
            return int(ctx.sql(sql_statement(scenario, rng, rows)).to_arrow_table().num_rows)

        return Session(sql, lambda: None)

    def point(rng: np.random.Generator) -> int:
        return int(ds.take(_offsets(rng, rows, 1)).num_rows)

    def batch(rng: np.random.Generator) -> int:
        return int(ds.take(_offsets(rng, rows, BATCH_TAKE_ROWS)).num_rows)

    def small(rng: np.random.Generator) -> int:
        offset = int(rng.integers(0, max(1, rows - SMALL_SCAN_ROWS)))
        return int(ds.to_table(limit=SMALL_SCAN_ROWS, offset=offset).num_rows)

    def large(rng: np.random.Generator) -> int:
        return int(ds.to_table().num_rows)

    def append(rng: np.random.Generator) -> int:
        writer(_append_batch(rng), f"{env.local_root}/{write_dataset_name('append', arm)}", mode="append")
        return APPEND_ROWS

    calls = {"point_take": point, "batch_take": batch, "small_scan": small, "large_scan": large}
    calls["append"] = append
    if scenario not in calls:
        raise ValueError(f"scenario {scenario!r} has no {arm} arm")
    return Session(calls[scenario], lambda: None)


def open_session(scenario: str, arm: str, env: ClientEnv) -> Session:
    """A session running ``scenario`` on ``arm``."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    if arm not in SCENARIOS[scenario].arms:
        raise ValueError(f"scenario {scenario!r} has no {arm!r} arm")
    if arm == "flight":
        return _flight_session(scenario, env)
    return _local_session(scenario, arm, env)
