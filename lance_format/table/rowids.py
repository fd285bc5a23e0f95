"""Stable row ids: a fragment's ``RowIdSequence`` to and from numpy arrays."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.table import _serde

__all__ = ["decode_row_ids", "encode_row_ids"]


def decode_row_ids(data: bytes, path: str) -> npt.NDArray[np.uint64]:
    """The row ids of a serialized ``RowIdSequence``, in physical row order."""
    return _serde.decode_row_ids(data, path)


def encode_row_ids(ids: npt.NDArray[np.uint64]) -> bytes:
    """A serialized ``RowIdSequence`` (one range when the ids are contiguous)."""
    return _serde.row_ids_bytes(ids)
