"""Which fragments and row ranges of a scan can hold rows matching a filter, from zone statistics.

The filter's IR tree (:mod:`.expr`) is visited; every node gets two per-segment flags, *can be
true* and *can be false*, over-approximated from the zone statistics (min, max, null and NaN
counts) of ZONEMAP indices; a segment is a run of physical rows of one fragment inside which every
index used has one zone (or none). Kleene logic composes them: ``a AND b`` can be true only where
both can, ``NOT a`` swaps the flags, and a node that is not understood (arithmetic, casts of
columns, functions, columns without statistics) can be both. Rows of fragments an index does not
cover (appended after it was built) and rows outside its zones are unknown too. Only segments whose
filter *can be true* are read; the scan still applies the filter exactly, so pruning changes what
is read, never what is returned. Deleted rows only remove values, so statistics built before a
delete stay valid.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.types import LanceField
from lance_format.dataset.expr import (
    FLIPPED,
    And,
    Between,
    Call,
    Cast,
    Column,
    Compare,
    InList,
    IsBool,
    IsNan,
    IsNull,
    Like,
    Literal,
    Node,
    Not,
    Or,
    Visitor,
    exact_integer_literal,
    holds_out_of_range,
    walk,
)
from lance_format.dataset.zonemap import ZoneMap

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot
    from lance_format.table.model import DataFragment

__all__ = ["RowRanges", "candidate_ranges", "prune"]

#: ``{fragment id: sorted disjoint [start, stop) physical row ranges that may match}``.
RowRanges = dict[int, list[tuple[int, int]]]
Bools = npt.NDArray[np.bool_]
Flags = tuple[Bools, Bools]

#: IN lists longer than this are tested by their overall [min, max] instead of value by value
#: (one vectorised comparison per value and zone stays cheap up to here).
MAX_IN_VALUES = 64
#: Fragment ids and row offsets share one sort key: offsets are below 2**32.
_KEY_SHIFT = 33

#: IR comparison operators to the pyarrow function names the zone tests use.
_OPS = {
    "eq": "equal",
    "ne": "not_equal",
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
}


@dataclass
class _Zones:
    """One zone map mapped onto the segments: the zone of each segment (or -1)."""

    zm: ZoneMap
    zone_of: npt.NDArray[np.int64]


class _Pruner(Visitor[Flags]):
    """``(can be true, can be false)`` per segment of every node."""

    def __init__(self, seg_count: int, zones: dict[tuple[str, ...], list[_Zones]]) -> None:
        self.n = seg_count
        self.zones = zones

    def unknown(self) -> Flags:
        return np.ones(self.n, bool), np.ones(self.n, bool)

    def const(self, value: bool | None) -> Flags:
        return np.full(self.n, value is True), np.full(self.n, value is False)

    def generic(self, node: Node) -> Flags:
        return self.unknown()

    def visit_literal(self, node: Literal) -> Flags:
        v = node.value.as_py() if pa.types.is_boolean(node.type) or not node.value.is_valid else "?"
        return self.const(v) if v in (True, False, None) else self.unknown()

    def visit_and(self, node: And) -> Flags:
        t, f = self.visit(node.args[0])
        for a in node.args[1:]:
            at, af = self.visit(a)
            t, f = t & at, f | af
        return t, f

    def visit_or(self, node: Or) -> Flags:
        t, f = self.visit(node.args[0])
        for a in node.args[1:]:
            at, af = self.visit(a)
            t, f = t | at, f & af
        return t, f

    def visit_not(self, node: Not) -> Flags:
        t, f = self.visit(node.arg)
        return f, t

    def visit_isbool(self, node: IsBool) -> Flags:
        if node.value is None:
            return self.unknown()
        t, f = self.visit(node.arg)
        return (t if node.value else f), np.ones(self.n, bool)

    def visit_compare(self, node: Compare) -> Flags:
        left, right, op = node.left, node.right, node.op
        if not isinstance(left, Column) and isinstance(right, Column):
            left, right, op = right, left, FLIPPED[op]
        lit = _fold(right)
        if isinstance(left, Column) and lit is not None:
            # An integer literal in the column's type, as the scan compares (see expr_arrow).
            typed, side = exact_integer_literal(lit, left.type)
            if side:
                holds = holds_out_of_range(op, side)
                return self.leaf(left, lambda zm: _constant_on_valid(zm, holds))
            v = lit if typed is None else typed
            return self.leaf(left, lambda zm: _compare(zm, _OPS[op], v))
        return self.unknown()

    def visit_between(self, node: Between) -> Flags:
        return self.visit(And((Compare("ge", node.value, node.low), Compare("le", node.value, node.high))))

    def visit_inlist(self, node: InList) -> Flags:
        if not isinstance(node.value, Column):
            return self.unknown()
        t = node.value.type
        if (pa.types.is_integer(t) or pa.types.is_decimal(t)) and all(
            pa.types.is_integer(o.type) for o in node.options
        ):
            typed = (exact_integer_literal(o.value, t)[0] for o in node.options)
            kept = pa.array([v.as_py() for v in typed if v is not None], t)
            return self.leaf(node.value, lambda zm: _is_in(zm, kept, False))
        try:
            values = pa.array(
                [o.value.as_py() for o in node.options], node.options[0].type if node.options else None
            )
        except (pa.ArrowException, TypeError, ValueError):
            return self.unknown()
        return self.leaf(node.value, lambda zm: _is_in(zm, values, False))

    def visit_isnull(self, node: IsNull) -> Flags:
        if not isinstance(node.arg, Column):
            return self.unknown()
        return self.leaf(node.arg, lambda zm: _null_test(zm, "is_null", False))

    def visit_isnan(self, node: IsNan) -> Flags:
        if not isinstance(node.arg, Column):
            return self.unknown()
        return self.leaf(node.arg, lambda zm: _null_test(zm, "is_nan", False))

    def visit_like(self, node: Like) -> Flags:
        prefix = node.pattern[:-1]
        if (
            isinstance(node.arg, Column)
            and not node.ignore_case
            and node.pattern.endswith("%")
            and not re.search(r"[%_\\]", prefix)
        ):
            return self.leaf(node.arg, lambda zm: _starts_with(zm, prefix))
        return self.unknown()

    def visit_call(self, node: Call) -> Flags:
        if node.name == "starts_with" and len(node.args) == 2 and isinstance(node.args[0], Column):
            pattern = _fold(node.args[1])
            if pattern is not None and isinstance(pattern.as_py(), str):
                text = str(pattern.as_py())
                return self.leaf(node.args[0], lambda zm: _starts_with(zm, text))
        return self.unknown()

    def leaf(self, ref: Column, test: Callable[[ZoneMap], Flags | None]) -> Flags:
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
            if not covered.any():
                continue  # no segment in its zones (an index built on no rows: it has none)
            idx = np.where(covered, z.zone_of, 0)
            can_t &= np.where(covered, zt[idx], True)
            can_f &= np.where(covered, zf[idx], True)
        return can_t, can_f


def _fold(node: Node) -> pa.Scalar | None:
    """A literal operand (casts of literals folded), else ``None``."""
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Cast):
        inner = _fold(node.arg)
        if inner is not None:
            try:
                return inner.cast(node.to, safe=node.safe)
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
    if op != "equal":
        # A NaN orders above every number, one with the sign bit set below: a zone holding NaN
        # may satisfy any ordering comparison (and ``<>``), whatever its finite range.
        t = t | b.nan
    return t | b.unknown, fl | b.unknown


def _constant_on_valid(zm: ZoneMap, holds: bool) -> tuple[Bools, Bools]:
    """A test that is ``holds`` on every valid row (and NULL on NULL rows)."""
    some_valid = zm.null_count < zm.zone_length
    none = np.zeros(len(some_valid), bool)
    return (some_valid, none) if holds else (none, some_valid)


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
    # NaN is certain only where NaN (and NULL) fill the whole span.
    return _bounds(zm).nan, zm.nan_count + zm.null_count < zm.zone_length


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
    tree: Node,
    fragments: Sequence[DataFragment],
    zonemaps: dict[tuple[str, ...], list[ZoneMap]],
) -> RowRanges | None:
    """Row ranges per fragment that may hold rows matching the filter ``tree``.

    ``zonemaps`` maps column paths (``("a",)``, ``("s", "x")``) to their zone maps. ``None`` when
    nothing can be pruned (no statistics for the filter's columns).
    """
    if not zonemaps or not fragments:
        return None
    mentioned = _column_paths(tree)
    used = {p: zms for p, zms in zonemaps.items() if p in mentioned}
    if not used:
        return None
    flat = [zm for zms in used.values() for zm in zms]
    fids = np.array([f.id for f in fragments], dtype=np.int64)
    seg_f, seg_s, seg_e = _segments(fragments, flat)
    zones = {
        p: [_Zones(zm, _zone_of_segments(zm, fids, seg_f, seg_s)) for zm in zms] for p, zms in used.items()
    }
    can_true, _ = _Pruner(len(seg_f), zones).visit(tree)
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


def _column_paths(tree: Node) -> set[tuple[str, ...]]:
    return {n.path for n in walk(tree) if isinstance(n, Column)}


def _field_paths(fields: Sequence[LanceField], prefix: tuple[str, ...] = ()) -> dict[int, tuple[str, ...]]:
    out: dict[int, tuple[str, ...]] = {}
    for f in fields:
        path = (*prefix, f.name)
        out[f.id] = path
        out.update(_field_paths(f.children, path))
    return out


def candidate_ranges(ds: Snapshot, tree: Node, fragments: Sequence[DataFragment]) -> RowRanges | None:
    """:func:`prune` with the dataset's ZONEMAP indices (``None``: read everything)."""
    from lance_format.dataset.indices import dataset_indices
    from lance_format.dataset.scalar_index.search import index_ranges, intersect_ranges
    from lance_format.dataset.zonemap import load_zonemap

    paths = _field_paths(ds.lance_schema.fields)
    # BTREE / BITMAP indices select rows; zone maps narrow what is left.
    exact = index_ranges(ds, tree, fragments, paths)
    indices = [i for i in dataset_indices(ds) if i.kind == "ZoneMap" and len(i.fields) == 1]
    if not indices:
        return exact
    mentioned = _column_paths(tree)
    zonemaps: dict[tuple[str, ...], list[ZoneMap]] = {}
    for index in indices:
        path = paths.get(index.fields[0])
        if path is None or path not in mentioned:  # dropped column, or not in the filter
            continue
        zonemaps.setdefault(path, []).append(load_zonemap(ds, index))
    return intersect_ranges(exact, prune(tree, fragments, zonemaps))
