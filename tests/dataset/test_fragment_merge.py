"""``LanceFragment.merge(data, left_on, right_on=None, schema=None)`` compared with pylance 14.0.2:
the fragment and schema each returns, the ``Merge`` commit of every fragment's result, each package
reading the other's (deleted rows' stored values included), keys ``_rowid`` / ``_rowaddr``, the
errors, and agreement with the dataset-level ``LanceDataset.merge``."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

_RIGHT = pa.table(
    {
        "key": pa.array([4, 0, 2, 99, 2, None, 6, 1], pa.int64()),
        "w": pa.array([40, 0, 20, 990, 21, -1, 60, 10], pa.int32()),
        "t": ["a", "b", "c", "d", "e", "f", "g", "h"],
    }
)


def _base(path: Path, version: str = "2.1", stable: bool = False) -> Path:
    table = pa.table({"id": pa.array(range(10), pa.int64()), "v": [f"s{i}" for i in range(10)]})
    lance.write_dataset(
        table, str(path), max_rows_per_file=4, data_storage_version=version, enable_stable_row_ids=stable
    )
    lance.dataset(str(path)).delete("id IN (1, 6)")
    return path


def _copies(tmp_path: Path, **kwargs: Any) -> dict[ModuleType, str]:
    base = _base(tmp_path / "base", **kwargs)
    out = {}
    for mod in (lance_format, lance):
        shutil.copytree(base, tmp_path / mod.__name__)
        out[mod] = str(tmp_path / mod.__name__)
    return out


def _ids(schema: Any) -> list[tuple[str, int]]:
    """A returned LanceSchema's top-level (name, field id) pairs, either package's (pylance's
    fields and their names and ids are methods, ours attributes)."""
    if callable(schema.fields):
        return [(f.name(), f.id()) for f in schema.fields()]
    return [(f.name, f.id) for f in schema.fields]


def _arrow(schema: Any) -> pa.Schema:
    return schema.to_pyarrow()  # pylance's name, ours too


def _merged(mod: ModuleType, uri: str, data: Any, left_on: str, right_on: str | None = None) -> Any:
    """Every fragment merged and committed as one ``Merge``; what the calls returned."""
    ds = mod.dataset(uri)
    results = [f.merge(data, left_on, right_on) for f in ds.get_fragments()]
    shapes = [
        (m.id, m.physical_rows, [list(d.fields) for d in m.files], m.deletion_file is not None, _ids(s))
        for m, s in results
    ]
    op = mod.LanceOperation.Merge([m for m, _ in results], results[0][1])
    mod.LanceDataset.commit(uri, op, read_version=ds.version)
    return shapes, _arrow(results[0][1])


def _read(mod: ModuleType, uri: str) -> pa.Table:
    # Live rows only. Known difference: a deleted row's stored value in the new file (seen with
    # include_deleted_rows) is pylance's artefact (fixed-width: the first row's value; variable
    # width and lists: null), ours a copy of the row before; neither is ever read otherwise.
    return mod.dataset(uri).to_table(with_row_id=True, with_row_address=True)


@pytest.mark.parametrize(("version", "stable"), [("2.0", False), ("2.1", True), ("2.2", False)])
def test_fragment_merge_matches_pylance(tmp_path: Path, version: str, stable: bool) -> None:
    """Before: ours had no ``LanceFragment.merge`` (AttributeError)."""
    uris = _copies(tmp_path, version=version, stable=stable)
    got = {mod: _merged(mod, uri, _RIGHT, "id", "key") for mod, uri in uris.items()}
    assert got[lance_format] == got[lance]
    expected = _read(lance, uris[lance])
    assert expected["w"].to_pylist()[:3] == [0, 21, None]
    for read in (lance_format, lance):
        for uri in uris.values():
            table = _read(read, uri)
            assert table.schema == expected.schema
            assert table.to_pydict() == expected.to_pydict()
    assert lance.dataset(uris[lance_format]).get_transactions(1)[0].operation.__class__.__name__ == "Merge"


def test_fragment_merge_agrees_with_the_dataset_merge(tmp_path: Path) -> None:
    uris = _copies(tmp_path)
    whole = tmp_path / "whole"
    shutil.copytree(tmp_path / "base", whole)
    lance_format.dataset(str(whole)).merge(_RIGHT, "id", "key")
    _merged(lance_format, uris[lance_format], _RIGHT, "id", "key")
    by_dataset, by_fragment = lance_format.dataset(str(whole)), lance_format.dataset(uris[lance_format])
    assert by_dataset.lance_schema == by_fragment.lance_schema
    assert _read(lance_format, str(whole)).equals(_read(lance_format, uris[lance_format]))
    layout = [[list(d.fields) for d in f.data_files()] for f in by_dataset.get_fragments()]
    assert layout == [[list(d.fields) for d in f.data_files()] for f in by_fragment.get_fragments()]


@pytest.mark.parametrize("key", ["_rowid", "_rowaddr"])
@pytest.mark.parametrize("stable", [False, True])
def test_merge_on_row_ids_and_addresses(tmp_path: Path, key: str, stable: bool) -> None:
    """pylance joins on ``_rowid`` (stable ids when the dataset has them) and ``_rowaddr``, at
    both levels. Before: ours refused them ("does not exist in the left side dataset")."""
    uris = _copies(tmp_path, stable=stable)
    right = pa.table({key: pa.array([2**32 + 1, 0, 9, 2**32 + 3], pa.uint64()), "z": [1, 2, 3, 4]})
    got = {mod: _merged(mod, uri, right, key) for mod, uri in uris.items()}
    assert got[lance_format] == got[lance]
    tables = [_read(read, uri) for read in (lance_format, lance) for uri in uris.values()]
    assert all(t.equals(tables[0]) for t in tables)
    assert tables[0]["z"].null_count < tables[0].num_rows - 1  # keys matched
    more = pa.table({key: pa.array([2**32 + 1, 8], pa.uint64()), "q": ["x", "y"]})
    for mod, uri in uris.items():
        mod.dataset(uri).merge(more, key)
    tables = [_read(read, uri) for read in (lance_format, lance) for uri in uris.values()]
    assert all(t.equals(tables[0]) for t in tables)


@pytest.mark.parametrize(
    ("data", "left_on", "right_on", "message"),
    [
        (_RIGHT, "nope", "key", "Column nope does not exist in the left side fragment"),
        (_RIGHT, "id", "nope", "Column nope does not exist in the right side fragment"),
        (_RIGHT, "id", None, "Column id does not exist in the right side fragment"),
        (
            pa.table({"key": pa.array([1], pa.int32()), "w": [1]}),
            "id",
            "key",
            "Index column type mismatch: expected int32, got int64",
        ),
        (
            pa.table({"_rowid": pa.array([1], pa.int64()), "w": [1]}),
            "_rowid",
            None,
            "Index column type mismatch: expected int64, got uint64",
        ),
        (
            pa.table({"key": [1], "v": ["x"]}),
            "id",
            "key",
            "Column v exists in left side fragment and right side",
        ),
        (pa.table({"key": pa.array([], pa.int64()), "w": pa.array([], pa.int32())}), "id", "key", "No data"),
    ],
)
def test_bad_fragment_merges_are_refused_as_pylance(
    tmp_path: Path, data: pa.Table, left_on: str, right_on: str | None, message: str
) -> None:
    uris = _copies(tmp_path)
    with pytest.raises(ValueError, match="Invalid user input") as theirs:
        lance.dataset(uris[lance]).get_fragment(0).merge(data, left_on, right_on)
    with pytest.raises(InvalidInputError) as ours:
        lance_format.dataset(uris[lance_format]).get_fragment(0).merge(data, left_on, right_on)
    assert message.lower() in str(theirs.value).lower()
    assert message.lower().replace("no data", "no rows") in str(ours.value).lower()


def test_a_fragment_merge_of_only_the_key_is_refused(tmp_path: Path) -> None:
    """pylance 14.0.2 panics on it (``RuntimeError: Task was aborted``); ours refuses it."""
    uri = str(_base(tmp_path / "ds"))
    with pytest.raises(InvalidInputError, match="columns besides the key"):
        lance_format.dataset(uri).get_fragment(0).merge(pa.table({"key": [1]}), "id", "key")


def test_fragment_merge_takes_a_batch_iterable_with_its_schema(tmp_path: Path) -> None:
    uris = _copies(tmp_path)
    for mod, uri in uris.items():
        ds = mod.dataset(uri)
        results = [
            f.merge(iter(_RIGHT.to_batches(max_chunksize=3)), "id", "key", _RIGHT.schema)
            for f in ds.get_fragments()
        ]
        op = mod.LanceOperation.Merge([m for m, _ in results], results[0][1])
        mod.LanceDataset.commit(uri, op, read_version=ds.version)
    assert _read(lance, uris[lance_format]).equals(_read(lance, uris[lance]))
    assert _read(lance_format, uris[lance_format]).equals(_read(lance, uris[lance]))
