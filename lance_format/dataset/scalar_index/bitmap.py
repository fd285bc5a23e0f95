"""BITMAP scalar indices in pylance's layout.

One Lance file, ``_indices/{uuid}/bitmap_page_lookup.lance``: a row per distinct value, sorted
(null first), with ``keys`` the value and ``bitmaps`` the serialized set of its rows
(:mod:`.rowid_map`). A search selects keys and unions their sets.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.scalar_index.queries import Query, key_mask, nulls_first_order
from lance_format.dataset.scalar_index.rowid_map import decode_row_set, encode_row_set
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.io.store import ObjectStore

__all__ = ["BITMAP_TYPE_URL", "BitmapIndex", "write_bitmap", "write_bitmap_lookup"]

#: ``google.protobuf.Any`` type of BITMAP details, as pylance writes it.
BITMAP_TYPE_URL = "/lance.table.BitmapIndexDetails"
LOOKUP_FILE = "bitmap_page_lookup.lance"


@dataclass
class BitmapIndex:
    """An opened BITMAP index (keys and serialized row sets in memory)."""

    keys: pa.Array | pa.ChunkedArray
    bitmaps: pa.Array | pa.ChunkedArray
    where: str

    @staticmethod
    def open(store: ObjectStore, folder: str, sizes: dict[str, int]) -> BitmapIndex:
        """Read the index in ``folder`` (``_indices/{uuid}``)."""
        key = f"{folder}/{LOOKUP_FILE}"
        table = LanceFileReader(key, store=store, size=sizes.get(LOOKUP_FILE)).read_all().to_table()
        return BitmapIndex(table.column("keys"), table.column("bitmaps"), f"{store.uri}/{key}")

    @property
    def nbytes(self) -> int:
        """Memory held."""
        return int(self.keys.nbytes + self.bitmaps.nbytes)

    def search(
        self, query: Query, whole_fragment: Callable[[int], npt.NDArray[np.uint64]]
    ) -> npt.NDArray[np.uint64]:
        """The sorted row ids (addresses) whose value the query selects."""
        picked = np.flatnonzero(key_mask(self.keys, query))
        sets = [decode_row_set(self.bitmaps[int(i)].as_py(), whole_fragment, self.where) for i in picked]
        return np.unique(np.concatenate(sets)) if sets else np.zeros(0, np.uint64)


def write_bitmap(
    store: ObjectStore, folder: str, values: pa.Array | pa.ChunkedArray, ids: npt.NDArray[np.uint64]
) -> tuple[tuple[str, int], ...]:
    """Write the index of ``values`` at rows ``ids``; the ``(file, size)`` pairs written."""
    data = pa.table({"v": values, "id": pa.array(ids, pa.uint64())})
    data = data.take(nulls_first_order(values, np.asarray(ids, dtype=np.uint64)))
    vals = data.column("v").combine_chunks()
    ids_sorted = data.column("id").to_numpy()
    if len(vals):
        # Group boundaries: where the value changes (null to null is no change).
        same = pc.fill_null(pc.equal(vals[1:], vals[:-1]), False).to_numpy(zero_copy_only=False)
        both_null = (~pc.is_valid(vals[1:]).to_numpy(zero_copy_only=False)) & (
            ~pc.is_valid(vals[:-1]).to_numpy(zero_copy_only=False)
        )
        if pa.types.is_floating(vals.type):
            # NaN != NaN: without this every NaN row was a key of its own, and pylance, which
            # expects each key once, found only one of them (``f > 1.5`` lost NaN rows).
            nan = pc.fill_null(pc.is_nan(vals), False).to_numpy(zero_copy_only=False)
            both_null |= nan[1:] & nan[:-1]
        starts = np.concatenate([[0], np.flatnonzero(~(same | both_null)) + 1])
    else:
        starts = np.zeros(0, np.int64)
    ends = np.append(starts[1:], len(vals)) if len(starts) else starts  # no rows: no groups
    keys = vals.take(pa.array(starts, pa.int64())) if len(starts) else pa.array([], vals.type)
    bitmaps = [encode_row_set(ids_sorted[s:e]) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
    return write_bitmap_lookup(store, folder, keys, bitmaps)


def write_bitmap_lookup(
    store: ObjectStore, folder: str, keys: pa.Array | pa.ChunkedArray, bitmaps: list[bytes]
) -> tuple[tuple[str, int], ...]:
    """Write the lookup file of a BITMAP index: ``keys`` (sorted, null first) and each key's
    serialized row set; the ``(file, size)`` pairs written."""
    schema = pa.schema(
        [pa.field("keys", keys.type), pa.field("bitmaps", pa.binary())],
        metadata={"lance:index_stats": json.dumps({"num_bitmaps": len(bitmaps)}, separators=(",", ":"))},
    )
    table = pa.table([keys, pa.array(bitmaps, pa.binary())], schema=schema)
    writer = LanceFileWriter(f"{folder}/{LOOKUP_FILE}", schema, version="2.2", store=store)
    if table.num_rows:
        writer.write_batch(table)
    writer.close()
    return ((LOOKUP_FILE, writer.size),)
