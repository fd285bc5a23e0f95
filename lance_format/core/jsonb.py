"""Lance's JSON type: JSON text in Arrow (``pa.json_()``), binary JSONB on disk.

pylance stores a ``pa.json_()`` column as ``large_binary`` values in the binary JSON layout of the
``jsonb`` Rust crate (Databend's), with the field's logical type ``json`` and extension metadata
``ARROW:extension:name = lance.json``; it reads them back as normalized JSON text. The layout, as
pylance 14 writes it (every integer big-endian):

* a value is a container: a u32 header, ``kind | count`` (kind ``0x80000000`` array,
  ``0x40000000`` object, ``0x20000000`` a single scalar, count 1 implied), then one u32 *entry*
  per item (objects: all keys' entries, then all values' entries), then the items' payloads in the
  same order;
* an entry is ``tag | payload length`` (28 bits): null ``0x0``, string ``0x1``, number ``0x2``,
  false ``0x3``, true ``0x4``, nested container ``0x5`` (tags in the top nibble);
* a number payload is one tag byte, then: zero ``0x00`` (nothing more), a negative integer
  ``0x40`` (i8/i16/i32/i64), a non-negative integer ``0x50`` (u8/u16/u32/u64), the narrowest
  that holds it, or any other number ``0x60`` (f64);
* object keys are sorted by their UTF-8 bytes; duplicate keys are refused.

Reading prints compact JSON (``,`` and ``:`` without spaces, non-ASCII unescaped) with floats in
the shortest round-trip digits, positional when the decimal exponent is in [-5, 16) (integral
values keep ``.0``) and ``1.5e-7`` / ``1e+16`` style otherwise, as pylance prints them.

Values are parsed and printed one by one (``json`` does the parsing): there is no vectorized JSON
codec, and JSON columns are rarely on a hot path.
"""

from __future__ import annotations

import json
import math
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa

from lance_format.core.errors import CorruptFileError, InvalidInputError

__all__ = ["JSON_EXTENSION_NAME", "decode_jsonb", "encode_jsonb", "is_json_type", "json_arrow_type"]

#: ``ARROW:extension:name`` of a Lance JSON field.
JSON_EXTENSION_NAME = b"lance.json"

_ARRAY, _OBJECT, _SCALAR = 0x80000000, 0x40000000, 0x20000000
_KIND_MASK, _COUNT_MASK = 0xE0000000, 0x1FFFFFFF
_NULL, _STRING, _NUMBER, _FALSE, _TRUE, _CONTAINER = (t << 28 for t in range(6))
_TAG_MASK, _LEN_MASK = 0x70000000, 0x0FFFFFFF
_ZERO, _INT, _UINT, _FLOAT = 0x00, 0x40, 0x50, 0x60
_INT_FORMATS = ((1, ">b", ">B"), (2, ">h", ">H"), (4, ">i", ">I"), (8, ">q", ">Q"))


def json_arrow_type() -> pa.DataType:
    """``pa.json_()``; plain strings on pyarrow < 19, which has no JSON type."""
    factory = getattr(pa, "json_", None)
    return factory() if factory is not None else pa.string()


def is_json_type(t: pa.DataType) -> bool:
    """Whether ``t`` is Arrow's canonical JSON extension type (``pa.json_()``)."""
    json_type = getattr(pa, "JsonType", None)
    return json_type is not None and isinstance(t, json_type)


# -- encoding -------------------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # pylance refuses duplicate keys rather than keep one
            raise ValueError(f"duplicate object attribute {key!r}")
        out[key] = value
    return out


def _number(v: int | float) -> bytes:
    if isinstance(v, int):
        if v == 0:
            return bytes([_ZERO])
        if -(1 << 63) <= v < (1 << 64):
            for width, signed, unsigned in _INT_FORMATS:
                if v < 0 and v >= -(1 << (8 * width - 1)):
                    return bytes([_INT]) + struct.pack(signed, v)
                if v > 0 and v < (1 << (8 * width)):
                    return bytes([_UINT]) + struct.pack(unsigned, v)
        v = float(v)
    return bytes([_FLOAT]) + struct.pack(">d", v)


def _item(v: Any) -> tuple[int, bytes]:
    """The entry tag and payload of one value inside a container."""
    if v is None:
        return _NULL, b""
    if v is True:
        return _TRUE, b""
    if v is False:
        return _FALSE, b""
    if isinstance(v, str):
        return _STRING, v.encode()
    if isinstance(v, int | float):
        return _NUMBER, _number(v)
    return _CONTAINER, _container(v)


def _container(v: Any) -> bytes:
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: k.encode())
        items = [(_STRING, k.encode()) for k in keys] + [_item(v[k]) for k in keys]
        head = _OBJECT | len(keys)
    elif isinstance(v, list):
        items = [_item(x) for x in v]
        head = _ARRAY | len(v)
    else:
        items = [_item(v)]
        head = _SCALAR
    for _, payload in items:
        if len(payload) > _LEN_MASK:
            raise ValueError("a JSON value is too large for JSONB (256 MiB per item)")
    entries = struct.pack(f">{1 + len(items)}I", head, *(tag | len(p) for tag, p in items))
    return entries + b"".join(p for _, p in items)


