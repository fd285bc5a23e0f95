"""pylance reads files our writer made at 2.1 and 2.2 (and we read them back): every catalogue
case pylance itself can write at that version, compared cell by cell."""

from __future__ import annotations

import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from tests.interop.cases import CASES, Case
from tests.interop.compare import assert_tables_equal
from tests.interop.helpers import FileCache, pylance_reader, pylance_take, random_indices
from tests.strategies import TableSpec, table_specs

pytestmark = pytest.mark.interop

VERSIONS = ["2.1", "2.2"]
PAIRS = [(c, v) for c in CASES for v in VERSIONS if v in c.versions]


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=lambda x: str(x))
def test_pylance_reads_ours(case: Case, version: str, our_file: FileCache) -> None:
    path = our_file(case, version)
    reader = pylance_reader(path)
    meta = reader.metadata()
    assert (meta.major_version, meta.minor_version) == tuple(int(x) for x in version.split("."))
    assert_tables_equal(
        reader.read_all().to_table(), case.expected(), context=f"pylance reads our {case.name}"
    )


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=lambda x: str(x))
def test_pylance_takes_and_ranges(case: Case, version: str, our_file: FileCache) -> None:
    # Random access exercises what a full read does not: chunk metadata, repetition indexes.
    reader = pylance_reader(our_file(case, version))
    expected = case.expected()
    n = expected.num_rows
    idx = random_indices(n, zlib.crc32(case.name.encode()))
    assert_tables_equal(
        pylance_take(reader, idx), expected.take(pa.array(idx)), context=f"pylance takes our {case.name}"
    )
    for start, num in {(0, min(n, 10)), (n // 3, n - n // 3), (max(0, n - 1), min(n, 1))}:
        assert_tables_equal(
            reader.read_range(start, num).to_table(),
            expected.slice(start, num),
            context=f"pylance read_range({start}, {num}) on our {case.name}",
        )


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=lambda x: str(x))
def test_we_read_ours(case: Case, version: str, our_file: FileCache) -> None:
    from lance_format.file import LanceFileReader

    got = LanceFileReader(our_file(case, version)).read_all().to_table()
    assert_tables_equal(got, case.expected(), context=f"we read our {case.name} at {version}")


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=table_specs(struct_nulls=True))
def test_hypothesis_pylance_reads_ours(spec: TableSpec, version: str, tmp_path: Path) -> None:
    from lance_format.file import LanceFileWriter

    table = spec.build()
    path = str(tmp_path / f"h{spec.seed}.lance")
    with LanceFileWriter(path, table.schema, version=version, max_page_bytes=4096) as w:
        w.write_batch(table)
    got = pylance_reader(path).read_all().to_table()
    assert got.num_rows == table.num_rows
    assert_tables_equal(got, table, context=f"pylance reads {spec}")


def test_append_to_pylance_22_dataset(tmp_path: Path) -> None:
    import lance

    from lance_format.dataset import write_dataset

    uri = str(tmp_path / "ds")
    first = pa.table({"a": pa.array([1, 2, None], pa.int64()), "s": ["x", None, "zz"]})
    lance.write_dataset(first, uri)
    more = pa.table({"a": pa.array([4, None], pa.int64()), "s": ["long" * 100, "q"]})
    write_dataset(more, uri, mode="append")
    ds = lance.dataset(uri)
    assert ds.data_storage_version == "2.2"
    assert_tables_equal(ds.to_table(), pa.concat_tables([first, more]), context="pylance reads the append")


@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_reads_compression_metadata(version: str, tmp_path: Path) -> None:
    from lance_format.file import LanceFileWriter

    def md(codec: str) -> dict[str, str]:
        return {"lance-encoding:compression": codec, "lance-encoding:compression-level": "5"}

    n = 6000
    schema = pa.schema(
        [
            pa.field("z", pa.int64(), metadata=md("zstd")),
            pa.field("l", pa.string(), metadata=md("lz4")),
            pa.field("n", pa.float64(), metadata=md("none")),
            pa.field("zs", pa.list_(pa.string()), metadata=md("zstd")),
        ]
    )
    table = pa.table(
        {
            "z": pa.array([None if i % 7 == 0 else i % 300 for i in range(n)], pa.int64()),
            "l": pa.array([f"row {i}" if i % 5 else None for i in range(n)]),
            "n": pa.array([i / 3 for i in range(n)]),
            "zs": pa.array([[str(i)] * (i % 3) if i % 4 else None for i in range(n)], pa.list_(pa.string())),
        },
        schema=schema,
    )
    path = str(tmp_path / "c.lance")
    with LanceFileWriter(path, schema, version=version) as w:
        w.write_batch(table)
    assert_tables_equal(pylance_reader(path).read_all().to_table(), table, check_metadata=False)


