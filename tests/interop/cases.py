"""The interop catalogue: named, deterministic test tables and the versions pylance writes them at.

Each :class:`Case` builds one seeded table (a few thousand rows unless the point is size) and says at
which file versions pylance 14.0.2 can write it, how to write it (rows per ``write_batch``, page
budget), which encodings pylance must have chosen (so a case provably exercises the decoder path it
is named for) and what pylance gives back when that differs from the input (:func:`expected_type`).

What pylance 14.0.2 does (``lance.file.LanceFileWriter`` / ``LanceFileReader``; checked in Nov 2026
with pyarrow 26, scratch scripts in /work/scratch/h5):

Versions
    ``LanceFileWriter(version=None)`` writes 2.2 (``"stable"`` too); ``"next"``/``"2.3"`` write 2.3 (and
    log an "unstable format" warning); ``"0.1"``/``"legacy"`` raise NotImplementedError (legacy files
    need a dataset); ``"3.0"`` raises ValueError. Footers: 2.0 files say 0.3, 2.1 say 2.1, 2.2 say 2.2.

Types accepted and returned unchanged at 2.0, 2.1 and 2.2
    bool, int8..int64, uint8..uint64, float16/32/64 (NaN, inf, -0.0 kept bit-exact), decimal128 and
    decimal256, date32/64, time32(s/ms), time64(us/ns), timestamp (every unit, with and without tz,
    named zones and ``+05:30`` offsets), duration (every unit), string, large_string, binary,
    large_binary, fixed_size_binary, fixed_size_list (of numbers, bool, float16, nested FSL), list,
    large_list (any nesting, null rows, empty lists, null items), struct (nested, child nulls), list of
    struct, struct of list, ``pa.null()``, the ``arrow.uuid`` extension, all-null columns of any of
    these, empty files (0 rows), schema and field metadata, non-nullable fields (nullability kept).

Differences between versions / what pylance changes
    * **struct validity**: 2.0 refuses a struct with null rows at any depth (also struct items of a
      list): ``ValueError: ... Lance file version 2.0 does not encode struct validity; use file
      version 2.1 or later``. 2.1 and 2.2 keep struct nulls.
    * **fixed_size_list item field**: always comes back as nullable ``"item"`` (names such as ``emb``
      and ``not null`` are lost; the logical type string has no room for them). List and large_list
      item fields keep their name and nullability.
    * **dictionary<intN, string|large_string|binary>** comes back as the same dictionary type with the
      same logical values, but not the same dictionary: 2.0 appends a null item to the dictionary
      (``["a", "b", "c", None]``) and a row whose key pointed at a null dictionary item comes back
      with a null key; 2.1/2.2 rebuild the dictionary (null items dropped, keys renumbered). Compare
      dictionaries logically.
    * string_view -> refused at 2.0, read back as ``string`` at 2.1/2.2. list_view, month_day_nano
      intervals, decimal32/decimal64: refused at every version. map: refused at 2.0 and 2.1
      ("Map data type is not enabled by the selected file format"), accepted at 2.2.
      ``arrow.json`` extension: stored as Lance JSONB and read back as ``large_binary`` (JSONB bytes).
    * fixed_size_list<string>: pylance panics while writing (2.0 "internal error", 2.1/2.2
      ``PanicException: compute_stat should only be called once``). Not in the catalogue.

Encodings pylance chooses (what the cases below pin down)
    * 2.0: ``nullable{no_nulls|some_nulls|all_nulls}`` around ``flat``; ``binary`` for strings; plain
      ``string`` (Utf8 only) with >= 100 rows and < 100 distinct values becomes ``dictionary`` (large
      strings and binary do not); ``list``; ``struct`` (SimpleStruct); ``fixed_size_list``.
    * 2.1/2.2 (structural): ``MiniBlockLayout`` for fixed width and strings under 256 B/value
      (``InlineBitpacking`` even for random float64, ``OutOfLineBitpacking`` for def levels, ``Rle`` for
      runs, ``Fsst`` for short strings, ``dictionary: Some`` for low cardinality strings, including
      large_string and binary); ``FullZipLayout`` for strings >= 256 B/value (``Fsst``), long binary
      and FSL<float32,128> (``BitsPerValue``); ``ConstantLayout`` (not ``AllNullLayout``) for all-null
      columns, and at 2.2 also for a constant non-null column (``inline_value: Some(...)``).
    * 2.2 only: ``General`` (LZ4) compression inside mini-blocks (e.g. on dictionaries and int
      chunks), and a ``has_large_chunk`` flag in MiniBlockLayout.

Pages
    By default a small column is one page per file, whatever the batches. ``data_cache_bytes=4096``
    makes every ``write_batch`` call end a page at every version (5000 rows in 397-row batches: 13
    pages per column; a bool column 11, and at 2.1 one column 9). ``max_page_bytes`` in addition
    splits 2.0 pages further (32 KiB: up to 458 pages per column; 4 KiB: 2775 pages for a 5000-row
    column of ~400-byte strings) and has no visible effect at 2.1/2.2. A 2.0 file with 0 rows still
    has one (empty) page per column; 2.1/2.2 have none.

Writer bugs to steer around
    * ``write_batch`` of a *sliced* batch (non-zero offset) holding a struct inside a struct panics
      at every version (``PanicException: assertion failed: end <= self.len()``, arrow-data
      data.rs:597); flat structs slice fine. The catalogue never slices nested structs.
    * pylance's reader is not robust to damaged files: an empty file panics in its I/O scheduler
      (``Option::unwrap()`` on None, scheduler.rs:1411) and some flipped metadata bytes abort the
      process (``memory allocation of 60129542160 bytes failed``), nondeterministically.

Reader API
    * ``take_rows`` needs **strictly increasing** indices (``ValueError: Indices must be sorted in
      ascending order for file API`` / ``... not strictly increasing``); ours takes any order and
      repeats, so the tests compare ours against pylance's take of the sorted unique indices,
      reordered with ``Table.take``.
    * out-of-range ``take_rows``/``read_range``: ValueError; negative: OverflowError.
      ``read_range(start, 0)`` and ``take_rows([])`` return 0 rows; ``read_range(num_rows, 0)`` too.
    * ``columns=[...]``: output in the order given, duplicates dropped, nested paths (``"st.b"``) give
      ``struct<b>``; ``[]`` -> ValueError; unknown name -> OSError.
    * ``to_batches()`` is a RecordBatchReader of ``batch_size`` (default 1024) rows, the last shorter;
      ``to_table()`` has one chunk per batch.
    * ``metadata()``: ``major_version``, ``minor_version``, ``num_rows``, ``schema``,
      ``num_data_bytes`` (= position of global buffer 0), ``num_column_metadata_bytes`` (= gbo table
      start - column metadata start), ``num_global_buffer_bytes``, ``columns[i].pages[j].encoding``
      (a Rust Debug string) and ``.buffers``.
    * An empty file written with a schema and no rows is 458 bytes at 2.0 for 3 columns.
"""

