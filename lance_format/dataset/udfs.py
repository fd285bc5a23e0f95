"""Vectorised scalar functions pyarrow lacks, registered as compute UDFs on first use.

DataFusion (pylance's engine) has list functions with SQL semantics that no pyarrow kernel gives
directly: ``array_has`` (a list holds a value) and 1-based list subscripts that are NULL out of
range (``pc.list_element`` raises instead). Each is registered once per input-type signature
under a name that includes the types, and works on whole arrays with numpy (no per-row Python).
"""

from __future__ import annotations

import contextlib
import decimal
import functools
import re
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core import text_kernels
from lance_format.core.errors import InvalidInputError
from lance_format.core.float_text import rust_float_text
from lance_format.dataset import regexp as regexps
from lance_format.dataset import value_text

__all__ = [
    "MAX_SIGNATURES",
    "array_has",
    "call",
    "case_map",
    "cast",
    "float_decimal",
    "float_mod",
    "float_text",
    "int_bytes",
    "list_equal",
    "list_get",
    "list_text",
    "regexp",
    "signature_count",
    "text_function",
]

#: Distinct signatures registered per process at most. pyarrow's function registry is global and
#: has no way to unregister, and the signatures come from what clients send (a list column's type
#: names its item field, a struct its fields, a fixed-size list its size: any dataset a client
#: writes adds new ones), ~1.6 KiB each (measured: 5,000 list types, +8 MiB resident). 4,096 of
#: them is ~6.5 MiB, far more than a deployment's schemas use; past it a filter needing a new one
#: is refused instead of the process growing for as long as clients invent types.
MAX_SIGNATURES = 4096

_lock = threading.Lock()
_registered: set[str] = set()


def _register(
    name: str, func: Callable[..., Any], in_types: dict[str, pa.DataType], out_type: pa.DataType
) -> str:
    """Register ``func`` under ``name`` once per process; returns the name.

    Raises
    ------
    InvalidInputError
        ``name`` is new and :data:`MAX_SIGNATURES` are registered already.
    """
    with _lock:
        if name not in _registered:
            if len(_registered) >= MAX_SIGNATURES:
                raise InvalidInputError(
                    f"too many distinct column types in filters of this process ({MAX_SIGNATURES} "
                    "signatures of list and cast functions); this filter needs another"
                )
            # ArrowKeyError: registered by an earlier import of this module (the registry is global).
            with contextlib.suppress(pa.ArrowKeyError):
                pc.register_scalar_function(
                    func, name, {"summary": name, "description": ""}, in_types, out_type
                )
            _registered.add(name)
    return name


def signature_count() -> int:
    """Signatures registered by this process so far (at most :data:`MAX_SIGNATURES`)."""
    with _lock:
        return len(_registered)


def call(name: str, args: list[pc.Expression]) -> pc.Expression:
    """An Expression calling the registered function ``name``.

    pyarrow has no public constructor for a call by name: its UDF documentation uses
    ``Expression._call`` for this, so it is used here, in this one place.
    """
    return pc.Expression._call(name, args)


def _as_array(value: Any, n: int) -> pa.Array:
    if isinstance(value, pa.Scalar):
        return pa.array([value.as_py()] * n, value.type) if n else pa.array([], value.type)
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks()
    return value


