"""Floats as text the way Arrow's Rust cast writes them (what DataFusion, so pylance, compares).

pyarrow and Rust both print the shortest digits that read back to the same float, but lay them out
differently: pyarrow writes ``1``, ``1e+20``, ``nan``; Rust writes ``1.0``, ``1e20``, ``NaN``, and
switches to scientific notation at other exponents. ``CAST(f AS STRING)`` and ``length(f)`` in a
filter or a computed column must give Rust's text, so pyarrow's is rewritten here by a compiled
kernel over its string buffers (one pass, no Python per value).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.core.jit import kernel, warm

__all__ = ["rust_float_text", "warm_up"]

#: Decimal exponents Rust writes in plain notation, ``[low, high)``: measured through pylance
#: (``1e15`` of a float64 is ``1000000000000000.0`` and ``1e16`` is ``1e16``; ``1e-5`` is
#: ``0.00001`` and ``1e-6`` is ``1e-6``; a float32 switches at ``1e13`` and below ``1e-6``).
PLAIN_EXPONENTS = {32: (-6, 13), 64: (-5, 16)}
#: Bytes one value's text can take at most: ``-1.2345678901234567e-308`` is 24.
_MAX_TEXT = 32
_NAN = np.frombuffer(b"NaN", np.uint8)
_INF = np.frombuffer(b"inf", np.uint8)


@kernel
def _rewrite(
    offsets: np.ndarray, data: np.ndarray, valid: np.ndarray, low: int, high: int, out: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    n_rows = len(offsets) - 1
    out_offsets = np.zeros(n_rows + 1, np.int64)
    digits = np.zeros(64, np.uint8)
    cur = 0
    for row in range(n_rows):
        if valid[row]:
            s, end = offsets[row], offsets[row + 1]
            negative = s < end and data[s] == 45  # '-'
            if negative:
                s += 1
            first = data[s] if s < end else 48
            if first == 110:  # 'n': NaN carries no sign in Rust's text
                for k in range(3):
                    out[cur + k] = _NAN[k]
                cur += 3
            else:
                if negative:
                    out[cur] = 45
                    cur += 1
                if first == 105:  # 'i'
                    for k in range(3):
                        out[cur + k] = _INF[k]
                    cur += 3
                else:
                    # digits (no point), digits before the point, then the exponent after 'e'
                    n, point, exponent, exp_sign, seen_point, i = 0, -1, 0, 1, False, s
                    while i < end and data[i] != 101:  # 'e'
                        c = data[i]
                        if c == 46:  # '.'
                            point = n
                            seen_point = True
                        elif n < 64:
                            digits[n] = c
                            n += 1
                        i += 1
                    if not seen_point:
                        point = n
                    i += 1
                    while i < end:
                        c = data[i]
                        if c == 45:
                            exp_sign = -1
                        elif c != 43:  # '+'
                            exponent = exponent * 10 + (c - 48)
                        i += 1
                    lead = 0
                    while lead < n and digits[lead] == 48:
                        lead += 1
                    last = n
                    while last > lead and digits[last - 1] == 48:
                        last -= 1
                    count = last - lead
                    if count == 0:  # zero: 0.0
                        out[cur] = 48
                        out[cur + 1] = 46
                        out[cur + 2] = 48
                        cur += 3
                    else:
                        e = point - lead - 1 + exp_sign * exponent  # exponent of the first digit
                        if e < low or e >= high:
                            out[cur] = digits[lead]
                            cur += 1
                            if count > 1:
                                out[cur] = 46
                                cur += 1
                                for k in range(lead + 1, last):
                                    out[cur] = digits[k]
                                    cur += 1
                            out[cur] = 101
                            cur += 1
                            if e < 0:
                                out[cur] = 45
                                cur += 1
                            magnitude = -e if e < 0 else e
                            width = 1
                            while magnitude >= 10**width:
                                width += 1
                            for k in range(width):
                                out[cur + width - 1 - k] = 48 + magnitude % 10
                                magnitude //= 10
                            cur += width
                        elif e >= 0:
                            for k in range(e + 1):  # the whole part, zeros past the digits
                                out[cur] = digits[lead + k] if k < count else 48
                                cur += 1
                            out[cur] = 46
                            cur += 1
                            if count <= e + 1:
                                out[cur] = 48
                                cur += 1
                            else:
                                for k in range(lead + e + 1, last):
                                    out[cur] = digits[k]
                                    cur += 1
                        else:
                            out[cur] = 48
                            out[cur + 1] = 46
                            cur += 2
                            for _ in range(-e - 1):
                                out[cur] = 48
                                cur += 1
                            for k in range(lead, last):
                                out[cur] = digits[k]
                                cur += 1
        out_offsets[row + 1] = cur
    return out_offsets


def rust_float_text(values: pa.Array) -> pa.Array:
    """The text of each float32 or float64 value as Arrow's Rust cast writes it (``1.0``,
    ``-0.0``, ``1e20``, ``0.000015``, ``NaN``, ``-inf``), NULL where ``values`` is."""
    width = values.type.bit_width
    if width not in PLAIN_EXPONENTS:
        raise TypeError(f"rust_float_text takes float32 or float64 values, got {values.type}")
    text = values.cast(pa.large_string())
    _, offsets_buf, data_buf = text.buffers()
    offsets = np.frombuffer(offsets_buf, np.int64)[text.offset : text.offset + len(text) + 1]
    data = np.frombuffer(data_buf if data_buf is not None else b"", np.uint8)
    # Both read-only, always (a view of a fresh Arrow buffer may or may not be writable): one
    # kernel specialization to compile ahead.
    offsets.flags.writeable = False
    data.flags.writeable = False
    valid = text.is_valid().to_numpy(zero_copy_only=False)
    out = np.empty(len(text) * _MAX_TEXT, np.uint8)
    low, high = PLAIN_EXPONENTS[width]
    out_offsets = _rewrite(offsets, data, valid, low, high, out)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if text.null_count else None
    body = pa.py_buffer(out[: out_offsets[-1]].copy())
    return pa.Array.from_buffers(
        pa.large_string(), len(text), [bitmap, pa.py_buffer(out_offsets), body], text.null_count
    ).cast(pa.string())


def warm_up() -> None:
    """Compile (or load from the kernel cache) the kernel of this module."""
    # Read-only offsets and text, as rust_float_text passes them (the only specialization used).
    offsets = np.frombuffer(np.array([0, 3], np.int64).tobytes(), np.int64)
    data = np.frombuffer(b"1.5", np.uint8)
    warm(_rewrite, offsets, data, np.ones(1, np.bool_), -5, 16, np.zeros(32, np.uint8))