from __future__ import annotations

import decimal
import functools
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

__all__ = [
    "ALL_VERSIONS",
    "CASES",
    "CASES_BY_NAME",
    "STRUCTURAL",
    "Case",
    "case_versions",
    "expected_table",
    "expected_type",
]

ALL_VERSIONS = ("2.0", "2.1", "2.2")
STRUCTURAL = ("2.1", "2.2")

#: Default rows per case: a few thousand, enough for several mini-block chunks and 1024-row batches.
N = 3000


@dataclass(frozen=True)
class Case:
    """One catalogue entry."""

    name: str
    build: Callable[[], pa.Table]
    #: Versions pylance 14.0.2 writes this table at (and that we must read).
    versions: tuple[str, ...] = ALL_VERSIONS
    #: Rows per ``write_batch`` call (None: the whole table in one call). Slicing a nested struct
    #: makes pylance's writer panic (see the module doc), so only flat tables are sliced.
    write_rows: int | None = None
    #: Extra writer keyword arguments (both pylance's writer and ours), e.g. a small page budget.
    writer_kwargs: Mapping[str, int] = field(default_factory=dict)
    #: Per version, substrings that must occur in pylance's page encodings of the file (proof that
    #: the case exercises the path it is named for).
    encodings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Fewest pages some column must have (multi-page cases).
    min_pages: int = 1
    note: str = ""

    def table(self) -> pa.Table:
        """The source table (built once, cached)."""
        return _built(self.name)

    def expected(self) -> pa.Table:
        """What pylance's reader returns for a file written from :meth:`table`."""
        return expected_table(self.table())

    def batches(self) -> list[pa.Table]:
        """The slices handed to ``write_batch``, in order."""
        t = self.table()
        if self.write_rows is None or t.num_rows == 0:
            return [t]
        return [t.slice(i, self.write_rows) for i in range(0, t.num_rows, self.write_rows)]

    def __str__(self) -> str:
        return self.name


# -- pylance's own changes to the data ------------------------------------------------------------------


def expected_type(t: pa.DataType) -> pa.DataType:
    """The type pylance returns for a column written as ``t``: FSL items become nullable ``item``,
    ``string_view`` becomes ``string`` (2.1+; 2.0 refuses it)."""
    if pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field("item", expected_type(t.value_type)), t.list_size)
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(expected_type(t.value_type)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(expected_type(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(expected_type(f.type)) for f in t])
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, expected_type(t.value_type), t.ordered)
    return t


def expected_table(table: pa.Table) -> pa.Table:
    """``table`` as pylance reads it back (values unchanged; see :func:`expected_type`)."""
    fields = [f.with_type(expected_type(f.type)) for f in table.schema]
    schema = pa.schema(fields, metadata=table.schema.metadata)
    if schema.equals(table.schema, check_metadata=True):
        return table
    return pa.Table.from_arrays(
        [c.cast(f.type) for c, f in zip(table.columns, fields, strict=True)], schema=schema
    )


# -- deterministic data helpers --------------------------------------------------------------------------


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _mask(rng: np.random.Generator, n: int, p: float = 0.15) -> np.ndarray:
    m = rng.random(n) < p
    if n > 3 and p > 0:
        m[:3] = [False, True, False]  # a null early, so even short slices see one
    return m


