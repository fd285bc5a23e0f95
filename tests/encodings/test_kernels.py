"""Each compiled kernel gives byte-identical results to the numpy code it replaced, on generated
inputs; and kernels work whatever the state of their cache directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_format.encodings.v21._bytes import gather
from lance_format.encodings.v21._fsst import fsst_decompress
from lance_format.encodings.v21.encode.bitpack import pack_blocks
from lance_format.encodings.v21.encode.fsst import fsst_compress
from lance_format.encodings.v21.fastlanes import fastlanes_unpack, unpack_inline_blocks
from tests.encodings.numpy_reference import bitpack as ref_bitpack
from tests.encodings.numpy_reference import fastlanes as ref_fastlanes
from tests.encodings.numpy_reference import fsst_decode as ref_fsst_decode
from tests.encodings.numpy_reference import fsst_encode as ref_fsst_encode
from tests.encodings.numpy_reference import gather as ref_gather

# Kernels compile once per process (seconds); keep the example counts modest.
FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _strings(seed: int, tokens: list[bytes], n: int, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` strings glued from ``tokens`` (a vocabulary FSST can learn) plus random bytes."""
    rng = np.random.default_rng(seed)
    parts: list[bytes] = []
    for _ in range(n):
        k = int(rng.integers(0, max_tokens + 1))
        picks = [tokens[int(i)] for i in rng.integers(0, len(tokens), k)]
        if rng.random() < 0.2:
            picks.append(rng.integers(0, 256, int(rng.integers(1, 4)), dtype=np.uint8).tobytes())
        parts.append(b"".join(picks))
    data = np.frombuffer(b"".join(parts), dtype=np.uint8)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return data, offsets


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    tokens=st.lists(st.binary(min_size=1, max_size=12), min_size=1, max_size=40),
    n=st.integers(500, 4000),
    max_tokens=st.integers(1, 12),
)
def test_fsst_compress_matches_numpy(seed: int, tokens: list[bytes], n: int, max_tokens: int) -> None:
    data, offsets = _strings(seed, tokens, n, max_tokens)
    ref_fsst_encode.assert_same_compression(fsst_compress(data, offsets), data, offsets)


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    nsym=st.integers(0, 255),
    ncodes=st.integers(0, 3000),
    nstr=st.integers(1, 50),
    sliced=st.booleans(),
)
def test_fsst_decompress_matches_numpy(seed: int, nsym: int, ncodes: int, nstr: int, sliced: bool) -> None:
    """Random tables and code streams, valid or not (codes past the table, escape at the end):
    the same output or the same error."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, 9, nsym).astype(np.uint8)
    vals = rng.integers(0, 2**63, nsym, dtype=np.uint64)
    head = (0x46535354 << 32) | (1 << 24) | nsym
    table = np.array([head], "<u8").tobytes() + vals.astype("<u8").tobytes() + lens.tobytes()
    table += bytes(8 + 256 * 9 - len(table))
    # Mostly valid codes (escapes with literals), sometimes anything.
    hi = nsym if rng.random() < 0.7 else 256
    codes = rng.integers(0, max(hi, 1), ncodes).astype(np.uint8)
    esc = rng.random(ncodes) < 0.1
    codes[esc] = 255
    lead = 5 if sliced else 0
    data = np.concatenate((rng.integers(0, 256, lead, dtype=np.uint8), codes))
    cuts = np.sort(rng.integers(0, ncodes + 1, nstr - 1))
    offsets = np.concatenate(([0], cuts, [ncodes])).astype(np.int64) + lead
    try:
        want = ref_fsst_decode.fsst_decompress(table, offsets, data)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e)):
            fsst_decompress(table, offsets, data)
        return
    got = fsst_decompress(table, offsets, data)
    assert np.array_equal(got[0], want[0])
    assert got[1].tobytes() == want[1].tobytes()


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    t=st.sampled_from([8, 16, 32, 64]),
    wfrac=st.floats(0, 1),
    nblocks=st.integers(1, 6),
    readonly=st.booleans(),
)
def test_fastlanes_pack_and_unpack_match_numpy(
    seed: int, t: int, wfrac: float, nblocks: int, readonly: bool
) -> None:
    rng = np.random.default_rng(seed)
    width = round(wfrac * t)
    dt = np.dtype(f"u{t // 8}")
    raw = rng.integers(0, 2**63, (nblocks, 1024), dtype=np.uint64) | rng.integers(
        0, 2, (nblocks, 1024), dtype=np.uint64
    ) << np.uint64(63)
    blocks = raw.astype(dt) & dt.type(2**width - 1 if width < 64 else 2**64 - 1)
    if readonly:
        blocks.setflags(write=False)
    packed = pack_blocks(blocks, width)
    want = ref_bitpack.pack_blocks(blocks, width)
    assert packed.dtype == want.dtype
    assert packed.shape == want.shape
    assert packed.tobytes() == want.tobytes()
    # Unpack arbitrary words too (not only packings of in-range values).
    words = rng.integers(0, 2**63, packed.size, dtype=np.uint64).astype(dt)
    for source in (packed, words):
        got = fastlanes_unpack(source, width, t, nblocks)
        assert got.tobytes() == ref_fastlanes.fastlanes_unpack(source, width, t, nblocks).tobytes()
    assert np.array_equal(fastlanes_unpack(packed, width, t, nblocks), blocks)


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    t=st.sampled_from([8, 16, 32, 64]),
    nblocks=st.integers(1, 6),
    readonly=st.booleans(),
)
def test_inline_blocks_of_mixed_widths_unpack_in_place(
    seed: int, t: int, nblocks: int, readonly: bool
) -> None:
    # Blocks of different widths (0 and t included), each led by a gap as in mini-block chunks,
    # the last one partly filled: the same values as unpacking each block alone and trimming it.
    rng = np.random.default_rng(seed)
    dt = np.dtype(f"u{t // 8}")
    widths = rng.integers(0, t + 1, nblocks)
    widths[0], widths[-1] = 0 if nblocks > 2 else widths[0], t if nblocks > 1 else widths[-1]
    counts = np.full(nblocks, 1024, dtype=np.int64)
    counts[-1] = int(rng.integers(1, 1025))
    parts, starts, want = [], [], []
    pos = 0
    for w, n in zip(widths.tolist(), counts.tolist(), strict=True):
        gap = bytes(int(rng.integers(0, 3)) * (t // 8))
        words = rng.integers(0, 2**63, 1024 * w // t, dtype=np.uint64).astype(dt)
        parts += [gap, words.tobytes()]
        starts.append(pos + len(gap))
        pos += len(gap) + words.nbytes
        want.append(ref_fastlanes.fastlanes_unpack(words, w, t, 1)[0, :n])
    blob = np.frombuffer(b"".join(parts), dtype=np.uint8).copy()
    if readonly:
        blob.setflags(write=False)
    got = unpack_inline_blocks(blob, np.array(starts, dtype=np.int64), widths.astype(np.int64), counts, t)
    assert got is not None
    assert got.tobytes() == np.concatenate(want).tobytes()
    # Words not aligned to t bits in memory: left to the gathering path.
    if t > 8:
        assert unpack_inline_blocks(blob, np.array(starts, dtype=np.int64) + 1, widths, counts, t) is None


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(0, 5000),
    nranges=st.integers(0, 300),
    regular=st.booleans(),
    readonly=st.booleans(),
)
def test_gather_matches_numpy(seed: int, size: int, nranges: int, regular: bool, readonly: bool) -> None:
    """Byte ranges (evenly spaced like a page's chunks, or arbitrary and overlapping, empty, out of
    bounds): the same bytes or the same error."""
    rng = np.random.default_rng(seed)
    blob = rng.integers(0, 256, size, dtype=np.uint8)
    if readonly:
        blob.setflags(write=False)
    if regular and size:
        width = int(rng.integers(1, 64))
        starts = np.arange(nranges, dtype=np.int64) * (width + int(rng.integers(0, 9)))
        lengths = np.full(nranges, width, dtype=np.int64)
    else:
        starts = rng.integers(-1 if rng.random() < 0.05 else 0, size + 10, nranges)
        lengths = rng.integers(-1 if rng.random() < 0.05 else 0, 600, nranges)
    try:
        want = ref_gather.gather(blob, starts, lengths)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e)):
            gather(blob, starts, lengths)
        return
    assert gather(blob, starts, lengths).tobytes() == want.tobytes()


def _python(code: str, env: dict[str, str]) -> str:
    """What ``code`` prints, run in a fresh interpreter with ``env`` (kernel settings are read at
    import, so each cache set-up needs its own process)."""
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("how", ["unwritable", "unset"])
def test_kernels_work_without_a_writable_cache(tmp_path: Path, how: str) -> None:
    """A cache directory that cannot be written (a read-only container; a path under a regular
    file fails even for root) or none configured: kernels still compile and run (in memory, or
    cached in the default temp directory). One module's kernels stand for all: every kernel takes its
    cache setting from the same decorator, and compiling all of them from nothing takes minutes."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("LANCE_FORMAT_KERNEL_CACHE_DIR", "NUMBA_CACHE_DIR")
    }
    if how == "unwritable":
        (tmp_path / "file").write_bytes(b"")
        env["LANCE_FORMAT_KERNEL_CACHE_DIR"] = str(tmp_path / "file" / "cache")
    else:
        env["TMPDIR"] = str(tmp_path)
    code = (
        "import numpy as np\n"
        "from lance_format.core.jit import kernel_cache_dir, kernel_cache_enabled\n"
        "from lance_format.encodings.v21 import _fsst\n"
        "from numba.core.registry import CPUDispatcher\n"
        "_fsst.warm_up()\n"
        "ran = sum(len(o.overloads) for o in vars(_fsst).values() if isinstance(o, CPUDispatcher))\n"
        "print(kernel_cache_dir(), kernel_cache_enabled(), ran)\n"
    )
    stdout = _python(code, env)
    where, enabled, compiled = stdout.split()
    assert int(compiled) > 0
    if how == "unwritable":
        assert enabled == "False"
    else:
        assert enabled == "True"
        assert Path(where).parent == tmp_path
        assert any(Path(where).rglob("*.nbi")), "compiled kernels were cached in the default directory"


