"""The compiled write-path kernels (mini-block chunking and layout, string dictionaries) give
byte-identical pages to the numpy code they replaced, on generated inputs."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_format.core.concurrency import LazyPool
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21.encode import miniblock
from lance_format.encodings.v21.encode._dict import dictionary_strings
from lance_format.encodings.v21.encode.values import FixedVals, VarVals
from tests.encodings.numpy_reference import miniblock_encode as ref
from tests.strategies import TableSpec, table_specs

FEW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KINDS = ["str", "large_str", "u8", "i16", "i32", "i64", "f64", "bool", "fsl"]


def _values(kind: str, n: int, rng: np.random.Generator) -> FixedVals | VarVals:
    if kind in ("str", "large_str"):
        lens = rng.integers(0, int(rng.choice([4, 40, 600])), n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        data = rng.integers(0, 256, int(offsets[-1]), dtype=np.uint8)
        return VarVals(offsets, data, kind == "large_str")
    if kind == "bool":
        return FixedVals(np.zeros(0, np.uint8), 0, n, bools=rng.random(n) < 0.5)
    if kind == "f64":
        return FixedVals(rng.random(n).view(np.uint8), 8, n)
    if kind == "fsl":
        valid = rng.random(n * 4) < 0.8
        return FixedVals(
            rng.random(n * 4).astype(np.float32).view(np.uint8), 4, n, dims=(4,), level_valid=(valid,)
        )
    width = {"u8": 1, "i16": 2, "i32": 4, "i64": 8}[kind]
    top = int(rng.choice([1, 1 << 7, 1 << 20, 2**62]))
    raw = rng.integers(0, min(top, 2 ** (8 * width - 1)), n, dtype=np.int64).astype(f"<u{width}")
    return FixedVals(raw.view(np.uint8), width, n, int_bits=8 * width)


def _levels(
    rows: int, rng: np.random.Generator, shape: str
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None, int, tuple[m.RepDefLayer, ...]]:
    """(rep, defs, visible, values, layers) of ``rows`` flat or list rows."""
    if shape == "flat":
        return None, None, None, rows, (m.RepDefLayer.ALL_VALID_ITEM,)
    if shape == "nulls":
        defs = (rng.random(rows) < 0.3).astype(np.uint16)
        return None, defs, None, rows, (m.RepDefLayer.NULLABLE_ITEM,)
    lens = rng.integers(0, 6, rows)
    count = np.where(lens > 0, lens, 1)
    total = int(count.sum())
    first = np.cumsum(count) - count
    rep = np.zeros(total, dtype=np.uint16)
    rep[first] = 1
    visible = np.repeat(lens > 0, count)
    defs = np.where(visible, (rng.random(total) < 0.2).astype(np.uint16), 2).astype(np.uint16)
    layers = (m.RepDefLayer.NULLABLE_ITEM, m.RepDefLayer.EMPTYABLE_LIST)
    return rep, defs, visible, int(visible.sum()), layers


def _bytes(bufs: list[object]) -> list[bytes]:
    return [bytes(memoryview(b).cast("B")) if not isinstance(b, bytes) else b for b in bufs]  # type: ignore[arg-type]


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(KINDS),
    rows=st.integers(0, 6000),
    shape=st.sampled_from(["flat", "nulls", "lists"]),
    large=st.booleans(),
    general=st.sampled_from([None, "zstd"]),
)
def test_encode_miniblock_matches_numpy(
    seed: int, kind: str, rows: int, shape: str, large: bool, general: str | None
) -> None:
    rng = np.random.default_rng(seed)
    rep, defs, visible, nvals, layers = _levels(rows, rng, shape)
    if nvals == 0:
        return
    vals = _values(kind, nvals, rng)
    comp = m.BufferCompression(general, None) if general else None
    args = (vals, rep, defs, visible, layers, large)
    try:
        want = ref.encode_miniblock(*args, general=comp)
    except ref.TooLarge:
        with pytest.raises(miniblock.TooLarge):
            miniblock.encode_miniblock(*args, general=comp)
        return
    got = miniblock.encode_miniblock(*args, general=comp)
    assert got[0] == want[0]
    assert _bytes(got[1]) == _bytes(want[1])


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 3000),
    distinct=st.integers(1, 400),
    null_rate=st.sampled_from([0.0, 0.1, 0.9]),
    divisor=st.sampled_from([1, 2, 8]),
)
def test_dictionary_strings_matches_arrow(
    seed: int, n: int, distinct: int, null_rate: float, divisor: int
) -> None:
    """Same entries in the same (first-occurrence) order as Arrow's dictionary_encode, nulls at
    index 0 and not entries, and no dictionary exactly when there are more entries than the limit."""
    rng = np.random.default_rng(seed)
    words = [
        rng.integers(97, 100, int(rng.integers(0, 12)), dtype=np.uint8).tobytes() for _ in range(distinct)
    ]
    picks = [words[int(i)] for i in rng.integers(0, distinct, n)]
    valid = rng.random(n) >= null_rate
    arr = pa.array([p if ok else None for p, ok in zip(picks, valid, strict=True)], pa.binary())
    lens = np.array([len(p) if ok else 0 for p, ok in zip(picks, valid, strict=True)], dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    data = np.frombuffer(b"".join(p for p, ok in zip(picks, valid, strict=True) if ok), dtype=np.uint8)
    limit = n // divisor
    got = dictionary_strings(data, offsets, None if valid.all() else valid, limit)
    enc = arr.dictionary_encode()
    if len(enc.dictionary) > limit:
        assert got is None
        return
    assert got is not None
    idx, firsts = got
    assert idx.tolist() == enc.indices.fill_null(0).to_pylist()
    assert [picks[f] for f in firsts.tolist()] == enc.dictionary.to_pylist()


def _codes(null_at: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """The kernels' null code of the oracle's (null_at, kind) pair."""
    return np.where(null_at >= 0, 2 * null_at + kind, -1).astype(np.int16)


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    nlists=st.integers(1, 300),
    nent=st.integers(0, 400),
    depth=st.integers(0, 3),
    large=st.booleans(),
    bit_off=st.integers(0, 9),
)
def test_expand_lists_matches_numpy(
    seed: int, nlists: int, nent: int, depth: int, large: bool, bit_off: int
) -> None:
    """Entries pointing at lists (valid, null, empty; some invisible or null above) expand the
    same way as the numpy passes did, reading an Arrow validity bitmap at a bit offset."""
    from lance_format.encodings.v21.encode._levels import expand_lists
    from tests.encodings.numpy_reference.list_levels import expand_lists as ref_expand

    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 4, nlists) * (rng.random(nlists) < 0.7)
    offsets = np.zeros(nlists + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    valid = rng.random(nlists) < 0.8
    bitmap = np.packbits(np.concatenate((np.zeros(bit_off, bool), valid)), bitorder="little")
    slots = np.where(rng.random(nent) < 0.85, rng.integers(0, nlists, nent), -1).astype(np.int64)
    null_at = np.where(rng.random(nent) < 0.1, rng.integers(0, depth + 1, nent), -1).astype(np.int64)
    kind = (rng.random(nent) < 0.5).astype(np.int64)
    starts = rng.integers(-1, depth + 1, nent).astype(np.int64)
    offs = offsets if large else offsets.astype(np.int32)
    got = expand_lists(
        slots, False, _codes(null_at, kind), starts.astype(np.int16), nent, offs, bitmap, bit_off, depth
    )
    want = ref_expand(slots, null_at, kind, starts, offsets, valid, depth)
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tolist() == _codes(want[1], want[2]).tolist()
    assert got[2].tolist() == want[3].tolist()
    assert (bool(got[3]), bool(got[4])) == want[4:]


def test_expand_lists_identity_entries_match_numpy() -> None:
    """Top-level entries passed as the identity shorthand (no slot, code or starts arrays) expand
    like explicit row entries; an all-valid list needs no bitmap."""
    from lance_format.encodings.v21.encode._levels import expand_lists
    from tests.encodings.numpy_reference.list_levels import expand_lists as ref_expand

    offsets = np.array([0, 2, 2, 5, 5, 6], dtype=np.int32)
    n = len(offsets) - 1
    none16 = np.zeros(0, dtype=np.int16)
    for valid in (np.ones(n, bool), np.array([1, 1, 0, 0, 1], bool)):
        bitmap = np.zeros(0, np.uint8) if valid.all() else np.packbits(valid, bitorder="little")
        got = expand_lists(np.zeros(0, np.int64), True, none16, none16, n, offsets, bitmap, 0, 0)
        minus = np.full(n, -1, dtype=np.int64)
        want = ref_expand(np.arange(n), minus, minus + 1, minus, offsets.astype(np.int64), valid, 0)
        assert got[0].tolist() == want[0].tolist()
        assert got[1].tolist() == _codes(want[1], want[2]).tolist()
        assert got[2].tolist() == want[3].tolist()
        assert (bool(got[3]), bool(got[4])) == want[4:]


def _check_walk(arr: pa.Array, version: str = "2.1") -> None:
    """The compiled level walk gives the numpy walk's levels, layers and visible values."""
    from lance_format.core.types import fields_from_arrow
    from lance_format.encodings.v21.encode.levels import leaf_levels
    from lance_format.file.format import LanceFileVersion
    from lance_format.file.reader import assign_columns
    from tests.encodings.numpy_reference.leaf_levels import leaf_levels as ref_leaf_levels

    schema = fields_from_arrow(pa.schema([pa.field("c", arr.type)]))
    columns_of = assign_columns(schema, LanceFileVersion.parse(version))
    field = schema.fields[0]
    got = leaf_levels(field, arr, columns_of)
    want = ref_leaf_levels(field, arr, columns_of)
    assert [g.field.id for g in got] == [w.field.id for w in want]
    for g, w in zip(got, want, strict=True):
        assert g.layers == w.layers
        assert (g.num_rows, g.index_bits) == (w.num_rows, w.index_bits)
        for a, b in ((g.rep, w.rep), (g.defs, w.defs)):
            assert (a is None) == (b is None)
            if a is not None and b is not None:
                assert a.dtype == b.dtype == np.uint16
                assert a.tolist() == b.tolist()
        mask = g.visible_mask()
        want_mask = w.slots >= 0
        assert (mask if mask is not None else np.ones(g.num_entries, bool)).tolist() == want_mask.tolist()
        # Unsliced first: pyarrow 26's take applies a slice offset twice inside nested fixed-size lists.
        vis = pa.concat_arrays([w.values]).take(pa.array(w.slots[want_mask], type=pa.int64()))
        assert _same_array(g.visible_values(), vis)


