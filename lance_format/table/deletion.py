"""Deletion files: the deleted physical row offsets of one fragment.

Small sets are an Arrow IPC file with one column ``row_id: uint32 not null`` (zstd-compressed, as
pylance writes them); above :data:`BITMAP_THRESHOLD` rows, a portable Roaring bitmap. Files are
cumulative: each holds every offset deleted so far.
"""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.ipc as ipc
from pyroaring import BitMap

from lance_format.core.errors import CorruptFileError
from lance_format.io.store import ObjectStore
from lance_format.table.model import DeletionFile, DeletionFileType

__all__ = ["BITMAP_THRESHOLD", "read_deletion_file", "write_deletion_file"]

#: pylance switches to the Roaring form when more rows than this are deleted.
BITMAP_THRESHOLD = 5_000
_SCHEMA = pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])


def read_deletion_file(
    store: ObjectStore, fragment_id: int, d: DeletionFile, key: str | None = None
) -> npt.NDArray[np.uint32]:
    """The deleted offsets, sorted and unique (``key`` overrides the default location)."""
    key = key or d.key(fragment_id)
    data = store.read_all(key)
    path = f"{store.uri}/{key}"
    try:
        if d.file_type is DeletionFileType.BITMAP:
            return np.asarray(BitMap.deserialize(data).to_array(), dtype=np.uint32)
        reader = ipc.open_file(pa.BufferReader(data))
        if not reader.schema.equals(_SCHEMA):
            raise CorruptFileError(path, f"deletion file schema is {reader.schema}, expected {_SCHEMA}")
        table = reader.read_all()
    except (pa.ArrowException, ValueError, OSError) as e:
        raise CorruptFileError(path, f"cannot read deletion file: {e}") from None
    col = table.column(0)
    if col.null_count:
        raise CorruptFileError(path, "deletion file holds nulls")
    return np.unique(col.to_numpy())


def write_deletion_file(
    store: ObjectStore, fragment_id: int, read_version: int, offsets: npt.NDArray[np.integer]
) -> DeletionFile:
    """Write a (cumulative) deletion file and return its manifest entry."""
    rows = np.unique(np.asarray(offsets, dtype=np.uint32))
    file_id = random.getrandbits(63)
    if len(rows) > BITMAP_THRESHOLD:
        kind = DeletionFileType.BITMAP
        bm = BitMap(rows)
        data = bm.serialize()
    else:
        kind = DeletionFileType.ARROW_ARRAY
        sink = pa.BufferOutputStream()
        opts = ipc.IpcWriteOptions(compression="zstd")
        with ipc.new_file(sink, _SCHEMA, options=opts) as w:
            w.write_batch(pa.record_batch([pa.array(rows, pa.uint32())], schema=_SCHEMA))
        data = sink.getvalue().to_pybytes()
    d = DeletionFile(kind, read_version, file_id, len(rows))
    store.write(d.key(fragment_id), data)
    return d
