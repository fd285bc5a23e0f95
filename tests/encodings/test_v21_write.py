"""Unit tests of the 2.1/2.2 encoder: FastLanes packing and round trips through our own reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from lance_format.encodings.v21.encode.bitpack import bit_widths, pack_blocks
from lance_format.encodings.v21.fastlanes import fastlanes_unpack
from lance_format.file import LanceFileReader, LanceFileWriter
from tests.interop.compare import assert_tables_equal
from tests.strategies import TableSpec, table_specs


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_pack_inverts_unpack(t: int) -> None:
    rng = np.random.default_rng(t)
    dt = np.dtype(f"u{t // 8}")
    for w in sorted({0, 1, 3, t - 1, t}):
        hi = 1 << min(w, 63)
        v = (
            rng.integers(0, hi, size=(3, 1024), dtype=np.uint64) if w else np.zeros((3, 1024), np.uint64)
        ).astype(dt)
        assert (fastlanes_unpack(pack_blocks(v, w), w, t, 3) == v).all()


def test_bit_widths() -> None:
    got = bit_widths(np.array([[0, 0], [0, 1], [3, 2], [2**63, 1]], dtype=np.uint64))
    assert got.tolist() == [0, 1, 2, 64]


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=table_specs(struct_nulls=True))
def test_hypothesis_round_trip_ours(spec: TableSpec, version: str, tmp_path: Path) -> None:
    table = spec.build()
    path = str(tmp_path / f"r{spec.seed}.lance")
    with LanceFileWriter(path, table.schema, version=version, max_page_bytes=4096) as w:
        w.write_batch(table)
    got = LanceFileReader(path).read_all().to_table()
    assert got.num_rows == table.num_rows
    # Cell by cell; dictionaries may come back rebuilt, as pylance's do.
    assert_tables_equal(got, table, context=str(spec))


def _layouts(path: str) -> list[object]:
    reader = LanceFileReader(path)
    return [c.pages[0].encoding for c in reader._meta.columns]


def test_fsst_round_trip() -> None:
    from lance_format.encodings.v21._fsst import fsst_decompress
    from lance_format.encodings.v21.encode.fsst import TABLE_SIZE, fsst_compress

    rng = np.random.default_rng(3)
    words = [f"user-{x}@example.com" for x in rng.integers(0, 1 << 40, 5000)] + ["", "\xff\xfe", "a"]
    raw = [w.encode("utf-8", "surrogateescape") for w in words]
    data = np.frombuffer(b"".join(raw), dtype=np.uint8)
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    got = fsst_compress(data, offsets)
    assert got is not None
    table, offs, codes = got
    assert len(table) == TABLE_SIZE, "pylance insists on the full-size symbol table"
    assert len(codes) < len(data) / 2
    back_offs, back = fsst_decompress(table, offs, codes)
    assert np.array_equal(back_offs, offsets)
    assert np.array_equal(back, data)


def test_fsst_skips_small_input() -> None:
    from lance_format.encodings.v21.encode.fsst import fsst_compress

    data = np.frombuffer(b"abcabc", dtype=np.uint8)
    assert fsst_compress(data, np.array([0, 3, 6], dtype=np.int64)) is None


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_layout_choices(version: str, tmp_path: Path) -> None:
    from lance_format.encodings.v21 import model as m

    n = 5000
    table = pa.table(
        {
            "ints": pa.array(np.arange(n, dtype=np.int64)),
            "lowcard": pa.array([f"k{i % 7}" for i in range(n)]),
            "long": pa.array(["z" * 300 + str(i) for i in range(n)]),
            "nulls": pa.nulls(n, pa.int32()),
            "lists": pa.array([[i, i] for i in range(n)], pa.list_(pa.int32())),
        }
    )
    path = str(tmp_path / "x.lance")
    with LanceFileWriter(path, table.schema, version=version) as w:
        w.write_batch(table)
    ints, lowcard, long, nulls, lists = _layouts(path)
    assert isinstance(ints, m.MiniBlockLayout)
    assert isinstance(ints.value_compression, m.InlineBitpacking)
    assert ints.has_large_chunk == (version == "2.2")
    assert isinstance(lowcard, m.MiniBlockLayout)
    assert lowcard.num_dictionary_items == 7
    assert isinstance(long, m.FullZipLayout)
    assert isinstance(long.value_compression, m.Fsst)
    assert isinstance(nulls, m.AllNullLayout)
    assert isinstance(lists, m.MiniBlockLayout)
    assert lists.repetition_index_depth == 1
    assert_tables_equal(LanceFileReader(path).read_all().to_table(), table)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_compression_metadata(version: str, tmp_path: Path) -> None:
    from lance_format.encodings.v21 import model as m

    def md(**kw: str) -> dict[str, str]:
        return {f"lance-encoding:{k.replace('_', '-')}": v for k, v in kw.items()}

    n = 4000
    schema = pa.schema(
        [
            pa.field("z", pa.int64(), metadata=md(compression="zstd", compression_level="7")),
            pa.field("l", pa.string(), metadata=md(compression="lz4")),
            pa.field("plain", pa.int32(), metadata=md(compression="none")),
            pa.field("fz", pa.int32(), metadata=md(structural_encoding="fullzip")),
        ]
    )
    table = pa.table(
        {
            "z": pa.array(np.arange(n) % 50, pa.int64()),
            "l": pa.array([f"value {i}" for i in range(n)]),
            "plain": pa.array(np.arange(n, dtype=np.int32)),
            "fz": pa.array(np.arange(n, dtype=np.int32)),
        },
        schema=schema,
    )
    path = str(tmp_path / "c.lance")
    with LanceFileWriter(path, schema, version=version) as w:
        w.write_batch(table)
    z, lz, plain, fz = _layouts(path)
    assert isinstance(z, m.MiniBlockLayout)
    assert z.value_compression == m.General(m.BufferCompression("zstd", 7), m.InlineBitpacking(64))
    assert isinstance(lz, m.MiniBlockLayout)
    assert isinstance(lz.value_compression, m.General)
    assert lz.value_compression.compression.scheme == "lz4"
    assert isinstance(plain, m.MiniBlockLayout)
    assert plain.value_compression == m.Flat(32)
    assert isinstance(fz, m.FullZipLayout)
    assert_tables_equal(LanceFileReader(path).read_all().to_table(), table)


def test_bad_compression_level_is_a_typed_error(tmp_path: Path) -> None:
    from lance_format.core.errors import InvalidInputError

    meta = {"lance-encoding:compression": "zstd", "lance-encoding:compression-level": "high"}
    schema = pa.schema([pa.field("a", pa.int64(), metadata=meta)])
    w = LanceFileWriter(str(tmp_path / "e.lance"), schema, version="2.1")
    w.write_batch(pa.table({"a": pa.array([1, 2], pa.int64())}, schema=schema))
    with pytest.raises(InvalidInputError, match="compression-level"):
        w.close()


@pytest.mark.parametrize(
    ("asked", "expected"),
    [(None, "2.2"), ("2.1", "2.1"), ("2.0", "2.0"), ("stable", "2.2")],
)
def test_dataset_version_choice(asked: str | None, expected: str, tmp_path: Path) -> None:
    from lance_format.dataset import write_dataset

    uri = str(tmp_path / "ds")
    first = pa.table({"a": pa.array([1, None, 3], pa.int64()), "s": ["x", "y", None]})
    kw = {} if asked is None else {"data_storage_version": asked}
    ds = write_dataset(first, uri, **kw)
    assert ds.manifest.data_format.version == expected
    more = pa.table({"a": pa.array([4], pa.int64()), "s": ["w"]})
    # An append keeps the dataset's version whatever is asked.
    ds = write_dataset(more, uri, mode="append", data_storage_version="2.0" if expected != "2.0" else "2.2")
    assert ds.manifest.data_format.version == expected
    assert_tables_equal(ds.to_table(), pa.concat_tables([first, more]))


@pytest.mark.parametrize("seed", [5, 6])
def test_fsst_symbol_lookup_is_exact(seed: int) -> None:
    """The compiled greedy parse picks, at every position, the longest symbol a dictionary lookup
    finds (hash probes and the per-first-byte length masks miss nothing), and round-trips."""
    from lance_format.encodings.v21._fsst import fsst_decompress
    from lance_format.encodings.v21.encode import fsst

    rng = np.random.default_rng(seed)
    lens = rng.integers(1, 9, 255)
    raw = [rng.integers(97, 101, k, dtype=np.uint8).tobytes() for k in lens]
    uniq = {r: i for i, r in enumerate(raw)}
    keep = np.array(sorted(uniq.values()))
    vals = np.array([int.from_bytes(raw[i], "little") for i in keep], np.uint64)
    table = fsst._Table(vals, lens[keep].astype(np.int64))
    code_of = {raw[i]: c for c, i in enumerate(keep)}
    sample = rng.integers(97, 102, 4000, dtype=np.uint8)  # 'e' (101) is in no symbol: escapes
    offsets = np.array([0, 1000, 1000, 2500, 4000], dtype=np.int64)
    s, code, pos, ln = fsst._parse(table, sample, offsets)
    want: list[tuple[int, int, int, int]] = []
    for i in range(len(offsets) - 1):
        cur, end = int(offsets[i]), int(offsets[i + 1])
        while cur < end:
            hit = next(
                (
                    (code_of[b], k)
                    for k in range(min(8, end - cur), 0, -1)
                    if (b := sample[cur : cur + k].tobytes()) in code_of
                ),
                (-1, 1),
            )
            want.append((i, hit[0], cur, hit[1]))
            cur += hit[1]
    assert list(zip(s.tolist(), code.tolist(), pos.tolist(), ln.tolist(), strict=True)) == want
    text = "".join(f"abacad-{i % 97}-dabaca;" for i in range(3000)).encode()
    data = np.frombuffer(text, np.uint8)
    offsets = np.arange(0, len(data) + 1, 23, dtype=np.int64)
    offsets[-1] = len(data)
    out = fsst.fsst_compress(data, offsets)
    assert out is not None
    _, back = fsst_decompress(out[0], out[1], out[2])
    assert back.tobytes() == text
