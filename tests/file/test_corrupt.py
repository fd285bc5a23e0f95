"""Bad input: truncated files, wrong magic, random byte corruption, unsupported and legacy versions.

The contract: opening and reading a damaged file either raises ``CorruptFileError`` or
``NotSupportedError`` naming the file, or returns data that is at least valid Arrow (Lance has no
checksums, so a flipped bit in a value buffer is silently a different value). It never hangs, never
crashes the process, never raises any other exception type. Every read runs in a separate worker process
(:mod:`tests.file.read_worker`), so a hang or a crash fails one test instead of the whole run.

Source files come from pylance (2.0, 2.1, 2.2; those parameters are marked ``interop``) and from our
own writer (2.0). (pylance itself is not this robust: an empty file panics in its I/O scheduler and
some flipped bytes abort the process.)
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.file.read_worker import IsolatedReader, Outcome

#: A read of these small files takes milliseconds; anything near this is a hang.
TIMEOUT_S = 15.0
FOOTER = 40

SOURCES = [
    pytest.param("pylance-2.0", marks=pytest.mark.interop),
    pytest.param("pylance-2.1", marks=pytest.mark.interop),
    pytest.param("pylance-2.2", marks=pytest.mark.interop),
    "ours-2.0",
]

_names = itertools.count()


def _source_table(n: int = 300) -> pa.Table:
    rng = np.random.default_rng(20261122)
    mask = rng.random(n) < 0.2
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789"))  # no upper case: no stray b"LANC"

    def word(k: int) -> str:
        return "".join(rng.choice(letters, k))

    return pa.table(
        {
            "i": pa.array(rng.integers(-1000, 1000, n).astype(np.int32), mask=mask),
            "f": pa.array(rng.random(n)),
            "s": pa.array(
                [None if m else word(int(k)) for m, k in zip(mask, rng.integers(0, 20, n), strict=True)]
            ),
            "long": pa.array([word(300) for _ in range(min(n, 40))] + [None] * max(0, n - 40)),
            "l": pa.array(
                [None if m else list(range(i % 5)) for i, m in enumerate(mask)], pa.list_(pa.int32())
            ),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4),
            "st": pa.StructArray.from_arrays(
                [pa.array(rng.integers(0, 9, n).astype(np.int16)), pa.array([word(3) for _ in range(n)])],
                ["a", "b"],
            ),
            "d": pa.array([f"cat{k}" for k in rng.integers(0, 5, n)]).dictionary_encode(),
        }
    )


def _write(source: str, path: Path) -> None:
    who, version = source.split("-")
    table = _source_table()
    if who == "pylance":
        lance_file = pytest.importorskip("lance.file")
        writer = lance_file.LanceFileWriter(str(path), table.schema, version=version)
    else:
        from lance_format.file import LanceFileWriter

        writer = LanceFileWriter(str(path), table.schema, version=version)
    with writer:
        writer.write_batch(table)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corrupt")


class Source:
    """An intact file's bytes, with a short repr: hypothesis prints the arguments of a failing example
    and warns (an error under ``filterwarnings = error``) when one is huge. Not a dataclass, since
    hypothesis pretty-prints dataclass fields whatever their ``repr`` flag."""

    __slots__ = ("data", "name")

    def __init__(self, name: str, data: bytes) -> None:
        self.name = name
        self.data = data

    def __repr__(self) -> str:
        return f"Source({self.name!r}, {len(self.data)} bytes)"


@pytest.fixture(params=SOURCES)
def source(request: pytest.FixtureRequest, workdir: Path) -> Source:
    """A small file with nested, nullable, dictionary and long-string columns."""
    path = workdir / f"source-{request.param}.lance"
    if not path.exists():
        _write(request.param, path)
    data = path.read_bytes()
    assert data.endswith(b"LANC")
    assert data.count(b"LANC") == 1, "the magic must only occur in the footer"
    return Source(request.param, data)


def _fresh_path(workdir: Path, tag: str) -> Path:
    # A new name for every variant, so no metadata cache keyed by path can serve stale bytes.
    return workdir / f"{tag}-{next(_names)}.lance"


@pytest.fixture(scope="module")
def worker() -> Iterator[IsolatedReader]:
    reader = IsolatedReader(timeout=TIMEOUT_S)
    yield reader
    reader.close()


def read_guarded(worker: IsolatedReader, path: str | Path) -> Outcome:
    """Read ``path`` completely in the worker process and check the contract; returns the outcome.

    Fails the test on a hang, a crash, an exception other than CorruptFileError/NotSupportedError,
    a typed error that does not name the file, or returned data that is not valid Arrow.
    """
    path = str(path)
    out = worker.read(path)
    # AssertionError, not pytest.fail: hypothesis treats pytest's BaseException outcomes as flaky.
    if out.kind in ("hang", "crash"):
        raise AssertionError(f"reading {path}: {out.kind} ({out.detail})")
    if out.kind == "other":
        allowed = "only CorruptFileError/NotSupportedError are allowed"
        raise AssertionError(f"reading {path} raised {out.error_type} ({allowed}):\n{out.detail}")
    if out.kind == "invalid":
        raise AssertionError(f"reading {path} returned invalid Arrow data (a later crash): {out.detail}")
    if out.kind in ("corrupt", "not_supported"):
        assert path in out.message, f"{out.error_type} does not name the file: {out.message}"
    if out.kind == "corrupt":
        assert out.error_path == path, f"CorruptFileError.path is {out.error_path!r}, not {path!r}"
    return out


def _cut_points(size: int) -> Iterator[int]:
    fixed = {0, 1, 3, 4, 8, 39, 40, 41, 64, 100}
    fixed |= {size - k for k in (1, 2, 4, 8, 16, 24, 39, 40, 41, 48, 56, 64, 100, 200, 500, 1000, 4096)}
    fixed |= set(range(0, size, max(1, size // 40)))
    yield from sorted(p for p in fixed if 0 <= p < size)


def test_intact_source_reads(source: Source, workdir: Path, worker: IsolatedReader) -> None:
    """Baseline: the untouched bytes read without error (else the other tests prove nothing)."""
    path = _fresh_path(workdir, "intact")
    path.write_bytes(source.data)
    assert read_guarded(worker, path).kind == "ok"


def test_truncated(source: Source, workdir: Path, worker: IsolatedReader) -> None:
    wrong = []
    for cut in _cut_points(len(source.data)):
        path = _fresh_path(workdir, f"cut{cut}")
        path.write_bytes(source.data[:cut])
        out = read_guarded(worker, path)
        if out.kind != "corrupt":
            wrong.append((cut, out.kind, out.message[:100]))
        path.unlink()
    assert not wrong, f"truncations that did not raise CorruptFileError (cut, outcome): {wrong[:10]}"


@pytest.mark.parametrize("magic", [b"LANX", b"\x00\x00\x00\x00", b"PAR1", b"lanc"])
def test_wrong_magic(source: Source, workdir: Path, worker: IsolatedReader, magic: bytes) -> None:
    path = _fresh_path(workdir, "magic")
    path.write_bytes(source.data[:-4] + magic)
    out = read_guarded(worker, path)
    assert out.kind == "corrupt", out
    assert "magic" in out.reason.lower() or "lance" in out.reason.lower(), out.reason


def test_trailing_garbage(source: Source, workdir: Path, worker: IsolatedReader) -> None:
    path = _fresh_path(workdir, "trailing")
    path.write_bytes(source.data + b"\x00" * 13)
    assert read_guarded(worker, path).kind == "corrupt"


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"LANC",
        b"\x00" * 40,
        b"\x00" * 36 + b"LANC",
        bytes(range(256)) * 40,
        b"PAR1" + b"\x01" * 100 + b"PAR1",
    ],
    ids=["empty", "magic-only", "zeros-40", "zeros-with-magic", "ramp", "parquet-like"],
)
def test_not_a_lance_file(content: bytes, workdir: Path, worker: IsolatedReader) -> None:
    path = _fresh_path(workdir, "junk")
    path.write_bytes(content)
    assert read_guarded(worker, path).kind in ("corrupt", "not_supported")


def test_real_parquet_file(workdir: Path, worker: IsolatedReader) -> None:
    import pyarrow.parquet as pq

    path = _fresh_path(workdir, "parquet")
    pq.write_table(_source_table(50), path)
    assert read_guarded(worker, path).kind == "corrupt"


def _with_version(data: bytes, major: int, minor: int) -> bytes:
    return data[:-8] + struct.pack("<HH", major, minor) + data[-4:]


@pytest.mark.parametrize(
    ("major", "minor"), [(3, 0), (2, 9), (1, 0), (0, 4), (2, 99), (65535, 65535), (9, 1)]
)
def test_unsupported_version(
    source: Source, workdir: Path, worker: IsolatedReader, major: int, minor: int
) -> None:
    path = _fresh_path(workdir, f"v{major}.{minor}")
    path.write_bytes(_with_version(source.data, major, minor))
    out = read_guarded(worker, path)
    assert out.kind == "not_supported", out
    assert f"{major}.{minor}" in out.message


@pytest.mark.parametrize(("major", "minor"), [(0, 1), (0, 2)])
def test_legacy_version_in_v2_footer(
    source: Source, workdir: Path, worker: IsolatedReader, major: int, minor: int
) -> None:
    path = _fresh_path(workdir, "legacy-footer")
    path.write_bytes(_with_version(source.data, major, minor))
    out = read_guarded(worker, path)
    assert out.kind == "not_supported", out
    assert "legacy" in out.message.lower()


@pytest.mark.parametrize(
    "type_name",
    [b"lance.encodings.ArrayEncoding", b"lance.encodings.ColumnEncoding", b"lance.encodings21.PageLayout"],
)
def test_unknown_encoding(source: Source, workdir: Path, worker: IsolatedReader, type_name: bytes) -> None:
    """An encoding message type we do not know (same length, so the protobuf stays well-formed)."""
    if type_name not in source.data:
        pytest.skip(f"{type_name.decode()} does not occur in this file version")
    path = _fresh_path(workdir, "unknown-encoding")
    path.write_bytes(source.data.replace(type_name, type_name[:-1] + b"X"))
    assert read_guarded(worker, path).kind in ("not_supported", "corrupt")


@pytest.mark.interop
def test_real_legacy_file(tmp_path: Path, worker: IsolatedReader) -> None:
    """A data file of a ``data_storage_version="legacy"`` dataset (16-byte 0.2 footer)."""
    lance = pytest.importorskip("lance")
    lance.write_dataset(_source_table(20), str(tmp_path / "ds"), data_storage_version="legacy")
    (path,) = (tmp_path / "ds" / "data").glob("*.lance")
    assert path.read_bytes()[-8:] == b"\x00\x00\x02\x00LANC"
    out = read_guarded(worker, path)
    assert out.kind == "not_supported", out


@pytest.mark.interop
def test_pylance_2_3_file_is_refused_or_read_right(tmp_path: Path, worker: IsolatedReader) -> None:
    """2.3 is pylance's unstable "next" format: refuse it cleanly, or read exactly what pylance reads."""
    lance_file = pytest.importorskip("lance.file")
    from tests.interop.compare import assert_tables_equal

    table = _source_table(50)
    path = tmp_path / "next.lance"
    with lance_file.LanceFileWriter(str(path), table.schema, version="2.3") as w:
        w.write_batch(table)
    out = read_guarded(worker, path)
    if out.kind == "ok":
        from lance_format.file import LanceFileReader

        expected = lance_file.LanceFileReader(str(path)).read_all().to_table()
        assert_tables_equal(LanceFileReader(str(path)).read_all().to_table(), expected)
    else:
        assert out.kind == "not_supported", out


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    from lance_format.core.errors import NotFoundError
    from lance_format.file import LanceFileReader

    with pytest.raises(NotFoundError, match="nope"):
        LanceFileReader(str(tmp_path / "nope.lance"))