def test_append_keeps_pylance_21_dataset_version(tmp_path: Path) -> None:
    import lance

    from lance_format.dataset import write_dataset

    uri = str(tmp_path / "ds21")
    first = pa.table(
        {"l": pa.array([[1, 2], None, []], pa.list_(pa.int32())), "st": [{"a": 1}, None, {"a": 3}]}
    )
    lance.write_dataset(first, uri, data_storage_version="2.1")
    more = pa.table(
        {"l": pa.array([[5]], pa.list_(pa.int32())), "st": pa.array([{"a": None}], first["st"].type)}
    )
    write_dataset(more, uri, mode="append")
    ds = lance.dataset(uri)
    assert ds.data_storage_version == "2.1"
    assert_tables_equal(ds.to_table(), pa.concat_tables([first, more]), context="pylance reads the append")


@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_reads_packed_structs(version: str, tmp_path: Path) -> None:
    from lance_format.file import LanceFileReader, LanceFileWriter

    st = pa.struct([("a", pa.int32()), ("b", pa.float64()), ("c", pa.uint8())])
    packed = {"lance-encoding:packed": "true"}
    schema = pa.schema(
        [pa.field("p", st, metadata=packed), pa.field("lp", pa.list_(pa.field("item", st, metadata=packed)))]
    )
    n = 3000
    table = pa.table(
        {
            "p": pa.array([{"a": i, "b": i / 2, "c": i % 7} if i % 5 else None for i in range(n)], st),
            "lp": pa.array(
                [[{"a": i, "b": 1.0, "c": 1}] * (i % 3) if i % 4 else None for i in range(n)], pa.list_(st)
            ),
        },
        schema=schema,
    )
    path = str(tmp_path / "p.lance")
    with LanceFileWriter(path, schema, version=version) as w:
        w.write_batch(table)
    assert_tables_equal(pylance_reader(path).read_all().to_table(), table, check_metadata=False)
    assert_tables_equal(LanceFileReader(path).read_all().to_table(), table, check_metadata=False)


def test_pylance_reads_our_blobs(tmp_path: Path) -> None:
    import lance

    from lance_format.dataset import write_dataset
    from lance_format.encodings.v21 import model as m
    from lance_format.file import LanceFileReader

    blob = {"lance-encoding:blob": "true"}
    schema = pa.schema([pa.field("b", pa.large_binary(), metadata=blob), pa.field("i", pa.int32())])
    values = [b"x" * 1000, None, b"", b"yz" * 5000] * 50
    table = pa.table(
        {"b": pa.array(values, pa.large_binary()), "i": pa.array(range(200), pa.int32())}, schema=schema
    )
    uri = str(tmp_path / "blobs")
    write_dataset(table, uri)
    ds = lance.dataset(uri)
    assert ds.data_storage_version == "2.2"
    files = list((tmp_path / "blobs" / "data").glob("*.lance"))
    layout = LanceFileReader(str(files[0]))._meta.columns[0].pages[0].encoding
    assert isinstance(layout, m.BlobLayout)
    got = ds.take_blobs("b", indices=[0, 3, 7])
    assert [f.read() for f in got] == [values[0], values[3], values[7]]
    assert ds.to_table(columns=["i"]).column("i").to_pylist() == list(range(200))


@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_reads_strings_encoded_in_ranges_on_threads(version: str, tmp_path: Path) -> None:
    """Pages whose dictionary build and FSST coding ran in ranges on threads (low-cardinality
    strings with nulls: dictionary; distinct short strings: FSST mini-block; long strings: FSST
    full-zip) are the bytes of a one-range write, and pylance reads them cell by cell."""
    from unittest import mock

    import numpy as np

    from lance_format.dataset.session import Session
    from lance_format.encodings.v21.encode import _split
    from lance_format.file import LanceFileWriter

    rng = np.random.default_rng(7)
    n = 40_000
    words = np.array([f"category-{i}-{'x' * (i % 9)}" for i in range(60)])
    low = words[rng.integers(0, len(words), n)].astype(object)
    low[rng.random(n) < 0.1] = None
    table = pa.table(
        {
            "low": pa.array(low, pa.string()),
            "short": pa.array([f"user-{x}" for x in rng.integers(0, 1 << 40, n)]),
            "long": pa.array(
                ["lorem ipsum dolor " * 20 + str(x) for x in rng.integers(0, 1 << 30, n // 8)] * 8
            ),
        }
    )

    def write(name: str, min_bytes: int, threads: int) -> bytes:
        # The split threads are the writing session's (its encode_threads).
        with (
            Session(encode_threads=threads) as session,
            mock.patch.object(_split, "SPLIT_MIN_BYTES", min_bytes),
            LanceFileWriter(name, table.schema, version=version, store=session.store_for(str(tmp_path))) as w,
        ):
            w.write_batch(table)
        return (tmp_path / name).read_bytes()

    one = write("one.lance", 1 << 40, 1)
    split = write("split.lance", 1 << 12, 3)
    assert split == one
    assert_tables_equal(pylance_reader(str(tmp_path / "split.lance")).read_all().to_table(), table)
