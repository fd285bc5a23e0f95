"""Hypothesis strategies for Arrow schemas and tables that Lance file format 2.0 can hold.

``arrow_types()`` draws types up to three levels of nesting: every leaf type of the file-format issue
(bool, ints, floats incl. float16, decimal128, dates, times, timestamps with and without time zone,
durations, strings, binaries, fixed-size binary), dictionary-encoded strings and binaries, lists,
large lists, fixed-size lists of fixed-width values (pylance refuses FSL<list> and, before 2.2,
FSL<struct>; it panics on FSL<string>) and structs.

``table_specs()`` draws a schema, a row count, a null probability and a seed; ``TableSpec.build()``
makes the columns with a seeded numpy generator (fast, reproducible from the printed spec, and still
shrinkable through the schema, row count, null probability and seed). ``tables()`` maps specs to
tables. By default structs get no null rows, because 2.0 cannot store struct validity
(pylance and we refuse such data); pass ``struct_nulls=True`` for 2.1+.

Fixed-size-list items are always the nullable ``"item"`` field, the only form Lance round-trips.
"""

from __future__ import annotations

import string
from collections.abc import Callable

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

__all__ = ["TableSpec", "arrow_types", "random_array", "schemas", "table_specs", "tables"]

_INTS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
_ZONES = [None, "UTC", "Europe/Paris", "+05:30", "America/New_York"]

fixed_width_types: st.SearchStrategy[pa.DataType] = st.one_of(
    st.sampled_from([pa.bool_(), *_INTS, pa.float16(), pa.float32(), pa.float64()]),
    st.sampled_from(
        [pa.date32(), pa.date64(), pa.time32("s"), pa.time32("ms"), pa.time64("us"), pa.time64("ns")]
    ),
    st.builds(pa.timestamp, st.sampled_from(["s", "ms", "us", "ns"]), st.sampled_from(_ZONES)),
    st.builds(pa.duration, st.sampled_from(["s", "ms", "us", "ns"])),
    st.integers(1, 38).flatmap(lambda p: st.builds(pa.decimal128, st.just(p), st.integers(-2, p))),
    st.builds(pa.binary, st.integers(1, 24)),
)

variable_width_types: st.SearchStrategy[pa.DataType] = st.sampled_from(
    [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]
)

dictionary_types: st.SearchStrategy[pa.DataType] = st.builds(
    pa.dictionary,
    st.sampled_from(_INTS),
    st.sampled_from([pa.string(), pa.large_string(), pa.binary()]),
)

leaf_types: st.SearchStrategy[pa.DataType] = st.one_of(
    fixed_width_types, variable_width_types, dictionary_types
)


def _fsl_item_types(depth: int) -> st.SearchStrategy[pa.DataType]:
    inner = fixed_width_types
    if depth > 1:
        inner = st.one_of(inner, st.builds(pa.list_, fixed_width_types, st.integers(1, 4)))
    return inner


def _names(n: int) -> st.SearchStrategy[list[str]]:
    alphabet = string.ascii_lowercase + "_"
    return st.lists(st.text(alphabet, min_size=1, max_size=8), min_size=n, max_size=n, unique=True)


def arrow_types(max_depth: int = 3) -> st.SearchStrategy[pa.DataType]:
    """Arrow types with at most ``max_depth`` levels of nesting (a leaf is depth 0)."""
    if max_depth <= 0:
        return leaf_types

    child = arrow_types(max_depth - 1)

    def struct_of(n: int) -> st.SearchStrategy[pa.DataType]:
        return st.tuples(
            _names(n),
            st.lists(child, min_size=n, max_size=n),
            st.lists(st.booleans(), min_size=n, max_size=n),
        ).map(
            lambda t: pa.struct(
                [pa.field(name, typ, nullable) for name, typ, nullable in zip(*t, strict=True)]
            )
        )

    list_item = st.tuples(st.sampled_from(["item", "element"]), child, st.booleans()).map(
        lambda t: pa.field(t[0], t[1], t[2])
    )
    return st.one_of(
        leaf_types,
        st.builds(pa.list_, list_item),
        st.builds(pa.large_list, list_item),
        st.builds(pa.list_, _fsl_item_types(max_depth), st.integers(1, 8)),
        st.integers(1, 3).flatmap(struct_of),
    )