def _same_array(a: pa.Array, b: pa.Array) -> bool:
    """``a.equals(b)``, except that a NaN equals the same NaN (floats compare by bit pattern)."""
    if a.type != b.type or len(a) != len(b):
        return False
    if a.equals(b):
        return True
    if pa.types.is_floating(a.type):
        bits = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[a.type.bit_width]
        return bool(a.view(bits).equals(b.view(bits)))
    if pa.types.is_fixed_size_list(a.type) or pa.types.is_list(a.type) or pa.types.is_large_list(a.type):
        return bool(a.is_null().equals(b.is_null())) and _same_array(pc.list_flatten(a), pc.list_flatten(b))
    return False


_ST = pa.struct([pa.field("a", pa.int32()), pa.field("l", pa.list_(pa.int64()))])
_NESTED_CASES = {
    "list nulls and empties": pa.array([[1, None], None, [], [3], None, []], pa.list_(pa.int32())),
    "list of struct with nulls at every level": pa.array(
        [[{"a": 1, "b": None}, None], None, [], [{"a": None, "b": "x"}]],
        pa.list_(pa.struct([pa.field("a", pa.int8()), pa.field("b", pa.string())])),
    ),
    "struct of list under null structs": pa.array(
        [{"a": 1, "l": [1, 2]}, None, {"a": None, "l": None}, {"a": 4, "l": []}], _ST
    ),
    # Found by Hypothesis: the numpy walk left a list below a null struct "all valid".
    "list under a null struct row": pa.array(
        [{"l": [True]}, None, {"l": None}], pa.struct([pa.field("l", pa.list_(pa.bool_()))])
    ),
    "list under a leading null struct row": pa.array(
        [None, {"l": [True]}], pa.struct([pa.field("l", pa.list_(pa.bool_()))])
    ),
    "list of list": pa.array([[[1], [], None], None, [[2, 3]], [], [None]], pa.list_(pa.list_(pa.int16()))),
    "large list of dictionary": pa.array(
        [["x", None], [], None, ["y", "x"]], pa.large_list(pa.dictionary(pa.int8(), pa.string()))
    ),
    "struct without nulls": pa.array([{"a": i, "l": [i] * (i % 3)} for i in range(9)], _ST),
    "sliced list of struct": pa.array(
        [[{"a": i, "l": [i] * (i % 2)}] * (i % 3) if i % 4 else None for i in range(40)], pa.list_(_ST)
    ).slice(7, 21),
    "sliced nullable ints": pa.array([1, None, 3, None, 5], pa.int64()).slice(1, 3),
    "null type in a list": pa.array([[None, None], [], None], pa.list_(pa.null())),
}


