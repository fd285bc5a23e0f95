"""Random sequences of writes, deletes, updates and compactions against a plain-pyarrow model."""

from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_format

_counter = iter(range(1 << 62))


def _rows(n: int) -> pa.Table:
    start = next(_counter) * 1000
    a = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"a": a, "s": pa.array([None if i % 3 == 0 else f"v{i}" for i in a], pa.string())})


_op = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 40), st.integers(1, 25)),
    st.tuples(st.just("overwrite"), st.integers(0, 30), st.integers(1, 25)),
    st.tuples(st.just("delete"), st.integers(2, 7), st.integers(0, 6)),
    st.tuples(st.just("update"), st.integers(2, 7), st.integers(0, 6)),
    st.tuples(st.just("compact"), st.integers(1, 60), st.just(0)),
)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_op, min_size=1, max_size=8), take_seed=st.integers(0, 2**31), stable=st.booleans())
def test_matches_model(ops: list[tuple[str, int, int]], take_seed: int, stable: bool) -> None:
    uri = f"memory://model-{uuid.uuid4().hex}"
    model = _rows(5)
    ds = lance_format.write_dataset(model, uri, max_rows_per_file=4, enable_stable_row_ids=stable)
    for kind, x, y in ops:
        if kind == "append":
            data = _rows(x)
            ds = lance_format.write_dataset(data, uri, mode="append", max_rows_per_file=y)
            model = pa.concat_tables([model, data])
        elif kind == "overwrite":
            model = _rows(x)
            ds = lance_format.write_dataset(
                model, uri, mode="overwrite", max_rows_per_file=y, enable_stable_row_ids=stable
            )
        elif kind == "delete":
            ds.delete(f"a % {x} = {y % x}")
            model = model.filter(pa.array(model["a"].to_numpy() % x != y % x))
        elif kind == "update":
            ds.update({"s": "'u'"}, where=f"a % {x} = {y % x}")
            hit = pa.array(model["a"].to_numpy() % x == y % x)
            model = model.set_column(1, "s", pc.if_else(hit, pa.scalar("u"), model["s"]))
        else:
            ds.compact_files(target_rows_per_fragment=x)
        if kind in ("update", "compact"):  # updated / rewritten rows move to new fragments at the end
            assert ds.to_table().sort_by("a").equals(model.sort_by("a")), kind
            model = ds.to_table()
        else:
            assert ds.to_table().equals(model), kind
        assert ds.count_rows() == model.num_rows
    ordered = ds.to_table()
    if ordered.num_rows:
        rng = np.random.default_rng(take_seed)
        idx = rng.integers(0, ordered.num_rows, 12)
        assert ds.take(idx).equals(ordered.take(pa.array(idx)))
        with_ids = ds.to_table(with_row_id=True, with_row_address=True)
        ids = with_ids["_rowid"].to_numpy()
        assert len(np.unique(ids)) == len(ids)
        if not stable:
            assert (ids == with_ids["_rowaddr"].to_numpy()).all()
        assert ds.take_rows(ids[idx]).equals(ordered.take(pa.array(idx)))
    reopened = lance_format.dataset(uri)
    assert reopened.version == ds.version
    assert reopened.to_table().equals(ordered)