@st.composite
def schemas(draw: st.DrawFn, max_columns: int = 4, max_depth: int = 3) -> pa.Schema:
    """Schemas of 1..``max_columns`` top-level fields, some not nullable."""
    n = draw(st.integers(1, max_columns))
    names = draw(_names(n))
    fields = [pa.field(name, draw(arrow_types(max_depth)), draw(st.booleans())) for name in names]
    return pa.schema(fields)


# -- data ----------------------------------------------------------------------------------------------------

_TEXT = [*"abcdefghijklmnopqrstuvwxyz0123456789 _-", "é", "ß", "日", "本", "🦀", "Ω"]


def _mask(rng: np.random.Generator, n: int, p: float, nullable: bool) -> np.ndarray | None:
    if not nullable or p <= 0:
        return None
    m = rng.random(n) < p
    return m if m.any() else None


def _offsets(lengths: np.ndarray, large: bool) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.array(offsets)


def _strings(rng: np.random.Generator, n: int, long: bool) -> list[str]:
    hi = 400 if long else 12
    lengths = rng.integers(0, hi + 1, n)
    chars = rng.integers(0, len(_TEXT), int(lengths.sum()))
    text = [_TEXT[c] for c in chars]
    out, pos = [], 0
    for k in lengths:
        out.append("".join(text[pos : pos + k]))
        pos += int(k)
    return out


def _leaf(t: pa.DataType, n: int, rng: np.random.Generator, mask: np.ndarray | None) -> pa.Array:
    if pa.types.is_boolean(t):
        return pa.array(rng.random(n) < 0.5, mask=mask)
    if pa.types.is_integer(t):
        info = np.iinfo(t.to_pandas_dtype())
        narrow = rng.random() < 0.5
        lo, hi = (0, 100) if narrow and info.min == 0 else ((-50, 50) if narrow else (info.min, info.max))
        return pa.array(rng.integers(lo, hi, n, dtype=info.dtype, endpoint=True), type=t, mask=mask)
    if pa.types.is_floating(t):
        dtype = {16: np.float16, 32: np.float32, 64: np.float64}[t.bit_width]
        values = rng.standard_normal(n).astype(dtype)
        special = rng.random(n) < 0.05
        values[special] = rng.choice(
            np.array([np.nan, np.inf, -np.inf, -0.0], dtype=dtype), int(special.sum())
        )
        return pa.array(values, type=t, mask=mask)
    if pa.types.is_date32(t):
        return pa.array(rng.integers(-50_000, 50_000, n).astype(np.int32), type=t, mask=mask)
    if pa.types.is_date64(t):
        return pa.array(rng.integers(-50_000, 50_000, n) * 86_400_000, type=t, mask=mask)
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        per_day = {"s": 86_400, "ms": 86_400_000, "us": 86_400 * 10**6, "ns": 86_400 * 10**9}[t.unit]
        dtype = np.int32 if pa.types.is_time32(t) else np.int64
        return pa.array(rng.integers(0, per_day, n).astype(dtype), type=t, mask=mask)
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return pa.array(rng.integers(-(2**50), 2**50, n), type=t, mask=mask)
    if pa.types.is_decimal(t):
        # Build from unscaled 128-bit integers: going through decimal.Decimal makes
        # pyarrow rescale, which fails for negative scales.
        limit = 10**t.precision - 1
        digits = rng.integers(1, t.precision + 1, n)
        raw = bytearray()
        for i in range(n):
            d = int(digits[i])
            mag = int(rng.integers(0, 10 ** min(d, 18))) * 10 ** max(0, d - 18)
            v = min(mag, limit) * (-1 if rng.random() < 0.5 else 1)
            raw += v.to_bytes(16, "little", signed=True)
        validity = None if mask is None else pa.array(~mask).buffers()[1]
        return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(bytes(raw))])
    if pa.types.is_fixed_size_binary(t):
        data = rng.integers(0, 256, n * t.byte_width, dtype=np.uint8).tobytes()
        values = [data[i * t.byte_width : (i + 1) * t.byte_width] for i in range(n)]
        return pa.array(values, type=t, mask=mask)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.array(_strings(rng, n, rng.random() < 0.2), type=t, mask=mask)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        lengths = rng.integers(0, 30, n)
        data = rng.integers(0, 256, int(lengths.sum()), dtype=np.uint8).tobytes()
        ends = np.cumsum(lengths)
        values = [data[int(e - k) : int(e)] for e, k in zip(ends, lengths, strict=True)]
        return pa.array(values, type=t, mask=mask)
    raise NotImplementedError(f"no generator for {t}")


