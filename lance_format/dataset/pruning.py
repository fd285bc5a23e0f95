"""Which fragments and row ranges of a scan can hold rows matching a filter, from zone statistics.

The filter (a pyarrow Expression) is walked as a tree (:mod:`.exprtree`). Every node gets two
per-segment flags, *can be true* and *can be false*, over-approximated from the zone statistics
(min, max, null and NaN counts) of ZONEMAP indices; a segment is a run of physical rows of one
fragment inside which every index used has one zone (or none). Kleene logic composes them:
``a AND b`` can be true only where both can, ``NOT a`` swaps the flags, and a node that is not
understood (arithmetic, casts of columns, unknown functions, columns without statistics) can be
both. Rows of fragments an index does not cover (appended after it was built) and rows outside
its zones are unknown too. Only segments whose filter *can be true* are read; the scan still
applies the filter exactly, so pruning changes what is read, never what is returned. Deleted rows
only remove values, so statistics built before a delete stay valid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.types import LanceField
from lance_format.dataset.exprtree import Call, ExpressionShapeError, FieldRef, Literal, Node, decompose
from lance_format.dataset.zonemap import ZoneMap

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.table.model import DataFragment

__all__ = ["RowRanges", "candidate_ranges", "prune"]

#: ``{fragment id: sorted disjoint [start, stop) physical row ranges that may match}``.
RowRanges = dict[int, list[tuple[int, int]]]
Bools = npt.NDArray[np.bool_]

#: IN lists longer than this are tested by their overall [min, max] instead of value by value
#: (one vectorised comparison per value and zone stays cheap up to here).
MAX_IN_VALUES = 64
#: Fragment ids and row offsets share one sort key: offsets are below 2**32.
_KEY_SHIFT = 33

_FLIP = {
    "equal": "equal",
    "not_equal": "not_equal",
    "less": "greater",
    "less_equal": "greater_equal",
    "greater": "less",
    "greater_equal": "less_equal",
}


@dataclass
class _Zones:
    """One zone map mapped onto the segments: the zone of each segment (or -1)."""

    zm: ZoneMap
    zone_of: npt.NDArray[np.int64]


class _Pruner:
    def __init__(self, seg_count: int, zones: dict[tuple[str, ...], list[_Zones]]) -> None:
        self.n = seg_count
        self.zones = zones

    def unknown(self) -> tuple[Bools, Bools]:
        return np.ones(self.n, bool), np.ones(self.n, bool)

    def const(self, value: bool | None) -> tuple[Bools, Bools]:
        return np.full(self.n, value is True), np.full(self.n, value is False)

    def eval(self, node: Node) -> tuple[Bools, Bools]:
        """``(can be true, can be false)`` per segment."""
        if isinstance(node, Literal):
            v = node.value.as_py() if pa.types.is_boolean(node.value.type) else "?"
            return self.const(v) if v in (True, False, None) else self.unknown()
        if not isinstance(node, Call):
            return self.unknown()
        name, args = node.name, node.args
        if name in ("and", "and_kleene") and len(args) == 2:
            (at, af), (bt, bf) = self.eval(args[0]), self.eval(args[1])
            return at & bt, af | bf
        if name in ("or", "or_kleene") and len(args) == 2:
            (at, af), (bt, bf) = self.eval(args[0]), self.eval(args[1])
            return at | bt, af & bf
        if name == "invert" and len(args) == 1:
            t, f = self.eval(args[0])
            return f, t
        if name == "if_else" and len(args) == 3:
            (ct, cf), (at, af), (bt, bf) = (self.eval(a) for a in args)
            return (ct & at) | (cf & bt), (ct & af) | (cf & bf)
        if name in _FLIP and len(args) == 2:
            left, right = args
            op = name
            if isinstance(left, Literal | Call) and isinstance(right, FieldRef):
                left, right, op = right, left, _FLIP[name]
            lit = _fold(right)
            if isinstance(left, FieldRef) and lit is not None:
                return self.leaf(left, lambda zm: _compare(zm, op, lit))
            return self.unknown()
        if name == "is_in" and len(args) == 1 and isinstance(args[0], FieldRef) and node.options:
            values = node.options.get("value_set")
            match_nulls = node.options.get("null_matching_behavior", 0) == 0
            if isinstance(values, pa.Array):
                return self.leaf(args[0], lambda zm: _is_in(zm, values, match_nulls))
            return self.unknown()
        if name in ("is_null", "is_valid", "is_nan") and len(args) == 1 and isinstance(args[0], FieldRef):
            nan_is_null = bool((node.options or {}).get("nan_is_null", False))
            return self.leaf(args[0], lambda zm: _null_test(zm, name, nan_is_null))
        if name == "starts_with" and len(args) == 1 and isinstance(args[0], FieldRef) and node.options:
            pattern = node.options.get("pattern")
            if isinstance(pattern, str) and not node.options.get("ignore_case"):
                return self.leaf(args[0], lambda zm: _starts_with(zm, pattern))
        return self.unknown()

    def leaf(
        self, ref: FieldRef, test: Callable[[ZoneMap], tuple[Bools, Bools] | None]
    ) -> tuple[Bools, Bools]:
        """A per-zone test spread onto segments; several indices on a column all have to agree."""
        can_t, can_f = self.unknown()
        for z in self.zones.get(ref.path, []):
            try:
                got = test(z.zm)
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                got = None  # not comparable the way the statistics are stored: keep everything
            if got is None:
                continue
            zt, zf = got
            covered = z.zone_of >= 0
            idx = np.where(covered, z.zone_of, 0)
            can_t &= np.where(covered, zt[idx], True)
            can_f &= np.where(covered, zf[idx], True)
        return can_t, can_f


def _fold(node: Node) -> pa.Scalar | None:
    """A literal operand (casts of literals folded), else ``None``."""
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Call) and node.name == "cast" and len(node.args) == 1 and node.options:
        inner = _fold(node.args[0])
        to_type = node.options.get("to_type")
        if inner is not None and isinstance(to_type, pa.DataType):
            try:
                return inner.cast(to_type)
            except (pa.ArrowException, ValueError):
                return None
    return None


def _np(a: pa.Array | pa.ChunkedArray) -> Bools:
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=bool)


@dataclass
class _Bounds:
    """A zone map's extrema in comparable form."""

    lo: pa.Array
    hi: pa.Array
    finite: Bools  # has a comparable (non-null, non-NaN) value
    nan: Bools  # may hold NaN
    unknown: Bools  # extrema missing although comparable values may exist


