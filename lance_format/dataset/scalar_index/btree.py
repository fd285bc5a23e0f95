"""BTREE scalar indices in pylance's layout.

Two Lance files under ``_indices/{uuid}/``: ``page_data.lance`` holds every indexed row as
``(values, ids)`` sorted by value (nulls first, then by row id), cut into pages of ``batch_size``
rows; ``page_lookup.lance`` holds one row per page, ``(min, max, null_count, page_idx)``, with the
page's first and last value (so ``min`` is null on a page holding nulls). A search reads the
lookup, then only the pages whose value range can hold a match.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.scalar_index.queries import InSet, IsNullQuery, Query, key_mask, nulls_first_order
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.io.store import ObjectStore

__all__ = ["BTREE_TYPE_URL", "DEFAULT_BTREE_BATCH_SIZE", "BTreeIndex", "write_btree", "write_btree_pages"]

#: ``google.protobuf.Any`` type of BTREE details, as pylance writes it.
BTREE_TYPE_URL = "/lance.table.BTreeIndexDetails"
#: Rows per page, pylance's default: a search reads whole pages, so smaller pages read less for
#: point lookups and more lookup entries for the same data.
DEFAULT_BTREE_BATCH_SIZE = 4096
DATA_FILE = "page_data.lance"
LOOKUP_FILE = "page_lookup.lance"


@dataclass
class BTreeIndex:
    """An opened BTREE index: its page lookup in memory, pages read on demand."""

    store: ObjectStore
    folder: str
    lookup: pa.Table
    batch_size: int
    data_size: int | None = None

    @staticmethod
    def open(store: ObjectStore, folder: str, sizes: dict[str, int]) -> BTreeIndex:
        """Read the page lookup of the index in ``folder`` (``_indices/{uuid}``)."""
        reader = LanceFileReader(f"{folder}/{LOOKUP_FILE}", store=store, size=sizes.get(LOOKUP_FILE))
        table = reader.read_all().to_table()
        meta = table.schema.metadata or {}
        batch = int(meta.get(b"batch_size", DEFAULT_BTREE_BATCH_SIZE))
        return BTreeIndex(store, folder, table, batch, sizes.get(DATA_FILE))

    @property
    def nbytes(self) -> int:
        """Memory held by the lookup."""
        return int(self.lookup.nbytes)

    def _pages(self, query: Query) -> npt.NDArray[np.int64]:
        lk = self.lookup
        if isinstance(query, IsNullQuery):
            hit = pc.greater(lk.column("null_count"), 0)
        else:
            if isinstance(query, InSet):
                values = query.values.drop_null()
                if not len(values):
                    return np.zeros(0, np.int64)
                low, high = pc.min(values), pc.max(values)
            else:
                low, high = query.low, query.high
            hit = pc.is_valid(lk.column("max"))  # a page of nulls only holds no value
            if low is not None:
                hit = pc.and_(hit, pc.greater_equal(lk.column("max"), low))
            if high is not None:
                # A null min (the page starts with nulls) is below everything.
                below = pc.fill_null(pc.less_equal(lk.column("min"), high), True)
                hit = pc.and_(hit, below)
        pages = lk.column("page_idx").to_numpy()
        return np.asarray(
            pages[np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False))], np.int64
        )

    def search(self, query: Query) -> npt.NDArray[np.uint64]:
        """The sorted row ids (addresses) whose value the query selects."""
        pages = np.unique(self._pages(query))
        if not len(pages):
            return np.zeros(0, np.uint64)
        reader = LanceFileReader(f"{self.folder}/{DATA_FILE}", store=self.store, size=self.data_size)
        total = reader.num_rows()
        # Runs of consecutive pages are read as one range.
        breaks = np.flatnonzero(np.diff(pages) != 1) + 1
        ids = []
        for run in np.split(pages, breaks):
            start = int(run[0]) * self.batch_size
            stop = min(total, (int(run[-1]) + 1) * self.batch_size)
            part = reader.read_range(start, stop - start).to_table()
            mask = key_mask(part.column("values"), query)
            ids.append(part.column("ids").to_numpy()[mask])
        return np.sort(np.concatenate(ids)).astype(np.uint64)


def write_btree(
    store: ObjectStore,
    folder: str,
    values: pa.Array | pa.ChunkedArray,
    ids: npt.NDArray[np.uint64],
    batch_size: int = DEFAULT_BTREE_BATCH_SIZE,
) -> tuple[tuple[str, int], ...]:
    """Write the index of ``values`` at rows ``ids``; the ``(file, size)`` pairs written."""
    data = pa.table({"values": values, "ids": pa.array(ids, pa.uint64())})
    order = nulls_first_order(values, np.asarray(ids, dtype=np.uint64))
    return write_btree_pages(store, folder, data.take(order), batch_size)


def write_btree_pages(
    store: ObjectStore, folder: str, data: pa.Table, batch_size: int = DEFAULT_BTREE_BATCH_SIZE
) -> tuple[tuple[str, int], ...]:
    """Write ``data`` (``values``, ``ids`` in index order) as the pages of a BTREE index in
    ``folder``, cut every ``batch_size`` rows, and its page lookup; the ``(file, size)`` pairs."""
    schema = pa.schema(
        [pa.field("values", data.schema.field("values").type), pa.field("ids", pa.uint64(), False)]
    )
    data = data.cast(schema)
    writer = LanceFileWriter(f"{folder}/{DATA_FILE}", schema, version="2.2", store=store)
    if data.num_rows:
        writer.write_batch(data)
    writer.close()
    starts = np.arange(0, data.num_rows, batch_size)
    vals = data.column("values")
    valid = pc.is_valid(vals).to_numpy(zero_copy_only=False)
    nulls = np.add.reduceat(~valid, starts) if len(starts) else np.zeros(0, np.int64)
    lookup_schema = pa.schema(
        [
            pa.field("min", vals.type),
            pa.field("max", vals.type),
            pa.field("null_count", pa.uint32(), False),
            pa.field("page_idx", pa.uint32(), False),
        ],
        metadata={"batch_size": str(batch_size), "range_partitioned": "false"},
    )
    ends = np.minimum(starts + batch_size, data.num_rows) - 1
    lookup = pa.table(
        [
            vals.take(pa.array(starts)) if len(starts) else pa.array([], vals.type),
            vals.take(pa.array(ends)) if len(starts) else pa.array([], vals.type),
            pa.array(nulls, pa.uint32()),
            pa.array(np.arange(len(starts)), pa.uint32()),
        ],
        schema=lookup_schema,
    )
    lw = LanceFileWriter(f"{folder}/{LOOKUP_FILE}", lookup_schema, version="2.2", store=store)
    if lookup.num_rows:
        lw.write_batch(lookup)
    lw.close()
    return ((DATA_FILE, writer.size), (LOOKUP_FILE, lw.size))