@pytest.mark.parametrize("case", sorted(_NESTED_CASES))
def test_level_walk_matches_numpy_on_nested_cases(case: str) -> None:
    _check_walk(_NESTED_CASES[case])


def test_level_walk_reads_garbage_under_null_lists() -> None:
    """A null list may span items in Arrow: those items are skipped (the visible values are then
    no longer one slice) and the values array may start past offset 0."""
    items = pa.array(np.arange(20, dtype=np.int32))
    offsets = pa.array([2, 5, 9, 9, 12, 20], pa.int32())
    arr = pa.ListArray.from_arrays(offsets, items, mask=pa.array([False, True, False, False, False]))
    _check_walk(arr)
    _check_walk(arr.slice(1, 3))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=table_specs(max_rows=120, struct_nulls=True),
    cut=st.tuples(st.integers(0, 30), st.integers(0, 200)),
)
def test_level_walk_matches_numpy(spec: TableSpec, cut: tuple[int, int]) -> None:
    """Random nested columns (nulls at every level, empty and null lists, list<struct>,
    struct<list>, dictionaries), whole and sliced, walk the same as with numpy passes."""
    table = spec.build()
    for col in table.columns:
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        _check_walk(arr)
        start = min(cut[0], len(arr))
        _check_walk(arr.slice(start, cut[1]))


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(KINDS),
    rows=st.integers(1, 3000),
    shape=st.sampled_from(["flat", "nulls", "lists"]),
    fsst=st.booleans(),
)
def test_encode_fullzip_matches_numpy(seed: int, kind: str, rows: int, shape: str, fsst: bool) -> None:
    from lance_format.encodings.v21.encode.fullzip import encode_fullzip
    from tests.encodings.numpy_reference import fullzip_encode as ref_fullzip

    rng = np.random.default_rng(seed)
    rep, defs, visible, nvals, layers = _levels(rows, rng, shape)
    if visible is None:
        visible = np.ones(rows, dtype=bool)
    vals = _values(kind, nvals, rng)
    table = b"t" * 8 if fsst and isinstance(vals, VarVals) else None
    got = encode_fullzip(vals, rep, defs, visible, layers, table)
    want = ref_fullzip.encode_fullzip(vals, rep, defs, visible, layers, table)
    assert got[0] == want[0]
    assert _bytes(got[1]) == _bytes(want[1])


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_parallel_encode_writes_the_same_bytes(version: str, tmp_path: object) -> None:
    """Columns encoded on the pool land in the file in the order a single thread writes them."""
    from pathlib import Path

    from lance_format.file import LanceFileWriter

    rng = np.random.default_rng(7)
    n = 40_000
    table = pa.table(
        {
            "i": pa.array(rng.integers(0, 1000, n, dtype=np.int32)),
            "s": pa.array([f"user-{x}" for x in rng.integers(0, 1 << 30, n)]),
            "l": pa.array([[1] * int(k) for k in rng.integers(0, 3, n)], pa.list_(pa.int64())),
            "c": pa.array([f"k{x}" for x in rng.integers(0, 9, n)]),
            # A struct's leaves encode as jobs of their own.
            "st": pa.array(
                [{"a": int(k), "l": [1] * int(k)} if k else None for k in rng.integers(0, 3, n)],
                pa.struct([pa.field("a", pa.int32()), pa.field("l", pa.list_(pa.int64()))]),
            ),
        }
    )
    out = []
    for threads in (1, 3):
        path = Path(str(tmp_path)) / f"t{threads}.lance"
        # Small pages: many encodes in flight at once.
        with LanceFileWriter(
            str(path), table.schema, version=version, encode_threads=threads, data_cache_bytes=200_000
        ) as w:
            w.write_batch(table.slice(0, n // 2))
            w.write_batch(table.slice(n // 2))
        out.append(path.read_bytes())
    assert out[0] == out[1]


def test_parallel_encode_error_surfaces_at_close(tmp_path: object) -> None:
    """An encode that fails on the pool fails the write with the engine's error, as inline."""
    from lance_format.core.errors import InvalidInputError
    from lance_format.file import LanceFileWriter

    t = pa.table({"e": pa.array([{}, None], pa.struct([])), "i": pa.array([1, 2], pa.int32())})
    w = LanceFileWriter(f"{tmp_path}/x.lance", t.schema, version="2.1", encode_threads=2)
    w.write_batch(t)
    with pytest.raises(InvalidInputError, match="empty struct"):
        w.close()


def _packed_strings(strings: list[bytes | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, offsets, valid) of ``strings`` as Arrow would hold them (nulls empty)."""
    lens = np.array([len(s) if s is not None else 0 for s in strings], dtype=np.int64)
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    data = np.frombuffer(b"".join(s for s in strings if s is not None), dtype=np.uint8)
    return data, offsets, np.array([s is not None for s in strings], dtype=bool)


@pytest.mark.parametrize(
    ("shape", "repeats"),
    [("shuffled", 1), ("shuffled", 2), ("sorted", 2), ("sorted", 3), ("one_hot", 1)],
)
@pytest.mark.parametrize("null_rate", [0.0, 0.3])
def test_dictionary_sample_never_rules_out_a_dictionary_that_fits(
    shape: str, repeats: int, null_rate: float
) -> None:
    """Pages large enough for the sampled check: all-distinct strings are ruled out without a
    build; strings with at most ``limit`` distinct values (each repeated, in any order, or one
    value filling half the page) still get their dictionary, the same as Arrow's."""
    from lance_format.encodings.v21.encode import _dict

    rng = np.random.default_rng(repeats)
    n = 5 * _dict.SAMPLE_SIZE
    if shape == "one_hot":
        ids = np.where(rng.random(n) < 0.5, 0, np.arange(n))
    else:
        ids = np.repeat(np.arange(-(-n // repeats)), repeats)[:n]
        if shape == "shuffled":
            ids = rng.permutation(ids)
    words: list[bytes | None] = [f"ü-{i}".encode() for i in ids.tolist()]
    for j in np.flatnonzero(rng.random(n) < null_rate).tolist():
        words[j] = None
    data, offsets, valid = _packed_strings(words)
    limit = n // 2
    nv = int(valid.sum())
    distinct = len({w for w in words if w is not None})
    sampled = _dict._sample_rules_out(data, offsets, None if valid.all() else valid, limit)
    got = dictionary_strings(data, offsets, None if valid.all() else valid, limit)
    if distinct > limit:
        assert got is None
        if shape == "shuffled" and repeats == 1:
            assert sampled, "all-distinct strings are ruled out by the sample alone"
        return
    assert not sampled, f"{distinct} distinct of {nv} fit the limit {limit}"
    assert got is not None
    enc = pa.array(words, pa.binary()).dictionary_encode()
    idx, firsts = got
    assert [words[f] for f in firsts.tolist()] == enc.dictionary.to_pylist()
    assert idx.tolist() == enc.indices.fill_null(0).to_pylist()


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 2000),
    distinct=st.integers(1, 300),
    rows=st.integers(0, 500),
    readonly=st.booleans(),
)
def test_count_distinct_matches_set(seed: int, n: int, distinct: int, rows: int, readonly: bool) -> None:
    """The sample's distinct count is that of a Python set of the chosen strings (empty strings,
    unicode, strings sharing prefixes and hashes of any length included)."""
    from lance_format.encodings.v21.encode import _dict

    rng = np.random.default_rng(seed)
    words = ["", "é", "ab", "ab\x00", "a" * 9] + [
        "".join(rng.choice(list("ab\x00é"), int(rng.integers(0, 20)))) for _ in range(distinct)
    ]
    strings = [words[int(i)].encode() for i in rng.integers(0, len(words), n)]
    data, offsets, _ = _packed_strings(list(strings))
    if readonly:
        data = data.copy()
        data.setflags(write=False)
    pick = rng.integers(0, n, rows).astype(np.int64)
    pick = np.unique(pick)
    slots = 1 << max(4, int(2 * len(pick) + 1).bit_length())
    got = _dict._count_distinct(_dict._windows(data), offsets, pick, slots)
    assert got == len({strings[i] for i in pick.tolist()})


@FEW
@given(seed=st.integers(0, 2**32 - 1), ncodes=st.integers(1, 3000), vocab=st.integers(1, 40))
def test_fsst_candidates_match_numpy(seed: int, ncodes: int, vocab: int) -> None:
    """Training's compiled candidate count gives the distinct (value, length) pairs of every code
    and every two adjacent codes of a string with their counts, as the numpy lexsort it replaced
    did (values equal but for trailing zero bytes included)."""
    from lance_format.encodings.v21.encode import fsst

    rng = np.random.default_rng(seed)
    ln = rng.integers(1, 9, ncodes).astype(np.int64)
    pos = (np.cumsum(ln) - ln).astype(np.int64)
    alphabet = np.array([0, 97, 98], dtype=np.uint8)[: max(1, min(3, vocab))]
    data = rng.choice(alphabet, int(ln.sum()) + 8).astype(np.uint8)
    s = np.sort(rng.integers(0, max(1, ncodes // 3), ncodes)).astype(np.int64)
    win = fsst._windows(data)
    masks = fsst._MASKS
    val = win[pos] & masks[ln]
    same = s[1:] == s[:-1]
    plen = np.minimum(ln[:-1] + ln[1:], 8)[same]
    pval = win[pos[:-1][same]] & masks[plen]
    cv = np.concatenate((val, pval))
    cl = np.concatenate((ln, plen))
    order = np.lexsort((cl, cv))
    sv, sl = cv[order], cl[order]
    starts = np.flatnonzero(np.concatenate(([True], (sv[1:] != sv[:-1]) | (sl[1:] != sl[:-1]))))
    counts = np.diff(np.append(starts, len(sv)))
    uv, ul, cnt = fsst._candidates(win, s, pos, ln)
    order = np.lexsort((ul, uv))
    uv, ul, cnt = uv[order], ul[order], cnt[order]
    assert uv.tolist() == sv[starts].tolist()
    assert ul.tolist() == sl[starts].tolist()
    assert cnt.tolist() == counts.tolist()


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 3000),
    distinct=st.integers(1, 400),
    null_rate=st.sampled_from([0.0, 0.1, 0.9]),
    divisor=st.sampled_from([1, 2, 8]),
    parts=st.integers(2, 5),
)
def test_dictionary_strings_split_over_threads_matches_arrow(
    seed: int, n: int, distinct: int, null_rate: float, divisor: int, parts: int
) -> None:
    """Ranges built on threads and merged give Arrow's entries in first-occurrence order and its
    indices (nulls at 0), and no dictionary exactly when all the ranges together hold more
    entries than the limit (each range alone may fit)."""
    from unittest import mock

    from lance_format.encodings.v21.encode import _split

    rng = np.random.default_rng(seed)
    words = [
        rng.integers(97, 100, int(rng.integers(0, 20)), dtype=np.uint8).tobytes() for _ in range(distinct)
    ]
    picks: list[bytes | None] = [
        words[int(i)] if ok else None
        for i, ok in zip(rng.integers(0, distinct, n), rng.random(n) >= null_rate, strict=True)
    ]
    data, offsets, valid = _packed_strings(picks)
    limit = n // divisor
    pool = LazyPool(parts, "test-split")
    try:
        with mock.patch.object(_split, "SPLIT_MIN_BYTES", 1):
            bounds = _split.split_rows(offsets, pool)
            assert (bounds[0], bounds[-1]) == (0, n)
            assert len(bounds) <= parts + 1
            assert all(a < b for a, b in pairwise(bounds))
            got = dictionary_strings(data, offsets, None if valid.all() else valid, limit, pool)
    finally:
        pool.close()
    enc = pa.array(picks, pa.binary()).dictionary_encode()
    if len(enc.dictionary) > limit:
        assert got is None
        return
    assert got is not None
    idx, firsts = got
    assert idx.tolist() == enc.indices.fill_null(0).to_pylist()
    assert [picks[f] for f in firsts.tolist()] == enc.dictionary.to_pylist()


@FEW
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 400), end_pad=st.integers(0, 9))
def test_dictionary_hash_and_compare_read_words_exactly(seed: int, n: int, end_pad: int) -> None:
    """The word-at-a-time hash and compare see exactly a string's bytes, wherever it sits (the
    buffer's last 7 bytes included, buffers under 8 bytes padded): equal strings hash alike and
    compare equal, and the compare agrees with Python's."""
    from lance_format.encodings.v21.encode import _dict

    rng = np.random.default_rng(seed)
    strings = [rng.integers(0, 3, int(rng.integers(0, 19)), dtype=np.uint8).tobytes() for _ in range(n)]
    strings.append(b"\x01" * end_pad)
    data, offsets, _ = _packed_strings(list(strings))
    win = _dict._windows(data)
    hashes = [int(_dict._hash(win, int(offsets[i]), int(offsets[i + 1]))) for i in range(len(strings))]
    for _ in range(200):
        i, j = (int(x) for x in rng.integers(0, len(strings), 2))
        assert bool(_dict._same(win, offsets, i, j)) == (strings[i] == strings[j])
        if strings[i] == strings[j]:
            assert hashes[i] == hashes[j]


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    tokens=st.lists(st.binary(min_size=1, max_size=12), min_size=1, max_size=40),
    parts=st.integers(2, 5),
)
def test_fsst_coding_split_over_threads_matches_one_pass(seed: int, tokens: list[bytes], parts: int) -> None:
    """Strings coded in ranges on threads and joined are the codes and offsets of one pass (the
    numpy reference's), and decompress to the input."""
    from unittest import mock

    from lance_format.encodings.v21._fsst import fsst_decompress
    from lance_format.encodings.v21.encode import _split
    from lance_format.encodings.v21.encode.fsst import fsst_compress
    from tests.encodings.numpy_reference import fsst_encode as ref_fsst

    rng = np.random.default_rng(seed)
    n = 3000
    picks = [
        b"".join(tokens[int(i)] for i in rng.integers(0, len(tokens), int(k))) for k in rng.integers(0, 12, n)
    ]
    data, offsets, _ = _packed_strings(list(picks))
    pool = LazyPool(parts, "test-split")
    try:
        with mock.patch.object(_split, "SPLIT_MIN_BYTES", 1 << 10):
            got = fsst_compress(data, offsets, pool)
    finally:
        pool.close()
    ref_fsst.assert_same_compression(got, data, offsets)
    if got is None:
        return
    _, back = fsst_decompress(got[0], got[1], got[2])
    assert back.tobytes() == data.tobytes()


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    u=st.integers(0, 2000),
    k=st.integers(1, 300),
    spread=st.sampled_from([1, 3, 50, 10**6]),
)
def test_fsst_best_candidates_match_a_full_sort(seed: int, u: int, k: int, spread: int) -> None:
    """The selection of the best candidates is the first ``k`` of all of them sorted by gain (most
    first), ties by value then length, as the full stable sort it replaced (many ties included)."""
    from lance_format.encodings.v21.encode import fsst

    rng = np.random.default_rng(seed)
    pairs = {(int(v), int(n)) for v, n in zip(rng.integers(0, 40, u), rng.integers(1, 9, u), strict=True)}
    uv = np.array([p[0] for p in pairs], dtype=np.uint64)
    ul = np.array([p[1] for p in pairs], dtype=np.int64)
    gain = rng.integers(1, spread + 1, len(pairs)).astype(np.int64)
    order = np.lexsort((ul, uv))
    want = order[np.argsort(-gain[order], kind="stable")][:k]
    got = fsst._best(uv, ul, gain, k)
    assert got.tolist() == want.tolist()


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 2000),
    null_rate=st.sampled_from([0.01, 0.3, 1.0]),
    cut=st.integers(0, 50),
    large=st.booleans(),
)
def test_extract_compacts_nullable_strings_like_numpy(
    seed: int, n: int, null_rate: float, cut: int, large: bool
) -> None:
    """Nullable strings (a sliced array whose null slots span bytes) are compacted by the kernel
    into the numpy gather's bytes and offsets: valid strings back to back, nulls empty."""
    from lance_format.encodings.base import expand_ranges
    from lance_format.encodings.v21.encode.values import extract

    rng = np.random.default_rng(seed)
    strs = [rng.integers(97, 123, int(rng.integers(0, 30)), dtype=np.uint8).tobytes() for _ in range(n + cut)]
    full = pa.array(strs, pa.large_binary() if large else pa.binary())
    ok = rng.random(n + cut) >= null_rate
    # Nulls over non-empty slots (Arrow keeps their bytes; the file must not).
    bitmap = pa.array(ok).buffers()[1]
    arr = pa.Array.from_buffers(full.type, n + cut, [bitmap, *full.buffers()[1:]]).slice(cut)
    got = extract(arr)
    assert isinstance(got, VarVals)
    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[arr.offset : arr.offset + n + 1]
    offs = offs.astype(np.int64)
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    lens = np.where(valid, np.diff(offs), 0)
    raw = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    want = raw[expand_ranges(offs[:-1], lens)]
    want_offs = np.concatenate(([0], np.cumsum(lens)))
    if arr.null_count:
        assert got.offsets.tolist() == want_offs.tolist()
        assert got.data.tobytes() == want.tobytes()
    assert [
        got.data[a:b].tobytes() if ok else b""
        for a, b, ok in zip(got.offsets[:-1], got.offsets[1:], valid, strict=True)
    ] == [s if s is not None else b"" for s in arr.to_pylist()]
