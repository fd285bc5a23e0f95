"""Cleanup removes the files a writer killed before its commit left behind, as pylance does, and
never a file a kept version or tag references (issue 14)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import InvalidInputError

lance = pytest.importorskip("lance")

#: Writes rows, but the process is SIGKILLed where the commit would start: data files, no version.
_KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    import pyarrow as pa
    import importlib
    write = importlib.import_module("lance_format.dataset.write")

    def killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    write.commit_transaction = killed
    lance_dataset = importlib.import_module("lance_format.dataset")
    lance_dataset.write_dataset(pa.table({"a": list(range(100, 150))}), sys.argv[1], mode="append",
                                max_rows_per_file=20)
    """
)

WEEK_PLUS = 8 * 24 * 3600


def _data(path: Path) -> set[str]:
    return {p.name for p in (path / "data").iterdir()}


def _kill_a_writer(path: Path) -> set[str]:
    before = _data(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(path)], env=env, timeout=120)
    assert done.returncode == -9
    orphans = _data(path) - before
    assert len(orphans) == 3  # 50 rows, 20 per file
    return orphans


def _age(path: Path, names: set[str], seconds: float) -> None:
    stamp = time.time() - seconds
    for name in names:
        os.utime(path / "data" / name, (stamp, stamp))


@pytest.fixture
def uri(tmp_path: Path) -> Path:
    path = tmp_path / "t"
    lance.write_dataset(pa.table({"a": list(range(100))}), str(path), max_rows_per_file=40)
    ds = lance.dataset(str(path))
    ds.tags.create("first", 1)
    lance.write_dataset(pa.table({"a": list(range(5))}), str(path), mode="overwrite")
    return path


def test_orphans_of_a_killed_writer_go_once_old_like_pylance(uri: Path, tmp_path: Path) -> None:
    orphans = _kill_a_writer(uri)
    assert lance_format.dataset(str(uri)).count_rows() == 5  # nothing was committed
    committed = _data(uri) - orphans
    young = min(orphans)
    _age(uri, orphans - {young}, WEEK_PLUS)
    theirs = tmp_path / "copy"
    shutil.copytree(uri, theirs)  # copies keep modification times
    stats = lance_format.dataset(str(uri)).cleanup_old_versions(older_than_seconds=3600)
    lance.dataset(str(theirs)).cleanup_old_versions(older_than=timedelta(hours=1))
    assert stats.orphans_removed == 2
    assert _data(uri) == committed | {young} == _data(theirs)
    # The tagged version keeps its files; both read it alike.
    ours = lance_format.dataset(str(uri), version="first").to_table()
    assert ours.equals(lance.dataset(str(theirs), version="first").to_table())
    assert ours.num_rows == 100


def test_delete_unverified_removes_young_orphans_before_the_cutoff(uri: Path, tmp_path: Path) -> None:
    orphans = _kill_a_writer(uri)
    committed = _data(uri) - orphans
    theirs = tmp_path / "copy"
    shutil.copytree(uri, theirs)
    # A cutoff an hour back keeps every young orphan: it may be a write in flight.
    ds = lance_format.dataset(str(uri))
    assert ds.cleanup_old_versions(older_than_seconds=3600, delete_unverified=True).orphans_removed == 0
    assert _data(uri) == committed | orphans
    _age(uri, orphans, 7200)
    _age(theirs, orphans, 7200)
    stats = ds.cleanup_old_versions(older_than_seconds=3600, delete_unverified=True)
    lance.dataset(str(theirs)).cleanup_old_versions(older_than=timedelta(hours=1), delete_unverified=True)
    assert stats.orphans_removed == 3
    assert _data(uri) == committed == _data(theirs)
    assert lance_format.dataset(str(uri), version="first").count_rows() == 100


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), -1, True, "10"])
def test_cleanup_refuses_bad_ages(uri: Path, seconds: object) -> None:
    with pytest.raises(InvalidInputError):
        lance_format.dataset(str(uri)).cleanup_old_versions(older_than_seconds=seconds)  # type: ignore[arg-type]
