"""String functions whose pattern differs row by row, compiled over Arrow's offsets and bytes.

pyarrow's string kernels take one pattern for a whole array (``pc.match_substring(s,
pattern='a')``); DataFusion evaluates ``contains(s, t)``, ``strpos(s, t)``, ``starts_with(s, t)``,
``replace(s, 'a', t)`` or ``btrim(s, t)`` with ``t`` a column, one pattern per row. These kernels do
that in one compiled pass per call, no Python per row. Every argument is a view of one string
array or of one literal broadcast to every row: ``(starts, ends, data)``, byte ranges into ``data``
(a literal has the same range on every row, so it is never copied ``n`` times).

Matching is on bytes, which on valid UTF-8 is matching on characters; the functions that count
characters (``strpos``) or step over them (an empty ``replace`` pattern, the trims) read the
UTF-8 lead bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.core.jit import kernel

__all__ = ["contains", "ends_with", "replace", "starts_with", "strpos", "trim", "warm_up"]

#: ``(starts, ends, data, valid)``: one argument's byte ranges, bytes and validity, per row.
View = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _read_only(*arrays: np.ndarray) -> None:
    # One kernel specialization: every array argument is always read-only (a view of an Arrow
    # buffer is; the ones made here are set so).
    for a in arrays:
        a.flags.writeable = False


def view(value: Any, n: int) -> View:
    """The byte ranges of ``value`` (a string array, or a string scalar broadcast to ``n`` rows)."""
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if isinstance(value, pa.Scalar):
        text = value.as_py() if value.is_valid else ""
        raw = text.encode() if isinstance(text, str) else bytes(text)
        data = np.frombuffer(raw, np.uint8) if raw else np.zeros(0, np.uint8)
        starts, ends = np.zeros(n, np.int64), np.full(n, len(raw), np.int64)
        valid = np.full(n, value.is_valid, np.bool_)
    else:
        large = pa.types.is_large_string(value.type) or pa.types.is_large_binary(value.type)
        _, offsets_buf, data_buf = value.buffers()
        wide = np.frombuffer(offsets_buf, np.int64 if large else np.int32)
        offsets = wide[value.offset : value.offset + len(value) + 1].astype(np.int64)
        starts, ends = offsets[:-1], offsets[1:]
        data = (
            np.frombuffer(data_buf, np.uint8)
            if data_buf is not None and data_buf.size
            else np.zeros(0, np.uint8)
        )
        valid = value.is_valid().to_numpy(zero_copy_only=False)
    _read_only(starts, ends, data)
    return starts, ends, data, valid


@kernel
def _char_len(lead: int) -> int:  # pragma: no cover - compiled
    """Bytes of the UTF-8 character whose first byte is ``lead``."""
    if lead < 0x80:
        return 1
    if lead >= 0xF0:
        return 4
    if lead >= 0xE0:
        return 3
    return 2


@kernel
def _find(
    s_st: np.ndarray,
    s_en: np.ndarray,
    s_data: np.ndarray,
    p_st: np.ndarray,
    p_en: np.ndarray,
    p_data: np.ndarray,
    out_bytes: np.ndarray,
    out_chars: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """First occurrence of each row's pattern: its byte and character offset, -1 when absent."""
    for i in range(len(s_st)):
        a, b, ps = s_st[i], s_en[i], p_st[i]
        m = p_en[i] - ps
        found = -1
        for j in range(a, b - m + 1):
            k = 0
            while k < m and s_data[j + k] == p_data[ps + k]:
                k += 1
            if k == m:
                found = j
                break
        if found < 0:
            out_bytes[i] = -1
            out_chars[i] = -1
        else:
            chars = 0
            for j in range(a, found):
                if (s_data[j] & 0xC0) != 0x80:
                    chars += 1
            out_bytes[i] = found - a
            out_chars[i] = chars