def _ints(
    rng: np.random.Generator, n: int, dtype: type[np.integer], mask: np.ndarray | None = None
) -> pa.Array:
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    if n >= 6:
        values[3:6] = [info.min, info.max, 0]
    return pa.array(values, mask=mask)


_WORDS = ["alpha", "beta", "gamma", "δέλτα", "epsilon", "日本語", "zeta", "", "eta", "théta", "🦀", "iota"]


def _strings(rng: np.random.Generator, n: int, mask: np.ndarray | None = None, max_words: int = 4) -> list:
    counts = rng.integers(0, max_words + 1, n)
    picks = rng.integers(0, len(_WORDS), (n, max_words))
    out: list[str | None] = []
    for i in range(n):
        if mask is not None and mask[i]:
            out.append(None)
        else:
            out.append(f"{i}:" + " ".join(_WORDS[k] for k in picks[i, : counts[i]]))
    return out


def _blobs(rng: np.random.Generator, n: int, mask: np.ndarray | None, lo: int, hi: int) -> list:
    lengths = rng.integers(lo, hi + 1, n)
    data = rng.integers(0, 256, int(lengths.sum()), dtype=np.uint8).tobytes()
    ends = np.cumsum(lengths)
    out: list[bytes | None] = []
    for i in range(n):
        out.append(None if mask is not None and mask[i] else data[ends[i] - lengths[i] : ends[i]])
    return out


def _list(
    rng: np.random.Generator,
    n: int,
    make_values: Callable[[int], pa.Array],
    mask: np.ndarray | None,
    max_len: int = 4,
    large: bool = False,
    item: pa.Field | None = None,
) -> pa.Array:
    """A list array; null rows keep non-empty backing slots (legal Arrow that writers must ignore)."""
    lengths = rng.integers(0, max_len + 1, n)
    offsets = np.zeros(n + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = make_values(int(offsets[-1]))
    cls = pa.LargeListArray if large else pa.ListArray
    typ = None
    if item is not None:
        typ = (pa.large_list if large else pa.list_)(item.with_type(values.type))
    return cls.from_arrays(pa.array(offsets), values, type=typ, mask=None if mask is None else pa.array(mask))


def _fsl(values: pa.Array, size: int, mask: np.ndarray | None = None) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(values, size, mask=None if mask is None else pa.array(mask))


def _struct(children: Mapping[str, pa.Array], mask: np.ndarray | None = None) -> pa.Array:
    return pa.StructArray.from_arrays(
        list(children.values()), list(children.keys()), mask=None if mask is None else pa.array(mask)
    )


def _floats(rng: np.random.Generator, n: int, dtype: type[np.floating], mask: np.ndarray | None) -> pa.Array:
    values = rng.standard_normal(n).astype(dtype)
    if n >= 10:
        values[3:10] = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.finfo(dtype).max, np.finfo(dtype).tiny]
    return pa.array(values, mask=mask)


# -- the cases ---------------------------------------------------------------------------------------------

_BUILDERS: dict[str, Callable[[], pa.Table]] = {}


def _builder(fn: Callable[[np.random.Generator], pa.Table]) -> Callable[[], pa.Table]:
    name = fn.__name__.removeprefix("_t_")

    def build() -> pa.Table:
        return fn(_rng(name))

    _BUILDERS[name] = build
    return build


@_builder
def _t_bool(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "b": pa.array(rng.random(N) < 0.5, mask=_mask(rng, N)),
            "b_dense": pa.array(rng.random(N) < 0.9),
            "b_true": pa.array(np.ones(N, dtype=bool)),
        }
    )


@_builder
def _t_int_signed(rng: np.random.Generator) -> pa.Table:
    schema = pa.schema(
        [
            ("i8", pa.int8()),
            ("i16", pa.int16()),
            ("i32", pa.int32()),
            ("i64", pa.int64()),
            pa.field("i64_required", pa.int64(), nullable=False),
        ]
    )
    return pa.table(
        [
            _ints(rng, N, np.int8, _mask(rng, N)),
            _ints(rng, N, np.int16, _mask(rng, N, 0.5)),
            _ints(rng, N, np.int32, _mask(rng, N, 0.02)),
            _ints(rng, N, np.int64, _mask(rng, N)),
            _ints(rng, N, np.int64),
        ],
        schema=schema,
    )


@_builder
def _t_int_unsigned(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "u8": _ints(rng, N, np.uint8, _mask(rng, N)),
            "u16": _ints(rng, N, np.uint16),
            "u32": _ints(rng, N, np.uint32, _mask(rng, N, 0.9)),
            "u64": _ints(rng, N, np.uint64, _mask(rng, N)),
        }
    )


