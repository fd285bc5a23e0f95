"""A pyarrow compute Expression as a tree of calls, field references and literal scalars.

pyarrow offers no public way to walk an Expression. Its pickled form, though, is Arrow's own
expression serialization: an IPC file whose schema metadata lists the tree in prefix order
(``call``/``end`` around arguments, ``field_ref``, ``nested_field_ref``, ``literal`` and
``options`` pointing at columns of a one-row batch). The metadata keys repeat, which pyarrow's
``Schema.metadata`` dict collapses, so the ordered pairs are read through the Arrow C data
interface (a stable ABI). Anything unexpected raises :class:`ExpressionShapeError`; callers that
only optimise (statistics pruning) then fall back to reading everything.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

__all__ = ["Call", "ExpressionShapeError", "FieldRef", "Literal", "Node", "decompose"]


class ExpressionShapeError(ValueError):
    """The serialized expression did not have the expected shape."""


@dataclass(frozen=True)
class FieldRef:
    """A (possibly nested) column reference: the names from the top-level field down."""

    path: tuple[str, ...]


@dataclass(frozen=True)
class Literal:
    """A literal scalar."""

    value: pa.Scalar


@dataclass(frozen=True)
class Call:
    """A compute function call; ``options`` is its FunctionOptions as a struct scalar, if any."""

    name: str
    args: tuple[Node, ...]
    options: dict[str, Any] | None = None


Node: TypeAlias = "Call | FieldRef | Literal"


class _ArrowSchema(ctypes.Structure):
    """``struct ArrowSchema`` of the Arrow C data interface (only the fields read here)."""

    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_void_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _metadata_pairs(schema: pa.Schema) -> list[tuple[str, str]]:
    """The schema's key/value metadata in order, duplicates kept."""
    capsule = schema.__arrow_c_schema__()
    raw = _ArrowSchema.from_address(_get_pointer(capsule, b"arrow_schema"))
    if not raw.metadata:
        return []
    addr = raw.metadata
    i32 = struct.Struct("=i")

    def read_int(pos: int) -> int:
        return int(i32.unpack(ctypes.string_at(pos, 4))[0])

    n = read_int(addr)
    pos = addr + 4
    out = []
    for _ in range(n):
        klen = read_int(pos)
        key = ctypes.string_at(pos + 4, klen)
        pos += 4 + klen
        vlen = read_int(pos)
        value = ctypes.string_at(pos + 4, vlen)
        pos += 4 + vlen
        out.append((key.decode(), value.decode()))
    del capsule  # releases the exported schema
    return out


def decompose(expr: pc.Expression) -> Node:
    """The tree of ``expr``.

    Raises
    ------
    ExpressionShapeError
        When the serialized form is not understood.
    """
    try:
        _, (buf,) = expr.__reduce__()
        reader = ipc.open_file(pa.py_buffer(buf))
        pairs = _metadata_pairs(reader.schema)
        batch = reader.get_batch(0) if reader.num_record_batches else None
    except (pa.ArrowException, ValueError, TypeError, UnicodeDecodeError) as e:
        raise ExpressionShapeError(f"cannot read expression {expr}: {e}") from None

    def column(index: str) -> pa.Scalar:
        if batch is None or not index.isdigit() or int(index) >= batch.num_columns:
            raise ExpressionShapeError(f"expression refers to missing literal {index}")
        return batch.column(int(index))[0]

    pos = 0

    def parse() -> Node:
        nonlocal pos
        if pos >= len(pairs):
            raise ExpressionShapeError("expression ends early")
        key, value = pairs[pos]
        pos += 1
        if key == "literal":
            return Literal(column(value))
        if key == "field_ref":
            return FieldRef((value,))
        if key == "nested_field_ref":
            if not value.isdigit():
                raise ExpressionShapeError(f"bad nested field reference {value!r}")
            names = []
            for _ in range(int(value)):
                k, v = pairs[pos] if pos < len(pairs) else ("", "")
                if k != "field_ref":
                    raise ExpressionShapeError("nested field reference without names")
                names.append(v)
                pos += 1
            return FieldRef(tuple(names))
        if key == "call":
            args: list[Node] = []
            options = None
            while pos < len(pairs):
                k, v = pairs[pos]
                if k == "end":
                    pos += 1
                    return Call(value, tuple(args), options)
                if k == "options":
                    pos += 1
                    opt = column(v)
                    options = opt.as_py() if isinstance(opt, pa.StructScalar) else None
                    if isinstance(options, dict):
                        # value sets stay Arrow arrays: their type matters for comparisons.
                        for name, child in zip(opt.type, opt.values(), strict=False):
                            if isinstance(child, pa.ListScalar) and child.values is not None:
                                options[name.name] = child.values
                            elif name.name == "to_type":  # a cast's target is the child's type
                                options[name.name] = name.type
                    continue
                args.append(parse())
            raise ExpressionShapeError(f"call {value!r} is not closed")
        raise ExpressionShapeError(f"unknown expression element {key!r}")

    node = parse()
    if pos != len(pairs):
        raise ExpressionShapeError("trailing elements after the expression")
    return node
