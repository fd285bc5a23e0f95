"""Filters give pylance's (DataFusion's) answers, cell by cell, for every construct we accept."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop

TABLE = pa.table(
    {
        "id": pa.array(range(8), pa.int64()),
        "s": pa.array(["abc", "ABX", "", None, "bac", "a%b", "AbA", "ünï"]),
    }
)


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("filters") / "d")
    lance.write_dataset(TABLE, path)
    return path


def _same(uri: str, flt: str) -> None:
    got = lance_format.dataset(uri).to_table(filter=flt)
    want = lance.dataset(uri).to_table(filter=flt)
    assert got.to_pylist() == want.to_pylist(), flt


@pytest.mark.parametrize(
    "flt",
    [
        "s LIKE 'a%'",
        "s NOT LIKE 'a%'",
        "s NOT LIKE '%b%'",
        "s NOT LIKE 'a\\%b'",
        "s ILIKE 'a%'",
        "s NOT ILIKE 'a%'",
        "s NOT ILIKE '%X'",
        "NOT (s NOT LIKE 'a%')",
        "s NOT LIKE ''",
    ],
)
def test_not_like_matches_pylance(uri: str, flt: str) -> None:
    """Defect: the parser's ``negate`` flag was ignored, so NOT LIKE returned the LIKE rows."""
    _same(uri, flt)
