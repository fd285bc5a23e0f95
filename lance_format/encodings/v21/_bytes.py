"""Vectorized byte gathering over a batch of buffers (one numpy pass, no per-buffer loop).

A :class:`Bufs` is ``K`` byte strings that live inside one numpy array (``blob``) at
``starts[k]`` with ``sizes[k]`` bytes; mini-block chunks, their level buffers and their value
buffers are all handled this way so a whole batch of chunks decodes with a few numpy calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.encodings.base import expand_ranges

__all__ = ["Bufs", "gather", "read_uint", "single"]

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Bufs:
    """``K`` byte strings inside ``blob``: ``blob[starts[k] : starts[k] + sizes[k]]``."""

    blob: U8
    starts: I64
    sizes: I64

    def __len__(self) -> int:
        return len(self.starts)

    def check(self) -> None:
        """Raise ``ValueError`` unless every buffer lies inside ``blob``."""
        if len(self.starts) and (
            int(self.starts.min()) < 0
            or int(self.sizes.min()) < 0
            or int((self.starts + self.sizes).max()) > len(self.blob)
        ):
            raise ValueError("buffer lies outside the data read")

    def one(self, k: int) -> U8:
        """Buffer ``k`` as a view."""
        s = int(self.starts[k])
        return self.blob[s : s + int(self.sizes[k])]


def single(data: bytes | memoryview | U8) -> Bufs:
    """A batch holding one buffer."""
    blob = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    return Bufs(blob, np.zeros(1, dtype=np.int64), np.array([len(blob)], dtype=np.int64))


def gather(blob: U8, starts: I64, lengths: I64) -> U8:
    """Concatenation of ``blob[s : s + n]`` for every start and length.

    Parameters
    ----------
    blob:
        The bytes.
    starts, lengths:
        One range per entry.

    Raises
    ------
    ValueError
        A range lies outside ``blob`` or is negative.
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(starts) == 0:
        return np.zeros(0, dtype=np.uint8)
    if int(lengths.min()) < 0 or int(starts.min()) < 0:
        raise ValueError("negative byte range")
    nonempty = lengths > 0
    if nonempty.any() and int((starts + lengths)[nonempty].max()) > len(blob):
        raise ValueError("byte range outside the data read")
    if len(starts) == 1:
        s = int(starts[0])
        return blob[s : s + int(lengths[0])]
    # Gather whole words when every range allows it: fewer index entries to build and follow.
    for width, dt in ((8, np.uint64), (4, np.uint32), (2, np.uint16)):
        if not bool(((starts | lengths) & (width - 1)).any()):
            usable = len(blob) - len(blob) % width
            words = blob[:usable].view(dt)[expand_ranges(starts // width, lengths // width)]
            return words.view(np.uint8)
    return blob[expand_ranges(starts, lengths)]


def read_uint(blob: U8, positions: I64, width: int) -> npt.NDArray[np.uint64]:
    """Little-endian unsigned integers at byte positions.

    Parameters
    ----------
    blob:
        The bytes.
    positions:
        Byte position of each integer.
    width:
        Bytes per integer: 1, 2, 4 or 8.

    Returns
    -------
    numpy.ndarray
        The integers as uint64.

    Raises
    ------
    ValueError
        A read would leave ``blob``.
    """
    positions = np.asarray(positions, dtype=np.int64)
    if len(positions) == 0:
        return np.zeros(0, dtype=np.uint64)
    if int(positions.min()) < 0 or int(positions.max()) + width > len(blob):
        raise ValueError("integer read outside the data read")
    dt = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    if width == 1:
        return blob[positions].astype(np.uint64)
    if not bool((positions & (width - 1)).any()):
        # Aligned reads: index a view of the whole buffer.
        usable = len(blob) - len(blob) % width
        return blob[:usable].view(dt)[positions // width].astype(np.uint64)
    idx = positions[:, None] + np.arange(width, dtype=np.int64)[None, :]
    raw = np.ascontiguousarray(blob[idx])
    return raw.view(dt).reshape(-1).astype(np.uint64)