@kernel
def _affix(
    s_st: np.ndarray,
    s_en: np.ndarray,
    s_data: np.ndarray,
    p_st: np.ndarray,
    p_en: np.ndarray,
    p_data: np.ndarray,
    at_end: bool,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Whether each row starts (or, ``at_end``, ends) with its pattern."""
    for i in range(len(s_st)):
        n = s_en[i] - s_st[i]
        m = p_en[i] - p_st[i]
        if m > n:
            out[i] = False
            continue
        at = s_st[i] + (n - m if at_end else 0)
        same = True
        for k in range(m):
            if s_data[at + k] != p_data[p_st[i] + k]:
                same = False
                break
        out[i] = same


@kernel
def _replace(
    s_st: np.ndarray,
    s_en: np.ndarray,
    s_data: np.ndarray,
    f_st: np.ndarray,
    f_en: np.ndarray,
    f_data: np.ndarray,
    t_st: np.ndarray,
    t_en: np.ndarray,
    t_data: np.ndarray,
    write: bool,
    out: np.ndarray,
    out_offsets: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Every non-overlapping ``from`` replaced by ``to``, left to right; an empty ``from`` matches
    before every character and at the end (Rust's ``str::replace``). Run once to size the output
    (``write`` False: only ``out_offsets``), then again to fill ``out``."""
    cur = 0
    for i in range(len(s_st)):
        out_offsets[i] = cur
        a, b, fs, ts, te = s_st[i], s_en[i], f_st[i], t_st[i], t_en[i]
        m = f_en[i] - fs
        j = a
        while True:
            if m == 0:
                for k in range(ts, te):
                    if write:
                        out[cur] = t_data[k]
                    cur += 1
                if j >= b:
                    break
                step = min(_char_len(s_data[j]), b - j)
                for k in range(step):
                    if write:
                        out[cur] = s_data[j + k]
                    cur += 1
                j += step
                continue
            if j >= b:
                break
            hit = j + m <= b
            k = 0
            while hit and k < m:
                hit = s_data[j + k] == f_data[fs + k]
                k += 1
            if hit:
                for k in range(ts, te):
                    if write:
                        out[cur] = t_data[k]
                    cur += 1
                j += m
            else:
                if write:
                    out[cur] = s_data[j]
                cur += 1
                j += 1
    out_offsets[len(s_st)] = cur


@kernel
def _in_set(
    data: np.ndarray, at: int, size: int, c_data: np.ndarray, c_st: int, c_en: int
) -> bool:  # pragma: no cover - compiled
    """Whether the character ``data[at:at + size]`` is one of the characters of ``c_data[c_st:c_en]``."""
    k = c_st
    while k < c_en:
        step = _char_len(c_data[k])
        if step == size:
            same = True
            for q in range(size):
                if k + q >= c_en or c_data[k + q] != data[at + q]:
                    same = False
                    break
            if same:
                return True
        k += step
    return False


@kernel
def _trim(
    s_st: np.ndarray,
    s_en: np.ndarray,
    s_data: np.ndarray,
    c_st: np.ndarray,
    c_en: np.ndarray,
    c_data: np.ndarray,
    left: bool,
    right: bool,
    out_st: np.ndarray,
    out_en: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The byte range left of each row once the characters of its set are cut from its ends."""
    for i in range(len(s_st)):
        a, b = s_st[i], s_en[i]
        if left:
            while a < b:
                step = min(_char_len(s_data[a]), b - a)
                if not _in_set(s_data, a, step, c_data, c_st[i], c_en[i]):
                    break
                a += step
        if right:
            while b > a:
                j = b - 1
                while j > a and (s_data[j] & 0xC0) == 0x80:
                    j -= 1
                if not _in_set(s_data, j, b - j, c_data, c_st[i], c_en[i]):
                    break
                b = j
        out_st[i] = a
        out_en[i] = b


def _validity(*views: View) -> np.ndarray:
    valid = views[0][3].copy()
    for v in views[1:]:
        valid &= v[3]
    return valid


def _bitmap(valid: np.ndarray) -> pa.Buffer | None:
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def _booleans(values: np.ndarray, valid: np.ndarray) -> pa.Array:
    return pa.array(values, pa.bool_(), mask=~valid)


def _text(offsets: np.ndarray, data: np.ndarray, valid: np.ndarray) -> pa.Array:
    """A large string array of ``offsets`` into ``data``, NULL where not ``valid``."""
    n = len(offsets) - 1
    return pa.Array.from_buffers(
        pa.large_string(),
        n,
        [_bitmap(valid), pa.py_buffer(offsets), pa.py_buffer(data)],
        int(n - valid.sum()),
    )


def _found(s: View, p: View) -> tuple[np.ndarray, np.ndarray]:
    n = len(s[0])
    out_bytes, out_chars = np.empty(n, np.int64), np.empty(n, np.int64)
    _find(s[0], s[1], s[2], p[0], p[1], p[2], out_bytes, out_chars)
    return out_bytes, out_chars


def contains(s: View, p: View) -> pa.Array:
    """``contains(s, p)`` row by row (an empty pattern is in every string)."""
    return _booleans(_found(s, p)[0] >= 0, _validity(s, p))


def strpos(s: View, p: View) -> pa.Array:
    """``strpos(s, p)``: the 1-based character position of ``p`` in ``s``, 0 when absent."""
    chars = _found(s, p)[1]
    valid = _validity(s, p)
    return pa.array(np.where(chars >= 0, chars + 1, 0), pa.int64(), mask=~valid)


def _affixed(s: View, p: View, at_end: bool) -> pa.Array:
    out = np.empty(len(s[0]), np.bool_)
    _affix(s[0], s[1], s[2], p[0], p[1], p[2], at_end, out)
    return _booleans(out, _validity(s, p))


def starts_with(s: View, p: View) -> pa.Array:
    """``starts_with(s, p)`` row by row."""
    return _affixed(s, p, False)


def ends_with(s: View, p: View) -> pa.Array:
    """``ends_with(s, p)`` row by row."""
    return _affixed(s, p, True)


def replace(s: View, old: View, new: View) -> pa.Array:
    """``replace(s, old, new)`` row by row, as a large string array."""
    n = len(s[0])
    offsets = np.empty(n + 1, np.int64)
    args = (s[0], s[1], s[2], old[0], old[1], old[2], new[0], new[1], new[2])
    _replace(*args, False, np.zeros(0, np.uint8), offsets)
    out = np.empty(int(offsets[-1]), np.uint8)
    _replace(*args, True, out, offsets)
    return _text(offsets, out, _validity(s, old, new))


def trim(s: View, chars: View, left: bool, right: bool) -> pa.Array:
    """``btrim``/``ltrim``/``rtrim(s, chars)`` row by row: the characters of each row's ``chars``
    (a set) cut from its start, its end or both, as a large string array."""
    n = len(s[0])
    out_st, out_en = np.empty(n, np.int64), np.empty(n, np.int64)
    _trim(s[0], s[1], s[2], chars[0], chars[1], chars[2], left, right, out_st, out_en)
    lengths = out_en - out_st
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    # Gather the kept bytes of every row at once: each output byte's source position.
    within = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    data = s[2][np.repeat(out_st, lengths) + within] if offsets[-1] else np.zeros(0, np.uint8)
    return _text(offsets, np.ascontiguousarray(data), _validity(s, chars))


def warm_up() -> None:
    """Compile (or load from the kernel cache) every kernel of this module, in the one
    specialization the functions above call (read-only int64 ranges and uint8 bytes)."""
    s = view(pa.array(["ab", "é"]), 2)
    p = view(pa.scalar("b"), 2)
    contains(s, p)
    starts_with(s, p)
    replace(s, p, p)
    trim(s, p, True, True)
