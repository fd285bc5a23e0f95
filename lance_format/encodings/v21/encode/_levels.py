"""Compiled step of the level walk (:mod:`lance_format.encodings.v21.encode.levels`): expanding the
entries of a list layer into one entry per item, in one pass instead of a dozen numpy passes."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lance_format.core.jit import kernel, warm

__all__ = ["expand_lists", "warm_up"]

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@kernel
def expand_lists(
    slots: I64, null_at: I64, kind: I64, starts: I64, offsets: I64, valid: Bools, depth: int
) -> tuple[I64, I64, I64, I64, bool, bool]:  # pragma: no cover - compiled
    """Entries below a list layer at outer-first ``depth``.

    A live entry (a slot, not null above) whose list is valid and not empty becomes one entry per
    item (slot ``offsets[slot] + j``; the first keeps the entry's ``starts``, the others start an
    item of list ``depth``). Any other entry stays single and invisible (slot -1); a null or empty
    list here marks it null at ``depth`` (``kind`` 1 for empty).

    Returns
    -------
    (slots, null_at, kind, starts, has_null, has_empty)
    """
    n = slots.shape[0]
    lengths = np.zeros(n, dtype=np.int64)
    here = np.zeros(n, dtype=np.int8)  # 1 = null list, 2 = empty list
    total = 0
    for e in range(n):
        s = slots[e]
        if s >= 0 and null_at[e] < 0:
            if not valid[s]:
                here[e] = 1
            else:
                ln = offsets[s + 1] - offsets[s]
                if ln > 0:
                    lengths[e] = ln
                else:
                    here[e] = 2
        total += lengths[e] if lengths[e] > 0 else 1
    new_slots = np.empty(total, dtype=np.int64)
    new_null = np.empty(total, dtype=np.int64)
    new_kind = np.empty(total, dtype=np.int64)
    new_starts = np.empty(total, dtype=np.int64)
    has_null = False
    has_empty = False
    p = 0
    for e in range(n):
        ln = lengths[e]
        if ln > 0:
            b = offsets[slots[e]]
            for j in range(ln):
                new_slots[p + j] = b + j
                new_null[p + j] = null_at[e]
                new_kind[p + j] = kind[e]
                new_starts[p + j] = depth
            new_starts[p] = starts[e]
            p += ln
        else:
            new_slots[p] = -1
            new_starts[p] = starts[e]
            if here[e]:
                new_null[p] = depth
                new_kind[p] = 1 if here[e] == 2 else 0
                has_null |= here[e] == 1
                has_empty |= here[e] == 2
            else:
                new_null[p] = null_at[e]
                new_kind[p] = kind[e]
            p += 1
    return new_slots, new_null, new_kind, new_starts, has_null, has_empty


def warm_up() -> None:
    """Compile (or load) the kernel (offsets may come from a read-only Arrow buffer)."""
    one = np.zeros(1, dtype=np.int64)
    warm(expand_lists, one, one - 1, one, one - 1, np.array([0, 1]), np.ones(1, np.bool_), 0, readonly=(4, 5))
