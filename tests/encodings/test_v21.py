"""Reading Lance file format 2.1 and 2.2.

pylance (the oracle) writes files of every type we support - nulls at every level, several
layouts, compression schemes and multi-page columns - and our reader must return exactly what
pylance's own reader returns, for whole files, ranges and random takes. I/O checks make sure a
warm take reads only the chunks (or rows) it needs. The kernels (FastLanes, FSST) and the rep/def
unraveller also get direct unit tests that need no pylance.
"""

from __future__ import annotations

import decimal
import itertools
import os
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest

from lance_format.core.errors import CorruptFileError, LanceError, NotSupportedError
from lance_format.encodings.v21 import page_layout_from_raw
from lance_format.encodings.v21._fsst import fsst_decompress
from lance_format.encodings.v21.fastlanes import FL_BLOCK, fastlanes_unpack
from lance_format.encodings.v21.model import MiniBlockLayout, RepDefLayer
from lance_format.encodings.v21.repdef import concat_layers, unravel
from lance_format.file.reader import LanceFileReader

VERSIONS = ("2.1", "2.2")
N = 2000


# -- cases -------------------------------------------------------------------------------------


def _mask(rng: np.random.Generator, n: int, p: float = 0.1) -> npt.NDArray[np.bool_]:
    return rng.random(n) < p


