"""``write_dataset`` takes what pylance's takes: its parameter names and every input kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pds
import pytest

import lance_format
from lance_format.core.errors import InvalidInputError

lance = pytest.importorskip("lance")

TABLE = pa.table({"id": [1, 2, 3], "s": ["a", None, "c"]})


def _inputs(tmp_path: Path) -> dict[str, Any]:
    lance.write_dataset(TABLE, str(tmp_path / "src_pylance"))
    ours = lance_format.write_dataset(TABLE, str(tmp_path / "src_ours"))
    parquet = tmp_path / "src.parquet"
    import pyarrow.parquet as pq

    pq.write_table(TABLE, parquet)
    return {
        "dict": TABLE.to_pydict(),
        "rows": TABLE.to_pylist(),
        "reader": TABLE.to_reader(),
        "pyarrow_dataset": pds.dataset(parquet),
        "pyarrow_scanner": pds.dataset(parquet).scanner(),
        "our_dataset": ours,
        "our_scanner": ours.scanner(),
        "pylance_dataset": lance.dataset(str(tmp_path / "src_pylance")),
        "pylance_scanner": lance.dataset(str(tmp_path / "src_pylance")).scanner(),
        "capsule_stream": _Capsule(TABLE),
    }


class _Capsule:
    """Only the Arrow PyCapsule stream protocol, as polars and DuckDB results offer it."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._table.__arrow_c_stream__(requested_schema)


@pytest.mark.parametrize(
    "kind",
    [
        "dict",
        "rows",
        "reader",
        "pyarrow_dataset",
        "pyarrow_scanner",
        "our_dataset",
        "our_scanner",
        "pylance_dataset",
        "pylance_scanner",
        "capsule_stream",
    ],
)
def test_input_kinds_write_like_pylance(tmp_path: Path, kind: str) -> None:
    ours = lance_format.write_dataset(data_obj=_inputs(tmp_path)[kind], uri=str(tmp_path / "ours"))
    # pylance 14 takes neither a bare PyCapsule stream nor our dataset objects.
    if kind != "capsule_stream" and not kind.startswith("our_"):
        theirs = lance.write_dataset(_inputs(tmp_path / "again")[kind], str(tmp_path / "theirs"))
        assert ours.to_table().equals(theirs.to_table())
    assert ours.to_table().equals(TABLE)
    assert lance.dataset(str(tmp_path / "ours")).to_table().equals(TABLE)


def test_polars_dataframe(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    ds = lance_format.write_dataset(pl.from_arrow(TABLE), str(tmp_path / "ds"))
    assert ds.to_table().to_pydict() == TABLE.to_pydict()


def test_pylance_keywords(tmp_path: Path) -> None:
    class Progress:
        def __init__(self) -> None:
            self.events: list[tuple[str, int]] = []

        def begin(self, fragment: Any, **kwargs: Any) -> None:
            self.events.append(("begin", fragment.physical_rows))

        def complete(self, fragment: Any, **kwargs: Any) -> None:
            self.events.append(("complete", fragment.physical_rows))

    progress = Progress()
    big = pa.table({"id": list(range(3000))})
    ds = lance_format.write_dataset(
        big.to_batches(max_chunksize=500),
        str(tmp_path / "ds"),
        schema=big.schema,
        max_rows_per_group=128,
        max_bytes_per_file=4000,  # about 500 int64 rows each: files roll over on size
        progress=progress,
        transaction_properties={"origin": "cdc", "run": "7"},
        commit_message="first load",
    )
    assert ds.to_table().equals(big)
    frags = ds.get_fragments()
    assert len(frags) > 1
    assert sum(f.physical_rows for f in frags) == 3000
    assert progress.events == [e for f in frags for e in (("begin", 0), ("complete", f.physical_rows))]
    txn = lance.dataset(str(tmp_path / "ds")).get_transactions(1)[0]
    assert txn.transaction_properties == {"origin": "cdc", "run": "7", "__lance_commit_message": "first load"}
    # A LanceDataset as the target, as pylance allows.
    again = lance_format.write_dataset({"id": [5]}, ds, mode="append")
    assert again.count_rows() == 3001


@pytest.mark.parametrize(
    "kwargs",
    [{"max_rows_per_group": 0}, {"max_bytes_per_file": -1}, {"transaction_properties": {"a": 1}}],
)
def test_bad_keywords_are_invalid_input(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError):
        lance_format.write_dataset(TABLE, str(tmp_path / "ds"), **kwargs)


def test_unknown_input_names_what_is_accepted(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="dict of columns"):
        lance_format.write_dataset(42, str(tmp_path / "ds"))
