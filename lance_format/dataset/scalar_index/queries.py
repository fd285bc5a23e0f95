"""What a scalar index can answer: value queries on one column, evaluated on sorted keys.

A query selects the rows whose value is equal to one of a set of values, lies in a range, or is
null; SQL semantics, so a null value never matches an equality or a range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["InSet", "IsNullQuery", "Query", "Range", "key_mask", "nulls_first_order"]


@dataclass(frozen=True)
class InSet:
    """Value is one of ``values`` (an equality is a set of one)."""

    values: pa.Array


@dataclass(frozen=True)
class Range:
    """Value between ``low`` and ``high`` (either may be ``None``: unbounded)."""

    low: pa.Scalar | None
    low_inclusive: bool
    high: pa.Scalar | None
    high_inclusive: bool


@dataclass(frozen=True)
class IsNullQuery:
    """Value is null."""


Query = InSet | Range | IsNullQuery


def key_mask(keys: pa.Array | pa.ChunkedArray, query: Query) -> npt.NDArray[np.bool_]:
    """Which ``keys`` the query selects."""
    if isinstance(query, IsNullQuery):
        mask = pc.is_null(keys)
    elif isinstance(query, InSet):
        mask = pc.is_in(keys, value_set=query.values, skip_nulls=True)
        mask = pc.and_(mask, pc.is_valid(keys))
    else:
        mask = pc.is_valid(keys)
        if query.low is not None:
            fn = pc.greater_equal if query.low_inclusive else pc.greater
            mask = pc.and_(mask, fn(keys, query.low))
        if query.high is not None:
            fn = pc.less_equal if query.high_inclusive else pc.less
            mask = pc.and_(mask, fn(keys, query.high))
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)


def nulls_first_order(values: pa.Array | pa.ChunkedArray, ids: npt.NDArray[np.uint64]) -> pa.Array:
    """Indices sorting rows by value, nulls first, ties by id (pylance's index order)."""
    table = pa.table({"v": values, "id": pa.array(ids, pa.uint64())})
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    nulls = np.flatnonzero(~valid)
    nulls = nulls[np.argsort(ids[nulls], kind="stable")]
    rest = np.flatnonzero(valid)
    part = table.take(pa.array(rest, pa.int64()))
    order = pc.sort_indices(part, sort_keys=[("v", "ascending"), ("id", "ascending")]).to_numpy()
    return pa.array(np.concatenate([nulls, rest[order]]).astype(np.int64))
