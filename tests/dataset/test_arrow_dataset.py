"""LanceDataset is a ``pyarrow.dataset.Dataset``: DuckDB and DataFusion query it with pushdown.

Results are compared with pylance's cell by cell; pushdown is shown by the I/O counters: a
selective filter on a zone-mapped column reads a fraction of the bytes of a full scan.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
import pytest

import lance_format
from lance_format.dataset.dataset import LanceDataset, LanceFragment
from lance_format.io import io_stats

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")
duckdb = pytest.importorskip("duckdb")
datafusion = pytest.importorskip("datafusion")

pytestmark = pytest.mark.interop

ROWS = 40_000
ROWS_PER_FILE = 10_000


def _table(n: int) -> pa.Table:
    a = np.arange(n, dtype=np.int64)
    return pa.table(
        {
            "a": a,
            "g": pa.array(a % 7, pa.int32()),
            "s": pa.array([f"name-{i:06d}" for i in range(n)]),
            "x": pa.array(np.sin(a) * 100.0),
        }
    )


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Four fragments written by us, rows deleted, a zone map on ``a``."""
    path = str(tmp_path_factory.mktemp("arrowds") / "ds")
    lance_format.write_dataset(_table(ROWS), path, max_rows_per_file=ROWS_PER_FILE)
    ds = lance_format.dataset(path)
    ds.delete("a % 10 = 3")
    ds.create_scalar_index("a", "ZONEMAP", rows_per_zone=1000)
    return path


def _sorted(t: pa.Table, keys: list[str]) -> list[dict[str, Any]]:
    return t.sort_by([(k, "ascending") for k in keys]).to_pylist()  # type: ignore[no-any-return]


def test_is_a_pyarrow_dataset_and_fragment(uri: str) -> None:
    ds = lance_format.dataset(uri)
    assert isinstance(ds, pds.Dataset)
    frags = ds.get_fragments(pc.field("a") > 5)
    assert frags
    assert all(isinstance(f, pds.Fragment) for f in frags)
    assert ds.partition_expression.equals(pc.scalar(True))
    assert frags[0].physical_schema == ds.schema


def test_every_inherited_member_is_overridden() -> None:
    """An inherited pyarrow member would touch a C++ object we never create and crash the process."""
    for base, ours in ((pds.Dataset, LanceDataset), (pds.Fragment, LanceFragment)):
        for name in dir(base):
            if name.startswith("__"):
                continue
            assert getattr(ours, name) is not getattr(base, name), f"{ours.__name__}.{name} is pyarrow's"


def test_pyarrow_api_matches_pylance(uri: str) -> None:
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    flt = (pc.field("a") > 4000) & (pc.field("g") == 3)
    assert ours.to_table(columns=["a", "s"], filter=flt, use_threads=True) == theirs.to_table(
        columns=["a", "s"], filter=flt
    )
    assert ours.count_rows(filter=flt) == theirs.count_rows(filter=flt)
    assert ours.head(7, columns=["s"]) == theirs.head(7, columns=["s"])
    assert ours.take([0, 5, 35000], columns=["a"]) == theirs.take([0, 5, 35000], columns=["a"])
    assert ours.scanner(columns=["a"]).head(3) == theirs.scanner(columns=["a"]).head(3)
    frag = ours.get_fragments()[1]
    assert frag.take([0, 2]).column("a").to_pylist() == [10000, 10002]
    assert frag.count_rows() == theirs.get_fragments()[1].count_rows()
    assert frag.to_table(ours.schema, columns=["a"]).num_rows == frag.count_rows()
    assert pickle.loads(pickle.dumps(ours)).to_table() == ours.to_table()
    joined = ours.join(pds.dataset(pa.table({"g": pa.array([1, 2], pa.int32()), "k": ["one", "two"]})), "g")
    assert joined.count_rows() == ours.count_rows()
    assert ours.filter(pc.field("a") < 10).to_table() == theirs.to_table(filter="a < 10")
    with pytest.raises(TypeError):
        ours.scanner(no_such_option=1)


