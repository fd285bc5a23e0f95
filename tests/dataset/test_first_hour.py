"""A pylance user's first hour, step by step, on both packages: every step must agree.

Each step runs the same code against ``lance_format`` and against pylance (``lance``), each on its
own dataset, and reduces the answer to plain values (tables, dicts, numbers). A step that raises
records the error's built-in family, so "both refuse" also agrees. All disagreements are reported
at once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.core.errors import NotFoundError

lance = pytest.importorskip("lance")
pytest.importorskip("pandas")


def _table(n: int, start: int = 0) -> pa.Table:
    a = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "a": a,
            "b": (a * 1.5).astype(np.float64),
            "s": pa.array([None if i % 5 == 0 else f"x{i}" for i in a], pa.string()),
        }
    )


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by("a")


def _error(e: BaseException) -> str:
    # pylance raises plain OSError where we raise its subclasses FileNotFoundError / FileExistsError.
    for family in (ValueError, OSError, NotImplementedError):
        if isinstance(e, family):
            return f"raised {family.__name__}"
    return f"raised {type(e).__name__}"


class Session:
    """One package's side of the hour: the module, the dataset uri and the open dataset."""

    def __init__(self, mod: ModuleType, uri: str) -> None:
        self.mod = mod
        self.uri = uri
        self.ds: Any = None

    def reopen(self) -> Any:
        self.ds = self.mod.dataset(self.uri)
        return self.ds


Step = tuple[str, Callable[[Session], Any]]


def _write(s: Session) -> Any:
    s.ds = s.mod.write_dataset(_table(100), s.uri, max_rows_per_file=40)
    return s.ds.count_rows()


def _append(s: Session) -> Any:
    s.ds = s.mod.write_dataset(_table(20, 100), s.uri, mode="append")
    return s.ds.version


def _tag(s: Session) -> Any:
    s.ds.tags.create("first", 1)
    return {k: v["version"] for k, v in s.ds.tags.list().items()}


def _row_ids(s: Session) -> Any:
    ids = s.ds.to_table(columns=["a"], with_row_id=True, filter="a > 95").column("_rowid")
    return s.ds._take_rows(ids.to_pylist()[:3], columns=["a"])  # pylance 14's name


def _merge(s: Session) -> Any:
    src = pa.table({"a": [1, 2, 500], "b": [0.0, 0.0, 0.0], "s": ["m", "m", "m"]})
    return s.ds.merge_insert("a").when_matched_update_all().when_not_matched_insert_all().execute(src)


def _cleanup(s: Session) -> Any:
    s.ds.tags.delete("first")
    stats = s.ds.cleanup_old_versions(older_than=timedelta(0))
    # pylance's compaction above commits one extra internal version, so only the outcome compares.
    return stats.old_versions > 0, [v["version"] for v in s.reopen().versions()] == [s.ds.version]


def _compact(s: Session) -> Any:
    s.ds.optimize.compact_files(target_rows_per_fragment=1000)
    s.reopen()
    return (len(s.ds.get_fragments()), s.ds.count_rows())


def _restore(s: Session) -> Any:
    before = s.ds.version
    s.ds.checkout_version(before - 1).restore()
    return s.reopen().version - before, s.ds.count_rows()


