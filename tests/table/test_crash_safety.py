"""A writer killed (SIGKILL) at any point leaves the dataset readable at a consistent version."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.table import SqliteManifestStore, register_manifest_store, unregister_manifest_store

# Appends of 100 rows whose ids encode (writer run, batch); deletes remove whole batches, so every
# consistent version holds a whole number of batches with no id twice.
_WRITER = """
import sys
import pyarrow as pa
import lance_format
from lance_format.table import SqliteManifestStore, register_manifest_store
root, run, db = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if db:
    register_manifest_store(root, SqliteManifestStore(db))
print("ready", flush=True)
j = 0
while True:
    base = (run * 1000 + j) * 100
    lance_format.write_dataset(
        pa.table({"id": pa.array(range(base, base + 100), pa.int64()), "s": [str(i) for i in range(100)]}),
        root, mode="append", max_rows_per_file=40,
    )
    if j % 3 == 2:
        lance_format.dataset(root).delete(f"id >= {base} AND id < {base + 100}")
    j += 1
"""

KILLS = 8


def _check_consistent(root: str) -> int:
    ds = lance_format.dataset(root)
    table = ds.to_table()
    assert table.num_rows == ds.count_rows()
    assert table.num_rows % 100 == 0
    ids = table.column("id")
    assert pc.count_distinct(ids).as_py() == table.num_rows
    batches = pc.divide(ids, 100)
    assert set(pc.value_counts(batches).field("counts").to_pylist()) <= {100}
    assert [v["version"] for v in ds.versions()] == list(range(1, ds.version + 1))
    for frag in ds.get_fragments():
        for f in frag.data_files():
            assert Path(root, "data", f.path).exists(), f.path
    return ds.version


@pytest.mark.parametrize("external", [False, True], ids=["put-if-not-exists", "external-store"])
def test_killed_writers_leave_consistent_versions(tmp_path: Path, external: bool) -> None:
    root = str(tmp_path / "ds")
    db = str(tmp_path / "m.db") if external else ""
    if external:
        register_manifest_store(root, SqliteManifestStore(db))
    try:
        lance_format.write_dataset(
            pa.table({"id": pa.array([], pa.int64()), "s": pa.array([], pa.string())}), root
        )
        rng = random.Random(7)
        last = 1
        for run in range(1, KILLS + 1):
            proc = subprocess.Popen(
                [sys.executable, "-c", _WRITER, root, str(run), db],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.05, 0.6))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()
            version = _check_consistent(root)
            assert version >= last
            last = version
        # The dataset keeps accepting writes after all that.
        rows = lance_format.dataset(root).count_rows()
        ds = lance_format.write_dataset(
            pa.table({"id": pa.array([10**9], pa.int64()), "s": ["x"]}), root, mode="append"
        )
        assert ds.version == last + 1
        assert lance_format.dataset(root).count_rows() == rows + 1
    finally:
        if external:
            unregister_manifest_store(root)
