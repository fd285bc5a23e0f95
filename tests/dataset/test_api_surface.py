"""Parts of pylance's public API that scripts and pipelines call, against pylance 14.0.2.

``metadata`` / ``schema_metadata`` / ``has_index``, ``slice``, ``drop_index``, the deprecated
``replace_*_metadata``, ``to_pandas`` of fragments and scanners, the size hints ``dataset()`` and
``write_dataset()`` take, ``delete`` / ``update``'s retry arguments, ``fragment_ids``,
``truncate_table``, the static ``drop``, and the package-level names.
"""

from __future__ import annotations

import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import IndexNotFoundError, LanceError, NotSupportedError

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop

TABLE = pa.table({"a": pa.array(range(20), pa.int64()), "b": [f"v{i % 4}" for i in range(20)]})


@pytest.fixture
def uris(tmp_path: Path) -> dict[Any, str]:
    out = {}
    for engine in (lance, lance_format):
        out[engine] = str(tmp_path / engine.__name__)
        engine.write_dataset(TABLE, out[engine], max_rows_per_file=7)
    return out


def test_metadata_views_and_deprecated_setters(uris: dict[Any, str]) -> None:
    seen = []
    for engine, uri in uris.items():
        ds = engine.dataset(uri)
        ds.update_metadata({"owner": "etl"})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ds.replace_schema_metadata({"k": "v"})
            ds.replace_field_metadata("a", {"unit": "m"})
        ds = engine.dataset(uri)
        seen.append(
            (ds.version, ds.metadata, ds.schema_metadata, ds.schema.field("a").metadata, ds.has_index)
        )
    assert seen[0] == seen[1]


@pytest.mark.parametrize(("start", "end"), [(0, 5), (3, 3), (6, 15), (18, 40), (25, 30)])
def test_slice(uris: dict[Any, str], start: int, end: int) -> None:
    got = [
        engine.dataset(uri).slice(start, end, columns=["b", "a"]).to_pylist() for engine, uri in uris.items()
    ]
    assert got[0] == got[1]


@pytest.mark.parametrize(("start", "end"), [(-1, 2), (3, 2)])
def test_slice_refusals(uris: dict[Any, str], start: int, end: int) -> None:
    for engine, uri in uris.items():
        with pytest.raises(ValueError, match="start"):
            engine.dataset(uri).slice(start, end)


def test_drop_index(uris: dict[Any, str]) -> None:
    """Before: ours had no drop_index; pylance's is a CreateIndex removing the index's segments."""
    seen = []
    for engine, uri in uris.items():
        ds = engine.dataset(uri)
        ds.create_scalar_index("a", "BTREE")
        ds.create_scalar_index("b", "BITMAP", name="bi")
        ds.drop_index("a_idx")
        with pytest.raises(RuntimeError):
            ds.drop_index("nope")
        read = lance.dataset(uri)  # pylance reads both
        op = read.get_transactions(1)[0].operation
        seen.append(
            (
                read.version,
                sorted(d.name for d in read.describe_indices()),
                type(op).__name__,
                [i.name for i in op.removed_indices],
                read.has_index,
                read.to_table(filter="b = 'v1'").num_rows,
            )
        )
    assert seen[0] == seen[1]
    with pytest.raises(IndexNotFoundError):
        lance_format.dataset(uris[lance_format]).drop_index("a_idx")


def test_get_version(uris: dict[Any, str]) -> None:
    uri = uris[lance]
    lance.dataset(uri).delete("a < 4")
    for version in (1, 2):
        want = lance.dataset(uri, version=version).get_version()
        assert lance_format.dataset(uri, version=version).get_version() == want


def test_to_pandas_of_fragments_and_scanners(uris: dict[Any, str]) -> None:
    frames = []
    for engine, uri in uris.items():
        ds = engine.dataset(uri)
        frames.append(
            (
                ds.get_fragments()[1].to_pandas(columns=["a"], filter="a > 8").to_dict("list"),
                ds.scanner(columns=["b"], limit=3).to_pandas().to_dict("list"),
            )
        )
    assert frames[0] == frames[1]


