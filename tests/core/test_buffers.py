"""Large buffers of the read and decode paths come from Arrow's pool (no fresh pages per batch)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.core.buffers import POOL_MIN_BYTES, concat_bytes, empty, empty_bytes, pool_allocations
from lance_format.encodings.v21._bytes import gather
from lance_format.io.reader import RangeReader
from lance_format.io.store import LocalStore

# These tests count allocations from Arrow's pool; pyarrow 19 (our lowest) has no such counter.
pytestmark = pytest.mark.skipif(
    not hasattr(pa.MemoryPool, "num_allocations"), reason="this pyarrow cannot count pool allocations"
)


def test_large_buffers_come_from_the_pool_small_ones_do_not() -> None:
    before = pool_allocations()
    small = empty_bytes(POOL_MIN_BYTES - 1)
    assert pool_allocations() == before
    big = empty_bytes(POOL_MIN_BYTES)
    words = empty(POOL_MIN_BYTES // 8, np.uint64)
    assert pool_allocations() == before + 2
    for a in (small, big, words):
        assert a.flags.writeable
    assert words.dtype == np.uint64
    assert len(words) == POOL_MIN_BYTES // 8
    big[:] = 7  # writable all the way
    assert int(big.sum()) == 7 * POOL_MIN_BYTES


def test_concat_bytes_joins_into_one_pooled_buffer() -> None:
    parts = [b"ab", memoryview(b"c" * POOL_MIN_BYTES), np.frombuffer(b"de", dtype=np.uint8)]
    before = pool_allocations()
    got = concat_bytes(parts)
    assert pool_allocations() == before + 1
    assert got.tobytes() == b"ab" + b"c" * POOL_MIN_BYTES + b"de"
    assert concat_bytes([]).tobytes() == b""


def test_many_small_parts_are_joined_in_one_call_not_copied_part_by_part() -> None:
    # A take's chunk stretches (~100 of a few KiB per column): bytes.join, no pooled buffer filled
    # by a slice assignment per part (45 -> 21 us for 100 parts of 7.6 KB).
    from lance_format.core.buffers import JOIN_MAX_MEAN_PART_BYTES

    rng = np.random.default_rng(3)
    parts: list[bytes | memoryview | np.ndarray] = [
        rng.integers(0, 256, 7_600, dtype=np.uint8).tobytes() for _ in range(100)
    ]
    parts[1] = memoryview(parts[1])
    parts[2] = np.frombuffer(parts[2], dtype=np.uint8)
    before = pool_allocations()
    got = concat_bytes(parts)
    assert pool_allocations() == before
    assert got.tobytes() == b"".join(bytes(p) for p in parts)
    # Parts larger on average (a scan's chunks) still land in one pooled buffer.
    big = [b"x" * (JOIN_MAX_MEAN_PART_BYTES + 1)] * 8
    before = pool_allocations()
    assert concat_bytes(big).tobytes() == b"".join(big)
    assert pool_allocations() == before + 1


def test_local_scan_reads_land_in_pooled_buffers(tmp_path: Path) -> None:
    # A megabyte read (a scan's stretch of chunks) is one pooled buffer, not a fresh ``bytes``
    # whose every page faults in; small reads (takes) stay plain preads.
    data = os.urandom(2 * 1024 * 1024)
    (tmp_path / "f.bin").write_bytes(data)
    store = LocalStore(str(tmp_path))
    before = pool_allocations()
    got = store.read_ranges_view("f.bin", [(0, 1024 * 1024), (1024 * 1024, 1024 * 1024 + 100)])
    assert pool_allocations() == before + 1
    assert bytes(got[0]) == data[: 1024 * 1024]
    assert bytes(got[1]) == data[1024 * 1024 : 1024 * 1024 + 100]
    assert got[0].readonly
    before = pool_allocations()
    view = store.read_range_view("f.bin", 5, 5 + 3 * 1024 * 1024)  # past the end: short
    assert pool_allocations() == before + 1
    assert bytes(view) == data[5:]
    before = pool_allocations()
    (one,) = RangeReader(store, "f.bin").read([(100, 1024 * 1024)])
    assert pool_allocations() == before + 1
    assert bytes(one) == data[100 : 100 + 1024 * 1024]


def test_gathered_chunk_values_are_pooled() -> None:
    # The values of a page's equal chunks (one strided copy) and of uneven ones (slices) both
    # land in one pooled buffer.
    blob = np.arange(40 * 4096, dtype=np.uint64).view(np.uint8)
    starts = np.arange(40, dtype=np.int64) * 4096 * 8 + 8
    lengths = np.full(40, 4096 * 8 - 8, dtype=np.int64)
    for lens in (lengths, lengths - np.arange(40) * 8):
        before = pool_allocations()
        got = gather(blob, starts, lens)
        assert pool_allocations() == before + 1
        want = np.concatenate([blob[s : s + n] for s, n in zip(starts, lens, strict=True)])
        assert got.tobytes() == want.tobytes()


def test_dictionary_strings_are_built_in_pooled_buffers() -> None:
    # A dictionary-encoded string page: offsets and bytes in two pooled buffers (the bytes were
    # allocated inside the kernel before, fresh pages every page).
    from lance_format.encodings.v21._decode_kernels import dictionary_take

    words = [b"alpha", b"be", b"gamma-delta"]
    offsets = np.array([0, 5, 7, 18], dtype=np.int64)
    data = np.frombuffer(b"".join(words), dtype=np.uint8)
    idx = (np.arange(100_000) % 3).astype(np.uint32)
    before = pool_allocations()
    offs, got = dictionary_take(idx, offsets, data, large=False)
    assert pool_allocations() == before + 2
    assert got.tobytes() == b"".join(words[i % 3] for i in range(100_000))
    assert offs[-1] == len(got)
