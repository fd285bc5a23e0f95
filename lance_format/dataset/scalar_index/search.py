"""Answering filters with BTREE and BITMAP indices, and building them.

A filter's IR tree is reduced to the row ids its index-answerable parts select: comparisons,
``IN``, ``BETWEEN`` and ``IS NULL`` on an indexed column are searched; ``AND`` intersects what its
known parts select, ``OR`` unions (unknown if any part is), anything else is unknown (every row).
The rows selected become row ranges of the fragments the indices cover; fragments they do not
cover (appended since) are read whole. The scan still applies the filter to what it reads, so an
index changes what is read, never what is returned; deleted rows an index still lists are dropped
by the scan's deletion mask.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import InvalidInputError
from lance_format.dataset.expr import (
    FLIPPED,
    And,
    Between,
    Column,
    Compare,
    InList,
    IsNull,
    Literal,
    Node,
    Or,
)
from lance_format.dataset.scalar_index.bitmap import BITMAP_TYPE_URL, BitmapIndex, write_bitmap
from lance_format.dataset.scalar_index.btree import BTREE_TYPE_URL, BTreeIndex, write_btree
from lance_format.dataset.scalar_index.queries import InSet, IsNullQuery, Query, Range
from lance_format.table.model import DataFragment, IndexMetadata

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["INDEX_KINDS", "build_index", "index_ranges", "intersect_ranges"]

#: ``{fragment id: sorted disjoint [start, stop) physical row ranges}`` (as :mod:`..pruning`).
RowRanges = dict[int, list[tuple[int, int]]]
U64 = npt.NDArray[np.uint64]
#: Index kinds (``IndexMetadata.kind``) answered here.
INDEX_KINDS = ("BTree", "Bitmap")


def merge_gap_rows(ds: Snapshot) -> int:
    """Matching rows this close are read as one range: engine setting ``index_merge_gap_rows`` of
    the snapshot's session (``LANCE_FORMAT_INDEX_MERGE_GAP_ROWS``; :mod:`lance_format.core.config`
    says why its default)."""
    return ds.session.setting("index_merge_gap_rows")


#: Bytes charged per cached open index beyond its arrays.
_INDEX_OVERHEAD_BYTES = 1024


#: The first BTREE ``index_version`` whose rows are row addresses even when the dataset has stable
#: row ids: pylance 14.0.2 writes version 1 (addresses) on stable-row-id datasets and 0 (row ids,
#: which equal addresses there) otherwise; its BITMAP stays 0 with stable ids. Ours write 0.
BTREE_ADDRESS_VERSION = 1


def holds_addresses(meta: IndexMetadata) -> bool:
    """Whether an index's rows are row addresses rather than stable row ids (on a dataset with
    stable row ids; without them the two are the same)."""
    return meta.kind == "BTree" and (meta.index_version or 0) >= BTREE_ADDRESS_VERSION


class _Opened:
    """One index with its column path, opened lazily and cached in its session's metadata cache."""

    def __init__(self, ds: Snapshot, meta: IndexMetadata) -> None:
        self.ds, self.meta = ds, meta

    def search(self, query: Query) -> U64:
        ds, meta = self.ds, self.meta
        ckey = (ds.store.uri, "scalar_index", meta.uuid)
        cache = ds.cache.metadata  # the session's metadata cache
        index: BTreeIndex | BitmapIndex | None = cache.get(ckey)
        if index is None:
            folder, sizes = f"_indices/{meta.uuid}", dict(meta.files)
            index = (
                BTreeIndex.open(ds.store, folder, sizes)
                if meta.kind == "BTree"
                else BitmapIndex.open(ds.store, folder, sizes)
            )
            cache.put(ckey, index, index.nbytes + _INDEX_OVERHEAD_BYTES)
        if isinstance(index, BTreeIndex):
            ids = index.search(query)
        else:
            ids = index.search(query, self._whole_fragment)
        if ds.has_stable_row_ids and not holds_addresses(meta):
            # The index holds stable ids: to addresses (unknown ones drop).
            from lance_format.dataset.take import stable_ids_to_addresses

            addrs = stable_ids_to_addresses(ds, ids)
            ids = np.sort(addrs[addrs != np.iinfo(np.uint64).max])
        return ids

    def _whole_fragment(self, frag_id: int) -> U64:
        frag = next((f for f in self.ds.manifest.fragments if f.id == frag_id), None)
        n = 0 if frag is None else frag.physical_rows
        return (np.uint64(frag_id) << np.uint64(32)) | np.arange(n, dtype=np.uint64)


def _literal(node: Node, typ: pa.DataType) -> pa.Scalar | None:
    if not isinstance(node, Literal) or not node.value.is_valid:
        return None
    try:
        return node.value.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _leaf(node: Node) -> tuple[Column, Query] | None:
    """The column and value query of an index-answerable leaf (``None``: not one)."""
    if isinstance(node, Compare) and node.op != "ne":
        col, other, op = node.left, node.right, node.op
        if not isinstance(col, Column):
            col, other, op = node.right, node.left, FLIPPED[node.op]
        if not isinstance(col, Column):
            return None
        v = _literal(other, col.type)
        if v is None:
            return None
        if op == "eq":
            return col, InSet(pa.array([v.as_py()], col.type))
        low = v if op in ("gt", "ge") else None
        high = v if op in ("lt", "le") else None
        return col, Range(low, op == "ge", high, op == "le")
    if isinstance(node, InList) and isinstance(node.value, Column):
        col = node.value
        vals = [_literal(o, col.type) for o in node.options]
        if any(v is None for v in vals):
            return None
        return col, InSet(pa.array([v.as_py() for v in vals if v is not None], col.type))
    if isinstance(node, Between) and isinstance(node.value, Column):
        col = node.value
        lo, hi = _literal(node.low, col.type), _literal(node.high, col.type)
        if lo is None or hi is None:
            return None
        return col, Range(lo, True, hi, True)
    if isinstance(node, IsNull) and isinstance(node.arg, Column):
        return node.arg, IsNullQuery()
    return None


