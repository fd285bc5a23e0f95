"""``LanceFragment.delete_rows(offsets)`` compared with pylance 14.0.2: the metadata each returns,
the commit through ``LanceOperation.Delete`` / ``Overwrite``, each package reading the other's
result, and the errors for offsets that do not fit."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, InvalidTypeError, OutOfRangeError

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _base(tmp_path: Path) -> Path:
    """Two fragments of five rows; rows 1 and 2 of the first deleted."""
    path = tmp_path / "base"
    lance.write_dataset(pa.table({"id": list(range(10))}), str(path), max_rows_per_file=5)
    lance.dataset(str(path)).delete("id IN (1, 2)")
    return path


def _copies(tmp_path: Path) -> dict[ModuleType, str]:
    base = _base(tmp_path)
    out = {}
    for mod in (lance_format, lance):
        uri = tmp_path / mod.__name__
        shutil.copytree(base, uri)
        out[mod] = str(uri)
    return out


def _shape(meta: Any) -> Any:
    """A returned fragment as JSON, without the random deletion-file id and data file names."""
    if meta is None:
        return None
    doc = meta.to_json()
    if doc["deletion_file"] is not None:
        doc["deletion_file"] = {k: v for k, v in doc["deletion_file"].items() if k != "id"}
    doc["files"] = [{k: v for k, v in f.items() if k != "path"} for f in doc["files"]]
    return doc


@pytest.mark.parametrize(
    "offsets",
    [
        [0, 3],  # added to the fragment's deletions
        [1],  # already deleted: a new file with the same rows, as pylance
        [],  # nothing new: still a new file, since the fragment has deletions
        [3, 3, 0],  # repeats and any order
        np.array([4, 0], dtype=np.uint8),
        pa.array([3], pa.int64()),
        range(2),
        [1.9, True],  # int() of each: 1 and 1
        ["3"],
        b"\x00",  # iterates to [0]
        [0, 3, 4],  # every row: None
    ],
)
def test_delete_rows_returns_what_pylance_returns(tmp_path: Path, offsets: Any) -> None:
    """Before: ours had no ``delete_rows`` (AttributeError)."""
    uris = _copies(tmp_path)
    got = {mod: _shape(mod.dataset(uri).get_fragment(0).delete_rows(offsets)) for mod, uri in uris.items()}
    assert got[lance_format] == got[lance]


def test_delete_rows_of_a_fragment_without_deletions(tmp_path: Path) -> None:
    uris = _copies(tmp_path)
    for offsets in ([], [4], list(range(5))):
        got = [_shape(mod.dataset(uri).get_fragment(1).delete_rows(offsets)) for mod, uri in uris.items()]
        assert got[0] == got[1], offsets
    # No offsets, no deletions: no file at all.
    assert lance_format.dataset(uris[lance_format]).get_fragment(1).delete_rows([]).deletion_file is None


@pytest.mark.parametrize("reader", ["ours", "theirs"])
def test_delete_rows_committed_as_delete(tmp_path: Path, reader: str) -> None:
    uris = _copies(tmp_path)
    for mod, uri in uris.items():
        ds = mod.dataset(uri)
        f0, f1 = ds.get_fragments()
        kept = f0.delete_rows([0, 4])
        assert f1.delete_rows(range(5)) is None
        op = mod.LanceOperation.Delete([kept], [f1.fragment_id], "by offsets")
        mod.LanceDataset.commit(uri, op, read_version=ds.version)
    read = lance_format if reader == "ours" else lance
    tables = [read.dataset(uri).to_table(with_row_id=True) for uri in uris.values()]
    assert tables[0].equals(tables[1])
    assert tables[0]["id"].to_pylist() == [3]
    assert [read.dataset(uri).version for uri in uris.values()] == [3, 3]


def test_overwrite_refuses_fragments_with_deletions(tmp_path: Path) -> None:
    """pylance's ``Overwrite`` assigns new fragment ids and refuses a fragment carrying a deletion
    file (named by its old id). Before: ours committed it."""
    uris = _copies(tmp_path)
    errors = []
    for mod, uri in uris.items():
        ds = mod.dataset(uri)
        meta = ds.get_fragment(1).delete_rows([2])
        with pytest.raises(OSError, match="Overwrite fragments must be newly written") as err:
            mod.LanceDataset.commit(uri, mod.LanceOperation.Overwrite(ds.schema, [meta]), read_version=2)
        errors.append(err.value)
        # Without deletions the same fragment overwrites the table (renumbered).
        plain = ds.get_fragment(1).metadata
        ds = mod.LanceDataset.commit(uri, mod.LanceOperation.Overwrite(ds.schema, [plain]), read_version=2)
        assert ds.to_table()["id"].to_pylist() == [5, 6, 7, 8, 9]
    assert isinstance(errors[0], InvalidInputError)


def test_delete_rows_then_scan_matches(tmp_path: Path) -> None:
    uris = _copies(tmp_path)
    for mod, uri in uris.items():
        ds = mod.dataset(uri)
        op = mod.LanceOperation.Delete([ds.get_fragment(1).delete_rows([1, 3])], [], "")
        mod.LanceDataset.commit(uri, op, read_version=ds.version)
    for read in (lance_format, lance):
        tables = [read.dataset(uri).to_table(with_row_id=True) for uri in uris.values()]
        assert tables[0].equals(tables[1])
        assert tables[0]["id"].to_pylist() == [0, 3, 4, 5, 7, 9]


@pytest.mark.parametrize(
    ("offsets", "ours", "theirs"),
    [
        ([5], InvalidInputError, ValueError),  # past the fragment's physical rows
        ([2**32 - 1], InvalidInputError, ValueError),
        ([-1], OutOfRangeError, OverflowError),
        ([2**32], OutOfRangeError, OverflowError),
        ([float("inf")], OutOfRangeError, OverflowError),
        (["a"], InvalidInputError, ValueError),
        ([float("nan")], InvalidInputError, ValueError),
        ([None], InvalidTypeError, TypeError),
        (3, InvalidTypeError, TypeError),
        (None, InvalidTypeError, TypeError),
    ],
)
def test_delete_rows_errors_match_pylance(
    tmp_path: Path, offsets: Any, ours: type[Exception], theirs: type[Exception]
) -> None:
    uris = _copies(tmp_path)
    with pytest.raises(theirs) as expected:
        lance.dataset(uris[lance]).get_fragment(0).delete_rows(offsets)
    assert not isinstance(expected.value, ours) or ours is theirs
    with pytest.raises(ours) as got:
        lance_format.dataset(uris[lance_format]).get_fragment(0).delete_rows(offsets)
    assert isinstance(got.value, theirs)
    if theirs is ValueError and "out of range" in str(expected.value):
        assert str(got.value).split(",")[0] in str(expected.value)
