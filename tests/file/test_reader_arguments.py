"""``LanceFileReader(path, storage_options, columns)``: pylance's positional order."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lance_format.core.errors import InvalidInputError
from lance_format.file import LanceFileReader

lance_file = pytest.importorskip("lance.file")


@pytest.fixture
def path(tmp_path: Path) -> str:
    p = str(tmp_path / "f.lance")
    with lance_file.LanceFileWriter(p) as w:
        w.write_batch(pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}))
    return p


def test_positional_columns_project_like_pylance(path: str) -> None:
    ours = LanceFileReader(path, None, ["id"]).read_all().to_table()
    theirs = lance_file.LanceFileReader(path, None, ["id"]).read_all().to_table()
    assert ours.schema.names == ["id"]
    assert ours.equals(theirs)


def test_keyword_arguments_still_work(path: str) -> None:
    t = LanceFileReader(path, storage_options={}, columns=["s"]).read_all().to_table()
    assert t.to_pydict() == {"s": ["a", "b", "c"]}


def test_old_order_fails_loudly(path: str) -> None:
    with pytest.raises(InvalidInputError, match="storage_options must be a dict"):
        LanceFileReader(path, ["id"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="not one string"):
        LanceFileReader(path, None, "id")