def _rows(node: Node, indices: dict[tuple[str, ...], _Opened], used: set[str]) -> U64 | None:
    """Row addresses ``node`` can be true on (``None``: unknown)."""
    if isinstance(node, And):
        known = [r for r in (_rows(a, indices, used) for a in node.args) if r is not None]
        if not known:
            return None
        out = known[0]
        for r in known[1:]:
            out = np.intersect1d(out, r, assume_unique=True)
        return out
    if isinstance(node, Or):
        parts = [_rows(a, indices, used) for a in node.args]
        if any(p is None for p in parts):
            return None
        return np.unique(np.concatenate([p for p in parts if p is not None]))
    leaf = _leaf(node)
    if leaf is None:
        return None
    col, query = leaf
    index = indices.get(col.path)
    if index is None or pa.types.is_floating(col.type):
        # Floats: NaN orders above every number in the filter's semantics, but compares false in
        # the key tests, so ranges could miss NaN rows; those columns are scanned.
        return None
    try:
        rows = index.search(query)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None  # keys of a type the query's values do not compare with: scan instead
    used.add(index.meta.uuid)
    return rows


def _ranges(addresses: U64, gap: int) -> RowRanges:
    """Runs of consecutive row offsets per fragment."""
    out: RowRanges = {}
    if not len(addresses):
        return out
    frags = (addresses >> np.uint64(32)).astype(np.int64)
    offs = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
    # Rows closer than ``gap`` (merge_gap_rows) share one range: a scan step per scattered row costs far
    # more than decoding the rows between them.
    cut = np.flatnonzero((np.diff(frags) != 0) | (np.diff(offs) > gap + 1)) + 1
    starts = np.concatenate([[0], cut])
    ends = np.append(cut, len(offs))
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        out.setdefault(int(frags[s]), []).append((int(offs[s]), int(offs[e - 1]) + 1))
    return out


def index_ranges(
    ds: Snapshot, tree: Node, fragments: Sequence[DataFragment], paths: dict[int, tuple[str, ...]]
) -> RowRanges | None:
    """Row ranges per fragment that may match ``tree``, from BTREE / BITMAP indices (``None``:
    no index helps). ``paths`` maps field ids to column paths."""
    from lance_format.dataset.indices import dataset_indices

    indices: dict[tuple[str, ...], _Opened] = {}
    for meta in dataset_indices(ds):
        if meta.kind in INDEX_KINDS and len(meta.fields) == 1 and meta.base_id is None:
            path = paths.get(meta.fields[0])
            if path is not None and path not in indices:
                indices[path] = _Opened(ds, meta)
    if not indices:
        return None
    used: set[str] = set()
    rows = _rows(tree, indices, used)
    if rows is None:
        return None
    covered = set.intersection(*(set(i.meta.fragment_ids) for i in indices.values() if i.meta.uuid in used))
    found = _ranges(rows, merge_gap_rows(ds))
    return {f.id: (found.get(f.id, []) if f.id in covered else [(0, f.physical_rows)]) for f in fragments}


def intersect_ranges(a: RowRanges | None, b: RowRanges | None) -> RowRanges | None:
    """Ranges both allow (``None`` allows everything)."""
    if a is None or b is None:
        return b if a is None else a
    out: RowRanges = {}
    for fid in a.keys() & b.keys():
        got, i, j = [], 0, 0
        ra, rb = a[fid], b[fid]
        while i < len(ra) and j < len(rb):
            lo, hi = max(ra[i][0], rb[j][0]), min(ra[i][1], rb[j][1])
            if lo < hi:
                got.append((lo, hi))
            if ra[i][1] < rb[j][1]:
                i += 1
            else:
                j += 1
        out[fid] = got
    return out


def build_index(ds: Snapshot, column: str, kind: str, name: str, scan: Callable[..., Any]) -> IndexMetadata:
    """Write a BTREE or BITMAP index of ``column`` over the live rows of ``ds``; its metadata.

    ``scan(columns=..., with_row_id=True)`` reads the column with row ids (stable ids when the
    dataset has them, as pylance indexes them).
    """
    field = ds.lance_schema.field_by_name(column)
    if field.children or pa.types.is_nested(field.to_arrow().type):
        raise InvalidInputError(f"cannot build a {kind} index on nested column {column!r}")
    table = scan(columns=[column], with_row_id=True).to_table()
    values, ids = table.column(column), table.column("_rowid").to_numpy()
    ident = str(uuid.uuid4())
    folder = f"_indices/{ident}"
    if kind == "BTREE":
        files, url = write_btree(ds.store, folder, values, ids), BTREE_TYPE_URL
    else:
        files, url = write_bitmap(ds.store, folder, values, ids), BITMAP_TYPE_URL
    return IndexMetadata(
        uuid=ident,
        name=name,
        fields=(field.id,),
        dataset_version=ds.version,
        fragment_ids=frozenset(f.id for f in ds.manifest.fragments),
        details_type_url=url,
        details=b"",
        index_version=0,
        created_at_ms=time.time_ns() // 1_000_000,
        files=files,
    )