def test_compile_kernels_covers_what_reads_and_writes_use(tmp_path: Path) -> None:
    """After compile_kernels() a write and a read (FSST strings, bit-packed ints, at 2.1 and 2.2)
    compile no new kernel specialization: no request pays JIT time."""
    import pyarrow as pa

    from lance_format.core import float_text, text_kernels
    from lance_format.encodings import compile_kernels
    from lance_format.encodings.v21 import _bytes, _decode_kernels, _fsst, fastlanes
    from lance_format.encodings.v21.encode import _chunks, _dict, _levels, bitpack, fullzip, values
    from lance_format.encodings.v21.encode import fsst as fsst_encode
    from lance_format.file import LanceFileWriter
    from lance_format.file.reader import LanceFileReader

    compile_kernels()
    kernels = [
        f
        for mod in (
            float_text,
            text_kernels,
            _bytes,
            _decode_kernels,
            _fsst,
            fastlanes,
            bitpack,
            fsst_encode,
            _chunks,
            _dict,
            _levels,
            fullzip,
            values,
        )
        for f in vars(mod).values()
        if hasattr(f, "signatures") and hasattr(f, "py_func")
    ]
    assert len(kernels) >= 14
    before = {k.py_func.__qualname__: len(k.signatures) for k in kernels}
    rng = np.random.default_rng(0)
    n = 20_000
    table = pa.table(
        {
            "s": pa.array([f"user-{x}@example.com" for x in rng.integers(0, 1 << 40, n)]),
            "i8": pa.array(rng.integers(0, 100, n, dtype=np.int8)),
            "i16": pa.array(rng.integers(0, 1000, n, dtype=np.int16)),
            "i32": pa.array(rng.integers(0, 1 << 20, n, dtype=np.int32)),
            "i64": pa.array(rng.integers(0, 1 << 40, n, dtype=np.int64)),
            # Dictionary strings with nulls, large strings, lists (rep levels), nullable ints.
            "lc": pa.array([None if i % 9 == 0 else f"k{i % 11}" for i in range(n)]),
            "ls": pa.array([f"v{i % 7}" for i in range(n)], pa.large_string()),
            "l": pa.array([[i] * (i % 3) for i in range(n)], pa.list_(pa.int32())),
            "ni": pa.array([None if i % 5 == 0 else i for i in range(n)], pa.int32()),
            # Booleans: Arrow's bitmap read in place (a read-only array).
            "b": pa.array(rng.random(n) < 0.3),
        }
    )
    for version in ("2.1", "2.2"):
        path = str(tmp_path / f"{version}.lance")
        with LanceFileWriter(path, table.schema, version=version) as w:
            w.write_batch(table)
        assert LanceFileReader(path).read_all().to_table().equals(table)
    float_text.rust_float_text(pa.array([1.5, None]))  # a filter's CAST(f AS STRING)
    texts = text_kernels.view(pa.array(["ab", None, "c"], pa.large_string()).slice(1), 2)
    chars = text_kernels.view(pa.scalar("b"), 2)
    for fn in (text_kernels.contains, text_kernels.strpos, text_kernels.ends_with):
        fn(texts, chars)  # a filter's contains(s, t)
    text_kernels.replace(texts, chars, texts)
    text_kernels.trim(texts, chars, False, True)
    assert {k.py_func.__qualname__: len(k.signatures) for k in kernels} == before