def _bounds(zm: ZoneMap) -> _Bounds:
    lo, hi = zm.min, zm.max
    missing = _np(pc.or_(lo.is_null(), hi.is_null()))
    unknown = missing & (zm.null_count + zm.nan_count < zm.zone_length)
    if pa.types.is_floating(lo.type):
        lo_nan = _np(pc.is_nan(lo).fill_null(False))
        hi_nan = pc.is_nan(hi).fill_null(False)
        nan = (zm.nan_count > 0) | lo_nan | _np(hi_nan)
        # A NaN max hides the largest number: no upper bound.
        hi = pc.if_else(hi_nan, pa.scalar(float("inf"), hi.type), hi)
        finite = ~missing & ~lo_nan
    else:
        nan = np.zeros(len(lo), bool)
        finite = ~missing
    return _Bounds(lo, hi, finite, nan, unknown)


def _cmp(fn: str, arr: pa.Array, v: pa.Scalar) -> Bools:
    return _np(getattr(pc, fn)(arr, v).fill_null(False))


def _compare(zm: ZoneMap, op: str, v: pa.Scalar) -> tuple[Bools, Bools] | None:
    if not v.is_valid:  # comparisons with NULL are never true nor false
        none = np.zeros(len(zm.zone_start), bool)
        return none, none
    if isinstance(v.as_py(), float) and np.isnan(v.as_py()):
        return None
    b = _bounds(zm)
    f = b.finite
    lo_le, hi_ge = _cmp("less_equal", b.lo, v), _cmp("greater_equal", b.hi, v)
    single = _cmp("equal", b.lo, v) & _cmp("equal", b.hi, v)
    if op == "equal":
        t, fl = f & lo_le & hi_ge, b.nan | (f & ~single)
    elif op == "not_equal":
        t, fl = b.nan | (f & ~single), f & lo_le & hi_ge
    elif op == "less":
        t, fl = f & _cmp("less", b.lo, v), b.nan | (f & hi_ge)
    elif op == "less_equal":
        t, fl = f & lo_le, b.nan | (f & _cmp("greater", b.hi, v))
    elif op == "greater":
        t, fl = f & _cmp("greater", b.hi, v), b.nan | (f & lo_le)
    else:  # greater_equal
        t, fl = f & hi_ge, b.nan | (f & _cmp("less", b.lo, v))
    return t | b.unknown, fl | b.unknown


