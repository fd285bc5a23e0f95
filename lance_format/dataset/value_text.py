"""Values written as text the way arrow-rs writes them (DataFusion's casts to a string).

:func:`timestamp_text` is ``CAST(ts AS STRING)``; :func:`list_text` is the text of a list value,
as ``concat(s, list)``, ``s || list`` and ``CAST(list AS STRING)`` write it: ``[1, 2]``, the items
separated by ``", "``, a NULL item as nothing (``[, 3]``), lists inside lists alike. Both work on
arrays, column-wide (no loop per row); :func:`timestamp_text` on Expressions too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.float_text import rust_float_text

__all__ = ["list_text", "list_text_supported", "timestamp_text"]

_FRACTION_TRIMS = (
    (r"\.(?:000)+(Z?)$", r"\1"),
    (r"(\.[0-9]{3})(?:000)+(Z?)$", r"\1\2"),
    (r"(\.[0-9]{6})(?:000)+(Z?)$", r"\1\2"),
)
#: The two lower-case hex digits of every byte value (arrow-rs writes a byte string so in a list).
_HEX = np.frombuffer(b"".join(f"{i:02x}".encode() for i in range(256)), np.uint8).reshape(256, 2)


def timestamp_text(value: Any) -> Any:
    """``value`` (an Expression or array of timestamps) as Rust writes it: ``2020-01-02T03:04:05``,
    the fraction cut to the last non-zero group of three digits."""
    text = pc.replace_substring(value.cast(pa.string()), pattern=" ", replacement="T", max_replacements=1)
    for pattern, replacement in _FRACTION_TRIMS:
        text = pc.replace_substring_regex(text, pattern=pattern, replacement=replacement)
    return text


#: Item types whose text in a list is checked against pylance's (besides lists and timestamps).
_TEXT_ITEMS = (
    pa.types.is_integer,
    pa.types.is_float32,
    pa.types.is_float64,
    pa.types.is_boolean,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_date32,
    pa.types.is_decimal,
    pa.types.is_binary,
    pa.types.is_large_binary,
)


def _list_type(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


def list_text_supported(t: pa.DataType) -> bool:
    """Whether :func:`list_text` writes lists of type ``t`` as arrow-rs does. Fixed-size lists are
    not among them (pylance refuses them as text), nor lists of structs, maps, dictionaries, zoned
    timestamps or half floats (their text is not checked against pylance's)."""
    if not _list_type(t):
        return False
    item = t.value_type
    if _list_type(item):
        return list_text_supported(item)
    if pa.types.is_timestamp(item):
        return item.tz is None
    return any(check(item) for check in _TEXT_ITEMS)


def _hex(values: pa.Array) -> pa.Array:
    """Byte strings as their lower-case hex digits."""
    values = values.cast(pa.large_binary())
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], np.int64)[values.offset : values.offset + len(values) + 1]
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    digits = _HEX[data[offsets[0] : offsets[-1]]].reshape(-1)
    text = pa.LargeStringArray.from_buffers(
        len(values),
        pa.py_buffer(((offsets - offsets[0]) * 2).astype(np.int64)),
        pa.py_buffer(digits.tobytes()),
    )
    return pc.if_else(values.is_valid(), text, pa.scalar(None, pa.large_string()))


def _item_text(values: pa.Array) -> pa.Array:
    """Every item as text (NULL stays NULL), as a large string array."""
    t = values.type
    if _list_type(t):
        text = list_text(values)
    elif pa.types.is_floating(t):
        text = rust_float_text(values)
    elif pa.types.is_timestamp(t):
        text = timestamp_text(values)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        text = _hex(values)
    else:
        text = values.cast(pa.string())
    return text.cast(pa.large_string())


def list_text(lists: pa.Array) -> pa.Array:
    """List values as arrow-rs writes them (see the module); a NULL list is NULL."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    items = _item_text(pc.list_flatten(lists)).fill_null("")
    listed = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), items)
    joined = pc.binary_join(listed, pa.scalar(", ", pa.large_string()))
    large = [pa.scalar(c, pa.large_string()) for c in ("[", "]", "")]
    text = pc.binary_join_element_wise(large[0], joined, large[1], large[2])
    return pc.if_else(lists.is_valid(), text, pa.scalar(None, pa.large_string())).cast(pa.string())
