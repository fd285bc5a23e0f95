"""Row-id sets as Lance serializes them (``RowIdTreeMap``): one Roaring bitmap per fragment.

Layout: ``u32`` count, then per fragment ``u32`` fragment id, ``u32`` byte size and that many
bytes of a portable Roaring bitmap of row offsets; size 0 means every row of the fragment.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from lance_format.core.errors import CorruptFileError

__all__ = ["decode_row_set", "encode_row_set"]

U64 = npt.NDArray[np.uint64]


def encode_row_set(addresses: U64) -> bytes:
    """The serialized set of row addresses ``fragment << 32 | offset`` (sorted or not)."""
    addrs = np.unique(np.asarray(addresses, dtype=np.uint64))
    frags = (addrs >> np.uint64(32)).astype(np.uint32)
    cuts = np.flatnonzero(np.diff(frags)) + 1
    parts = [struct.pack("<I", len(cuts) + 1 if len(addrs) else 0)]
    for group in np.split(addrs, cuts) if len(addrs) else []:
        body = BitMap((group & np.uint64(0xFFFFFFFF)).astype(np.uint32)).serialize()
        parts.append(struct.pack("<II", int(group[0] >> np.uint64(32)), len(body)))
        parts.append(body)
    return b"".join(parts)


def decode_row_set(data: bytes, whole_fragment: Callable[[int], U64], where: str) -> U64:
    """The sorted row addresses of a serialized set (``whole_fragment(id)``: a size-0 entry)."""
    try:
        (count,) = struct.unpack_from("<I", data, 0)
        pos, out = 4, []
        for _ in range(count):
            frag, size = struct.unpack_from("<II", data, pos)
            pos += 8
            if size == 0:
                out.append(whole_fragment(frag))
                continue
            offsets = np.asarray(BitMap.deserialize(data[pos : pos + size]).to_array(), dtype=np.uint64)
            pos += size
            out.append((np.uint64(frag) << np.uint64(32)) | offsets)
    except (struct.error, ValueError) as e:
        raise CorruptFileError(where, f"bad row id set: {e}") from None
    return np.sort(np.concatenate(out)) if out else np.zeros(0, np.uint64)
