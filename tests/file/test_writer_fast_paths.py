"""The writer's fixed-cost cuts keep the bytes and pylance's reading of them: booleans taken as
Arrow's bitmap, whole pages of flat values or integers in one compiled call, schema plans shared
by writers of one schema, the row count appended to a cached descriptor, and parts written to
the local store without joining them."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_format.core.types import fields_from_arrow
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21.encode import miniblock
from lance_format.encodings.v21.encode.values import FixedVals, extract
from lance_format.file import LanceFileReader, LanceFileWriter, _serde
from lance_format.io.store import LocalStore
from tests.encodings.numpy_reference import miniblock_encode as ref
from tests.interop.compare import assert_tables_equal

VERSIONS = ["2.1", "2.2"]
FLAT = (m.RepDefLayer.ALL_VALID_ITEM,)


def _bytes(bufs: list[object]) -> list[bytes]:
    return [bytes(memoryview(b).cast("B")) if not isinstance(b, bytes) else b for b in bufs]  # type: ignore[arg-type]


def _write_both(tmp_path: Path, table: pa.Table, version: str) -> tuple[str, str]:
    import lance

    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    with LanceFileWriter(ours, table.schema, version=version) as w:
        w.write_batch(table)
    with lance.file.LanceFileWriter(theirs, table.schema, version=version) as w:
        w.write_batch(table)
    return ours, theirs


def _pylance_reads(path: str) -> pa.Table:
    import lance

    return lance.file.LanceFileReader(path).read_all().to_table()


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 70_000),
    offset=st.integers(0, 17),
    items=st.sampled_from([1, 3, 8]),
    large=st.booleans(),
)
def test_boolean_bitmap_page_matches_numpy(seed: int, n: int, offset: int, items: int, large: bool) -> None:
    """A boolean page from Arrow's bitmap (any offset, FSL or not) is the numpy reference's page
    of the same booleans unpacked."""
    rng = np.random.default_rng(seed)
    flat = pa.array(rng.random((n + offset) * items) < 0.4)
    arr: pa.Array = flat if items == 1 else pa.FixedSizeListArray.from_arrays(flat, items)
    arr = arr.slice(offset, n)
    vals = extract(arr)
    assert isinstance(vals, FixedVals)
    bools = np.asarray(flat.to_numpy(zero_copy_only=False))[offset * items : (offset + n) * items]
    dims = () if items == 1 else (items,)
    plain = FixedVals(np.zeros(0, np.uint8), 0, n, bools=bools, dims=dims, level_valid=(None,) * len(dims))
    assert np.array_equal(vals.bits(), bools)
    want = ref.encode_miniblock(plain, None, None, None, FLAT, large)
    got = miniblock.encode_miniblock(vals, None, None, None, FLAT, large)
    assert got[0] == want[0]
    assert _bytes(got[1]) == _bytes(want[1])


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 9000),
    kind=st.sampled_from(["u8", "i16", "i32", "i64", "f32", "f64", "fsl_f32", "fsl_i16"]),
    large=st.booleans(),
)
def test_one_call_pages_match_numpy(seed: int, n: int, kind: str, large: bool) -> None:
    """Flat integers (bit-packed) and flat fixed-width values (floats, fixed-size lists without
    nulls) encoded in one compiled call give the numpy reference's page."""
    rng = np.random.default_rng(seed)
    dims: tuple[int, ...] = (4,) if kind.startswith("fsl") else ()
    count = n * (dims[0] if dims else 1)
    if kind in ("f32", "fsl_f32", "f64"):
        width = 8 if kind == "f64" else 4
        raw = rng.random(count).astype(f"<f{width}").view(np.uint8)
        vals = FixedVals(raw, width, n, dims=dims, level_valid=(None,) * len(dims))
    else:
        width = {"u8": 1, "i16": 2, "fsl_i16": 2, "i32": 4, "i64": 8}[kind]
        top = int(rng.choice([1, 1 << 7, 1 << 20, 2**62]))
        raw = rng.integers(0, min(top, 2 ** (8 * width - 1)), count, dtype=np.int64).astype(f"<u{width}")
        bits = None if dims else 8 * width
        vals = FixedVals(
            raw.view(np.uint8), width, n, dims=dims, level_valid=(None,) * len(dims), int_bits=bits
        )
    want = ref.encode_miniblock(vals, None, None, None, FLAT, large)
    got = miniblock.encode_miniblock(vals, None, None, None, FLAT, large)
    assert got[0] == want[0]
    assert _bytes(got[1]) == _bytes(want[1])


