"""Remapping scalar indices after compaction, as pylance 14.0.2 does.

Compaction moves rows to new fragments, so their row addresses change. An index holding addresses
(every BTREE and BITMAP index without stable row ids; with stable row ids, BTREE indices of version
1) is rewritten under a new uuid: each old address becomes its new one, rows deleted before the
compaction are dropped, everything else keeps its order (a BTREE's pages are cut again, a BITMAP
keeps every key, even one left without rows). The Rewrite transaction records each as a
:class:`~lance_format.table.model.RewrittenIndex`; the manifest builder moves the index's coverage
to the new fragments. Indices holding stable row ids need no new files; zone maps and bloom filters
are never rewritten.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import NotSupportedError
from lance_format.dataset.scalar_index.bitmap import LOOKUP_FILE as BITMAP_FILE
from lance_format.dataset.scalar_index.bitmap import write_bitmap_lookup
from lance_format.dataset.scalar_index.btree import (
    DATA_FILE,
    DEFAULT_BTREE_BATCH_SIZE,
    LOOKUP_FILE,
    write_btree_pages,
)
from lance_format.dataset.scalar_index.rowid_map import decode_row_set, encode_row_set
from lance_format.dataset.scalar_index.search import holds_addresses
from lance_format.file import LanceFileReader
from lance_format.table.model import DataFragment, IndexMetadata, RewrittenIndex
from lance_format.table.transaction import FRAGMENT_ZONED_KINDS  # pylance leaves them on a rewrite

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["AddressMap", "indices_to_remap", "remap_indices"]

U64 = npt.NDArray[np.uint64]
#: Index kinds whose files can be remapped here.
REMAPPABLE_KINDS = ("BTree", "Bitmap")


@dataclass(frozen=True)
class AddressMap:
    """Where a rewrite moved rows: ``old`` live row addresses (sorted) to ``new`` ones; any other
    address of a ``rewritten`` fragment was a deleted row."""

    old: U64
    new: U64
    rewritten: frozenset[int]

    @staticmethod
    def of(old: U64, new_fragments: Sequence[DataFragment], rewritten: frozenset[int]) -> AddressMap:
        """The map of a rewrite that wrote the rows at ``old`` addresses, in order, into
        ``new_fragments`` (each filled from offset 0)."""
        new = [
            (np.uint64(f.id) << np.uint64(32)) | np.arange(f.physical_rows, dtype=np.uint64)
            for f in new_fragments
        ]
        new_all = np.concatenate(new) if new else np.zeros(0, np.uint64)
        old = np.asarray(old, dtype=np.uint64)
        if len(old) != len(new_all):
            raise ValueError(f"rewrite moved {len(old)} rows into {len(new_all)}")
        order = np.argsort(old, kind="stable")
        return AddressMap(old[order], new_all[order], rewritten)

    def apply(self, ids: U64) -> tuple[npt.NDArray[np.bool_], U64]:
        """Which of ``ids`` survive, and the survivors' new addresses (in the same order)."""
        ids = np.asarray(ids, dtype=np.uint64)
        frags = (ids >> np.uint64(32)).astype(np.int64)
        moved = np.isin(frags, np.fromiter(self.rewritten, np.int64, len(self.rewritten)))
        pos = np.minimum(np.searchsorted(self.old, ids), max(len(self.old) - 1, 0))
        found = moved & (self.old[pos] == ids) if len(self.old) else np.zeros(len(ids), bool)
        out = ids.copy()
        out[found] = self.new[pos[found]]
        keep = ~moved | found
        return keep, out[keep]


def indices_to_remap(ds: Snapshot, rewritten: set[int]) -> list[IndexMetadata]:
    """The indices of ``ds`` a rewrite of fragments ``rewritten`` must remap; refuses (before any
    work) when one of them is of a kind this engine cannot remap."""
    from lance_format.dataset.indices import dataset_indices

    out = []
    for meta in dataset_indices(ds):
        if not meta.fragment_ids & rewritten or meta.kind in FRAGMENT_ZONED_KINDS:
            continue
        if ds.has_stable_row_ids and not holds_addresses(meta):
            continue  # stable row ids survive the rewrite
        if meta.kind not in REMAPPABLE_KINDS or len(meta.fields) != 1 or meta.base_id is not None:
            raise NotSupportedError(
                f"compaction would have to remap index {meta.name!r} ({meta.kind or 'unknown kind'}"
                f"{', in another base' if meta.base_id is not None else ''}), which this engine "
                "cannot; drop the index or leave those fragments alone"
            )
        out.append(meta)
    return out


def remap_indices(
    ds: Snapshot, indices: Sequence[IndexMetadata], amap: AddressMap
) -> tuple[RewrittenIndex, ...]:
    """Write each of ``indices`` remapped by ``amap`` under a new uuid; what the Rewrite records."""
    out = []
    for meta in indices:
        ident = str(uuid.uuid4())
        old, new = f"_indices/{meta.uuid}", f"_indices/{ident}"
        sizes = dict(meta.files)
        if meta.kind == "BTree":
            files = _remap_btree(ds, old, new, sizes, amap)
        else:
            files = _remap_bitmap(ds, old, new, sizes, amap)
        out.append(
            RewrittenIndex(
                meta.uuid, ident, meta.details_type_url, meta.details, meta.index_version or 0, files
            )
        )
    return tuple(out)


def _remap_btree(
    ds: Snapshot, old: str, new: str, sizes: dict[str, int], amap: AddressMap
) -> tuple[tuple[str, int], ...]:
    lookup = LanceFileReader(f"{old}/{LOOKUP_FILE}", store=ds.store, size=sizes.get(LOOKUP_FILE))
    meta = lookup.read_all().to_table().schema.metadata or {}
    batch = int(meta.get(b"batch_size", DEFAULT_BTREE_BATCH_SIZE))
    reader = LanceFileReader(f"{old}/{DATA_FILE}", store=ds.store, size=sizes.get(DATA_FILE))
    data = reader.read_all().to_table()
    keep, ids = amap.apply(data.column("ids").to_numpy())
    data = data.filter(pa.array(keep)).set_column(1, "ids", pa.array(ids, pa.uint64()))
    return write_btree_pages(ds.store, new, data, batch)


def _remap_bitmap(
    ds: Snapshot, old: str, new: str, sizes: dict[str, int], amap: AddressMap
) -> tuple[tuple[str, int], ...]:
    key = f"{old}/{BITMAP_FILE}"
    table = LanceFileReader(key, store=ds.store, size=sizes.get(BITMAP_FILE)).read_all().to_table()
    physical = {f.id: f.physical_rows for f in ds.manifest.fragments}

    def whole(frag: int) -> U64:
        n = physical.get(frag, 0)
        return (np.uint64(frag) << np.uint64(32)) | np.arange(n, dtype=np.uint64)

    where = f"{ds.store.uri}/{key}"
    bitmaps = []
    for data in table.column("bitmaps").to_pylist():  # one set per distinct value
        _, ids = amap.apply(decode_row_set(data, whole, where))
        bitmaps.append(encode_row_set(ids))
    return write_bitmap_lookup(ds.store, new, table.column("keys"), bitmaps)