def _is_in(zm: ZoneMap, values: pa.Array, match_nulls: bool) -> tuple[Bools, Bools] | None:
    b = _bounds(zm)
    t = np.zeros(len(zm.zone_start), bool)
    if values.null_count and match_nulls:
        t |= zm.null_count > 0
    plain = values.drop_null()
    if pa.types.is_floating(plain.type):
        nan = pc.is_nan(plain)
        if pc.any(nan).as_py():
            t |= b.nan
        plain = plain.filter(pc.invert(nan))
    if len(plain) > MAX_IN_VALUES:
        mm = pc.min_max(plain)
        t |= b.finite & _cmp("less_equal", b.lo, mm["max"]) & _cmp("greater_equal", b.hi, mm["min"])
    else:
        for v in plain:
            t |= b.finite & _cmp("less_equal", b.lo, v) & _cmp("greater_equal", b.hi, v)
    return t | b.unknown, np.ones(len(t), bool)


def _null_test(zm: ZoneMap, name: str, nan_is_null: bool) -> tuple[Bools, Bools] | None:
    nulls = zm.null_count + (zm.nan_count if nan_is_null else 0)
    some_null = nulls > 0
    # The span may include rows deleted at build time, so "all null" is only certain when the
    # null count fills the whole span.
    some_valid = nulls < zm.zone_length
    if name == "is_null":
        return some_null, some_valid
    if name == "is_valid":
        return zm.null_count < zm.zone_length, zm.null_count > 0
    if not pa.types.is_floating(zm.min.type):
        return None
    return _bounds(zm).nan, np.ones(len(nulls), bool)


def _starts_with(zm: ZoneMap, pattern: str) -> tuple[Bools, Bools] | None:
    if not (pa.types.is_string(zm.min.type) or pa.types.is_large_string(zm.min.type)):
        return None
    b = _bounds(zm)
    # Any value with the prefix is >= the prefix, and cut to its length it is <= the prefix.
    head = pc.utf8_slice_codeunits(b.lo, 0, len(pattern))
    p = pa.scalar(pattern, zm.min.type)
    t = b.finite & _cmp("greater_equal", b.hi, p) & _cmp("less_equal", head, p)
    return t | b.unknown, np.ones(len(t), bool)


