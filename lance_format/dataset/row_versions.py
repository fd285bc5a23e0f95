"""Row versions: which dataset version created each row and which last updated it.

Fragments of a dataset with stable row ids record them as run-length sequences (pylance's
``_row_created_at_version`` and ``_row_last_updated_at_version``). New rows (appends, inserts)
get the committing version for both at commit; rows an update or a merge-insert rewrites keep
their creation version and get the committing version as their last update (also at commit, so
a rebased commit records the version it lands as); a compaction carries both over unchanged.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from lance_format.table.rowids import encode_row_versions

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["CREATED", "UPDATED", "split_versions", "versions_at"]

#: Which sequence of a fragment (``FragmentReader.row_versions``).
CREATED = "created"
UPDATED = "updated"


def versions_at(ds: Snapshot, addresses: npt.NDArray[np.uint64], which: str) -> npt.NDArray[np.uint64]:
    """The ``which`` version of the rows at ``addresses`` (fragment id << 32 | offset), in order."""
    addresses = np.asarray(addresses, dtype=np.uint64)
    out = np.empty(len(addresses), dtype=np.uint64)
    frag_ids = (addresses >> np.uint64(32)).astype(np.int64)
    offsets = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
    by_id = ds.fragment_index().by_id
    for fid in np.unique(frag_ids).tolist():
        at = frag_ids == fid
        out[at] = ds.fragment_reader(by_id[fid]).row_versions(which)[offsets[at]]
    return out


def split_versions(versions: npt.NDArray[np.uint64], sizes: list[int]) -> list[bytes]:
    """``versions`` cut into consecutive pieces of ``sizes`` rows, each as a serialized sequence
    (one per new fragment, in order)."""
    bounds = np.cumsum([0, *sizes])
    return [encode_row_versions(versions[a:b]) for a, b in itertools.pairwise(bounds.tolist())]
