"""A store wrapper that records every request, for tests that count I/O."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lance_format.io.planner import PlanLimits
from lance_format.io.reader import IOStats, io_stats
from lance_format.io.store import ObjectStore


@dataclass(frozen=True)
class Call:
    op: str  # size, read_range, read_all, read_tail, list, write, put_if_not_exists, exists, delete
    key: str
    start: int = 0
    end: int = 0


class CountingStore(ObjectStore):
    """Forwards to ``inner`` and records each call; ``uri`` is the inner store's (caches are shared)."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.io_parallelism = inner.io_parallelism
        self.remote = inner.remote
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def _log(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()

    @property
    def uri(self) -> str:
        return self.inner.uri

    @property
    def plan_limits(self) -> PlanLimits:
        return self.inner.plan_limits

    def size(self, key: str) -> int:
        self._log(Call("size", key))
        return self.inner.size(key)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        self._log(Call("read_range", key, start, end))
        return self.inner.read_range(key, start, end)

    def read_all(self, key: str) -> bytes:
        self._log(Call("read_all", key))
        return self.inner.read_all(key)

    def read_tail(self, key: str, nbytes: int) -> tuple[int, bytes]:
        self._log(Call("read_tail", key, -nbytes, 0))
        return self.inner.read_tail(key, nbytes)

    def write(self, key: str, data: bytes) -> None:
        self._log(Call("write", key))
        self.inner.write(key, data)

    def put_if_not_exists(self, key: str, data: bytes) -> bool:
        self._log(Call("put_if_not_exists", key))
        return self.inner.put_if_not_exists(key, data)

    def exists(self, key: str) -> bool:
        self._log(Call("exists", key))
        return self.inner.exists(key)

    def list(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        self._log(Call("list", prefix))
        return self.inner.list(prefix)

    def list_dirs(self, prefix: str = "") -> Iterator[str]:
        self._log(Call("list_dirs", prefix))
        return self.inner.list_dirs(prefix)

    def delete(self, key: str) -> None:
        self._log(Call("delete", key))
        self.inner.delete(key)


def takes_against_pylance(
    ours: Any,
    theirs: Any,
    rows: int,
    seed: int,
    cases: Sequence[tuple[int, list[str] | None]],
    max_gap: int,
) -> list[IOStats]:
    """Take the same random rows from both datasets for each ``(count, columns)`` case (both opened
    and cold, pylance's I/O counters just reset); assert equal results and that ours cost no more
    requests than pylance's, and no more bytes than pylance's plus ``max_gap`` (our planner's merge
    gap) for each request fewer: a request saved by merging two ranges reads at most the gap
    between them, and any other byte pylance did not read would be one more request or a wasted
    byte. Returns our I/O of each case."""
    rng = np.random.default_rng(seed)
    spent_all: list[IOStats] = []
    for k, cols in cases:
        picked = np.sort(rng.choice(rows, k, replace=False))
        before = io_stats()
        got = ours.take(picked, columns=cols)
        spent = io_stats() - before
        assert got.equals(theirs.take(picked, columns=cols))
        stats = theirs.io_stats_incremental()
        saved = stats.read_iops - spent.requests
        assert saved >= 0, (k, cols, spent, stats.read_iops)
        assert spent.bytes_read <= stats.read_bytes + saved * max_gap, (k, cols, spent, stats.read_bytes)
        spent_all.append(spent)
    return spent_all