# -- random corruption ---------------------------------------------------------------------------------


@st.composite
def corruptions(draw: st.DrawFn, size: int, meta_start: int) -> list[tuple[int, int]]:
    """1-4 (position, xor mask) pairs; positions mostly in the metadata tail, where damage matters."""
    # (Regions are drawn by name: ``st.one_of`` with the same strategy twice replays inconsistently.)
    starts = {"metadata": meta_start, "footer": size - FOOTER, "anywhere": 0}
    flips = []
    for _ in range(draw(st.integers(1, 4))):
        region = draw(st.sampled_from(["metadata", "metadata", "footer", "anywhere"]))
        flips.append((draw(st.integers(starts[region], size - 1)), draw(st.integers(1, 255))))
    return flips


def _flip(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    buf = bytearray(data)
    for pos, xor in flips:
        buf[pos] ^= xor
    return bytes(buf)


def _metadata_start(data: bytes) -> int:
    """Position of global buffer 0 (the file descriptor), where the metadata section begins."""
    gbo_start = struct.unpack_from("<Q", data, len(data) - FOOTER + 16)[0]
    return int(struct.unpack_from("<Q", data, gbo_start)[0])


@settings(
    max_examples=75,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a hang would make it take minutes
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_byte_corruption(
    source: Source, workdir: Path, worker: IsolatedReader, data: st.DataObject
) -> None:
    flips = data.draw(corruptions(len(source.data), _metadata_start(source.data)), label="flips")
    path = _fresh_path(workdir, "flipped")
    path.write_bytes(_flip(source.data, flips))
    try:
        read_guarded(worker, path)
    finally:
        path.unlink()
