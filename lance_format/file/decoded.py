"""Decoded blocks: hot rows of a file kept as Arrow arrays, so repeated takes skip decoding.

A long-lived server sees the same rows again and again. Decoding them from Lance pages costs far
more than copying them out of an Arrow array (a 100-row take decodes hundreds of mini-blocks), so
this layer keeps *decoded* data in :data:`~lance_format.io.cache.DECODED_CACHE`, in blocks of
:data:`DECODED_BLOCK_ROWS` rows of one top-level field of one file. Keys name immutable objects
(store URI, file key, file size, the field's ids, block number), so entries never go stale.

Admission is by second touch: a take that meets a block for the first time reads it the ordinary
way (only the bytes its rows need) and remembers the touch; a block touched again is decoded whole
and cached. One-off random reads therefore never pay for decoding whole blocks, and a take never
decodes more than :data:`ADMIT_BLOCKS_PER_CALL` blocks on top of its own rows. Once the cache is
full, a block must have been touched :data:`ADMIT_TOUCHES_WHEN_FULL` times to displace others,
so a random workload larger than the cache does not thrash it.

Scans read cached blocks when every block of their range is there, and add the blocks they decode
only while the cache has room without evicting (a scan must not push out the hot set of the
takes; a dataset that fits is then scanned again from memory). Reads whose
:class:`~lance_format.io.cache.ReadPolicy` says so (``COLD``) neither use nor fill it. The cache is off
in-process (capacity 0) unless configured; the server turns it on (``cache.decodedBytes``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from cachetools import LRUCache

from lance_format.core.types import LanceField
from lance_format.io.cache import DECODED_CACHE, ByteCache, ReadPolicy

if TYPE_CHECKING:
    from lance_format.file.reader import LanceFileReader

__all__ = [
    "ADMIT_BLOCKS_PER_CALL",
    "ADMIT_TOUCHES_WHEN_FULL",
    "DECODED_BLOCK_ROWS",
    "AdmitBudget",
    "read_range_cached",
    "take_cached",
]

#: Rows per cached block: the reader's streaming chunk (64 Ki rows). Decoding one block of a
#: typical column costs 1-5 ms, small enough to admit during a take; fewer, larger blocks keep the
#: per-take bookkeeping (one lookup and one Arrow take per block touched) to a few dozen calls.
DECODED_BLOCK_ROWS = 64 * 1024
#: Whole blocks one take may decode for the cache on top of its own rows: bounds the extra latency
#: of a take that meets many newly hot blocks (8 blocks ~ 10-40 ms once, then sub-millisecond).
ADMIT_BLOCKS_PER_CALL = 8
#: Touches a block needs to be admitted while the cache is full (2 while it has room). A random
#: workload over more data than the cache touches most blocks rarely; requiring a third touch
#: keeps it from replacing blocks that are really hot.
ADMIT_TOUCHES_WHEN_FULL = 3
#: The cache counts as full above this fraction of its capacity (entries vary in size, so an LRU
#: near capacity evicts on most admissions).
FULL_FRACTION = 0.95
#: Bytes charged per cached block beyond its buffers: the Array object, its C++ array data, the
#: key tuple and the LRU's node take ~1.1 KiB (measured: 100,000 blocks of 8 int32 grew the resident
#: size by 1,158 bytes each, charged 32). Blocks of small files are tiny, so without it a 32 MiB
#: cache could hold a million of them, over 1 GiB.
BLOCK_OVERHEAD_BYTES = 1024
#: Touch counters remembered for blocks not (yet) cached: 64 Ki keys ~ a few MiB of Python objects.
TOUCH_MEMORY_KEYS = 64 * 1024

#: (store URI, "decoded", file key, file size, field ids, block)
_Key = tuple[Hashable, ...]

#: Touch counts per decoded-block cache, as of its generation: a cache cleared (or another
#: session's cache) starts from no touches, so blocks touched before do not get decoded whole on
#: their next touch as if they were hot now.
_touches: weakref.WeakKeyDictionary[ByteCache, tuple[int, LRUCache[_Key, int]]] = weakref.WeakKeyDictionary()
_touch_lock = threading.Lock()


def _touch_memory(cache: ByteCache) -> LRUCache[_Key, int]:
    """The touch counts of ``cache`` (under ``_touch_lock``)."""
    known = _touches.get(cache)
    if known is None or known[0] != cache.generation:
        known = _touches[cache] = (cache.generation, LRUCache(maxsize=TOUCH_MEMORY_KEYS))
    return known[1]


class AdmitBudget:
    """Whole blocks one logical take may still decode for the cache, shared by its fragments
    (which may be read on several threads).

    Parameters
    ----------
    blocks:
        The allowance; :data:`ADMIT_BLOCKS_PER_CALL` by default.
    """

    def __init__(self, blocks: int = ADMIT_BLOCKS_PER_CALL) -> None:
        self._left = blocks
        self._lock = threading.Lock()

    def claim(self, wanted: int) -> int:
        """Grant up to ``wanted`` blocks (fewer when the allowance runs out)."""
        with self._lock:
            got = max(0, min(wanted, self._left))
            self._left -= got
            return got


def _field_key(reader: LanceFileReader, field: LanceField) -> _Key:
    return reader.field_cache_key(field)


def _array_bytes(arr: pa.Array) -> int:
    return int(arr.get_total_buffer_size()) + BLOCK_OVERHEAD_BYTES


def _decode_block(reader: LanceFileReader, field: LanceField, block: int, policy: ReadPolicy) -> pa.Array:
    start = block * DECODED_BLOCK_ROWS
    rows = min(DECODED_BLOCK_ROWS, reader.num_rows() - start)
    return reader.view([field]).read_range(start, rows, policy=policy).to_table().column(0).combine_chunks()


def _admit(cache: ByteCache, keys: list[_Key], budget: AdmitBudget) -> list[_Key]:
    """Count a touch of each missing key; return those to decode now (as the budget allows)."""
    full = cache.nbytes >= cache.capacity * FULL_FRACTION
    need = ADMIT_TOUCHES_WHEN_FULL if full else 2
    due = []
    with _touch_lock:
        touches = _touch_memory(cache)
        for key in keys:
            n = touches.get(key, 0) + 1
            touches[key] = n
            if n >= need:
                due.append(key)
        granted = due[: budget.claim(len(due))] if due else []
        for key in granted:
            touches.pop(key, None)
    return granted


def take_cached(
    reader: LanceFileReader,
    offsets: npt.NDArray[np.int64],
    budget: AdmitBudget | None = None,
    cache: ByteCache | None = None,
    policy: ReadPolicy = ReadPolicy.CACHED,
) -> pa.Table:
    """Rows at ``offsets`` (physical, sorted unique is cheapest) of ``reader``'s projection.

    Fields whose touched blocks are all cached are gathered from them; the others are decoded by
    the ordinary take. Equal to ``reader.take_rows(offsets).to_table()``.

    Parameters
    ----------
    reader:
        An open file reader (or a projected view of one).
    offsets:
        Row offsets in the file, any order, repeats allowed.
    budget:
        Blocks this take may decode whole for the cache; share one between the fragments of a
        logical take. A fresh :class:`AdmitBudget` when omitted.
    cache:
        The decoded-block cache; :data:`~lance_format.io.cache.DECODED_CACHE` by default.
    policy:
        The caches this read may use (:attr:`ReadPolicy.COLD`: neither this one nor the pages).
    """
    cache = DECODED_CACHE if cache is None else cache
    if not cache.enabled or not len(offsets) or not policy.decoded_cache:
        return reader.take_rows(offsets, policy=policy).to_table()
    blocks = offsets // DECODED_BLOCK_ROWS
    if len(blocks) > 1 and not bool((offsets[1:] >= offsets[:-1]).all()):
        order = np.argsort(offsets, kind="stable")
        result = take_cached(reader, offsets[order], budget, cache, policy)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return result.take(pa.array(inverse))
    # Non-decreasing offsets: the rows of block b are one contiguous slice.
    if blocks[0] == blocks[-1]:
        block_list, bounds = [int(blocks[0])], [0, len(offsets)]
    else:
        uniq, first = np.unique(blocks, return_index=True)
        block_list, bounds = uniq.tolist(), np.append(first, len(offsets)).tolist()
    fields = reader.projection
    arrays: list[pa.Array | None] = []
    budget = AdmitBudget() if budget is None else budget
    for field in fields:
        base = _field_key(reader, field)
        keys = [(*base, b) for b in block_list]
        found = cache.get_many(keys)  # type: ignore[arg-type]
        missing = [k for k, v in zip(keys, found, strict=True) if v is None]
        if missing:
            admit = _admit(cache, missing, budget)
            block_of = dict(zip(keys, block_list, strict=True))
            fresh = {k: _decode_block(reader, field, block_of[k], policy) for k in admit}
            for k, arr in fresh.items():
                cache.put(k, arr, _array_bytes(arr))
            found = [v if v is not None else fresh.get(k) for k, v in zip(keys, found, strict=True)]
        blocks_of_field = [v for v in found if v is not None]
        if len(blocks_of_field) < len(found):
            arrays.append(None)
            continue
        parts = []
        for i, (b, arr) in enumerate(zip(block_list, blocks_of_field, strict=True)):
            local = offsets[bounds[i] : bounds[i + 1]] - b * DECODED_BLOCK_ROWS
            parts.append(arr.take(pa.array(local)))
        arrays.append(parts[0] if len(parts) == 1 else pa.concat_arrays(parts))
    return _merge(reader, fields, arrays, lambda view: view.take_rows(offsets, policy=policy).to_table())


def read_range_cached(
    reader: LanceFileReader,
    start: int,
    stop: int,
    cache: ByteCache | None = None,
    policy: ReadPolicy = ReadPolicy.CACHED,
) -> pa.Table:
    """Rows ``[start, stop)`` of ``reader``'s projection, from cached blocks where all are there.

    Fields it has to decode are admitted block by block only while the cache has room for them
    without evicting anything (a scan must not push out the hot set of the takes). Equal to
    ``reader.read_range(start, stop - start).to_table()``.
    """
    cache = DECODED_CACHE if cache is None else cache
    if not cache.enabled or stop <= start or not policy.decoded_cache:
        return reader.read_range(start, stop - start, policy=policy).to_table()
    first, last = start // DECODED_BLOCK_ROWS, (stop - 1) // DECODED_BLOCK_ROWS
    block_list = list(range(first, last + 1))
    fields = reader.projection
    arrays: list[pa.Array | pa.ChunkedArray | None] = []
    for field in fields:
        base = _field_key(reader, field)
        found = cache.get_many([(*base, b) for b in block_list]) if cache.nbytes else [None]
        cached = [v for v in found if v is not None]
        if len(cached) < len(block_list):
            arrays.append(None)
            continue
        parts = []
        for b, arr in zip(block_list, cached, strict=True):
            lo = max(start - b * DECODED_BLOCK_ROWS, 0)
            hi = min(stop - b * DECODED_BLOCK_ROWS, len(arr))
            parts.append(arr.slice(lo, hi - lo))
        arrays.append(parts[0] if len(parts) == 1 else pa.chunked_array(parts))
    table = _merge(
        reader, fields, arrays, lambda view: view.read_range(start, stop - start, policy=policy).to_table()
    )
    # Whole blocks only: the range starts on a block and ends on one (or at the end of the file).
    if start % DECODED_BLOCK_ROWS == 0 and (stop % DECODED_BLOCK_ROWS == 0 or stop == reader.num_rows()):
        for i, (field, arr) in enumerate(zip(fields, arrays, strict=True)):
            if arr is None:
                _admit_scanned(cache, reader, field, first, table.column(i))
    return table


def _admit_scanned(
    cache: ByteCache, reader: LanceFileReader, field: LanceField, first: int, column: pa.ChunkedArray
) -> None:
    """Cache the blocks of a decoded scan column while that evicts nothing."""
    base = _field_key(reader, field)
    for j, lo in enumerate(range(0, len(column), DECODED_BLOCK_ROWS)):
        piece = column.slice(lo, DECODED_BLOCK_ROWS)
        nbytes = piece.nbytes + BLOCK_OVERHEAD_BYTES
        if cache.nbytes + nbytes > cache.capacity * FULL_FRACTION:
            return
        # A copy: a slice would keep the whole chunk's buffers alive under a smaller charge.
        block = pa.concat_arrays(piece.chunks) if piece.num_chunks else piece.combine_chunks()
        cache.put((*base, first + j), block, _array_bytes(block))


def _merge(
    reader: LanceFileReader,
    fields: list[LanceField],
    arrays: list[pa.Array | pa.ChunkedArray | None],
    decode: Callable[[LanceFileReader], pa.Table],
) -> pa.Table:
    """A table of ``reader.schema`` from cached arrays, decoding the fields that have none."""
    todo = [f for f, a in zip(fields, arrays, strict=True) if a is None]
    if todo:
        decoded = decode(reader.view(todo))
        it = iter(decoded.columns)
        cols = [next(it) if a is None else a for a in arrays]
    else:
        cols = list(arrays)
    return pa.Table.from_arrays(cols, schema=reader.schema)