STEPS: list[Step] = [
    ("write_dataset", _write),
    ("open", lambda s: s.reopen().version),
    ("schema", lambda s: s.ds.schema),
    ("to_table", lambda s: s.ds.to_table()),
    ("columns", lambda s: s.ds.to_table(columns=["s", "a"])),
    ("sql filter", lambda s: s.ds.to_table(filter="a > 10 AND b < 60")),
    ("like filter", lambda s: s.ds.to_table(filter="s LIKE 'x1%'")),
    ("is null filter", lambda s: s.ds.to_table(filter="s IS NULL", columns=["a"])),
    ("in filter", lambda s: s.ds.to_table(filter="a IN (3, 7, 99)")),
    ("expression filter", lambda s: s.ds.to_table(filter=pc.field("a") < 5)),
    ("limit offset", lambda s: s.ds.to_table(limit=7, offset=36)),
    ("computed columns", lambda s: s.ds.to_table(columns={"twice": "a * 2"}, limit=5)),
    ("count_rows", lambda s: s.ds.count_rows()),
    ("count_rows filter", lambda s: s.ds.count_rows("a >= 50")),
    ("head", lambda s: s.ds.head(5)),
    ("take", lambda s: s.ds.take([0, 45, 2, 45])),
    ("take columns", lambda s: s.ds.take([99, 1], columns=["s"])),
    ("row ids", _row_ids),
    ("scanner", lambda s: s.ds.scanner(columns=["a"], filter="a % 10 = 0").to_table()),
    ("to_batches", lambda s: pa.Table.from_batches(list(s.ds.to_batches(batch_size=16)))),
    ("fragments", lambda s: [f.count_rows() for f in s.ds.get_fragments()]),
    ("fragment scan", lambda s: s.ds.get_fragments()[1].to_table(columns=["a"], limit=3)),
    ("data_storage_version", lambda s: s.ds.data_storage_version),
    ("append", _append),
    ("insert", lambda s: (s.ds.insert(_table(5, 120)), s.ds.version, s.ds.count_rows())),
    ("versions", lambda s: [v["version"] for v in s.ds.versions()]),
    ("latest_version", lambda s: s.ds.latest_version),
    ("checkout_version", lambda s: s.ds.checkout_version(1).count_rows()),
    ("open old version", lambda s: s.mod.dataset(s.uri, version=2).to_table()),
    ("tags", _tag),
    ("open tag", lambda s: s.mod.dataset(s.uri, version="first").count_rows()),
    ("delete", lambda s: s.ds.delete("a < 3")),
    ("count after delete", lambda s: s.ds.count_rows()),
    ("take after delete", lambda s: s.ds.take([0, 1])),
    ("update", lambda s: s.ds.update({"b": "b + 1000"}, where="a > 118")),
    ("rows after update", lambda s: _sorted(s.ds.to_table())),
    ("add_columns", lambda s: (s.ds.add_columns({"c": "a * 10"}), s.ds.schema.names)),
    ("read added column", lambda s: s.ds.to_table(columns=["c"], limit=4)),
    ("alter_columns", lambda s: (s.ds.alter_columns({"path": "c", "name": "d"}), s.ds.schema.names)),
    ("drop_columns", lambda s: (s.ds.drop_columns(["d"]), s.ds.schema.names)),
    ("merge_insert", _merge),
    ("rows after merge", lambda s: _sorted(s.ds.to_table())),
    ("to_pandas", lambda s: s.ds.to_pandas(filter="a < 10").to_dict("list")),
    ("sample", lambda s: (s.ds.sample(6).num_rows, s.ds.sample(6).schema)),
    ("config", lambda s: (s.ds.update_config({"owner": "me"}), s.ds.config().get("owner"))[1]),
    ("dataset_stats", lambda s: s.ds.stats.dataset_stats()),
    ("get_transactions", lambda s: [type(t.operation).__name__ for t in s.ds.get_transactions(3)]),
    ("validate", lambda s: s.ds.validate()),
    ("explain_plan", lambda s: "LanceRead" in s.ds.scanner(filter="a > 3").explain_plan()),
    ("scalar index", lambda s: (s.ds.create_scalar_index("a", "ZONEMAP"), s.ds.count_rows("a > 110"))[1]),
    ("count with index", lambda s: s.ds.count_rows("a < 20 OR a > 115")),
    ("compaction", _compact),
    ("rows after compaction", lambda s: _sorted(s.ds.to_table())),
    ("restore", _restore),
    ("cleanup", _cleanup),
    ("rows after cleanup", lambda s: _sorted(s.reopen().to_table())),
    ("create over existing", lambda s: s.mod.write_dataset(_table(1), s.uri)),
    ("bad write mode", lambda s: s.mod.write_dataset(_table(1), s.uri, mode="bogus")),
    ("unknown column", lambda s: s.ds.to_table(columns=["nope"])),
    ("overwrite", lambda s: s.mod.write_dataset(_table(3), s.uri, mode="overwrite").to_table()),
]


def _plain(value: Any) -> Any:
    """Results reduced to comparable values (a dataset handle compares by its rows)."""
    if isinstance(value, pa.Table):
        return value.to_pydict(), value.schema
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if hasattr(value, "to_table") and hasattr(value, "version"):
        return "dataset", value.version, value.to_table().to_pydict()
    return value


def test_first_hour_agrees_with_pylance(tmp_path: Path) -> None:
    ours = Session(lance_format, str(tmp_path / "ours"))
    theirs = Session(lance, str(tmp_path / "theirs"))
    disagreements = []
    for name, step in STEPS:
        got = []
        for side in (ours, theirs):
            try:
                got.append(_plain(step(side)))
            except Exception as e:  # both sides refusing is an agreement too
                got.append(_error(e))
        if got[0] != got[1]:
            disagreements.append(f"{name}: ours={got[0]!r}\n    pylance={got[1]!r}")
    assert len(STEPS) >= 50
    assert not disagreements, "\n".join(disagreements)


def test_missing_version_error_family(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance_format.write_dataset(_table(3), uri)
    with pytest.raises(ValueError, match=r"(?i)not found|does not exist|999|no-such-tag"):
        lance.dataset(uri, version=999)
    with pytest.raises(ValueError, match=r"(?i)not found|does not exist|999|no-such-tag"):
        lance.dataset(uri, version="no-such-tag")
    with pytest.raises(ValueError, match=r"(?i)not found|does not exist|999|no-such-tag"):
        lance_format.dataset(uri, version=999)
    with pytest.raises(ValueError, match=r"(?i)not found|does not exist|999|no-such-tag"):
        lance_format.dataset(uri, version="no-such-tag")
    # Still our NotFoundError (and FileNotFoundError) for code written against our hierarchy.
    with pytest.raises(NotFoundError):
        lance_format.dataset(uri, version=999)
