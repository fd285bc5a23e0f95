"""A column named twice in a projection: scans refuse it and takes name it once, as pylance does.

Found by the Flight SQL fuzzer (session 12): ``SELECT id, s, id FROM t WHERE ...`` runs as one scan
of ours, and ``scanner(columns=["id", "s", "id"])`` failed deep in the fragment plan with
``RuntimeError: generator raised StopIteration`` (an INTERNAL answer); ``take`` raised a bare
``StopIteration``.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import InvalidInputError

lance = pytest.importorskip("lance")

COLUMNS = [["id", "s", "id"], ["s", "s"], ["s", "id", "s"]]


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("dup") / "t")
    lance.write_dataset(pa.table({"id": list(range(10)), "s": [str(i) for i in range(10)]}), path)
    return path


@pytest.mark.parametrize("columns", COLUMNS)
@pytest.mark.parametrize("filter", [None, "id > 5"])
def test_a_scan_refuses_a_column_named_twice(uri: str, columns: list[str], filter: str | None) -> None:
    with pytest.raises(ValueError, match="Duplicate column name"):
        lance.dataset(uri).to_table(columns=columns, filter=filter)
    with pytest.raises(InvalidInputError, match="Duplicate column name"):
        lance_format.dataset(uri).to_table(columns=columns, filter=filter)


@pytest.mark.parametrize("columns", COLUMNS)
def test_a_take_names_a_repeated_column_once(uri: str, columns: list[str]) -> None:
    theirs = lance.dataset(uri).take([3, 1, 3], columns=columns)
    ours = lance_format.dataset(uri).take([3, 1, 3], columns=columns)
    assert ours.equals(theirs)
    assert ours.schema.names == list(dict.fromkeys(columns))
    assert (
        lance_format.dataset(uri)
        .take_rows([3, 1], columns=columns)
        .equals(lance.dataset(uri)._take_rows([3, 1], columns=columns))
    )


def test_sql_selecting_a_column_twice_is_a_clean_refusal(tmp_path: Path) -> None:
    """Not a simple scan any more: DataFusion plans it and refuses the repeated output name."""
    from flight_server.catalog import Catalog
    from flight_server.flightsql.engine import SqlEngine

    lance_format.write_dataset(pa.table({"id": [1, 2, 7], "s": ["a", "b", "c"]}), str(tmp_path / "t"))
    engine = SqlEngine(Catalog(str(tmp_path)))
    with pytest.raises(InvalidInputError, match="unique expression names"):
        engine.run("SELECT id, s, id FROM t WHERE id > 1")
    schema, batches = engine.run("SELECT id, s, id AS id2 FROM t WHERE id > 1")
    assert pa.Table.from_batches(list(batches), schema).num_rows == 2
