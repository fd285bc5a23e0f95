"""``LanceScanner``'s pylance 14.0.2 surface beyond reads: ``scan_batches``, ``projected_schema``,
the ``from_*`` constructors and ``take`` (which pylance refuses), and ``analyze_plan(count_rows)``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, NotSupportedError

lance = pytest.importorskip("lance")

SCANS: list[dict[str, Any]] = [
    {},
    {"batch_size": 3},
    {"columns": ["v"], "limit": 4, "offset": 1, "batch_size": 2},
    {"columns": [], "with_row_id": True},
    {"columns": {"twice": "id * 2"}, "with_row_address": True},
    {"limit": 0},
    {"batch_size": 4, "strict_batch_size": True},
    {"columns": ["_rowaddr", "id"], "with_row_id": True},
]


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("scanner") / "ds")
    table = pa.table({"id": pa.array(range(10), pa.int64()), "v": [f"s{i}" for i in range(10)]})
    lance.write_dataset(table, path, max_rows_per_file=5, schema=table.schema.with_metadata({"k": "m"}))
    lance.dataset(path).delete("id = 3")
    return path


def _batches(batches: list[pa.RecordBatch]) -> list[tuple[pa.Schema, dict[str, list[Any]]]]:
    return [(b.schema, b.to_pydict()) for b in batches]


@pytest.mark.parametrize("scan", SCANS, ids=[str(s) for s in SCANS])
def test_scan_batches_are_pylances_batches(uri: str, scan: dict[str, Any]) -> None:
    """Before: ours had no ``scan_batches`` (AttributeError). pylance 14.0.2's returns a list of
    its reader's batches (not pyarrow's ``TaggedRecordBatch``), but fails at the end of every
    scan (``read_next_batch`` raises ``StopIteration`` rather than returning ``None``); ours
    returns the list it meant, compared with pylance's reader's batches."""
    theirs_scanner = lance.dataset(uri).scanner(**scan)
    try:
        theirs = theirs_scanner.scan_batches()
    except StopIteration:
        theirs = list(lance.dataset(uri).scanner(**scan).to_reader())
    ours = lance_format.dataset(uri).scanner(**scan).scan_batches()
    assert isinstance(ours, list)
    assert _batches(ours) == _batches(theirs)


@pytest.mark.parametrize("scan", SCANS, ids=[str(s) for s in SCANS])
def test_projected_schema_is_pylances(uri: str, scan: dict[str, Any]) -> None:
    ours = lance_format.dataset(uri).scanner(**scan)
    theirs = lance.dataset(uri).scanner(**scan)
    assert ours.projected_schema.equals(theirs.projected_schema, check_metadata=True)
    assert ours.to_table().schema.equals(ours.projected_schema, check_metadata=True)
    for scanner in (ours, theirs):
        with pytest.raises(AttributeError):  # read-only in both
            scanner.projected_schema = pa.schema([])  # type: ignore[misc]


@pytest.mark.parametrize("name", ["from_dataset", "from_fragment", "from_batches"])
def test_from_constructors_are_refused_as_pylance(uri: str, name: str) -> None:
    """pylance 14.0.2 overrides pyarrow's constructors to raise ``NotImplementedError``; ours
    raises its ``NotSupportedError`` (a ``NotImplementedError``). Before: AttributeError."""
    with pytest.raises(NotImplementedError):
        getattr(lance.LanceScanner, name)(lance.dataset(uri))
    with pytest.raises(NotSupportedError):
        getattr(lance_format.LanceScanner, name)(lance_format.dataset(uri))


def test_scanner_take_is_refused_as_pylance(uri: str) -> None:
    with pytest.raises(NotImplementedError):
        lance.dataset(uri).scanner().take([0])
    with pytest.raises(NotSupportedError):
        lance_format.dataset(uri).scanner().take([0])


def test_analyze_plan_counting_rows(uri: str) -> None:
    for mod in (lance_format, lance):
        plan = mod.dataset(uri).scanner(filter="id > 2").analyze_plan(count_rows=True)
        assert "output_rows=1" in plan
        assert "output_rows=6" in mod.dataset(uri).scanner(filter="id > 2").analyze_plan()
    with pytest.raises(ValueError, match="Cannot use limit/offset with aggregate"):
        lance.dataset(uri).scanner(limit=2).analyze_plan(count_rows=True)
    with pytest.raises(InvalidInputError, match="Cannot use limit/offset with aggregate"):
        lance_format.dataset(uri).scanner(limit=2).analyze_plan(count_rows=True)
