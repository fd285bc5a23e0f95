"""The decode kernels of ``lance_format.encodings.v21._decode_kernels`` and the string-by-string
FSST kernel give the same results as the numpy code they replaced, on generated inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lance_format.encodings.v21._bytes import Bufs
from lance_format.encodings.v21._decode_kernels import variable_chunks
from lance_format.encodings.v21._fsst import fsst_decompress
from lance_format.encodings.v21.encode.fsst import fsst_compress
from tests.encodings.numpy_reference import fsst_decode as ref_fsst_decode
from tests.encodings.numpy_reference import variable_mini as ref_variable

FEW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _chunks(rng: np.random.Generator, nchunks: int, width: int, corrupt: bool) -> tuple[Bufs, np.ndarray]:
    """``nchunks`` variable-width chunks (offsets then bytes) laid out with gaps in one blob."""
    parts: list[bytes] = []
    starts, sizes, counts = [], [], []
    pos = 0
    for _ in range(nchunks):
        gap = rng.integers(0, 256, int(rng.integers(0, 5)), dtype=np.uint8).tobytes()
        parts.append(gap)
        pos += len(gap)
        n = int(rng.integers(0, 40))
        lens = rng.integers(0, 20, n)
        body = rng.integers(0, 256, int(lens.sum()), dtype=np.uint8).tobytes()
        head = (n + 1) * width
        offs = np.concatenate(([0], np.cumsum(lens))).astype(np.int64) + head
        if corrupt and n and rng.random() < 0.5:
            offs[int(rng.integers(0, n + 1))] = int(rng.integers(0, 2 * head + len(body) + 2))
        chunk = offs.astype(f"<u{width}").tobytes() + body
        parts.append(chunk)
        starts.append(pos)
        sizes.append(len(chunk))
        counts.append(n)
        pos += len(chunk)
    blob = np.frombuffer(b"".join(parts), dtype=np.uint8)
    if corrupt and nchunks and rng.random() < 0.3:
        blob = blob[: int(rng.integers(0, len(blob) + 1))]  # a read cut short
    return (
        Bufs(blob, np.array(starts, dtype=np.int64), np.array(sizes, dtype=np.int64)),
        np.array(counts, dtype=np.int64),
    )


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    nchunks=st.integers(0, 30),
    width=st.sampled_from([4, 8]),
    corrupt=st.booleans(),
)
def test_variable_chunks_match_numpy(seed: int, nchunks: int, width: int, corrupt: bool) -> None:
    """Valid chunks decode to the same offsets and bytes; corrupt ones (offsets out of order or
    past their chunk, a blob cut short) raise ValueError on both sides."""
    bufs, counts = _chunks(np.random.default_rng(seed), nchunks, width, corrupt)
    try:
        want = ref_variable.variable_chunks(bufs, width * 8, counts)
    except ValueError:
        with pytest.raises(ValueError, match=r"outside the data read|out of order"):
            variable_chunks(bufs, width * 8, counts)
        return
    got = variable_chunks(bufs, width * 8, counts)
    assert np.array_equal(got[0], want[0])
    assert got[1].tobytes() == want[1].tobytes()


def test_variable_chunks_reject_a_bad_offset_width() -> None:
    bufs = Bufs(np.zeros(8, np.uint8), np.zeros(1, np.int64), np.array([8], np.int64))
    with pytest.raises(ValueError, match="bad offset width"):
        variable_chunks(bufs, 16, np.zeros(1, np.int64))


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2000, 5000),
    vocab=st.integers(1, 60),
    readonly=st.booleans(),
)
def test_fsst_decompress_of_real_strings_matches_numpy(seed: int, n: int, vocab: int, readonly: bool) -> None:
    """Strings our encoder compressed (escapes never cross a string, the string-by-string path)
    decode to the numpy oracle's output and to the original strings."""
    rng = np.random.default_rng(seed)
    words = [rng.integers(97, 123, int(rng.integers(1, 10)), dtype=np.uint8).tobytes() for _ in range(vocab)]
    parts = []
    for _ in range(n):
        picks = [words[int(i)] for i in rng.integers(0, vocab, int(rng.integers(1, 10)))]
        if rng.random() < 0.1:
            picks.append(rng.integers(0, 256, 3, dtype=np.uint8).tobytes())  # escapes
        parts.append(b"".join(picks))
    data = np.frombuffer(b"".join(parts), dtype=np.uint8)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    packed = fsst_compress(data, offsets)
    assume(packed is not None)
    assert packed is not None
    table, coffs, codes = packed
    if readonly:
        codes = codes.copy()
        codes.setflags(write=False)
    want = ref_fsst_decode.fsst_decompress(table, coffs, codes)
    got = fsst_decompress(table, coffs, codes)
    assert np.array_equal(got[0], want[0])
    assert got[1].tobytes() == want[1].tobytes() == data.tobytes()


def _dict_ref(entries: list[bytes], idx: np.ndarray) -> list[bytes]:
    """What a dictionary take means: entry ``min(i, last)`` for every index (null slots may hold
    any index; their rows are masked later)."""
    last = len(entries) - 1
    return [entries[min(int(i), last)] for i in idx]