def _parse(text: str) -> Any:
    if not text.strip():
        return None  # pylance stores an empty document as JSON null
    value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=lambda _: None)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("number out of range")
    return value


def encode_jsonb(texts: pa.Array) -> pa.Array:
    """JSON text (``pa.json_()`` or strings) as JSONB ``large_binary`` values; nulls stay null.

    Raises
    ------
    InvalidInputError
        A value is not valid JSON (or has a duplicate object key, which pylance refuses too).
    """
    if isinstance(texts, pa.ExtensionArray):
        texts = texts.storage
    out: list[bytes | None] = []
    for i, text in enumerate(texts.to_pylist()):
        if text is None:
            out.append(None)
            continue
        try:
            out.append(_container(_parse(text)))
        except (ValueError, RecursionError) as e:
            raise InvalidInputError(f"row {i} is not valid JSON: {e}") from None
    return pa.array(out, pa.large_binary())


# -- decoding -------------------------------------------------------------------------------------


def _float_text(x: float) -> str:
    """pylance's printing of a JSON float (see the module docstring)."""
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    # repr gives the shortest digits that round-trip (as ryu does); Decimal splits them.
    _, digit_tuple, exponent = Decimal(repr(abs(x))).normalize().as_tuple()
    assert isinstance(exponent, int)
    sig = "".join(map(str, digit_tuple))
    e = len(sig) + exponent - 1  # decimal exponent of the first significant digit
    sign = "-" if x < 0 else ""
    if -5 <= e < 16:
        if e >= 0:
            whole = sig[: e + 1].ljust(e + 1, "0")
            rest = sig[e + 1 :] or "0"
            return f"{sign}{whole}.{rest}"
        return f"{sign}0.{'0' * (-e - 1)}{sig}"
    head = sig[0] + ("." + sig[1:] if len(sig) > 1 else "")
    return f"{sign}{head}e{'+' if e >= 0 else '-'}{abs(e)}"


class _Reader:
    def __init__(self, data: bytes, path: str) -> None:
        self.data = data
        self.path = path

    def fail(self, why: str) -> CorruptFileError:
        return CorruptFileError(self.path, f"bad JSONB value: {why}")

    def u32(self, pos: int) -> int:
        if pos + 4 > len(self.data):
            raise self.fail("truncated")
        return int.from_bytes(self.data[pos : pos + 4], "big")

    def container(self, pos: int, end: int) -> str:
        head = self.u32(pos)
        kind, count = head & _KIND_MASK, head & _COUNT_MASK
        n_entries = 2 * count if kind == _OBJECT else 1 if kind == _SCALAR else count
        if kind not in (_ARRAY, _OBJECT, _SCALAR) or pos + 4 + 4 * n_entries > end:
            raise self.fail("bad container header")
        entries = [self.u32(pos + 4 + 4 * i) for i in range(n_entries)]
        at = pos + 4 + 4 * n_entries
        texts = []
        for entry in entries:
            size = entry & _LEN_MASK
            if at + size > end:
                raise self.fail("item runs past its container")
            texts.append(self.item(entry & _TAG_MASK, at, size))
            at += size
        if kind == _SCALAR:
            return texts[0]
        if kind == _ARRAY:
            return "[" + ",".join(texts) + "]"
        return "{" + ",".join(f"{k}:{v}" for k, v in zip(texts[:count], texts[count:], strict=True)) + "}"

    def item(self, tag: int, pos: int, size: int) -> str:
        raw = self.data[pos : pos + size]
        if tag == _NULL:
            return "null"
        if tag == _TRUE:
            return "true"
        if tag == _FALSE:
            return "false"
        if tag == _STRING:
            try:
                return json.dumps(raw.decode(), ensure_ascii=False)
            except UnicodeDecodeError:
                raise self.fail("string is not UTF-8") from None
        if tag == _NUMBER:
            return self.number(raw)
        if tag == _CONTAINER:
            return self.container(pos, pos + size)
        raise self.fail(f"unknown entry tag {tag >> 28}")

    def number(self, raw: bytes) -> str:
        if not raw:
            raise self.fail("empty number")
        kind, body = raw[0], raw[1:]
        if kind == _ZERO:
            return "0"
        if kind in (_INT, _UINT) and len(body) in (1, 2, 4, 8):
            return str(int.from_bytes(body, "big", signed=kind == _INT))
        if kind == _FLOAT and len(body) == 8:
            x = struct.unpack(">d", body)[0]
            return _float_text(x) if math.isfinite(x) else "null"
        if kind in (0x10, 0x20, 0x30):  # NaN, +inf, -inf: JSON has no text for them
            return "null"
        raise self.fail(f"unknown number kind {kind:#x}")


def decode_jsonb(blobs: pa.Array, path: str = "<jsonb>") -> pa.Array:
    """JSONB values as ``pa.json_()`` text (as pylance returns them); nulls stay null."""
    out: list[str | None] = []
    for blob in blobs.to_pylist():
        if blob is None:
            out.append(None)
        else:
            r = _Reader(blob, path)
            out.append(r.container(0, len(blob)))
    storage = pa.array(out, pa.string())
    typ = json_arrow_type()
    return storage if typ == storage.type else pa.ExtensionArray.from_storage(typ, storage)
