"""Takes: rows by row id or logical offset, in the order asked, within the take-size limit."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from flight_server.catalog import Catalog
from flight_server.handlers.scan import open_version
from flight_server.requests import TakeRequest
from flight_server.streams import estimate_row_bytes
from lance_format import LanceDataset
from lance_format.core.errors import InvalidInputError

__all__ = ["TAKE_CHUNK_BYTES", "TAKE_CHUNK_ROWS", "check_take_size", "take_batches", "take_rows"]

#: Bytes of rows a streamed take materializes at once (estimated from the column types): a take
#: is sent in chunks of about this size, so an unread take holds one chunk, not all its rows.
#: 8 MiB keeps the per-chunk overhead (one engine take each) under 1% for typical rows.
TAKE_CHUNK_BYTES = 8 * 1024 * 1024
#: Fewest rows per chunk, however wide the rows: a take's fixed cost is paid per chunk.
MIN_TAKE_CHUNK_ROWS = 256
#: Most rows per chunk, however narrow the rows: each chunk is one turn of the server's fair work
#: scheduler (flight_server.fairness), so a chunk bounds how long another client's small take
#: waits behind a big take. 16,384 rows of a few columns take a few milliseconds; the fixed cost
#: per chunk stays a small part of it.
TAKE_CHUNK_ROWS = 16_384


def check_take_size(count: int, max_rows: int) -> None:
    """Refuse takes above ``limits.maxTakeRows`` (a scan in disguise, buffered whole in memory)."""
    if count > max_rows:
        raise InvalidInputError(
            f"take of {count} rows exceeds the server limit of {max_rows} (limits.maxTakeRows); "
            "use a scan or split the take"
        )


def take_rows(
    ds: LanceDataset,
    req: TakeRequest,
    row_ids: npt.NDArray[np.uint64] | None,
    indices: npt.NDArray[np.uint64] | None,
) -> pa.Table:
    """Rows of ``ds`` by ``row_ids`` or ``indices`` with ``req``'s columns and options."""
    columns = list(req.columns) if req.columns is not None else None
    if row_ids is not None:
        return ds.take_rows(
            row_ids, columns, with_row_id=req.with_row_id, with_row_address=req.with_row_address
        )
    if indices is None:
        raise InvalidInputError("a take needs row_ids or indices")
    return ds.take(indices, columns, with_row_id=req.with_row_id, with_row_address=req.with_row_address)


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    if table.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    return table.combine_chunks().to_batches()[0]


def take_batches(
    catalog: Catalog,
    req: TakeRequest,
    max_rows: int,
    chunk_bytes: int = TAKE_CHUNK_BYTES,
    chunk_rows: int = TAKE_CHUNK_ROWS,
) -> tuple[pa.Schema, int, Iterator[pa.RecordBatch]]:
    """A take as a lazy stream of batches of about ``chunk_bytes`` (at most ``chunk_rows`` rows)
    each, in the order asked.

    Returns the schema, the estimated bytes of the first batch and the batches; the rows of a
    chunk are read only when the stream asks for it (after the previous one was sent).
    """
    check_take_size(req.count, max_rows)
    ds = open_version(catalog, req.dataset, req.version, req.tag)
    by_row_id = req.row_ids is not None
    chosen = req.row_ids if by_row_id else req.indices
    if chosen is None:
        raise InvalidInputError("a take needs row_ids or indices")
    empty = np.zeros(0, np.uint64)
    schema = take_rows(ds, req, empty if by_row_id else None, None if by_row_id else empty).schema
    row_bytes = estimate_row_bytes(schema)
    step = max(MIN_TAKE_CHUNK_ROWS, min(chunk_rows, chunk_bytes // row_bytes))
    ids = chosen

    def chunk(lo: int) -> pa.RecordBatch:
        part = ids[lo : lo + step]
        return _one_batch(take_rows(ds, req, part if by_row_id else None, None if by_row_id else part))

    return schema, min(len(ids), step) * row_bytes, _Chunks(chunk, range(0, len(ids), step))


class _Chunks(Iterator[pa.RecordBatch]):
    """A take's batches, one per chunk start, read when asked for; says how many are left
    (``__length_hint__``), so the fair scheduler needs no turn to learn the take is over."""

    def __init__(self, read: Callable[[int], pa.RecordBatch], starts: range) -> None:
        self._read = read
        self._starts = iter(starts)
        self._left = len(starts)

    def __next__(self) -> pa.RecordBatch:
        lo = next(self._starts)
        self._left -= 1
        return self._read(lo)

    def __length_hint__(self) -> int:
        return self._left