def random_array(
    t: pa.DataType,
    n: int,
    rng: np.random.Generator,
    null_p: float = 0.1,
    nullable: bool = True,
    struct_nulls: bool = False,
) -> pa.Array:
    """``n`` random values of type ``t``; nulls with probability ``null_p`` where ``nullable``."""
    mask = _mask(rng, n, null_p, nullable)
    if pa.types.is_dictionary(t):
        k = int(rng.integers(1, 20))
        pool = _leaf(t.value_type, k, rng, None).unique()
        keys = rng.integers(0, len(pool), n)
        return pa.DictionaryArray.from_arrays(pa.array(keys, t.index_type, mask=mask), pool)
    if pa.types.is_struct(t):
        children = [random_array(f.type, n, rng, null_p, f.nullable, struct_nulls) for f in t]
        return pa.StructArray.from_arrays(
            children, fields=list(t), mask=pa.array(mask) if struct_nulls and mask is not None else None
        )
    if pa.types.is_fixed_size_list(t):
        items = random_array(t.value_type, n * t.list_size, rng, null_p, t.value_field.nullable, struct_nulls)
        return pa.FixedSizeListArray.from_arrays(items, type=t, mask=None if mask is None else pa.array(mask))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        large = pa.types.is_large_list(t)
        lengths = rng.integers(0, 5, n)
        items = random_array(
            t.value_type, int(lengths.sum()), rng, null_p, t.value_field.nullable, struct_nulls
        )
        cls: Callable[..., pa.Array] = pa.LargeListArray.from_arrays if large else pa.ListArray.from_arrays
        return cls(_offsets(lengths, large), items, type=t, mask=None if mask is None else pa.array(mask))
    return _leaf(t, n, rng, mask)


class TableSpec:
    """Everything that determines a generated table; :meth:`build` makes it.

    Tests draw specs rather than tables so a failing example prints as a short, reproducible line
    (hypothesis reprs ``@given`` arguments, and warns, an error under ``filterwarnings = error``,
    when a repr passes 30 kB, which a nested table easily does).
    """

    __slots__ = ("null_p", "num_rows", "schema", "seed", "struct_nulls")

    def __init__(
        self, schema: pa.Schema, num_rows: int, null_p: float, seed: int, struct_nulls: bool
    ) -> None:
        self.schema = schema
        self.num_rows = num_rows
        self.null_p = null_p
        self.seed = seed
        self.struct_nulls = struct_nulls

    def build(self) -> pa.Table:
        rng = np.random.default_rng(self.seed)
        columns = [
            random_array(f.type, self.num_rows, rng, self.null_p, f.nullable, self.struct_nulls)
            for f in self.schema
        ]
        return pa.Table.from_arrays(columns, schema=self.schema)

    def __repr__(self) -> str:
        fields = ", ".join(f"{f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in self.schema)
        return (
            f"TableSpec(schema=<{fields}>, num_rows={self.num_rows}, null_p={self.null_p}, "
            f"seed={self.seed}, struct_nulls={self.struct_nulls})"
        )


@st.composite
def table_specs(
    draw: st.DrawFn,
    schema: st.SearchStrategy[pa.Schema] | None = None,
    max_rows: int = 300,
    struct_nulls: bool = False,
) -> TableSpec:
    """Specs of random tables: a drawn schema, 0..``max_rows`` rows, nulls where fields are nullable."""
    sch = draw(schema if schema is not None else schemas())
    n = draw(st.one_of(st.just(0), st.just(1), st.integers(0, max_rows)))
    null_p = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    return TableSpec(sch, n, null_p, seed, struct_nulls)


def tables(
    schema: st.SearchStrategy[pa.Schema] | None = None, max_rows: int = 300, struct_nulls: bool = False
) -> st.SearchStrategy[pa.Table]:
    """Random tables (see :func:`table_specs`; prefer specs in ``@given`` for readable failures)."""
    return table_specs(schema, max_rows, struct_nulls).map(lambda spec: spec.build())