@_builder
def _t_int_patterns(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "constant": pa.array(np.full(N, 7, dtype=np.int64)),
            "runs": pa.array(np.repeat(np.arange(N // 100 + 1, dtype=np.int32), 100)[:N]),
            "narrow": pa.array(rng.integers(0, 1000, N).astype(np.uint16), mask=_mask(rng, N)),
            "sorted": pa.array(np.cumsum(rng.integers(0, 50, N)).astype(np.int64)),
            "negative_narrow": pa.array(rng.integers(-8, 8, N).astype(np.int32)),
            "wide": _ints(rng, N, np.int64),
        }
    )


@_builder
def _t_floats(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "f16": _floats(rng, N, np.float16, _mask(rng, N)),
            "f32": _floats(rng, N, np.float32, _mask(rng, N)),
            "f64": _floats(rng, N, np.float64, _mask(rng, N)),
            "f64_dense": pa.array(rng.random(N)),
            "f32_small": pa.array(rng.integers(0, 10, N).astype(np.float32)),
        }
    )


def _decimals(rng: np.random.Generator, n: int, precision: int, scale: int, mask: np.ndarray) -> pa.Array:
    digits = [int(d) for d in rng.integers(1, precision + 1, n)]
    mags = [int(rng.integers(0, 10 ** min(d, 18))) * 10 ** max(0, d - 18) for d in digits]
    signs = rng.random(n) < 0.5
    exact = decimal.Context(prec=80)
    values = [
        None if mask[i] else decimal.Decimal(-m if s else m).scaleb(-scale, exact)
        for i, (m, s) in enumerate(zip(mags, signs, strict=True))
    ]
    if n > 5 and not mask[4]:
        values[4] = decimal.Decimal(10**precision - 1).scaleb(-scale, exact)
    return pa.array(values, pa.decimal128(precision, scale))


@_builder
def _t_decimal128(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "d38_10": _decimals(rng, N, 38, 10, _mask(rng, N)),
            "d10_2": _decimals(rng, N, 10, 2, _mask(rng, N)),
            "d5_0": _decimals(rng, N, 5, 0, np.zeros(N, dtype=bool)),
            "d20_neg_scale": _decimals(rng, N, 20, -3, _mask(rng, N)),
        }
    )


@_builder
def _t_dates(rng: np.random.Generator) -> pa.Table:
    days = rng.integers(-100_000, 100_000, N)
    return pa.table(
        {
            "d32": pa.array(days.astype(np.int32), pa.date32(), mask=_mask(rng, N)),
            "d64": pa.array(days.astype(np.int64) * 86_400_000, pa.date64(), mask=_mask(rng, N)),
        }
    )


@_builder
def _t_times(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "t32s": pa.array(rng.integers(0, 86_400, N).astype(np.int32), pa.time32("s"), mask=_mask(rng, N)),
            "t32ms": pa.array(rng.integers(0, 86_400_000, N).astype(np.int32), pa.time32("ms")),
            "t64us": pa.array(rng.integers(0, 86_400 * 10**6, N), pa.time64("us"), mask=_mask(rng, N)),
            "t64ns": pa.array(rng.integers(0, 86_400 * 10**9, N), pa.time64("ns"), mask=_mask(rng, N)),
        }
    )


@_builder
def _t_timestamps(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            f"ts_{unit}": pa.array(rng.integers(-(2**40), 2**40, N), pa.timestamp(unit), mask=_mask(rng, N))
            for unit in ("s", "ms", "us", "ns")
        }
    )


@_builder
def _t_timestamps_tz(rng: np.random.Generator) -> pa.Table:
    zones = [("s", "+05:30"), ("ms", "Europe/Paris"), ("us", "UTC"), ("ns", "America/New_York")]
    return pa.table(
        {
            f"ts_{unit}_{i}": pa.array(
                rng.integers(0, 2**40, N), pa.timestamp(unit, tz=tz), mask=_mask(rng, N)
            )
            for i, (unit, tz) in enumerate(zones)
        }
    )


@_builder
def _t_durations(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            f"dur_{unit}": pa.array(rng.integers(-(2**50), 2**50, N), pa.duration(unit), mask=_mask(rng, N))
            for unit in ("s", "ms", "us", "ns")
        }
    )


@_builder
def _t_strings(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "s": pa.array(_strings(rng, N, _mask(rng, N)), pa.string()),
            "ls": pa.array(_strings(rng, N, _mask(rng, N)), pa.large_string()),
            "s_dense": pa.array(_strings(rng, N, None, 8), pa.string()),
            "s_empty": pa.array([""] * N, pa.string()),
        }
    )


@_builder
def _t_string_view(rng: np.random.Generator) -> pa.Table:
    return pa.table({"sv": pa.array(_strings(rng, N, _mask(rng, N)), pa.string_view())})


@_builder
def _t_binary(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "bin": pa.array(_blobs(rng, N, _mask(rng, N), 0, 40), pa.binary()),
            "lbin": pa.array(_blobs(rng, N, _mask(rng, N), 0, 40), pa.large_binary()),
            "bin_dense": pa.array(_blobs(rng, N, None, 1, 8), pa.binary()),
        }
    )


@_builder
def _t_fixed_size_binary(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "fsb16": pa.array(_blobs(rng, N, _mask(rng, N), 16, 16), pa.binary(16)),
            "fsb1": pa.array(_blobs(rng, N, None, 1, 1), pa.binary(1)),
            "fsb7": pa.array(_blobs(rng, N, _mask(rng, N, 0.5), 7, 7), pa.binary(7)),
        }
    )