def _dict_arrays(entries: list[bytes], lead: int = 0) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([len(e) for e in entries], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths))) + lead
    data = np.frombuffer(b"#" * lead + b"".join(entries), dtype=np.uint8)
    return offsets, data


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("rows", [0, 1, 7, 1000])
@pytest.mark.parametrize("kind", ["short", "long", "empty-strings", "big-dictionary"])
def test_dictionary_take_matches_the_entries(kind: str, rows: int, large: bool) -> None:
    """Word-store path (small dictionary, entries of 0..8+ bytes) and byte path (a dictionary larger
    than the rows), 32- and 64-bit offsets, indices past the end clamped, a read-only dictionary
    that does not start at byte 0."""
    from lance_format.encodings.v21._decode_kernels import dictionary_take

    rng = np.random.default_rng(rows)
    if kind == "short":
        entries = [f"t{i:04d}".encode() for i in range(100)]
    elif kind == "long":
        entries = [bytes(rng.integers(0, 256, int(n), dtype=np.uint8)) for n in rng.integers(0, 40, 50)]
    elif kind == "empty-strings":
        entries = [b"", b"a", b"", b"12345678", b"123456789"]
    else:
        entries = [bytes(rng.integers(97, 123, 30, dtype=np.uint8)) for _ in range(5000)]
    offsets, data = _dict_arrays(entries, lead=3)
    data.setflags(write=False)
    idx = rng.integers(0, len(entries) + 3, rows).astype(np.uint32)
    out_offsets, got = dictionary_take(idx, offsets, data, large)
    assert out_offsets.dtype == (np.int64 if large else np.int32)
    want = _dict_ref(entries, idx)
    assert out_offsets.tolist() == np.concatenate(([0], np.cumsum([len(w) for w in want]))).tolist()
    assert got.tobytes() == b"".join(want)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint64])
def test_dictionary_take_of_other_index_widths(dtype: type) -> None:
    from lance_format.encodings.v21._decode_kernels import dictionary_take

    entries = [b"x", b"yy", b"zzz"]
    offsets, data = _dict_arrays(entries)
    idx = np.array([2, 0, 1, 200, 1], dtype=dtype)
    _, got = dictionary_take(idx, offsets, data, False)
    assert got.tobytes() == b"".join(_dict_ref(entries, idx))


def test_dictionary_take_rejects_bad_dictionaries() -> None:
    from lance_format.encodings.v21._decode_kernels import dictionary_take

    idx = np.array([0, 1], dtype=np.uint32)
    data = np.frombuffer(b"abcdef", dtype=np.uint8)
    with pytest.raises(ValueError, match="out of order"):
        dictionary_take(idx, np.array([0, 4, 2], np.int64), data, False)
    with pytest.raises(ValueError, match="outside"):
        dictionary_take(idx, np.array([0, 4, 9], np.int64), data, False)
    with pytest.raises(ValueError, match="empty dictionary"):
        dictionary_take(idx, np.array([0], np.int64), data, False)


def _packed(seed: int) -> tuple[bytes, np.ndarray, np.ndarray, bytes]:
    rng = np.random.default_rng(seed)
    words = [rng.integers(97, 123, int(rng.integers(2, 9)), dtype=np.uint8).tobytes() for _ in range(20)]
    parts = [b"".join(words[int(i)] for i in rng.integers(0, 20, 4)) for _ in range(3000)]
    data = np.frombuffer(b"".join(parts), dtype=np.uint8)
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    packed = fsst_compress(data, offsets)
    assert packed is not None
    table, coffs, codes = packed
    return table, coffs, codes, data.tobytes()


def test_fsst_symbol_table_parsed_once_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """One-row takes decode one string at a time: the symbol table's parsed form is kept per
    table (the same arrays on the next call), strings still decode right, and the map of tables
    stays within its bound."""
    from lance_format.encodings.v21 import _fsst

    monkeypatch.setattr(_fsst, "_TABLES", {})
    monkeypatch.setattr(_fsst, "_MAX_TABLES", 2)
    table, coffs, codes, _ = _packed(0)
    info = int.from_bytes(table[:8], "little")
    first = _fsst._tables(table, info)
    for i in (0, 7, 2999):
        offs, out = fsst_decompress(table, coffs[i : i + 2], codes)
        want = ref_fsst_decode.fsst_decompress(table, coffs[i : i + 2], codes)
        assert out.tobytes() == want[1].tobytes()
        assert np.array_equal(offs, want[0])
    again = _fsst._tables(table, info)
    assert again[0] is first[0]
    assert again[1] is first[1]
    for seed in (1, 2, 3):
        other, oo, oc, odata = _packed(seed)
        assert fsst_decompress(other, oo, oc)[1].tobytes() == odata
        assert len(_fsst._TABLES) <= 2


def test_fsst_bad_symbol_length_still_rejected_after_caching() -> None:
    """A table with a symbol longer than 8 bytes raises on every call (it is never kept)."""
    table, coffs, codes, _ = _packed(4)
    nsym = int.from_bytes(table[:8], "little") & 0xFF
    bad = bytearray(table)
    bad[8 + 8 * nsym] = 9  # first symbol's length
    for _ in range(2):
        with pytest.raises(ValueError, match="longer than 8 bytes"):
            fsst_decompress(bytes(bad), coffs, codes)