def test_flat_page_too_large_rows_still_refused() -> None:
    """A fixed-size-list row over a 2.1 chunk's 32 KiB is still refused (the caller goes full-zip)."""
    vals = FixedVals(np.zeros(3 * 40_000, np.uint8), 4, 3, dims=(10_000,), level_valid=(None,))
    with pytest.raises(miniblock.TooLarge):
        miniblock.encode_miniblock(vals, None, None, None, FLAT, False)


@pytest.mark.parametrize("version", VERSIONS)
def test_bool_with_garbage_bits_past_the_end(version: str, tmp_path: Path) -> None:
    """Arrow leaves the bits past a boolean array's end undefined: they never reach the file."""
    n = 13
    garbage = pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(b"\x55\xff\xff\xff")])
    clean = pa.array(garbage.to_pylist(), pa.bool_())
    for name, arr in (("garbage", garbage), ("clean", clean)):
        with LanceFileWriter(str(tmp_path / f"{name}.lance"), version=version) as w:
            w.write_batch(pa.table({"b": arr}))
    assert (tmp_path / "garbage.lance").read_bytes() == (tmp_path / "clean.lance").read_bytes()
    assert _pylance_reads(str(tmp_path / "garbage.lance")).column(0).to_pylist() == clean.to_pylist()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "column",
    [
        "bool",
        "bool_sliced",
        "bool_sliced8",
        "bool_nulls",
        "bool_fsl",
        "one_int",
        "ints",
        "floats",
        "floats_sliced",
        "vec4",
        "vec128",
    ],
)
def test_pylance_reads_fast_path_pages(column: str, version: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    bools = pa.array(rng.random(100_003) < 0.3)
    arrays = {
        "bool": bools,
        "bool_sliced": bools.slice(3, 50_001),
        "bool_sliced8": bools.slice(16, 49_999),
        "bool_nulls": pa.array([True, None, False] * 3001),
        "bool_fsl": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(30_003) < 0.5), 3).slice(1, 9000),
        "one_int": pa.array([1], pa.int64()),
        "ints": pa.array(rng.integers(-5, 1000, 20_000, dtype=np.int32)),
        "floats": pa.array(rng.random(30_000)),
        "floats_sliced": pa.array(rng.random(30_000)).slice(7, 20_000),
        "vec4": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(40_000, dtype=np.float32)), 4),
        "vec128": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(128_000, dtype=np.float32)), 128),
    }
    table = pa.table({"c": arrays[column]})
    ours, theirs = _write_both(tmp_path, table, version)
    assert_tables_equal(_pylance_reads(ours), table, context=f"pylance reads our {column}")
    assert_tables_equal(LanceFileReader(ours).read_all().to_table(), table, context=column)
    if table.num_rows > 1:  # (pylance stores a single value as a constant page)
        assert os.path.getsize(ours) <= os.path.getsize(theirs) * 1.05