def _primitives(rng: np.random.Generator) -> pa.Table:
    cols: dict[str, pa.Array] = {}
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        info = np.iinfo(t)
        vals = rng.integers(info.min // 2, info.max // 2, N, dtype=np.int64 if info.min else np.uint64)
        cols[np.dtype(t).name] = pa.array(vals.astype(t), mask=_mask(rng, N))
    cols["bool"] = pa.array(rng.random(N) < 0.3, mask=_mask(rng, N))
    cols["f16"] = pa.array(rng.random(N).astype(np.float16), mask=_mask(rng, N))
    cols["f32"] = pa.array(rng.standard_normal(N).astype(np.float32), mask=_mask(rng, N))
    cols["f64"] = pa.array(rng.standard_normal(N), mask=_mask(rng, N))
    cols["dec"] = pa.array(
        [decimal.Decimal(int(x)) / 1000 if x % 9 else None for x in rng.integers(-(10**12), 10**12, N)],
        pa.decimal128(20, 3),
    )
    cols["date32"] = pa.array(rng.integers(0, 30000, N).astype(np.int32), pa.date32(), mask=_mask(rng, N))
    cols["date64"] = pa.array(rng.integers(0, 30000, N) * 86_400_000, pa.date64(), mask=_mask(rng, N))
    cols["time32s"] = pa.array(rng.integers(0, 86400, N).astype(np.int32), pa.time32("s"), mask=_mask(rng, N))
    cols["time32ms"] = pa.array(
        rng.integers(0, 86_400_000, N).astype(np.int32), pa.time32("ms"), mask=_mask(rng, N)
    )
    cols["time64us"] = pa.array(rng.integers(0, 86_400 * 10**6, N), pa.time64("us"), mask=_mask(rng, N))
    cols["time64ns"] = pa.array(rng.integers(0, 86_400 * 10**9, N), pa.time64("ns"), mask=_mask(rng, N))
    cols["ts"] = pa.array(rng.integers(0, 2**50, N), pa.timestamp("us"), mask=_mask(rng, N))
    cols["tstz"] = pa.array(
        rng.integers(0, 2**60, N), pa.timestamp("ns", tz="Europe/Paris"), mask=_mask(rng, N)
    )
    cols["dur"] = pa.array(rng.integers(-(2**40), 2**40, N), pa.duration("ms"), mask=_mask(rng, N))
    cols["i32_valid"] = pa.array(np.arange(N, dtype=np.int32) * 7)
    cols["f64_valid"] = pa.array(rng.random(N))
    return pa.table(cols)


def _strings(rng: np.random.Generator) -> pa.Table:
    words = np.array(["", "a", "bb", "hello", "world", "lance", "x" * 40])

    def blobs(lo: int, hi: int) -> list[bytes]:
        return [bytes(rng.integers(0, 256, int(k)).astype(np.uint8)) for k in rng.integers(lo, hi, N)]

    cols = {
        "s": pa.array([f"{w}{i}" for i, w in enumerate(rng.choice(words, N))], mask=_mask(rng, N)),
        "ls": pa.array([str(w) * 2 for w in rng.choice(words, N)], pa.large_string(), mask=_mask(rng, N)),
        "b": pa.array(blobs(0, 30), pa.binary(), mask=_mask(rng, N)),
        "lb": pa.array(blobs(0, 30), pa.large_binary(), mask=_mask(rng, N)),
        "fsb": pa.array(blobs(7, 8), pa.binary(7), mask=_mask(rng, N)),
        # Values past 256 bytes make pylance choose full-zip (with FSST for the strings).
        "long_s": pa.array(
            [f"{'y' * 300}{i}" * int(k) for i, k in enumerate(rng.integers(1, 3, N))], mask=_mask(rng, N)
        ),
        "long_lb": pa.array(blobs(400, 450), pa.large_binary(), mask=_mask(rng, N)),
        "lowcard": pa.array(rng.choice(["red", "green", "blue"], N), mask=_mask(rng, N)),
        "dict": pa.array(
            rng.choice(["red", "green", "blue", "cyan"], N), mask=_mask(rng, N)
        ).dictionary_encode(),
        "empty_strs": pa.array([""] * N, mask=_mask(rng, N)),
        "dict_i16": pa.array(
            rng.choice([1, 2, 3], N).astype(np.int16), mask=_mask(rng, N)
        ).dictionary_encode(),
        "lowcard_f64": pa.array(rng.choice([1.5, 2.5, 3.25], N)),
    }
    return pa.table(cols)


def _fsl(rng: np.random.Generator) -> pa.Table:
    def vec(dim: int, item_nulls: float = 0.0, row_nulls: bool = True) -> pa.Array:
        items = pa.array(rng.random(N * dim).astype(np.float32), mask=_mask(rng, N * dim, item_nulls))
        mask = pa.array(_mask(rng, N)) if row_nulls else None
        return pa.FixedSizeListArray.from_arrays(items, dim, mask=mask)

    return pa.table(
        {
            "v8": vec(8),
            "v8_items": vec(8, 0.1),
            "v128": vec(128, row_nulls=False),
            "v128n": vec(128),
            "v128_items": vec(128, 0.01),
            "i3": pa.FixedSizeListArray.from_arrays(pa.array(rng.integers(0, 100, N * 3).astype(np.int8)), 3),
            "i4_items": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.integers(0, 9, N * 4).astype(np.int8), mask=_mask(rng, N * 4, 0.2)),
                4,
                mask=pa.array(_mask(rng, N, 0.2)),
            ),
            "bools": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(N * 16) < 0.5), 16),
            "fsl_fsl": pa.FixedSizeListArray.from_arrays(
                pa.FixedSizeListArray.from_arrays(pa.array(rng.random(N * 6)), 3), 2
            ),
        }
    )


