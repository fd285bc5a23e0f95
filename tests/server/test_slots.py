"""The slot counter shared by the stream governor and the SQL query slots."""

from __future__ import annotations

import pytest

from flight_server.errors import ResourceExhausted
from flight_server.flightsql.interrupt import QuerySlots
from flight_server.slots import Slots
from flight_server.streams import StreamGovernor


def test_one_slot_counter_serves_streams_and_sql_queries() -> None:
    sql = QuerySlots(limit=4, wait_seconds=0.0)
    gov = StreamGovernor(4, 2, 1 << 20, 1 << 20, wait_seconds=0.0, idle_seconds=60.0)
    assert isinstance(sql, Slots)
    sql.acquire("a", lambda: None)
    sql.acquire("a", lambda: None)
    with pytest.raises(ResourceExhausted, match="runs 2 SQL queries, its share"):
        sql.acquire("a", lambda: None)
    sql.acquire("b", lambda: None)
    sql.acquire("b", lambda: None)
    with pytest.raises(ResourceExhausted, match=r"limits\.maxConcurrentSqlQueries = 4"):
        sql.acquire("c", lambda: None)
    sql.release("a")
    sql.acquire("c", lambda: None)
    assert sql.open == 4
    lease = gov.acquire("a")
    gov.acquire("a")
    with pytest.raises(ResourceExhausted, match="holds 2 streams, its share"):
        gov.acquire("a")
    lease.release()
    assert gov.open == 1
    assert gov.stats()["stream_principals"] == 1


def test_cancelled_wait_for_a_sql_slot_stops_with_the_callers_error() -> None:
    sql = QuerySlots(limit=1, wait_seconds=5.0)
    sql.acquire("a", lambda: None)

    def cancelled() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sql.acquire("b", cancelled)
    assert sql.open == 1