def _segments(
    fragments: Sequence[DataFragment], zonemaps: list[ZoneMap]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(fragment id, start, stop)`` of every segment: runs between any zone boundary."""
    fids = np.array([f.id for f in fragments], dtype=np.int64)
    phys = np.array([f.physical_rows for f in fragments], dtype=np.int64)
    keys = [(fids << _KEY_SHIFT), (fids << _KEY_SHIFT) + phys]
    order = np.argsort(fids)
    for zm in zonemaps:
        zf, start, stop = _covered(zm, fids)
        if not len(zf):
            continue
        limit = phys[order][np.searchsorted(fids[order], zf)]
        keys.append((zf << _KEY_SHIFT) + np.minimum(start, limit))
        keys.append((zf << _KEY_SHIFT) + np.minimum(stop, limit))
    allk = np.unique(np.concatenate(keys))
    kf = allk >> _KEY_SHIFT
    same = kf[:-1] == kf[1:]
    mask = (1 << _KEY_SHIFT) - 1
    return kf[:-1][same], (allk[:-1] & mask)[same], (allk[1:] & mask)[same]


def _covered(
    zm: ZoneMap, fids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Zones of fragments that are scanned and covered by the index: ``(fragment, start, stop)``."""
    covered = np.fromiter(zm.index.fragment_ids, dtype=np.int64, count=len(zm.index.fragment_ids))
    ok = np.isin(zm.fragment_id, covered) & np.isin(zm.fragment_id, fids)
    return zm.fragment_id[ok], zm.zone_start[ok], zm.zone_start[ok] + zm.zone_length[ok]


def _zone_of_segments(
    zm: ZoneMap, fids: npt.NDArray[np.int64], seg_f: npt.NDArray[np.int64], seg_s: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """For each segment, the index of the zone of ``zm`` holding it (-1: none)."""
    covered = np.fromiter(zm.index.fragment_ids, dtype=np.int64, count=len(zm.index.fragment_ids))
    idx = np.flatnonzero(np.isin(zm.fragment_id, covered) & np.isin(zm.fragment_id, fids))
    zkey = (zm.fragment_id[idx] << _KEY_SHIFT) + zm.zone_start[idx]
    order = np.argsort(zkey, kind="stable")
    zkey, idx = zkey[order], idx[order]
    skey = (seg_f << _KEY_SHIFT) + seg_s
    pos = np.searchsorted(zkey, skey, side="right") - 1
    safe = np.maximum(pos, 0)
    z = idx[safe] if len(idx) else np.zeros(len(skey), np.int64)
    inside = (
        (pos >= 0) & (zm.fragment_id[z] == seg_f) & (seg_s < zm.zone_start[z] + zm.zone_length[z])
        if len(idx)
        else np.zeros(len(skey), bool)
    )
    return np.where(inside, z, -1)


def prune(
    expr: pc.Expression,
    fragments: Sequence[DataFragment],
    zonemaps: dict[tuple[str, ...], list[ZoneMap]],
) -> RowRanges | None:
    """Row ranges per fragment that may hold rows matching ``expr``.

    ``zonemaps`` maps column paths (``("a",)``, ``("s", "x")``) to their zone maps. ``None`` when
    nothing can be pruned (no statistics for the filter's columns, or a filter not understood).
    """
    if not zonemaps or not fragments:
        return None
    try:
        tree = decompose(expr)
    except ExpressionShapeError:
        return None
    used = {p: zms for p, zms in zonemaps.items() if _mentions(tree, p)}
    if not used:
        return None
    flat = [zm for zms in used.values() for zm in zms]
    fids = np.array([f.id for f in fragments], dtype=np.int64)
    seg_f, seg_s, seg_e = _segments(fragments, flat)
    zones = {
        p: [_Zones(zm, _zone_of_segments(zm, fids, seg_f, seg_s)) for zm in zms] for p, zms in used.items()
    }
    can_true, _ = _Pruner(len(seg_f), zones).eval(tree)
    out: RowRanges = {int(f): [] for f in fids}
    kf, ks, ke = seg_f[can_true], seg_s[can_true], seg_e[can_true]
    # Merge touching kept segments of one fragment into one range.
    joins = (kf[1:] == kf[:-1]) & (ks[1:] == ke[:-1])
    starts = np.concatenate([[True], ~joins]) if len(kf) else np.zeros(0, bool)
    first = np.flatnonzero(starts)
    last = np.concatenate([first[1:] - 1, [len(kf) - 1]]) if len(first) else first
    for f, s, e in zip(kf[first].tolist(), ks[first].tolist(), ke[last].tolist(), strict=True):
        out[f].append((s, e))
    return out


def _mentions(node: Node, path: tuple[str, ...]) -> bool:
    if isinstance(node, FieldRef):
        return node.path == path
    if isinstance(node, Call):
        return any(_mentions(a, path) for a in node.args)
    return False


def _field_paths(fields: Sequence[LanceField], prefix: tuple[str, ...] = ()) -> dict[int, tuple[str, ...]]:
    out: dict[int, tuple[str, ...]] = {}
    for f in fields:
        path = (*prefix, f.name)
        out[f.id] = path
        out.update(_field_paths(f.children, path))
    return out


def candidate_ranges(
    ds: LanceDataset, expr: pc.Expression, fragments: Sequence[DataFragment]
) -> RowRanges | None:
    """:func:`prune` with the dataset's ZONEMAP indices (``None``: read everything)."""
    from lance_format.dataset.indices import dataset_indices
    from lance_format.dataset.zonemap import load_zonemap

    indices = [i for i in dataset_indices(ds) if i.kind == "ZoneMap" and len(i.fields) == 1]
    if not indices:
        return None
    paths = _field_paths(ds.lance_schema.fields)
    text = str(expr)
    zonemaps: dict[tuple[str, ...], list[ZoneMap]] = {}
    for index in indices:
        path = paths.get(index.fields[0])
        if path is None or path[-1] not in text:  # dropped column, or not in the filter
            continue
        zonemaps.setdefault(path, []).append(load_zonemap(ds, index))
    return prune(expr, fragments, zonemaps)
