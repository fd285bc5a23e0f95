"""Shared helpers of the interop tests: write a case with pylance or with us, open either reader.

Our package is imported inside the functions, not at module level, so until ``lance_format.file``
works every test fails on its own with the real error instead of the whole run stopping at collection.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tests.interop.cases import Case

__all__ = [
    "FileCache",
    "our_reader",
    "pylance_reader",
    "pylance_take",
    "random_indices",
    "write_with_ours",
    "write_with_pylance",
]


def write_with_pylance(path: str | os.PathLike[str], case: Case, version: str) -> str:
    """Write ``case`` with pylance's file writer at ``version``; returns the path."""
    from lance.file import LanceFileWriter

    table = case.table()
    with LanceFileWriter(os.fspath(path), table.schema, version=version, **case.writer_kwargs) as w:
        for batch in case.batches():
            w.write_batch(batch)
    return os.fspath(path)


def write_with_ours(path: str | os.PathLike[str], case: Case, version: str = "2.0") -> str:
    """Write ``case`` with our file writer at ``version``; returns the path."""
    from lance_format.file import LanceFileWriter

    table = case.table()
    with LanceFileWriter(os.fspath(path), table.schema, version=version, **case.writer_kwargs) as w:
        for batch in case.batches():
            w.write_batch(batch)
    return os.fspath(path)


def pylance_reader(path: str, columns: list[str] | None = None) -> Any:
    """pylance's ``LanceFileReader`` (the oracle)."""
    from lance.file import LanceFileReader

    return LanceFileReader(path, columns=columns)


def our_reader(path: str, columns: list[str] | None = None) -> Any:
    """Our ``LanceFileReader``."""
    from lance_format.file import LanceFileReader

    return LanceFileReader(path, columns=columns)


def pylance_take(reader: Any, indices: np.ndarray) -> pa.Table:
    """pylance's answer to a take in any order with repeats.

    pylance's file API only takes strictly increasing indices, so take the sorted unique ones and
    put them in the asked order with ``Table.take``.
    """
    uniq, inverse = np.unique(np.asarray(indices, dtype=np.int64), return_inverse=True)
    table = reader.take_rows(uniq.tolist()).to_table()
    return table.take(pa.array(inverse.astype(np.int64)))


def random_indices(n: int, seed: int, count: int = 200) -> np.ndarray:
    """Random row indices in random order with repeats, always including the first and last row."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, count)
    idx = np.concatenate([idx, [0, n - 1, n - 1, idx[0]]])
    rng.shuffle(idx)
    return idx.astype(np.int64)


class FileCache:
    """Files built at most once per session; a failed build is re-raised to every test that needs it."""

    def __init__(self, root: Path, build: Callable[[str, Case, str], str]) -> None:
        self._root = root
        self._build = build
        self._done: dict[tuple[str, str], str | Exception] = {}
        self._lock = threading.Lock()

    def __call__(self, case: Case, version: str) -> str:
        key = (case.name, version)
        with self._lock:
            if key not in self._done:
                path = self._root / f"{case.name}-{version}.lance"
                try:
                    self._done[key] = self._build(str(path), case, version)
                except Exception as e:
                    self._done[key] = e
            got = self._done[key]
        if isinstance(got, Exception):
            raise got
        return got