@_builder
def _t_embeddings(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "emb16": _fsl(pa.array(rng.standard_normal(N * 16).astype(np.float32)), 16),
            "emb8_null_rows": _fsl(pa.array(rng.standard_normal(N * 8).astype(np.float32)), 8, _mask(rng, N)),
            "emb4_null_items": _fsl(
                pa.array(rng.standard_normal(N * 4).astype(np.float32), mask=_mask(rng, N * 4)),
                4,
                _mask(rng, N),
            ),
        }
    )


@_builder
def _t_embeddings_large(rng: np.random.Generator) -> pa.Table:
    n = 2000
    return pa.table(
        {
            "emb128": _fsl(pa.array(rng.standard_normal(n * 128).astype(np.float32)), 128),
            "emb128_null_rows": _fsl(
                pa.array(rng.standard_normal(n * 128).astype(np.float32)), 128, _mask(rng, n)
            ),
        }
    )


@_builder
def _t_fsl_misc(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "i8x3": _fsl(_ints(rng, N * 3, np.int8, _mask(rng, N * 3)), 3, _mask(rng, N)),
            "f64x2": _fsl(pa.array(rng.standard_normal(N * 2)), 2),
            "f16x4": _fsl(pa.array(rng.standard_normal(N * 4).astype(np.float16)), 4, _mask(rng, N)),
            "boolx5": _fsl(pa.array(rng.random(N * 5) < 0.3), 5),
            "u8x32": _fsl(pa.array(rng.integers(0, 256, N * 32).astype(np.uint8)), 32),
            "i16x2x2": _fsl(
                _fsl(pa.array(rng.integers(-99, 99, N * 4).astype(np.int16)), 2), 2, _mask(rng, N)
            ),
            "named_item": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.random(N * 2).astype(np.float32)),
                type=pa.list_(pa.field("emb", pa.float32(), False), 2),
            ),
        }
    )


@_builder
def _t_lists(rng: np.random.Generator) -> pa.Table:
    def ints(k: int) -> pa.Array:
        return pa.array(rng.integers(-1000, 1000, k).astype(np.int32), mask=_mask(rng, k))

    def strs(k: int) -> pa.Array:
        return pa.array(_strings(rng, k, _mask(rng, k)))

    def inner(k: int) -> pa.Array:
        return _list(rng, k, lambda j: pa.array(rng.integers(0, 9, j), mask=_mask(rng, j)), _mask(rng, k), 3)

    return pa.table(
        {
            "l_i32": _list(rng, N, ints, _mask(rng, N)),
            "l_str": _list(rng, N, strs, _mask(rng, N)),
            "l_l_i64": _list(rng, N, inner, _mask(rng, N), 3),
            "l_required_items": _list(
                rng,
                N,
                lambda k: pa.array(rng.random(k)),
                _mask(rng, N),
                item=pa.field("element", pa.float64(), False),
            ),
            "l_empty": pa.array([[] for _ in range(N)], pa.list_(pa.int16())),
        }
    )


@_builder
def _t_large_lists(rng: np.random.Generator) -> pa.Table:
    def strs(k: int) -> pa.Array:
        return pa.array(_strings(rng, k, _mask(rng, k)), pa.large_string())

    return pa.table(
        {
            "ll_i64": _list(
                rng, N, lambda k: _ints(rng, k, np.int64, _mask(rng, k)), _mask(rng, N), large=True
            ),
            "ll_lstr": _list(rng, N, strs, _mask(rng, N), large=True),
            "ll_f64": _list(rng, N, lambda k: pa.array(rng.random(k)), None, 6, large=True),
        }
    )


def _flat_struct(rng: np.random.Generator, n: int, mask: np.ndarray | None = None) -> pa.Array:
    return _struct(
        {
            "a": pa.array(rng.integers(-50, 50, n).astype(np.int32), mask=_mask(rng, n)),
            "b": pa.array(_strings(rng, n, _mask(rng, n))),
            "c": pa.array(rng.random(n), mask=_mask(rng, n)),
            "d": pa.array(rng.random(n) < 0.5),
        },
        mask,
    )


@_builder
def _t_struct_flat(rng: np.random.Generator) -> pa.Table:
    return pa.table({"st": _flat_struct(rng, N), "id": pa.array(np.arange(N))})


def _nested_struct(rng: np.random.Generator, n: int, nulls: bool) -> pa.Array:
    def m(p: float = 0.1) -> np.ndarray | None:
        return _mask(rng, n, p) if nulls else None

    innermost = _struct(
        {
            "x": pa.array(rng.integers(0, 100, n).astype(np.int16), mask=_mask(rng, n)),
            "y": pa.array(_strings(rng, n)),
        },
        m(),
    )
    middle = _struct(
        {
            "inner": innermost,
            "z": _list(rng, n, lambda k: pa.array(rng.integers(0, 9, k).astype(np.int32)), _mask(rng, n)),
        },
        m(),
    )
    return _struct(
        {
            "outer": middle,
            "w": pa.array(rng.integers(0, 20000, n).astype(np.int32), pa.date32(), mask=_mask(rng, n)),
        },
        m(),
    )