def test_schema_plan_keeps_field_metadata_apart(tmp_path: Path) -> None:
    """Writers of schemas equal but for field metadata do not share a plan: an encoding hint in
    the metadata still takes effect (Arrow's schema equality ignores metadata)."""
    values = pa.array(np.arange(10_000, dtype=np.int64) % 7)
    paths = []
    for i, meta in enumerate([None, {"lance-encoding:compression": "none"}, None]):
        schema = pa.schema([pa.field("x", pa.int64(), metadata=meta)])
        path = str(tmp_path / f"f{i}.lance")
        with LanceFileWriter(path, schema, version="2.1") as w:
            w.write_batch(pa.table({"x": values}, schema=schema))
        paths.append(path)
        assert _pylance_reads(path).column(0).to_pylist() == values.to_pylist()
    sizes = [os.path.getsize(p) for p in paths]
    assert sizes[0] == sizes[2] < sizes[1]  # bit-packed, plain, bit-packed again
    assert LanceFileReader(paths[1]).schema.field("x").metadata == {b"lance-encoding:compression": b"none"}


@pytest.mark.parametrize("rows", [0, 1, 127, 128, 300, 2**31, 2**40 + 5])
def test_descriptor_with_length_is_the_full_serialization(rows: int) -> None:
    schema = pa.schema(
        [pa.field("x", pa.int64(), metadata={"k": "v"}), pa.field("s", pa.struct([("z", pa.string())]))],
        metadata={"m": "1"},
    )
    for lance_schema in (fields_from_arrow(schema), fields_from_arrow(pa.schema([]))):
        empty = _serde.file_descriptor_bytes(lance_schema, 0)
        assert _serde.with_length(empty, rows) == _serde.file_descriptor_bytes(lance_schema, rows)


def test_local_write_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts land back to back (short writes resumed), missing folders are made, no temporary
    file is left behind, and an existing object is replaced."""
    store = LocalStore(str(tmp_path))
    real = os.writev

    def short_writev(fd: int, bufs: list[memoryview]) -> int:
        return real(fd, [bytes(memoryview(bufs[0])[:3])])  # at most 3 bytes a call

    parts = [b"hello ", memoryview(b"big world"), b"", np.arange(5, dtype=np.uint8).data]
    want = b"hello big world" + bytes(range(5))
    store.write_parts("a/b/c.bin", parts)
    assert (tmp_path / "a" / "b" / "c.bin").read_bytes() == want
    monkeypatch.setattr(os, "writev", short_writev)
    store.write_parts("a/b/c.bin", [b"xy", b"z" * 10])
    assert (tmp_path / "a" / "b" / "c.bin").read_bytes() == b"xy" + b"z" * 10
    store.write_parts("a/empty.bin", [])
    assert (tmp_path / "a" / "empty.bin").read_bytes() == b""
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b", "empty.bin"]
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["c.bin"]


_EDGES = [0, 1, 127, 128, 300, 2**32, 2**63 - 1, 2**64 - 1]
_U64 = st.one_of(st.sampled_from(_EDGES), st.integers(0, 2**64 - 1))
_RAW = st.tuples(st.sampled_from(["lance.encodings21.PageLayout", "x", "a" * 150]), st.binary(max_size=300))


@settings(max_examples=300, deadline=None)
@given(
    column=_RAW,
    pages=st.lists(
        st.tuples(st.lists(_U64, max_size=4), st.lists(_U64, max_size=4), _U64, _U64, _RAW), max_size=4
    ),
)
def test_column_metadata_bytes_are_protobufs(
    column: tuple[str, bytes], pages: list[tuple[list[int], list[int], int, int, tuple[str, bytes]]]
) -> None:
    """The column metadata written straight in wire format is the bytes protobuf makes of the same
    message (zeros, empty lists, multi-byte lengths and 64-bit numbers included)."""
    from lance_format._proto import file2_pb2

    cm = file2_pb2.ColumnMetadata()
    cm.encoding.CopyFrom(_serde.wrap_any(column))
    for offsets, sizes, length, priority, enc in pages:
        p = cm.pages.add()
        p.buffer_offsets.extend(offsets)
        p.buffer_sizes.extend(sizes)
        p.length = length
        p.priority = priority
        p.encoding.CopyFrom(_serde.wrap_any(enc))
    assert _serde.column_metadata_bytes(column, pages) == cm.SerializeToString()
