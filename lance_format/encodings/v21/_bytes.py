"""Vectorized byte gathering over a batch of buffers (one numpy pass, no per-buffer loop).

A :class:`Bufs` is ``K`` byte strings that live inside one numpy array (``blob``) at
``starts[k]`` with ``sizes[k]`` bytes; mini-block chunks, their level buffers and their value
buffers are all handled this way so a whole batch of chunks decodes with a few numpy calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import types
from numba.extending import intrinsic

from lance_format.core.buffers import concat_bytes, empty_bytes
from lance_format.core.jit import kernel, warm

__all__ = ["Bufs", "gather", "read_uint", "single", "store_u64", "warm_up"]

U8 = npt.NDArray[np.uint8]

# Mean range length from which :func:`gather` copies slices (one Python step per range, ~0.3 us)
# instead of the compiled byte copy: break-even is near 50-100 bytes, so 256 keeps
# short take ranges on the kernel and sends full reads' chunk buffers (KiBs) to slices.
SLICE_GATHER_MIN_BYTES = 256

_UINT_LE: dict[int, np.dtype[Any]] = {2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}
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
    regular = _regular_gather(blob, starts, lengths)
    if regular is not None:
        return regular
    if int(lengths.sum()) >= SLICE_GATHER_MIN_BYTES * len(starts):
        # Long ranges (whole chunks' values): copying slices beats building an index per byte.
        return concat_bytes([blob[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)])
    # Short ranges (takes, chunks of small values): one compiled pass, no index per byte.
    out = empty_bytes(int(lengths[nonempty].sum()))
    _gather(blob, starts, lengths, out)
    return out


def _regular_gather(blob: U8, starts: I64, lengths: I64) -> U8 | None:
    """One strided copy when the ranges are evenly spaced and equally long, the last excepted
    (the value buffers of a page's equal chunks); None otherwise."""
    k = len(starts)
    if k < 3:
        return None
    step, width = int(starts[1] - starts[0]), int(lengths[0])
    if width <= 0 or step < width:
        return None
    if bool((np.diff(starts[:-1]) != step).any()) or bool((lengths[:-1] != width).any()):
        return None
    body = np.lib.stride_tricks.as_strided(blob[int(starts[0]) :], shape=(k - 1, width), strides=(step, 1))
    last_start, last_len = int(starts[-1]), int(lengths[-1])
    out = empty_bytes((k - 1) * width + last_len)
    out[: (k - 1) * width].reshape(k - 1, width)[...] = body
    out[(k - 1) * width :] = blob[last_start : last_start + last_len]
    return out


@intrinsic
def store_u64(typingctx: Any, arr: Any, idx: Any, val: Any) -> Any:  # pragma: no cover - compiled
    """``arr[idx : idx + 8] = val`` (little-endian u64) as one unaligned store; ``arr`` is u8."""
    sig = types.void(arr, idx, val)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        data, i, v = args
        ary = context.make_array(signature.args[0])(context, builder, data)
        word = context.get_value_type(types.uint64).as_pointer()
        ptr = builder.bitcast(builder.gep(ary.data, [i]), word)
        builder.store(v, ptr).align = 1
        return context.get_dummy_value()

    return sig, codegen


@kernel
def _gather(blob: U8, starts: I64, lengths: I64, out: U8) -> None:  # pragma: no cover - compiled
    pos = 0
    for i in range(starts.shape[0]):
        n = lengths[i]
        if n > 0:
            s = starts[i]
            out[pos : pos + n] = blob[s : s + n]
            pos += n


def warm_up() -> None:
    """Compile (or load) the gather kernel for writable and read-only blobs."""
    warm(
        gather,
        np.arange(8, dtype=np.uint8),
        np.array([0, 4], np.int64),
        np.array([2, 3], np.int64),
        readonly=(0,),
    )


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
    n = len(positions)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    if n == 1:
        # One integer (a take's chunk header): plain Python is several numpy calls cheaper.
        p = int(positions[0])
        if p < 0 or p + width > len(blob):
            raise ValueError("integer read outside the data read")
        return np.array([int.from_bytes(blob[p : p + width].tobytes(), "little")], dtype=np.uint64)
    if int(positions.min()) < 0 or int(positions.max()) + width > len(blob):
        raise ValueError("integer read outside the data read")
    if width == 1:
        return blob[positions].astype(np.uint64)
    # An overlapping view with one integer starting at every byte: any alignment, one gather.
    words = np.ndarray(
        (len(blob) - width + 1,), dtype=_UINT_LE[width], buffer=np.ascontiguousarray(blob), strides=(1,)
    )
    return words[positions].astype(np.uint64)