@_builder
def _t_struct_nested(rng: np.random.Generator) -> pa.Table:
    return pa.table({"nested": _nested_struct(rng, N, nulls=False), "flag": pa.array(rng.random(N) < 0.5)})


@_builder
def _t_struct_nulls(rng: np.random.Generator) -> pa.Table:
    return pa.table({"st": _flat_struct(rng, N, _mask(rng, N)), "nested": _nested_struct(rng, N, nulls=True)})


def _point_list(rng: np.random.Generator, n: int, struct_nulls: bool) -> pa.Array:
    def points(k: int) -> pa.Array:
        children = {
            "a": pa.array(rng.integers(0, 100, k).astype(np.int32), mask=_mask(rng, k)),
            "b": pa.array(_strings(rng, k, _mask(rng, k))),
        }
        return _struct(children, _mask(rng, k) if struct_nulls else None)

    return _list(rng, n, points, _mask(rng, n))


@_builder
def _t_list_struct(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "points": _point_list(rng, N, struct_nulls=False),
            "st_of_list": _struct(
                {"l": _list(rng, N, lambda k: pa.array(rng.random(k), mask=_mask(rng, k)), _mask(rng, N))}
            ),
        }
    )


@_builder
def _t_list_struct_nulls(rng: np.random.Generator) -> pa.Table:
    def deep(k: int) -> pa.Array:
        return _struct(
            {
                "l": _list(
                    rng,
                    k,
                    lambda j: pa.array(rng.integers(0, 9, j).astype(np.int32), mask=_mask(rng, j)),
                    _mask(rng, k),
                    3,
                ),
                "s": _struct({"c": pa.array(_strings(rng, k, _mask(rng, k)))}, _mask(rng, k)),
            },
            _mask(rng, k),
        )

    return pa.table(
        {"points": _point_list(rng, N, struct_nulls=True), "deep": _list(rng, N, deep, _mask(rng, N), 3)}
    )


def _dict(
    rng: np.random.Generator, n: int, index: pa.DataType, values: pa.Array, p: float = 0.15
) -> pa.Array:
    keys = rng.integers(0, len(values), n)
    return pa.DictionaryArray.from_arrays(pa.array(keys, index, mask=_mask(rng, n, p)), values)


@_builder
def _t_dictionary(rng: np.random.Generator) -> pa.Table:
    words = pa.array([f"w{i}-{_WORDS[i % len(_WORDS)]}" for i in range(40)])
    return pa.table(
        {
            "d_i32_str": _dict(rng, N, pa.int32(), words),
            "d_i8_str": _dict(rng, N, pa.int8(), pa.array(["a", "b", "c"])),
            "d_u16_lstr": _dict(rng, N, pa.uint16(), words.cast(pa.large_string())),
            "d_i64_bin": _dict(rng, N, pa.int64(), pa.array([b"\x00\xff", b"", b"xyz"])),
            "d_unused_items": pa.DictionaryArray.from_arrays(
                pa.array(rng.integers(0, 2, N), pa.int32()),
                pa.array(["used", "also used", "never", "nor this"]),
            ),
            "d_null_item": _dict(rng, N, pa.int32(), pa.array(["a", None, "c"]), 0.05),
            "d_encoded": pa.array(_strings(rng, N, _mask(rng, N), 1)).dictionary_encode(),
        }
    )


@_builder
def _t_dictionary_values(rng: np.random.Generator) -> pa.Table:
    # Fixed-width dictionary values: 2.1/2.2 need a page dictionary for pylance to read them back.
    return pa.table(
        {
            "d_i32_i32": _dict(rng, N, pa.int32(), pa.array([7, -1, 2**31 - 1], pa.int32())),
            "d_i8_i64": _dict(rng, N, pa.int8(), pa.array([10, None, -(2**63)], pa.int64()), 0.05),
            "d_i16_f64": _dict(rng, N, pa.int16(), pa.array([1.5, -0.0, float("inf")])),
            "d_i32_u8": _dict(rng, N, pa.int32(), pa.array([0, 255], pa.uint8())),
            "d_i32_bool": _dict(rng, N, pa.int32(), pa.array([True, False])),
        }
    )


@_builder
def _t_empty_struct(rng: np.random.Generator) -> pa.Table:
    # struct<> without nulls: pylance gives it its own value-less column at 2.1+ (issue 15 defect 4).
    return pa.table({"i": _ints(rng, N, np.int32), "e": pa.array([{}] * N, pa.struct([]))})


@_builder
def _t_low_cardinality(rng: np.random.Generator) -> pa.Table:
    cats = [f"category-{k}" for k in range(7)]
    m = _mask(rng, N)
    picks = rng.integers(0, len(cats), N)
    values = [None if m[i] else cats[picks[i]] for i in range(N)]
    return pa.table(
        {
            "s": pa.array(values, pa.string()),
            "ls": pa.array(values, pa.large_string()),
            "bin": pa.array(values, pa.binary()),
            "i": pa.array(rng.integers(0, 3, N)),
        }
    )