def _starts(lists: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(first flat position, length)`` of every list within ``pc.list_flatten(lists)``."""
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.cumsum(lengths) - lengths
    return starts, lengths


def _rows(*args: Any) -> int:
    """Rows of a UDF call: the length of its array arguments (1 when all are scalars)."""
    return next((len(a) for a in args if not isinstance(a, pa.Scalar)), 1)


def _array_has(ctx: Any, lists: Any, value: Any) -> pa.Array:
    n = _rows(lists, value)  # a list literal with a column of values: the column's rows
    lists = _as_array(lists, n)
    flat = pc.list_flatten(lists)
    _, lengths = _starts(lists)
    parents = np.repeat(np.arange(len(lists), dtype=np.int64), lengths)
    if isinstance(value, pa.Scalar):
        if not value.is_valid:
            return pa.nulls(len(lists), pa.bool_())
        hits = pc.equal(flat, value)
        null_value = np.zeros(len(lists), bool)
    else:
        value = _as_array(value, len(lists))
        hits = pc.equal(flat, value.take(pa.array(parents)))
        null_value = value.is_null().to_numpy(zero_copy_only=False)
    hit = hits.fill_null(False).to_numpy(zero_copy_only=False)
    found = np.bincount(parents[hit], minlength=len(lists)) > 0
    mask = lists.is_null().to_numpy(zero_copy_only=False) | null_value
    return pa.array(found, pa.bool_(), mask=mask)


def array_has(list_type: pa.DataType, value_type: pa.DataType) -> str:
    """Name of ``array_has(list, value)`` for these types (NULL list or value: NULL)."""
    name = f"lance_array_has<{list_type},{value_type}>"
    return _register(name, _array_has, {"list": list_type, "value": value_type}, pa.bool_())


def _list_get(ctx: Any, lists: Any, index: Any) -> pa.Array:
    n = len(lists) if not isinstance(lists, pa.Scalar) else 1
    lists = _as_array(lists, n)
    flat = pc.list_flatten(lists)
    starts, lengths = _starts(lists)
    i = np.asarray(_as_array(index, len(lists)).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    # 1-based from the front, -1 is the last element; 0 and out of range are NULL (DataFusion).
    pos = np.where(i > 0, starts + i - 1, starts + lengths + i)
    ok = (i != 0) & (np.abs(i) <= lengths)
    taken = flat.take(pa.array(np.where(ok, pos, 0))) if len(flat) else pa.nulls(len(lists), flat.type)
    return pc.if_else(pa.array(ok), taken, pa.scalar(None, flat.type))


def list_get(list_type: pa.DataType) -> str:
    """Name of ``list_get(list, index)`` for ``list_type`` (index: int64)."""
    name = f"lance_list_get<{list_type}>"
    return _register(name, _list_get, {"list": list_type, "index": pa.int64()}, list_type.value_type)


def _cast_or_null(values: pa.Array, to: pa.DataType) -> pa.Array:
    """``values`` cast to ``to``, NULL where a value does not convert.

    The whole array is cast at once; only a failing run is split in halves, so an array with a
    few bad values costs a few extra casts, not one per row.
    """
    try:
        return values.cast(to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
        if len(values) <= 1:
            return pa.nulls(len(values), to)
    half = len(values) // 2
    return pa.concat_arrays([_cast_or_null(values.slice(0, half), to), _cast_or_null(values.slice(half), to)])


def _float_to_int(values: pa.Array, to: pa.DataType, null_on_error: bool) -> pa.Array:
    """Floats cast to an integer type, truncating toward zero (DataFusion's cast).

    NaN, infinities and values out of the target's range are an error, or NULL for TRY_CAST.
    """
    info = np.iinfo(to.to_pandas_dtype())
    raw = values.to_numpy(zero_copy_only=False).astype(np.float64)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        trunc = np.trunc(raw)
        fits = np.isfinite(trunc) & (trunc >= info.min) & (trunc <= info.max)
    bad = valid & ~fits
    if bad.any() and not null_on_error:
        raise pa.ArrowInvalid(f"Can't cast value {raw[np.flatnonzero(bad)[0]]} to type {to}")
    keep = valid & fits
    return pa.array(np.where(keep, trunc, 0).astype(to.to_pandas_dtype()), to, mask=~keep)


def cast(from_type: pa.DataType, to: pa.DataType, null_on_error: bool) -> str:
    """Name of a cast with SQL semantics from ``from_type`` to ``to``.

    Floats to integers truncate (an error, or NULL with ``null_on_error``, for NaN, infinities
    and values out of range); other casts are pyarrow's safe casts, failing values NULL with
    ``null_on_error`` (SQL ``TRY_CAST``).
    """

    def run(ctx: Any, values: Any) -> pa.Array:
        n = len(values) if not isinstance(values, pa.Scalar) else 1
        arr = _as_array(values, n)
        if pa.types.is_floating(arr.type) and pa.types.is_integer(to):
            return _float_to_int(arr, to, null_on_error)
        return _cast_or_null(arr, to) if null_on_error else arr.cast(to)

    kind = "try_cast" if null_on_error else "cast"
    return _register(f"lance_{kind}<{from_type},{to}>", run, {"value": from_type}, to)


def _list_equal(ctx: Any, left: Any, right: Any) -> pa.Array:
    if isinstance(left, pa.Scalar) and not isinstance(right, pa.Scalar):
        left, right = right, left
    n = len(left) if not isinstance(left, pa.Scalar) else 1
    left = _as_array(left, n)
    a_flat = pc.list_flatten(left)
    a_starts, a_len = _starts(left)
    if isinstance(right, pa.Scalar):
        if not right.is_valid:
            return pa.nulls(n, pa.bool_())
        b_flat = right.values
        b_starts, b_len = np.zeros(n, np.int64), np.full(n, len(b_flat), np.int64)
        right_null = np.zeros(n, bool)
    else:
        right = _as_array(right, n)
        b_flat = pc.list_flatten(right)
        b_starts, b_len = _starts(right)
        right_null = right.is_null().to_numpy(zero_copy_only=False)
    same_len = a_len == b_len
    rows = np.flatnonzero(same_len)
    lens = a_len[rows]
    within = np.arange(lens.sum(), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
    ia = np.repeat(a_starts[rows], lens) + within
    ib = np.repeat(b_starts[rows], lens) + within
    a_vals, b_vals = a_flat.take(pa.array(ia)), b_flat.take(pa.array(ib))
    # Elements compare equal when both are NULL (arrow-rs's nested equality).
    both_null = pc.and_(a_vals.is_null(), b_vals.is_null())
    eq = pc.or_(pc.equal(a_vals, b_vals).fill_null(False), both_null).to_numpy(zero_copy_only=False)
    mismatches = np.bincount(np.repeat(rows, lens)[~eq], minlength=n)
    result = same_len & (mismatches == 0)
    mask = left.is_null().to_numpy(zero_copy_only=False) | right_null
    return pa.array(result, pa.bool_(), mask=mask)


def list_equal(left: pa.DataType, right: pa.DataType) -> str:
    """Name of ``left = right`` for two list types (same length, elements equal, NULL = NULL)."""
    return _register(
        f"lance_list_equal<{left},{right}>", _list_equal, {"left": left, "right": right}, pa.bool_()
    )


def _nan_rank(ctx: Any, values: Any) -> pa.Array:
    n = len(values) if not isinstance(values, pa.Scalar) else 1
    arr = _as_array(values, n)
    raw = arr.to_numpy(zero_copy_only=False).astype(np.float64)
    rank = np.where(np.isnan(raw), np.where(np.signbit(raw), -1, 1), 0).astype(np.int8)
    return pa.array(rank, pa.int8(), mask=arr.is_null().to_numpy(zero_copy_only=False))


def nan_rank(float_type: pa.DataType) -> str:
    """Name of ``nan_rank(x)``: 1 for NaN, -1 for NaN with the sign bit set, 0 for numbers.

    DataFusion orders floats totally: a negative NaN (``-x`` of a NaN) below every number, a NaN
    above. The sign of a NaN is not visible to any pyarrow compute function.
    """
    return _register(f"lance_nan_rank<{float_type}>", _nan_rank, {"value": float_type}, pa.int8())


_BMP = 0x10000


@functools.cache
def _special_case_chars(upper: bool) -> re.Pattern[str]:
    """A regex class of the characters whose full case mapping is not one character (``ß`` -> ``SS``,
    ``ﬁ`` -> ``FI``, ``İ`` -> ``i̇``), plus ``Σ`` (lowered to ``ς`` at the end of a word).

    pyarrow's ``utf8_upper``/``utf8_lower`` map one character to one; DataFusion (Rust's
    ``to_uppercase``) applies the full mappings, as Python's ``str.upper`` does. Built once, on first use.
    """
    # All of them are in the Basic Multilingual Plane (the last is U+FB17): scan only that.
    chars = [chr(c) for c in range(_BMP) if not 0xD800 <= c <= 0xDFFF]
    special = [c for c in chars if len(c.upper() if upper else c.lower()) != 1]
    if not upper:
        special.append("\u03a3")
    return re.compile("[" + "".join(re.escape(c) for c in special) + "]")


def _case_map(values: Any, upper: bool) -> pa.Array:
    n = len(values) if not isinstance(values, pa.Scalar) else 1
    arr = _as_array(values, n)
    simple = pc.utf8_upper(arr) if upper else pc.utf8_lower(arr)
    pattern = _special_case_chars(upper).pattern
    special = pc.match_substring_regex(arr, pattern=pattern).fill_null(False)
    if not pc.any(special).as_py():
        return simple
    # Only the rows holding such a character go through Python's full mapping (few in any text).
    rows = arr.filter(special).to_pylist()
    fixed = pa.array([s.upper() if upper else s.lower() for s in rows], arr.type)
    return pc.replace_with_mask(simple, special, fixed)


def case_map(string_type: pa.DataType, upper: bool) -> str:
    """Name of ``upper(s)`` / ``lower(s)`` with Unicode's full case mappings, as DataFusion's."""
    kind = "upper" if upper else "lower"

    def run(ctx: Any, values: Any) -> pa.Array:
        return _case_map(values, upper)

    return _register(f"lance_{kind}<{string_type}>", run, {"value": string_type}, string_type)


def _float_mod(ctx: Any, left: Any, right: Any) -> pa.Array:
    n = _rows(left, right)
    a, b = _as_array(left, n), _as_array(right, n)
    mask = (a.is_null().to_numpy(zero_copy_only=False)) | (b.is_null().to_numpy(zero_copy_only=False))
    x = a.to_numpy(zero_copy_only=False)
    y = b.to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.fmod(x, y)
    return pa.array(out, a.type, mask=mask)


def float_mod(float_type: pa.DataType) -> str:
    """Name of ``x % y`` of two floats of ``float_type``: C's ``fmod`` (the remainder truncated
    toward zero, exact, with the dividend's sign; NaN for a zero divisor), as Rust's ``%`` is.
    pyarrow has no float remainder, and ``x - trunc(x / y) * y`` loses digits."""
    return _register(
        f"lance_float_mod<{float_type}>", _float_mod, {"left": float_type, "right": float_type}, float_type
    )


def list_text(list_type: pa.DataType) -> str:
    """Name of ``CAST(l AS STRING)`` of a list ``l``: arrow-rs's text of lists (``[1, , 3]``), see
    :func:`lance_format.dataset.value_text.list_text`."""

    def run(ctx: Any, values: Any) -> pa.Array:
        n = len(values) if not isinstance(values, pa.Scalar) else 1
        return value_text.list_text(_as_array(values, n))

    return _register(f"lance_list_text<{list_type}>", run, {"value": list_type}, pa.string())


def float_text(float_type: pa.DataType) -> str:
    """Name of ``CAST(x AS STRING)`` of float32 or float64 ``x``: the text Arrow's Rust cast writes
    (``1.0``, ``1e20``, ``NaN``; pyarrow's own is ``1``, ``1e+20``, ``nan``), see
    :func:`lance_format.core.float_text.rust_float_text`."""

    def run(ctx: Any, values: Any) -> pa.Array:
        n = len(values) if not isinstance(values, pa.Scalar) else 1
        return rust_float_text(_as_array(values, n))

    return _register(f"lance_float_text<{float_type}>", run, {"value": float_type}, pa.string())


def int_bytes_of(values: pa.Array) -> pa.Array:
    """Each integer as its little-endian bytes, as many as its type's width (``CAST(i AS BINARY)``
    of an int32 1 is ``X'01000000'``, as DataFusion's cast writes it); NULL where ``values`` is."""
    width = values.type.bit_width // 8
    raw = values.fill_null(0).to_numpy(zero_copy_only=False)
    data = pa.py_buffer(raw.astype(raw.dtype.newbyteorder("<")).tobytes())
    offsets = pa.py_buffer(np.arange(len(values) + 1, dtype=np.int32) * np.int32(width))
    validity = None
    if values.null_count:
        validity = pa.py_buffer(
            np.packbits(values.is_valid().to_numpy(zero_copy_only=False), bitorder="little")
        )
    return pa.Array.from_buffers(pa.binary(), len(values), [validity, offsets, data], values.null_count)


def int_bytes(int_type: pa.DataType) -> str:
    """Name of ``CAST(i AS BINARY)`` of integers of ``int_type`` (see :func:`int_bytes_of`)."""

    def run(ctx: Any, values: Any) -> pa.Array:
        n = len(values) if not isinstance(values, pa.Scalar) else 1
        return int_bytes_of(_as_array(values, n))

    return _register(f"lance_int_bytes<{int_type}>", run, {"value": int_type}, pa.binary())


#: Decimal digits of the widest decimal128 (larger rounded floats are out of every precision).
_DECIMAL128_DIGITS = 38


def _float_to_decimal(values: pa.Array, to: pa.DataType, null_on_error: bool) -> pa.Array:
    """Floats cast to decimal128 ``to`` as DataFusion (arrow-rs) casts them: ``round(x * 10^scale)``
    in float64 (half away from zero, so 0.125 is 0.13 and 1.005, a little below, is 1.00), that
    integer as the unscaled value. NaN, infinities and values past the precision are an error, or
    NULL with ``null_on_error``."""
    raw = values.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore", over="ignore"):
        x = raw * 10.0**to.scale
        whole = np.trunc(x)
        # half away from zero (Rust's f64::round; numpy's rounds half to even); x - whole is exact
        unscaled = whole + np.where(np.abs(x - whole) >= 0.5, np.sign(x), 0.0)
        # 1e38 itself (below 10**38 as a float) is let through to the exact check below.
        finite = np.isfinite(unscaled) & (np.abs(unscaled) <= 1e38)
    digits = pa.array(np.where(finite, unscaled, 0.0)).cast(pa.decimal256(_DECIMAL128_DIGITS + 1, 0))
    bound = pa.scalar(decimal.Decimal(10**to.precision - 1), pa.decimal256(_DECIMAL128_DIGITS + 1, 0))
    fits = finite & pc.less_equal(pc.abs(digits), bound).to_numpy(zero_copy_only=False)
    bad = valid & ~fits
    if bad.any() and not null_on_error:
        raise pa.ArrowInvalid(f"Can't cast value {raw[np.flatnonzero(bad)[0]]} to {to}: it does not fit")
    keep = valid & fits
    narrow = pc.if_else(pa.array(fits), digits, pa.scalar(0, digits.type)).cast(
        pa.decimal128(_DECIMAL128_DIGITS, 0)
    )
    # The unscaled integers, read as decimals of the target's scale (the same 16-byte values).
    out = pa.Array.from_buffers(to, len(narrow), [None, narrow.buffers()[1]], 0, narrow.offset)
    return pc.if_else(pa.array(keep), out, pa.scalar(None, to))


def float_decimal(float_type: pa.DataType, to: pa.DataType, null_on_error: bool) -> str:
    """Name of ``CAST(f AS DECIMAL(p, s))`` (``TRY_CAST`` with ``null_on_error``), see
    :func:`_float_to_decimal`."""

    def run(ctx: Any, values: Any) -> pa.Array:
        n = len(values) if not isinstance(values, pa.Scalar) else 1
        return _float_to_decimal(_as_array(values, n), to, null_on_error)

    kind = "try_cast" if null_on_error else "cast"
    return _register(f"lance_{kind}_decimal<{float_type},{to}>", run, {"value": float_type}, to)


def _text_result(name: str, views: list[text_kernels.View]) -> pa.Array:
    if name == "contains":
        return text_kernels.contains(views[0], views[1])
    if name == "strpos":
        return text_kernels.strpos(views[0], views[1])
    if name == "starts_with":
        return text_kernels.starts_with(views[0], views[1])
    if name == "ends_with":
        return text_kernels.ends_with(views[0], views[1])
    if name == "replace":
        return text_kernels.replace(views[0], views[1], views[2])
    sides = {"trim": (True, True), "ltrim": (True, False), "rtrim": (False, True)}[name]
    return text_kernels.trim(views[0], views[1], *sides)


#: The string functions :func:`text_function` computes row by row, and their result types (None:
#: the first argument's; see :func:`text_result_type`).
TEXT_FUNCTIONS: dict[str, pa.DataType | None] = {
    "contains": pa.bool_(),
    "starts_with": pa.bool_(),
    "ends_with": pa.bool_(),
    "strpos": pa.int32(),
    "replace": None,
    "trim": None,
    "ltrim": None,
    "rtrim": None,
}


def text_result_type(name: str, types: list[pa.DataType]) -> pa.DataType:
    """The result type of string function ``name`` of arguments of ``types``, as DataFusion's:
    ``strpos`` is an int32 of a string, an int64 of a large string (its first argument)."""
    if name == "strpos" and pa.types.is_large_string(types[0]):
        return pa.int64()
    return TEXT_FUNCTIONS[name] or types[0]


def text_function(name: str, types: list[pa.DataType]) -> str:
    """Name of string function ``name`` (a key of :data:`TEXT_FUNCTIONS`) whose pattern arguments
    are columns, evaluated row by row by :mod:`lance_format.core.text_kernels`; ``types`` are the
    argument types (strings or large strings)."""
    out = text_result_type(name, types)

    def run(ctx: Any, *args: Any) -> pa.Array:
        n = _rows(*args)
        views = [text_kernels.view(a, n) for a in args]
        return _text_result(name, views).cast(out)

    in_types = {f"arg{i}": t for i, t in enumerate(types)}
    return _register(f"lance_text_{name}<{','.join(map(str, types))}>", run, in_types, out)


def regexp(
    kind: str, value_type: pa.DataType, pattern_type: pa.DataType, ignore_case: bool, out: pa.DataType
) -> str:
    """Name of ``regexp_like`` (``kind`` "like", ``out`` boolean), SQL ``LIKE`` ("sql_like") or
    ``regexp_match`` ("match", ``out`` its list type) of strings of ``value_type`` and patterns of
    ``pattern_type``: one pattern (a scalar) or one per row (an array, run once per distinct
    pattern), see :mod:`lance_format.dataset.regexp`."""

    def run(ctx: Any, values: Any, patterns: Any) -> pa.Array:
        n = _rows(values, patterns)
        values = _as_array(values, n)
        if isinstance(patterns, pa.Scalar):
            if not patterns.is_valid:
                return pa.nulls(n, out)
            pattern = str(patterns.as_py())
            if kind in ("like", "sql_like"):
                kernel = pc.match_like if kind == "sql_like" else pc.match_substring_regex
                return kernel(values, pattern=pattern, ignore_case=ignore_case)
            return regexps.match_lists(values, pattern, ignore_case, out)
        if kind in ("like", "sql_like"):
            return regexps.like_rows(values, _as_array(patterns, n), ignore_case, kind == "sql_like")
        return regexps.match_rows(values, _as_array(patterns, n), ignore_case, out)

    case = "i" if ignore_case else ""
    return _register(
        f"lance_regexp_{kind}{case}<{value_type},{pattern_type},{out}>",
        run,
        {"value": value_type, "pattern": pattern_type},
        out,
    )
