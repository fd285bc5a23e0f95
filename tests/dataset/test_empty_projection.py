"""Scans that project no columns report the rows they select, as pylance does (never more).

pyarrow does not clamp ``slice`` on a zero-column table, so a scan whose chunks lost their last
column reported ``limit`` rows however few the dataset had (issue 14: ``to_table(columns=[],
limit=10**6)`` on 1,000 rows returned 1,000,000; over Flight ``limit=2**63-1`` grew the server
without bound). Every limit here is far above the row count; the memory cap of
:func:`_capped` keeps a regression from taking the machine down.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance")

#: Address-space cap while these scans run: far above what 1,000 rows need, far below a blow-up.
_CAP_BYTES = 8 * 1024**3


@pytest.fixture(autouse=True)
def _capped() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _CAP_BYTES if hard == resource.RLIM_INFINITY else min(_CAP_BYTES, hard)
    if soft != resource.RLIM_INFINITY and soft < cap:
        cap = soft
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("empty") / "t")
    lance.write_dataset(pa.table({"a": list(range(1000))}), path, max_rows_per_file=300)
    lance.dataset(path).delete("a % 10 = 3")  # deletion vectors in every fragment
    return path


CASES: list[dict[str, Any]] = [
    {"limit": 10**6},
    {"limit": 2**62},
    {"limit": 10**6, "offset": 850},
    {"limit": 10, "offset": 895},
    {"offset": 10**6},
    {"limit": 0},
    {"offset": 299, "limit": 2},
    {"filter": "a > 500", "limit": 10**6, "offset": 3},
    {"filter": "a < 100", "offset": 85, "limit": 10**6},
    {"filter": "a < 100", "offset": 95, "limit": 5},
    {"filter": "a >= 0", "limit": 2**62},
]


@pytest.mark.parametrize("kwargs", CASES, ids=[str(c) for c in CASES])
def test_empty_projection_counts_rows_like_pylance(uri: str, kwargs: dict[str, Any]) -> None:
    ours = lance_format.dataset(uri).to_table(columns=[], **kwargs)
    theirs = lance.dataset(uri).to_table(columns=[], **kwargs)
    assert ours.num_columns == theirs.num_columns == 0
    assert ours.num_rows == theirs.num_rows


@pytest.mark.parametrize("kwargs", CASES, ids=[str(c) for c in CASES])
def test_empty_projection_row_ids_like_pylance(uri: str, kwargs: dict[str, Any]) -> None:
    ours = lance_format.dataset(uri).to_table(columns=[], with_row_id=True, **kwargs)
    theirs = lance.dataset(uri).to_table(columns=[], with_row_id=True, **kwargs)
    assert ours.column_names == theirs.column_names == ["_rowid"]
    assert ours.column("_rowid").to_pylist() == theirs.column("_rowid").to_pylist()


@pytest.mark.parametrize("kwargs", CASES, ids=[str(c) for c in CASES])
def test_empty_projection_batches_add_up(uri: str, kwargs: dict[str, Any]) -> None:
    expected = lance.dataset(uri).to_table(columns=[], **kwargs).num_rows
    batches = list(lance_format.dataset(uri).to_batches(columns=[], batch_size=64, **kwargs))
    assert all(b.num_columns == 0 and 0 < b.num_rows <= 64 for b in batches)
    assert sum(b.num_rows for b in batches) == expected


def test_count_rows_of_an_empty_projection(uri: str) -> None:
    ds = lance_format.dataset(uri)
    assert ds.scanner(columns=[]).count_rows() == 900
    assert ds.scanner(columns=[], filter="a > 500").count_rows() == lance.dataset(uri).count_rows("a > 500")