@_builder
def _t_long_strings(rng: np.random.Generator) -> pa.Table:
    n = 2000

    def texts(k: int, mask: np.ndarray | None) -> list:
        lengths = rng.integers(150, 350, k)
        return [None if mask is not None and mask[i] else rng.bytes(int(lengths[i])).hex() for i in range(k)]

    return pa.table(
        {
            "s": pa.array(texts(n, _mask(rng, n)), pa.string()),
            "ls": pa.array(texts(n, None), pa.large_string()),
            "bin": pa.array(_blobs(rng, n, _mask(rng, n), 260, 600), pa.binary()),
            "l_s": _list(rng, n, lambda k: pa.array(texts(k, _mask(rng, k))), _mask(rng, n), 3),
        }
    )


@_builder
def _t_all_null(rng: np.random.Generator) -> pa.Table:
    n = N
    types = {
        "i32": pa.int32(),
        "f64": pa.float64(),
        "bool": pa.bool_(),
        "s": pa.string(),
        "lbin": pa.large_binary(),
        "fsb": pa.binary(5),
        "dec": pa.decimal128(12, 3),
        "ts": pa.timestamp("us", tz="UTC"),
        "l": pa.list_(pa.int32()),
        "fsl": pa.list_(pa.float32(), 4),
        "dict": pa.dictionary(pa.int32(), pa.string()),
    }
    cols = {name: pa.nulls(n, t) for name, t in types.items()}
    cols["st_children_null"] = _struct({"a": pa.nulls(n, pa.int32()), "b": pa.nulls(n, pa.string())})
    return pa.table(cols)


@_builder
def _t_null_type(rng: np.random.Generator) -> pa.Table:
    return pa.table({"nothing": pa.nulls(N), "i": pa.array(np.arange(N, dtype=np.int32))})


_EMPTY_SCHEMA = pa.schema(
    [
        pa.field("i", pa.int32(), nullable=False),
        ("s", pa.string()),
        ("f", pa.float64()),
        ("l", pa.list_(pa.int64())),
        ("v", pa.list_(pa.float32(), 8)),
        ("st", pa.struct([("a", pa.int16()), ("b", pa.large_string())])),
        ("d", pa.dictionary(pa.int32(), pa.string())),
    ],
    metadata={"origin": "lance-flight tests"},
)


@_builder
def _t_empty(rng: np.random.Generator) -> pa.Table:
    return _EMPTY_SCHEMA.empty_table()


@_builder
def _t_single_row(rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "i": pa.array([42], pa.int64()),
            "s": pa.array(["only"]),
            "n": pa.array([None], pa.float32()),
            "l": pa.array([[1, None, 3]], pa.list_(pa.int8())),
            "v": _fsl(pa.array([1.0, 2.0, 3.0, 4.0], pa.float32()), 4),
        }
    )


@_builder
def _t_metadata(rng: np.random.Generator) -> pa.Table:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False, metadata={"description": "row id", "unit": "none"}),
            pa.field("name", pa.string(), metadata={"lang": "en"}),
            pa.field(
                "st",
                pa.struct(
                    [pa.field("x", pa.float32(), nullable=False, metadata={"k": "v"}), ("y", pa.string())]
                ),
                nullable=False,
            ),
        ],
        metadata={"producer": "tests", "version": "1"},
    )
    n = 500
    return pa.table(
        [
            pa.array(np.arange(n)),
            pa.array(_strings(rng, n, _mask(rng, n))),
            _struct({"x": pa.array(rng.random(n).astype(np.float32)), "y": pa.array(_strings(rng, n))}),
        ],
        schema=schema,
    )


@_builder
def _t_multipage(rng: np.random.Generator) -> pa.Table:
    n = 5000

    def texts(k: int) -> list:
        return [rng.bytes(int(x)).hex() for x in rng.integers(140, 300, k)]

    return pa.table(
        {
            "i64": _ints(rng, n, np.int64, _mask(rng, n)),
            "f32": pa.array(rng.random(n).astype(np.float32)),
            "b": pa.array(rng.random(n) < 0.5, mask=_mask(rng, n)),
            "s": pa.array(_strings(rng, n, _mask(rng, n))),
            "long_s": pa.array(texts(n)),
            "l": _list(
                rng,
                n,
                lambda k: pa.array(rng.integers(0, 99, k).astype(np.int32), mask=_mask(rng, k)),
                _mask(rng, n),
                6,
            ),
            "emb": _fsl(pa.array(rng.standard_normal(n * 16).astype(np.float32)), 16),
            "st": _flat_struct(rng, n),
            "d": _dict(rng, n, pa.int32(), pa.array([f"k{i}" for i in range(10)])),
            "fsb": pa.array(_blobs(rng, n, _mask(rng, n), 8, 8), pa.binary(8)),
        }
    )


def _built_table(name: str) -> pa.Table:
    return _BUILDERS[name]()


_built = functools.cache(_built_table)

_SMALL_PAGES = {"data_cache_bytes": 4096, "max_page_bytes": 32 * 1024}

