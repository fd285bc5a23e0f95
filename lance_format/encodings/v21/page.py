"""What a page reader hands back: the selected rows' levels and visible values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.core.records import fast_init
from lance_format.encodings.v21.model import RepDefLayer
from lance_format.encodings.v21.values import Values

__all__ = ["PageData", "row_entry_ranges"]

Levels = npt.NDArray[np.uint16]
I64 = npt.NDArray[np.int64]


@fast_init
@dataclass(frozen=True)
class PageData:
    """The selected rows of one page of one leaf column.

    Attributes
    ----------
    rep, defs:
        Repetition / definition level of every selected entry (None when the page has none).
    layers:
        Meaning of the levels, leaf first.
    num_entries:
        Entries selected (rows, when there are no repetition levels).
    values:
        The visible leaf values, in order (dictionary indices when ``dictionary`` is set).
    dictionary:
        The page dictionary, or None.
    """

    rep: Levels | None
    defs: Levels | None
    layers: tuple[RepDefLayer, ...]
    num_entries: int
    values: Values
    dictionary: Values | None = None


def row_entry_ranges(
    row_start_pos: I64, row_ids: I64, runs: I64, seg_end: I64, seg_of_start: I64
) -> tuple[I64, I64]:
    """Entry ``[start, stop)`` of each run of rows, from the positions where rows start.

    ``row_ids`` (sorted) names the row beginning at each ``row_start_pos``; ``seg_of_start`` is the
    contiguous stretch of entries each belongs to and ``seg_end`` where that stretch ends. A run
    ends where its next row starts when that row is in the same stretch, else at the stretch end.
    """
    k_s = np.searchsorted(row_ids, runs[:, 0])
    if len(k_s) and (int(k_s.max()) >= len(row_ids) or bool((row_ids[k_s] != runs[:, 0]).any())):
        raise ValueError("a selected row does not start in the data read")
    k_e = np.searchsorted(row_ids, runs[:, 1])
    seg = seg_of_start[k_s]
    k_e_c = np.minimum(k_e, len(row_ids) - 1)
    same = (k_e < len(row_ids)) & (row_ids[k_e_c] == runs[:, 1]) & (seg_of_start[k_e_c] == seg)
    stop = np.where(same, row_start_pos[k_e_c], seg_end[seg])
    return row_start_pos[k_s], stop
