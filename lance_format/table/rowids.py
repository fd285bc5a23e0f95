"""Stable row ids and row versions: a fragment's ``RowIdSequence`` and its
``RowDatasetVersionSequence`` (the version that created or last updated each row) to and from
numpy arrays."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.core.errors import CorruptFileError
from lance_format.table import _serde

__all__ = [
    "DEFAULT_ROW_VERSION",
    "decode_row_ids",
    "decode_row_versions",
    "encode_row_ids",
    "encode_row_versions",
]

#: The version of a row whose fragment records none (written without stable row ids, or by an
#: older writer): pylance reports 1 for ``_row_created_at_version`` and
#: ``_row_last_updated_at_version`` there.
DEFAULT_ROW_VERSION = 1


def decode_row_ids(data: bytes, path: str) -> npt.NDArray[np.uint64]:
    """The row ids of a serialized ``RowIdSequence``, in physical row order."""
    return _serde.decode_row_ids(data, path)


def encode_row_ids(ids: npt.NDArray[np.uint64]) -> bytes:
    """A serialized ``RowIdSequence`` (one range when the ids are contiguous)."""
    return _serde.row_ids_bytes(ids)


def decode_row_versions(data: bytes | None, num_rows: int, path: str) -> npt.NDArray[np.uint64]:
    """The version of each of a fragment's ``num_rows`` rows from its serialized
    ``RowDatasetVersionSequence`` (``None``: :data:`DEFAULT_ROW_VERSION` for every row)."""
    if data is None:
        return np.full(num_rows, DEFAULT_ROW_VERSION, dtype=np.uint64)
    out = _serde.decode_row_versions(data, path)
    if len(out) != num_rows:
        raise CorruptFileError(path, f"row version sequence covers {len(out)} rows of {num_rows}")
    return out


def encode_row_versions(versions: npt.NDArray[np.uint64]) -> bytes:
    """A serialized ``RowDatasetVersionSequence`` of per-row versions (runs of equal ones)."""
    return _serde.row_versions_bytes(versions)