def test_a_seed_directory_fills_an_empty_kernel_cache(tmp_path: Path) -> None:
    """LANCE_FORMAT_KERNEL_SEED_DIR (kernels compiled ahead, as the image bakes them in): a process
    with an empty cache copies them and loads every kernel from there, compiling none."""
    from lance_format.core.jit import kernel_cache_dir
    from lance_format.encodings import compile_kernels

    compile_kernels()  # this process's cache (the seed) holds every kernel
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["LANCE_FORMAT_KERNEL_CACHE_DIR"] = str(cache)
    env["LANCE_FORMAT_KERNEL_SEED_DIR"] = kernel_cache_dir()
    code = (
        "import sys\n"
        "from lance_format.encodings import compile_kernels\n"
        "compile_kernels()\n"
        "from numba.core.registry import CPUDispatcher\n"
        "hits = misses = 0\n"
        "for mod in list(sys.modules.values()):\n"
        "    if not getattr(mod, '__name__', '').startswith('lance_format'):\n"
        "        continue\n"
        "    for obj in vars(mod).values():\n"
        "        if isinstance(obj, CPUDispatcher):\n"
        "            hits += sum(obj.stats.cache_hits.values())\n"
        "            misses += sum(obj.stats.cache_misses.values())\n"
        "print(hits, misses)\n"
    )
    stdout = _python(code, env)
    hits, misses = map(int, stdout.split())
    assert any(cache.rglob("*.nbi")), "the seed was copied into the empty cache"
    assert hits > 20, (hits, misses)
    assert misses == 0, (hits, misses)
    # Without a seed the same empty cache compiles: the check above can fail.
    env.pop("LANCE_FORMAT_KERNEL_SEED_DIR")
    env["LANCE_FORMAT_KERNEL_CACHE_DIR"] = str(tmp_path / "fresh")
    code_one = (
        "import numpy as np\n"
        "from lance_format.encodings.v21 import _fsst\n"
        "_fsst.warm_up()\n"
        "from numba.core.registry import CPUDispatcher\n"
        "print(sum(sum(o.stats.cache_misses.values()) for o in vars(_fsst).values()"
        " if isinstance(o, CPUDispatcher)))\n"
    )
    stdout = _python(code_one, env)
    assert int(stdout) > 0


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_full_inline_blocks_of_every_width_match_the_reference(t: int) -> None:
    # Full blocks (a scan's pages are made of them) of every width, with and without words
    # spilling across a lane's word boundary, against the numpy reference.
    rng = np.random.default_rng(t)
    dt = np.dtype(f"u{t // 8}")
    widths = np.arange(1, t + 1, dtype=np.int64)
    parts, starts, want = [], [], []
    pos = 0
    for w in widths.tolist():
        words = rng.integers(0, 2**63, 1024 * w // t, dtype=np.uint64).astype(dt)
        gap = bytes(t // 8)  # the block's width word, as in a mini-block chunk
        parts += [gap, words.tobytes()]
        starts.append(pos + len(gap))
        pos += len(gap) + words.nbytes
        want.append(ref_fastlanes.fastlanes_unpack(words, w, t, 1)[0])
    blob = np.frombuffer(b"".join(parts), dtype=np.uint8).copy()
    counts = np.full(len(widths), 1024, dtype=np.int64)
    got = unpack_inline_blocks(blob, np.array(starts, dtype=np.int64), widths, counts, t)
    assert got is not None
    assert got.tobytes() == np.concatenate(want).tobytes()