def _nested(rng: np.random.Generator, with_struct: bool = True) -> pa.Table:
    def lst(i: int, k: int) -> list[int | None] | None:
        if i % 7 == 0:
            return None
        if i % 5 == 0:
            return []
        return [None if (i + j) % 4 == 0 else i * 10 + j for j in range(k)]

    ks = rng.integers(1, 6, N)
    item_t = pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))])
    cols = {
        "l_i32": pa.array([lst(i, int(k)) for i, k in enumerate(ks)], pa.list_(pa.int32())),
        "ll_s": pa.array(
            [
                None if i % 6 == 0 else [None if j == 1 else f"s{i}_{j}" for j in range(i % 4)]
                for i in range(N)
            ],
            pa.large_list(pa.string()),
        ),
        "l_l_i64": pa.array(
            [
                None if i % 9 == 0 else [None if j % 3 == 2 else [i] * (j % 3) for j in range(i % 4)]
                for i in range(N)
            ],
            pa.list_(pa.list_(pa.int64())),
        ),
        "l_struct": pa.array(
            [
                None
                if i % 8 == 0
                else [
                    None if j == 2 else {"a": None if j == 1 else i, "b": None if j == 0 else [str(j)] * j}
                    for j in range(i % 4)
                ]
                for i in range(N)
            ],
            pa.list_(item_t),
        ),
        "l_long_s": pa.array(
            [
                None if i % 5 == 0 else [None if j == 1 else "z" * 300 + str(i) for j in range(i % 3)]
                for i in range(N)
            ],
            pa.list_(pa.string()),
        ),
        "struct_list": pa.array(
            [None if i % 6 == 0 else {"l": None if i % 4 == 0 else list(range(i % 3))} for i in range(N)],
            pa.struct([("l", pa.list_(pa.int16()))]),
        ),
        # 256-byte vectors inside lists: full-zip, fixed width, with repetition.
        "l_vec": pa.array(
            [None if i % 5 == 0 else [[float(i)] * 64 for _ in range(i % 3)] for i in range(N)],
            pa.list_(pa.list_(pa.float32(), 64)),
        ),
        "struct_fsl": pa.array(
            [None if i % 4 == 0 else {"v": [float(i)] * 3, "n": None if i % 3 else i} for i in range(N)],
            pa.struct([("v", pa.list_(pa.float64(), 3)), ("n", pa.int32())]),
        ),
        "l_fsl": pa.array(
            [None if i % 5 == 0 else [[float(i), float(j)] for j in range(i % 3)] for i in range(N)],
            pa.list_(pa.list_(pa.float32(), 2)),
        ),
    }
    if with_struct:
        inner = pa.struct([("p", pa.float64()), ("q", pa.string())])
        cols["struct"] = pa.array(
            [
                None
                if i % 10 == 0
                else {
                    "x": None if i % 3 == 0 else i,
                    "y": {"p": None if i % 4 == 0 else float(i), "q": None if i % 7 == 0 else str(i)}
                    if i % 11
                    else None,
                }
                for i in range(N)
            ],
            pa.struct([("x", pa.int64()), ("y", inner)]),
        )
    return pa.table(cols)


def _all_null(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "n_i32": pa.nulls(N, pa.int32()),
            "n_s": pa.nulls(N, pa.string()),
            "n_l": pa.nulls(N, pa.list_(pa.int32())),
            "n_st": pa.nulls(N, pa.struct([("a", pa.int32()), ("b", pa.string())])),
            "n_fsl": pa.nulls(N, pa.list_(pa.float32(), 4)),
            "const_i": pa.array([5] * N, pa.int64()),
            "const_s": pa.array(["same"] * N),
            "const_b": pa.array([False] * N),
            "const_l": pa.array([[1, 2]] * N, pa.list_(pa.int8())),
        }
    )