CASES: tuple[Case, ...] = (
    Case("bool", _BUILDERS["bool"]),
    Case("int_signed", _BUILDERS["int_signed"]),
    Case("int_unsigned", _BUILDERS["int_unsigned"]),
    Case(
        "int_patterns",
        _BUILDERS["int_patterns"],
        encodings={"2.1": ("Rle", "InlineBitpacking"), "2.2": ("ConstantLayout", "Rle", "InlineBitpacking")},
        note="constant, runs, narrow and sorted integers: RLE / constant / bitpacking at 2.1+",
    ),
    Case("floats", _BUILDERS["floats"]),
    Case("decimal128", _BUILDERS["decimal128"]),
    Case("dates", _BUILDERS["dates"]),
    Case("times", _BUILDERS["times"]),
    Case("timestamps", _BUILDERS["timestamps"]),
    Case("timestamps_tz", _BUILDERS["timestamps_tz"]),
    Case("durations", _BUILDERS["durations"]),
    Case("strings", _BUILDERS["strings"], encodings={"2.1": ("MiniBlockLayout", "Fsst")}),
    Case(
        "string_view",
        _BUILDERS["string_view"],
        versions=STRUCTURAL,
        note="pylance changes the type: string_view is read back as string (2.0 refuses it)",
    ),
    Case("binary", _BUILDERS["binary"]),
    Case("fixed_size_binary", _BUILDERS["fixed_size_binary"]),
    Case(
        "embeddings",
        _BUILDERS["embeddings"],
        encodings={"2.0": ("FixedSizeList",), "2.1": ("MiniBlockLayout", "FixedSizeList")},
        note="FSL<float32, 4|8|16>: mini-block at 2.1+",
    ),
    Case(
        "embeddings_large",
        _BUILDERS["embeddings_large"],
        encodings={"2.1": ("FullZipLayout", "FixedSizeList"), "2.2": ("FullZipLayout", "FixedSizeList")},
        note="FSL<float32,128> is 512 B/row: full-zip at 2.1+",
    ),
    Case("fsl_misc", _BUILDERS["fsl_misc"], note="the FSL item field comes back as nullable 'item'"),
    Case("lists", _BUILDERS["lists"], encodings={"2.0": ("List",)}),
    Case("large_lists", _BUILDERS["large_lists"]),
    Case("struct_flat", _BUILDERS["struct_flat"], encodings={"2.0": ("Struct",)}),
    Case("struct_nested", _BUILDERS["struct_nested"]),
    Case(
        "struct_nulls",
        _BUILDERS["struct_nulls"],
        versions=STRUCTURAL,
        note="2.0 refuses struct validity (ValueError)",
    ),
    Case("list_struct", _BUILDERS["list_struct"]),
    Case(
        "list_struct_nulls",
        _BUILDERS["list_struct_nulls"],
        versions=STRUCTURAL,
        note="null struct items inside lists, lists inside structs inside lists; 2.0 refuses",
    ),
    Case(
        "dictionary",
        _BUILDERS["dictionary"],
        encodings={"2.0": ("Dictionary",), "2.1": ("dictionary: Some",)},
        note="compared logically: pylance's dictionaries differ from the input's (see module doc)",
    ),
    Case(
        "dictionary_values",
        _BUILDERS["dictionary_values"],
        encodings={"2.1": ("dictionary: Some",), "2.2": ("dictionary: Some",)},
        note="integer, float and boolean dictionary values (issue 15 defect 2)",
    ),
    Case("empty_struct", _BUILDERS["empty_struct"], note="struct<> columns without nulls"),
    Case(
        "low_cardinality",
        _BUILDERS["low_cardinality"],
        encodings={"2.0": ("Dictionary",), "2.1": ("dictionary: Some",), "2.2": ("dictionary: Some",)},
        note="plain string columns pylance dictionary-encodes on its own",
    ),
    Case(
        "long_strings",
        _BUILDERS["long_strings"],
        encodings={"2.1": ("FullZipLayout", "Fsst"), "2.2": ("FullZipLayout", "Fsst")},
        note="> 256 B per value: full-zip with FSST at 2.1+",
    ),
    Case(
        "all_null",
        _BUILDERS["all_null"],
        encodings={"2.0": ("AllNulls",), "2.1": ("ConstantLayout",), "2.2": ("ConstantLayout",)},
    ),
    Case("null_type", _BUILDERS["null_type"], note="columns of Arrow type null"),
    Case("empty", _BUILDERS["empty"], note="0 rows"),
    Case("single_row", _BUILDERS["single_row"]),
    Case("metadata", _BUILDERS["metadata"], note="schema and field metadata, non-nullable fields"),
    Case(
        "multipage",
        _BUILDERS["multipage"],
        write_rows=397,
        writer_kwargs=_SMALL_PAGES,
        min_pages=10,
        note="every write_batch ends a page (and 2.0 splits further); pages end at odd rows",
    ),
)

CASES_BY_NAME: dict[str, Case] = {c.name: c for c in CASES}


def case_versions(cases: tuple[Case, ...] = CASES) -> list[tuple[Case, str]]:
    """Every (case, version) pair pylance writes."""
    return [(c, v) for c in cases for v in c.versions]