QUERIES = [
    "SELECT a, s FROM t WHERE a BETWEEN 12000 AND 12100 ORDER BY a",
    "SELECT g, count(*) AS n, sum(a) AS total FROM t WHERE x > 50 GROUP BY g ORDER BY g",
    "SELECT s FROM t WHERE s LIKE 'name-0199%' ORDER BY s",
    "SELECT a FROM t WHERE g = 2 AND a < 100 ORDER BY a LIMIT 5",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_duckdb_matches_pylance(uri: str, sql: str) -> None:
    results = []
    for ds in (lance_format.dataset(uri), lance.dataset(uri)):
        con = duckdb.connect()
        con.register("t", ds)
        results.append(con.sql(sql).to_arrow_table())
    assert results[0] == results[1]


@pytest.mark.parametrize("sql", QUERIES)
def test_datafusion_matches_pylance(uri: str, sql: str) -> None:
    results = []
    # pylance's own dataset refuses DataFusion's filtered get_fragments: its rows, in memory, are the oracle.
    for ds in (lance_format.dataset(uri), pds.dataset(lance.dataset(uri).to_table())):
        ctx = datafusion.SessionContext()
        ctx.register_dataset("t", ds)
        results.append(ctx.sql(sql).to_arrow_table())
    assert results[0] == results[1]


def _bytes_read(run: Any) -> int:
    before = io_stats()
    run()
    return (io_stats() - before).bytes_read


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
def test_filters_reach_the_scanner(uri: str, engine: str) -> None:
    """A selective filter on the zone-mapped column reads far fewer bytes than a full scan."""
    t = lance_format.dataset(uri)

    def query(sql: str) -> Any:
        if engine == "duckdb":
            con = duckdb.connect()
            con.register("t", t)
            return lambda: con.sql(sql).to_arrow_table()
        ctx = datafusion.SessionContext()
        ctx.register_dataset("t", t)
        return lambda: ctx.sql(sql).to_arrow_table()

    selective = _bytes_read(query("SELECT s FROM t WHERE a >= 15000 AND a < 15050"))
    full = _bytes_read(query("SELECT s FROM t"))
    assert selective * 4 < full
    # Projection reaches the scanner too: one narrow column reads less than every column.
    narrow = _bytes_read(query("SELECT g FROM t"))
    wide = _bytes_read(query("SELECT * FROM t"))
    assert narrow * 4 < wide


TYPED_FILTERS = [
    "i IS NULL",
    "i IS NOT NULL AND i > 500",
    "ts >= TIMESTAMP '2024-01-10 00:00:00'",
    "d = DATE '2024-01-05'",
    "s IN ('k1', 'k2')",
    "dec > 100.5",
    "b",
    "s <> 'k3' AND NOT b",
    "i BETWEEN 10 AND 20 OR s = 'k5'",
]


@pytest.fixture(scope="module")
def typed_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Nullable ints, timestamps, dates, strings, decimals and booleans, written by pylance."""
    import datetime as dt

    n = 1000
    table = pa.table(
        {
            "i": pa.array([None if k % 7 == 0 else k for k in range(n)], pa.int32()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1) + dt.timedelta(hours=k) for k in range(n)], pa.timestamp("us")
            ),
            "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=k % 50) for k in range(n)], pa.date32()),
            "s": pa.array([f"k{k % 13}" for k in range(n)]),
            "dec": pa.array([k / 4 for k in range(n)]).cast(pa.decimal128(10, 2)),
            "b": pa.array([k % 3 == 0 for k in range(n)]),
        }
    )
    path = str(tmp_path_factory.mktemp("typed") / "t")
    lance.write_dataset(table, path)
    return path


@pytest.mark.parametrize("where", TYPED_FILTERS)
def test_pushed_down_filters_of_every_type_match_pylance(typed_uri: str, where: str) -> None:
    """DuckDB and DataFusion turn these into pyarrow Expressions our scanner evaluates."""
    sql = f"SELECT count(*) AS n, sum(i) AS total FROM t WHERE {where}"
    oracle = duckdb.connect()
    oracle.register("t", lance.dataset(typed_uri))
    want = oracle.sql(sql).fetchall()
    con = duckdb.connect()
    con.register("t", lance_format.dataset(typed_uri))
    assert con.sql(sql).fetchall() == want
    ctx = datafusion.SessionContext()
    ctx.register_dataset("t", lance_format.dataset(typed_uri))
    got = ctx.sql(sql).to_arrow_table()
    assert (got.column("n")[0].as_py(), got.column("total")[0].as_py()) == want[0]