def test_size_hints_are_accepted(tmp_path: Path) -> None:
    for engine in (lance, lance_format):
        uri = str(tmp_path / engine.__name__)
        engine.write_dataset(TABLE, uri, data_cache_bytes=1 << 20, max_page_bytes=1 << 16)
        with warnings.catch_warnings():  # pylance: index_cache_size is deprecated
            warnings.simplefilter("ignore", DeprecationWarning)
            ds = engine.dataset(
                uri,
                block_size=4096,
                index_cache_size=16,
                metadata_cache_size_bytes=1 << 20,
                index_cache_size_bytes=1 << 20,
                read_params={"cache_repetition_index": False},
            )
        assert ds.to_table() == TABLE
        assert ds.delete("a < 3", conflict_retries=2, retry_timeout=timedelta(seconds=5)) is not None
        ds.update({"b": "'x'"}, where="a = 5", conflict_retries=2, retry_timeout=timedelta(seconds=5))
    assert (
        lance_format.dataset(str(tmp_path / "lance_format")).to_table()
        == lance.dataset(str(tmp_path / "lance")).to_table()
    )
    with pytest.raises(ValueError, match="index_cache_size"):
        lance_format.dataset(str(tmp_path / "lance_format"), index_cache_size=-1)


def test_use_legacy_format_and_refused_options(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(TABLE, str(tmp_path / "stable"), use_legacy_format=False)
    assert ds.data_storage_version == lance.dataset(str(tmp_path / "stable")).data_storage_version
    with pytest.raises(NotSupportedError):
        lance_format.write_dataset(TABLE, str(tmp_path / "legacy"), use_legacy_format=True)
    with pytest.raises(NotSupportedError):
        lance_format.write_dataset(TABLE, str(tmp_path / "ac"), auto_cleanup_options={"interval": 5})
    with pytest.raises(LanceError):
        lance_format.dataset(str(tmp_path / "stable"), commit_lock=object())


def test_fragment_ids_and_truncate_table(uris: dict[Any, str]) -> None:
    """Before: ours had neither. pylance's truncate is a Delete of every fragment, predicate true."""
    seen = []
    for engine, uri in uris.items():
        ds = engine.dataset(uri)
        ds.delete("a < 7")  # fragment 0 goes
        ids = sorted(ds.fragment_ids())
        ds.truncate_table()
        ds.truncate_table()  # again, with no fragments left
        read = lance.dataset(uri)  # pylance reads both
        op = read.get_transactions(1)[0].operation
        seen.append(
            (
                ids,
                3 in ds.fragment_ids(),
                len(engine.dataset(uri).fragment_ids()),
                read.version,
                read.count_rows(),
                read.schema,
                type(op).__name__,
                getattr(op, "predicate", None),
                engine.dataset(uri, version=2).count_rows(),
            )
        )
    assert seen[0] == seen[1]
    assert seen[0][0] == [1, 2]


def test_drop(uris: dict[Any, str], tmp_path: Path) -> None:
    """Before: ours had no ``LanceDataset.drop``; pylance's removes the folder, OSError when absent."""
    for engine, uri in uris.items():
        cls = type(engine.dataset(uri))
        cls.drop(Path(uri))
        assert not Path(uri).exists()
        with pytest.raises(OSError, match=r"(?i)not found|no dataset"):
            cls.drop(uri)
        cls.drop(uri, ignore_not_found=True)
        assert tmp_path.exists()
    with pytest.raises(FileNotFoundError):
        lance_format.dataset(uris[lance_format])
    # Written again at the same URI after the drop: what a reader sees is the new dataset.
    lance_format.write_dataset(TABLE.slice(0, 3), uris[lance_format])
    assert lance.dataset(uris[lance_format]).to_table() == TABLE.slice(0, 3)


def test_drop_on_object_stores() -> None:
    uri = "memory://drop-test/ds"
    lance_format.write_dataset(TABLE, uri)
    lance_format.write_dataset(TABLE, uri, mode="append")
    lance_format.dataset(uri).create_scalar_index("a", "BTREE")  # an _indices/<uuid>/ folder too
    lance_format.LanceDataset.drop(uri)
    with pytest.raises(FileNotFoundError):
        lance_format.dataset(uri)
    with pytest.raises(FileNotFoundError):
        lance_format.LanceDataset.drop(uri)


@pytest.mark.parametrize(
    "name", ["LanceScanner", "MergeInsertBuilder", "CleanupStats", "Index", "IndexFile", "DataStatistics"]
)
def test_package_level_names(name: str) -> None:
    assert hasattr(lance, name)
    assert isinstance(getattr(lance_format, name), type)