def _forced(rng: np.random.Generator) -> pa.Table:
    """Layouts and compression chosen through field metadata."""
    fields: list[pa.Field] = []
    arrays: list[pa.Array] = []

    def add(name: str, arr: pa.Array, **meta: str) -> None:
        md = {f"lance-encoding:{k.replace('_', '-')}": v for k, v in meta.items()}
        fields.append(pa.field(name, arr.type, metadata=md))
        arrays.append(arr)

    add(
        "fz_i32",
        pa.array(rng.integers(0, 1000, N).astype(np.int32), mask=_mask(rng, N)),
        structural_encoding="fullzip",
    )
    add("fz_s", pa.array([f"s{i}" for i in range(N)], mask=_mask(rng, N)), structural_encoding="fullzip")
    add(
        "fz_l",
        pa.array([None if i % 5 == 0 else list(range(i % 4)) for i in range(N)], pa.list_(pa.int64())),
        structural_encoding="fullzip",
    )
    add(
        "mb_long",
        pa.array(["q" * 300 + str(i) for i in range(N)], mask=_mask(rng, N)),
        structural_encoding="miniblock",
    )
    add("lz4_i", pa.array(rng.integers(0, 10**9, N), mask=_mask(rng, N)), compression="lz4")
    add("zstd_s", pa.array([f"value-{i % 50}-{i}" for i in range(N)], mask=_mask(rng, N)), compression="zstd")
    add("zstd_f", pa.array(rng.standard_normal(N)), compression="zstd")
    add("zstd_fz", pa.array(["w" * 300 + str(i) for i in range(N)], mask=_mask(rng, N)), compression="zstd")
    add(
        "fsst_s",
        pa.array([f"https://example.com/{i % 97}/item{i}" for i in range(N)], mask=_mask(rng, N)),
        compression="fsst",
    )
    add("bss_f32", pa.array(rng.standard_normal(N).astype(np.float32), mask=_mask(rng, N)), bss="on")
    add("bss_f64", pa.array(rng.standard_normal(N)), bss="on")
    add("rle_i", pa.array(np.repeat(np.arange(N // 50), 50).astype(np.int32)), rle_threshold="0.9")
    add(
        "blob",
        pa.array([b"x" * (i % 70) if i % 3 else None for i in range(N)], pa.large_binary()),
        blob="true",
    )
    add(
        "packed",
        pa.array(
            [None if i % 7 == 0 else {"a": i, "b": i / 2} for i in range(N)],
            pa.struct([("a", pa.int32()), ("b", pa.float64())]),
        ),
        packed="true",
    )
    return pa.table(arrays, schema=pa.schema(fields))


CASES: dict[str, Callable[[np.random.Generator], pa.Table]] = {
    "primitives": _primitives,
    "strings": _strings,
    "fsl": _fsl,
    "nested": _nested,
    "all_null": _all_null,
    "forced": _forced,
}


def _table(case: str, paged: bool) -> pa.Table:
    rng = np.random.default_rng(sum(map(ord, case)))
    if case == "nested" and paged:
        # pylance 14.0.2 panics on nested structs of strings written in several batches.
        return _nested(rng, with_struct=False)
    return CASES[case](rng)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str, bool], str]:
    """``written(case, version, paged)``: path of the case as pylance wrote it (cached)."""
    pytest.importorskip("lance.file", reason="pylance (the test oracle) is not installed")
    from lance.file import LanceFileWriter

    root = tmp_path_factory.mktemp("v21")
    cache: dict[tuple[str, str, bool], str] = {}

    def get(case: str, version: str, paged: bool) -> str:
        key = (case, version, paged)
        if key not in cache:
            table = _table(case, paged)
            path = os.fspath(root / f"{case}-{version}-{int(paged)}.lance")
            # Small page budgets and several batches give multi-page columns.
            kw: dict[str, Any] = {"data_cache_bytes": 4096, "max_page_bytes": 4096} if paged else {}
            with LanceFileWriter(path, table.schema, version=version, **kw) as w:
                for batch in table.to_batches(max_chunksize=700 if paged else None):
                    w.write_batch(batch)
            cache[key] = path
        return cache[key]

    return get


def _theirs(path: str) -> pa.Table:
    from lance.file import LanceFileReader as PylanceReader

    return PylanceReader(path).read_all().to_table()


def _assert_same(ours: pa.Table, theirs: pa.Table, what: str) -> None:
    assert ours.schema == theirs.schema, what
    for name in theirs.column_names:
        a, b = ours.column(name), theirs.column(name)
        if pa.types.is_dictionary(b.type):
            # pylance concatenates page dictionaries per output batch; compare the values.
            a, b = a.cast(b.type.value_type), b.cast(b.type.value_type)
        if not a.equals(b):
            la, lb = a.to_pylist(), b.to_pylist()
            bad = next((i for i in range(min(len(la), len(lb))) if la[i] != lb[i]), None)
            pytest.fail(f"{what}: column {name!r} differs (rows {len(la)} vs {len(lb)}, first at {bad})")


# -- pylance writes, we read --------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("paged", [False, True], ids=["one-page", "multi-page"])
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_read_matches_pylance(
    written: Callable[[str, str, bool], str], case: str, version: str, paged: bool
) -> None:
    path = written(case, version, paged)
    theirs = _theirs(path)
    reader = LanceFileReader(path)
    if paged:
        assert max(len(c.pages) for c in reader.metadata().columns) > 1
    _assert_same(reader.read_all().to_table(), theirs, "read_all")

    rng = np.random.default_rng(7)
    n = theirs.num_rows
    for start, length in [(0, 1), (n - 1, 1), (13, 700), (int(rng.integers(0, n // 2)), n // 3), (0, n)]:
        _assert_same(reader.read_range(start, length).to_table(), theirs.slice(start, length), "read_range")

    # Any order, with repeats; rows in one chunk, across chunks and across pages.
    idx = np.concatenate([rng.integers(0, n, 40), [0, n - 1, 5, 5, n // 2, n // 2 + 1]])
    rng.shuffle(idx)
    _assert_same(reader.take_rows(idx).to_table(), theirs.take(pa.array(idx)), "take_rows")
    _assert_same(
        reader.take_rows(np.sort(np.unique(idx))).to_table(), theirs.take(np.sort(np.unique(idx))), "take"
    )


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_projection_of_struct_member(written: Callable[[str, str, bool], str], version: str) -> None:
    path = written("nested", version, False)
    theirs = _theirs(path)
    ours = LanceFileReader(path, columns=["struct.y", "l_i32"]).read_all().to_table()
    expected_y = theirs.column("struct").combine_chunks().field("y")
    got = ours.column("struct").combine_chunks()
    assert got.type.num_fields == 1
    assert got.field("y").equals(expected_y)
    assert got.is_null().equals(theirs.column("struct").combine_chunks().is_null())
    assert ours.column("l_i32").equals(theirs.column("l_i32"))


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_empty_file(tmp_path: Any, version: str) -> None:
    pytest.importorskip("lance.file", reason="pylance (the test oracle) is not installed")
    from lance.file import LanceFileWriter

    schema = pa.schema(
        [
            ("a", pa.int32()),
            ("s", pa.string()),
            ("l", pa.list_(pa.struct([("x", pa.int8())]))),
            ("d", pa.dictionary(pa.int32(), pa.string())),
            ("v", pa.list_(pa.float32(), 4)),
        ]
    )
    path = os.fspath(tmp_path / "empty.lance")
    with LanceFileWriter(path, schema, version=version) as w:
        w.write_batch(schema.empty_table())
    reader = LanceFileReader(path)
    assert reader.num_rows() == 0
    table = reader.read_all().to_table()
    assert table.schema == _theirs(path).schema
    assert table.num_rows == 0
    assert reader.take_rows([]).to_table().num_rows == 0


# -- I/O: a take reads only what it needs -------------------------------------------------------


def _write(path: str, table: pa.Table, version: str) -> str:
    pytest.importorskip("lance.file", reason="pylance (the test oracle) is not installed")
    from lance.file import LanceFileWriter

    with LanceFileWriter(path, table.schema, version=version) as w:
        w.write_batch(table)
    return path


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_warm_take_reads_only_its_chunks(tmp_path: Any, version: str) -> None:
    rows = 200_000
    rng = np.random.default_rng(3)
    table = pa.table(
        {
            "i": pa.array(rng.integers(0, 2**40, rows)),
            "l": pa.array([[i] * (i % 4) for i in range(rows)], pa.list_(pa.int32())),
            "s": pa.array([f"category-{i % 3}" for i in range(rows)]),
        }
    )
    path = _write(os.fspath(tmp_path / "t.lance"), table, version)
    for name in table.column_names:
        reader = LanceFileReader(path, columns=[name])
        column_bytes = sum(sum(p.buffer_sizes) for c in reader.metadata().columns for p in c.pages)
        # Warm up the pages involved (chunk metadata, dictionary, repetition index).
        reader.take_rows([11, 100_001, 199_991]).to_table()
        before = reader.io_stats
        picked = [10, 100_000, 199_990]
        got = reader.take_rows(picked).to_table()
        spent = reader.io_stats - before
        assert got.column(0).equals(table.column(name).take(picked))
        assert spent.requests <= 3, name
        # Three chunks of at most a few KiB each (8 KiB of data plus headers), nothing else.
        assert spent.bytes_read <= 3 * 12 * 1024, name
        assert spent.bytes_read < column_bytes / 20, name


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_full_zip_take_reads_index_entries_then_rows(tmp_path: Any, version: str) -> None:
    rows = 5000
    table = pa.table(
        {
            "s": pa.array([f"{i:05d}" * 80 for i in range(rows)]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(rows * 128, dtype=np.float32)), 128),
        }
    )
    path = _write(os.fspath(tmp_path / "fz.lance"), table, version)
    reader = LanceFileReader(path, columns=["s"])
    assert type(reader.metadata().columns[0].pages[0].encoding).__name__ == "FullZipLayout"
    before = reader.io_stats
    got = reader.take_rows([7, 4000]).to_table()
    spent = reader.io_stats - before
    assert got.column(0).equals(table.column("s").take([7, 4000]))
    # Two rounds (index entries, then row bytes), each at most one request per row.
    assert spent.requests <= 4
    assert spent.bytes_read < 2 * 400 + 64

    reader = LanceFileReader(path, columns=["v"])
    before = reader.io_stats
    got = reader.take_rows([3, 4999]).to_table()
    spent = reader.io_stats - before
    assert got.column(0).equals(table.column("v").take([3, 4999]))
    assert spent.requests <= 2
    assert spent.bytes_read == 2 * 128 * 4


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_full_read_reads_whole_buffers(tmp_path: Any, version: str) -> None:
    rows = 100_000
    table = pa.table({"i": pa.array(np.arange(rows) * 3)})
    path = _write(os.fspath(tmp_path / "full.lance"), table, version)
    reader = LanceFileReader(path)
    before = reader.io_stats
    assert reader.read_all().to_table().equals(table)
    spent = reader.io_stats - before
    pages = len(reader.metadata().columns[0].pages)
    assert spent.requests <= 2 * pages  # chunk metadata, then all chunks of the page at once


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_corrupt_data_raises_lance_errors(written: Callable[[str, str, bool], str], version: str) -> None:
    src = written("nested", version, True)
    with open(src, "rb") as f:
        data = bytearray(f.read())
    end = LanceFileReader(src).metadata().num_data_bytes
    rnd = random.Random(11)
    target = src + ".bad"
    for _ in range(25):
        bad = bytearray(data)
        for _ in range(rnd.randint(1, 6)):
            bad[rnd.randrange(end)] = rnd.randrange(256)
        with open(target, "wb") as f:
            f.write(bad)
        try:
            reader = LanceFileReader(target)
            reader.read_all().to_table()
            reader.take_rows([0, reader.num_rows() - 1, 7]).to_table()
        except LanceError:
            pass


# -- unit tests: layouts, kernels, rep/def ------------------------------------------------------


def test_page_layout_from_raw_errors() -> None:
    from lance_format._proto import encodings_v2_1_pb2 as pb

    name = "lance.encodings21.PageLayout"
    with pytest.raises(CorruptFileError, match=r"f\.lance"):
        page_layout_from_raw((name, b"\xff\xff\xff"), "f.lance")
    with pytest.raises(NotSupportedError, match=r"f\.lance"):
        page_layout_from_raw((name, b""), "f.lance")  # no layout variant set
    with pytest.raises(NotSupportedError, match=r"f\.lance"):
        page_layout_from_raw(("lance.encodings.ArrayEncoding", b""), "f.lance")
    msg = pb.PageLayout()
    mb = msg.mini_block_layout
    mb.value_compression.inline_bitpacking.uncompressed_bits_per_value = 32
    mb.layers.append(pb.REPDEF_NULLABLE_ITEM)
    mb.num_buffers = 1
    mb.num_items = 10
    layout = page_layout_from_raw((name, msg.SerializeToString()), "f.lance")
    assert isinstance(layout, MiniBlockLayout)
    assert layout.layers == (RepDefLayer.NULLABLE_ITEM,)
    assert layout.rep_compression is None


def _fastlanes_pack(values: npt.NDArray[Any], width: int, t: int) -> npt.NDArray[Any]:
    """Reference packer written straight from the layout description (slow, test only)."""
    lanes = FL_BLOCK // t
    order = [0, 4, 2, 6, 1, 5, 3, 7]
    words = [0] * (lanes * width)
    if width == 0:
        return np.zeros(0, dtype=f"u{t // 8}")
    for row in range(t):
        for lane in range(lanes):
            v = int(values[order[row // 8] * 16 + (row % 8) * 128 + lane])
            bit = row * width
            word, shift = bit // t, bit % t
            words[lanes * word + lane] |= (v << shift) & ((1 << t) - 1)
            if shift + width > t:
                words[lanes * (word + 1) + lane] |= v >> (t - shift)
    return np.array(words, dtype=f"u{t // 8}")


@pytest.mark.parametrize(("t", "width"), [(8, 3), (16, 9), (32, 1), (32, 17), (64, 63), (64, 64), (16, 0)])
def test_fastlanes_unpack_matches_reference(t: int, width: int) -> None:
    rng = np.random.default_rng(t * 100 + width)
    hi = (1 << width) - 1 if width else 0
    blocks = [rng.integers(0, hi, FL_BLOCK, dtype=np.uint64, endpoint=True) for _ in range(2)]
    packed = np.concatenate([_fastlanes_pack(b, width, t) for b in blocks])
    out = fastlanes_unpack(packed, width, t, 2)
    assert out.shape == (2, FL_BLOCK)
    for got, want in zip(out, blocks, strict=True):
        assert (got.astype(np.uint64) == want).all()


def _fsst_table(symbols: list[bytes]) -> bytes:
    header = (0x46535354 << 32) | (1 << 24) | len(symbols)
    body = b"".join(s.ljust(8, b"\0") for s in symbols) + bytes(len(s) for s in symbols)
    return header.to_bytes(8, "little") + body


def test_fsst_decompress_with_escapes() -> None:
    table = _fsst_table([b"hello", b" ", b"world", b"\xff\xff"])
    # "hello world", "", literal 0xff + "!" + "hello", the two-byte symbol, a literal 'x'
    codes = [0, 1, 2, 255, 255, 255, ord("!"), 0, 3, 255, ord("x")]
    offsets = np.array([0, 3, 3, 8, 9, 11], dtype=np.int64)
    out_offsets, out = fsst_decompress(table, offsets, np.array(codes, dtype=np.uint8))
    strings = [bytes(out[a:b]) for a, b in itertools.pairwise(out_offsets.tolist())]
    assert strings == [b"hello world", b"", b"\xff!hello", b"\xff\xff", b"x"]
    with pytest.raises(ValueError, match="escape"):
        fsst_decompress(table, np.array([0, 1]), np.array([255], dtype=np.uint8))


def _check(arr: npt.NDArray[Any] | None, expected: list[Any]) -> None:
    assert arr is not None
    assert arr.tolist() == expected


def _levels(*xs: int) -> npt.NDArray[np.uint16]:
    return np.array(xs, dtype=np.uint16)


def test_unravel_list_with_null_empty_and_null_items() -> None:
    # [[1, None], None, [], [4]] with a nullable item and a null-and-empty list layer.
    layers = (RepDefLayer.NULLABLE_ITEM, RepDefLayer.NULL_AND_EMPTY_LIST)
    rep = _levels(1, 0, 1, 1, 1)
    defs = _levels(0, 1, 2, 3, 0)
    items, lists = unravel(rep, defs, layers, 5)
    assert items.length == 3
    _check(items.validity, [True, False, True])
    assert lists.length == 4
    _check(lists.offsets, [0, 2, 2, 2, 3])
    _check(lists.validity, [True, False, True, True])


def test_unravel_null_struct_masks_inner_list() -> None:
    # list<struct<l: list<int>>>: [[{l: [1]}, None]], [[{l: None}]] - the None struct hides its list.
    layers = (
        RepDefLayer.ALL_VALID_ITEM,
        RepDefLayer.NULLABLE_LIST,
        RepDefLayer.NULLABLE_ITEM,
        RepDefLayer.ALL_VALID_LIST,
    )
    rep = _levels(2, 1, 2)
    defs = _levels(0, 2, 1)
    item, inner, struct, outer = unravel(rep, defs, layers, 3)
    assert item.length == 1
    _check(inner.offsets, [0, 1, 1, 1])
    _check(inner.validity, [True, False, False])
    assert struct.length == 3
    _check(struct.validity, [True, False, True])
    _check(outer.offsets, [0, 2, 3])
    assert outer.validity is None


def test_concat_layers_rebases_offsets() -> None:
    layers = (RepDefLayer.ALL_VALID_ITEM, RepDefLayer.NULLABLE_LIST)
    a = unravel(_levels(1, 0, 1), _levels(0, 0, 1), layers, 3)
    b = unravel(_levels(1, 1), None, layers, 2)
    items, lists = concat_layers([a, b])
    assert items.length == 4
    _check(lists.offsets, [0, 2, 2, 3, 4])
    _check(lists.validity, [True, False, True, True])


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_lists_spanning_many_chunks(tmp_path: Any, version: str) -> None:
    rows: list[list[int] | None] = []
    for i in range(120):
        if i % 40 == 7:
            rows.append(list(range(20_000 + i)))  # spans many mini-block chunks
        elif i % 11 == 0:
            rows.append(None)
        elif i % 13 == 0:
            rows.append([])
        else:
            rows.append(list(range(i % 7)))
    table = pa.table(
        {
            "l": pa.array(rows, pa.list_(pa.int64())),
            "ls": pa.array(
                [None if r is None else [str(x) for x in r[:3000]] for r in rows], pa.list_(pa.string())
            ),
        }
    )
    path = _write(os.fspath(tmp_path / "long.lance"), table, version)
    theirs = _theirs(path)
    reader = LanceFileReader(path)
    assert reader.metadata().columns[0].pages[0].encoding.repetition_index_depth > 0
    _assert_same(reader.read_all().to_table(), theirs, "read_all")
    for big in (7, 47, 87):
        for start, stop in [(big, big + 1), (big - 1, big + 1), (big, big + 2), (big - 2, big + 3)]:
            got = LanceFileReader(path).read_range(start, stop - start).to_table()
            _assert_same(got, theirs.slice(start, stop - start), f"rows {start}..{stop}")
    idx = np.random.default_rng(2).integers(0, len(rows), 60)
    _assert_same(reader.take_rows(idx).to_table(), theirs.take(idx), "take_rows")
