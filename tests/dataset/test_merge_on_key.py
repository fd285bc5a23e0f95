"""``LanceDataset.merge(data, left_on, right_on)`` (a column-wise merge on a key), compared with
pylance 14.0.2: the values, the schema and field ids, one new data file per fragment, the ``Merge``
transaction, and each package reading the other's result."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_format
from lance_format.errors import InvalidInputError
from tests.strategies import schemas, table_specs

lance = pytest.importorskip("lance")


def _base(uri: str, version: str, stable: bool) -> None:
    table = pa.table({"id": pa.array(range(10), pa.int64()), "v": [f"v{i}" for i in range(10)]})
    lance.write_dataset(
        table, uri, max_rows_per_file=4, data_storage_version=version, enable_stable_row_ids=stable
    )
    lance.dataset(uri).delete("id IN (1, 6)")


_RIGHT = pa.table(
    {
        "key": pa.array([5, 0, 2, 99, 2, None, 6, 9], pa.int64()),
        "w": pa.array([50, 0, 20, 990, 21, -1, 60, None], pa.int32()),
        "t": ["a", "b", "c", "d", "e", "f", "g", "h"],
    }
)


def _layout(ds: Any) -> list[tuple[int, int, list[list[int]]]]:
    return [
        (f.fragment_id, f.metadata.physical_rows, [list(d.fields) for d in f.data_files()])
        for f in ds.get_fragments()
    ]


@pytest.mark.parametrize(("version", "stable"), [("2.0", False), ("2.1", True), ("2.2", False)])
def test_merge_matches_pylance(tmp_path: Path, version: str, stable: bool) -> None:
    """Before: ours had no ``merge`` (AttributeError)."""
    theirs_uri, ours_uri = str(tmp_path / "theirs"), str(tmp_path / "ours")
    _base(theirs_uri, version, stable)
    shutil.copytree(theirs_uri, ours_uri)
    lance.dataset(theirs_uri).merge(_RIGHT, left_on="id", right_on="key")
    ours = lance_format.dataset(ours_uri)
    ours.merge(_RIGHT, left_on="id", right_on="key")
    expected = lance.dataset(theirs_uri)
    assert ours.version == expected.version
    for read in (lance.dataset(ours_uri), lance_format.dataset(ours_uri), lance_format.dataset(theirs_uri)):
        assert read.schema == expected.schema
        assert read.to_table().to_pylist() == expected.to_table().to_pylist()
        assert _layout(read) == _layout(expected)
    assert lance.dataset(ours_uri).get_transactions(1)[0].operation.__class__.__name__ == "Merge"
    # A second merge reads the first one's files.
    more = pa.table({"id": pa.array([3, 4], pa.int64()), "u": [True, False]})
    lance.dataset(theirs_uri).merge(more, "id")
    lance_format.dataset(ours_uri).merge(more, "id")
    assert lance.dataset(ours_uri).to_table().to_pylist() == lance.dataset(theirs_uri).to_table().to_pylist()


@pytest.mark.parametrize(
    ("data", "left_on", "right_on"),
    [
        (pa.table({"key": pa.array([1], pa.int32()), "w": [1]}), "id", "key"),  # key types differ
        (pa.table({"key": [1], "v": ["x"]}), "id", "key"),  # a column both sides have
        (pa.table({"w": [1]}), "id", "key"),  # no right key
        (pa.table({"key": [1], "w": [1]}), "nope", "key"),  # no left key
        # no rows: "HashJoiner: No data" (differential seeds 1601, 1602; ours merged nulls)
        (pa.table({"key": pa.array([], pa.int64()), "w": pa.array([], pa.int32())}), "id", "key"),
    ],
)
def test_bad_merges_are_refused_by_both(tmp_path: Path, data: pa.Table, left_on: str, right_on: str) -> None:
    uri = str(tmp_path / "ds")
    _base(uri, "2.1", False)
    with pytest.raises(OSError, match="Invalid user input"):
        lance.dataset(uri).merge(data, left_on, right_on)
    with pytest.raises(InvalidInputError):
        lance_format.dataset(uri).merge(data, left_on, right_on)
    assert lance_format.dataset(uri).version == lance.dataset(uri).version == 2


def test_a_merge_of_only_the_key_is_refused(tmp_path: Path) -> None:
    """pylance 14.0.2 panics on it ("must either specify a row count or at least one column",
    raised as ``RuntimeError: Task was aborted``); ours refuses it."""
    uri = str(tmp_path / "ds")
    _base(uri, "2.1", False)
    with pytest.raises(InvalidInputError, match="columns besides the key"):
        lance_format.dataset(uri).merge(pa.table({"key": [1]}), "id", "key")
    assert lance_format.dataset(uri).version == 2


@settings(
    max_examples=int(os.environ.get("LANCE_MERGE_EXAMPLES", "30")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    spec=table_specs(schemas(max_columns=3), max_rows=20),
    seed=st.integers(0, 2**31),
    version=st.sampled_from(["2.0", "2.1"]),
)
def test_generated_merges_match_pylance(
    tmp_path_factory: pytest.TempPathFactory, spec: Any, seed: int, version: str
) -> None:
    """Columns of every type (lists, large lists, fixed-size lists, structs of lists, dictionaries)
    given without a schema, keys repeated and absent, over three fragments; data of no rows is
    refused by both (pylance: "HashJoiner: No data"; ours merged it)."""
    rng = np.random.default_rng(seed)
    data = spec.build()
    data = data.rename_columns([f"c{i}" for i in range(data.num_columns)])
    data = data.append_column("id", pa.array(rng.choice(15, data.num_rows).tolist(), pa.int64()))
    base = pa.table({"id": pa.array(range(12), pa.int64())})
    root = tmp_path_factory.mktemp("merge")
    answers = []
    for engine in (lance, lance_format):
        uri = str(root / engine.__name__)
        lance.write_dataset(base, uri, max_rows_per_file=5, data_storage_version=version)
        try:
            engine.dataset(uri).merge(data, "id")
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # pyo3's PanicException is a BaseException
            answers.append(e)
            continue
        answers.append(uri)
    theirs, ours = answers
    if isinstance(theirs, BaseException):
        assert isinstance(ours, InvalidInputError), f"pylance refuses ({theirs}), ours: {ours!r}"
        assert lance.dataset(str(root / "lance_format")).version == 1  # nothing committed
        return
    assert isinstance(ours, str), f"pylance merges, ours refuses: {ours!r}"
    expected = lance.dataset(theirs)
    for read in (lance.dataset(ours), lance_format.dataset(ours)):
        assert read.schema == expected.schema
        assert read.to_table().to_pylist() == expected.to_table().to_pylist()
        assert _layout(read) == _layout(expected)
