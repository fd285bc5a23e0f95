"""Substrait ``ExtendedExpression`` bytes to the predicate IR (the only protobuf user of the dataset layer).

Substrait refers to fields by position in the message's own ``base_schema``. Positions are turned
into names there and the names are bound to the dataset schema, so the tree never depends on the
column order of whatever table it is later evaluated on (a positional reference evaluated on a
projected table read the wrong column, or past the end of it). A producer that sends no base
schema is taken to mean the dataset's own columns.

Functions are matched by name (the part before ``:``); extension URIs are not checked, since
pyarrow, DataFusion and Substrait's own extension files agree on the names used here. Anything not
modelled (other functions, window functions, subqueries, masked references, map keys...) raises
:class:`~lance_format.core.errors.NotSupportedError` naming it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_format._proto import substrait_pb2 as sp
from lance_format.core.errors import InvalidInputError, NotSupportedError
from lance_format.dataset.expr import (
    And,
    Arith,
    Call,
    Cast,
    Column,
    Compare,
    InList,
    IsBool,
    IsNan,
    IsNull,
    Like,
    Literal,
    Negate,
    Node,
    Not,
    Or,
)

__all__ = ["predicate_from_substrait"]

_COMPARE = {
    "equal": "eq",
    "not_equal": "ne",
    "lt": "lt",
    "lte": "le",
    "gt": "gt",
    "gte": "ge",
}
_ARITH = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "modulus": "mod"}
#: Substrait function names that are functions of the IR's dialect under another name.
_CALLS = {
    "lower": "lower",
    "upper": "upper",
    "char_length": "length",
    "starts_with": "starts_with",
    "ends_with": "ends_with",
    "contains": "contains",
    "strpos": "strpos",
    "replace": "replace",
    "substring": "substr",
    "trim": "trim",
    "ltrim": "ltrim",
    "rtrim": "rtrim",
    "abs": "abs",
    "ceil": "ceil",
    "floor": "floor",
    "sqrt": "sqrt",
    "coalesce": "coalesce",
    "concat": "concat_op",
}
_TS_UNITS = {0: "s", 3: "ms", 6: "us", 9: "ns"}

_SIMPLE_TYPES: dict[str, pa.DataType] = {
    "bool": pa.bool_(),
    "i8": pa.int8(),
    "i16": pa.int16(),
    "i32": pa.int32(),
    "i64": pa.int64(),
    "fp32": pa.float32(),
    "fp64": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us"),
    "timestamp_tz": pa.timestamp("us", "UTC"),
    "time": pa.time64("us"),
    "fixed_char": pa.string(),
    "varchar": pa.string(),
}


def _arrow_type(t: sp.Type) -> pa.DataType:
    kind = t.WhichOneof("kind")
    if kind is None:
        raise NotSupportedError("Substrait type not supported in filters")
    simple = _SIMPLE_TYPES.get(kind)
    if simple is not None:
        return simple
    if kind == "fixed_binary":
        return pa.binary(t.fixed_binary.length)
    if kind == "decimal":
        return pa.decimal128(t.decimal.precision, t.decimal.scale)
    if kind in ("precision_timestamp", "precision_timestamp_tz"):
        p = getattr(t, kind).precision
        if p not in _TS_UNITS:
            raise NotSupportedError(f"Substrait timestamp precision {p}")
        return pa.timestamp(_TS_UNITS[p], "UTC" if kind.endswith("_tz") else None)
    if kind == "list":
        return pa.list_(_arrow_type(t.list.type))
    if kind == "struct":
        return pa.struct([pa.field(f"f{i}", _arrow_type(c)) for i, c in enumerate(t.struct.types)])
    raise NotSupportedError(f"Substrait type {kind!r} in a filter")


def _literal(lit: sp.Expression.Literal) -> pa.Scalar:
    kind = lit.WhichOneof("literal_type")
    if kind is None:
        raise NotSupportedError("Substrait literal of an unknown kind")
    value: Any = getattr(lit, kind)
    if kind in ("boolean", "i8", "i16", "i32", "i64", "fp32", "fp64", "string", "binary", "date"):
        name = {"boolean": "bool"}.get(kind, kind)
        return pa.scalar(value, _SIMPLE_TYPES[name])
    if kind in ("timestamp", "timestamp_tz", "time"):
        return pa.scalar(value, _SIMPLE_TYPES[kind])
    if kind == "fixed_char":
        return pa.scalar(value, pa.string())
    if kind == "var_char":
        return pa.scalar(value.value, pa.string())
    if kind == "fixed_binary":
        return pa.scalar(value, pa.binary(len(value)))
    if kind in ("precision_timestamp", "precision_timestamp_tz"):
        if value.precision not in _TS_UNITS:
            raise NotSupportedError(f"Substrait timestamp precision {value.precision}")
        unit = _TS_UNITS[value.precision]
        return pa.scalar(value.value, pa.timestamp(unit, "UTC" if kind.endswith("_tz") else None))
    if kind == "decimal":
        raw = int.from_bytes(value.value, "little", signed=True)
        return pa.scalar(Decimal(raw).scaleb(-value.scale), pa.decimal128(value.precision, value.scale))
    if kind == "null":
        return pa.scalar(None, _arrow_type(value))
    if kind == "list":
        items = [_literal(v) for v in value.values]
        if not items:
            raise NotSupportedError("empty Substrait list literal without a type")
        return pa.scalar([i.as_py() for i in items], pa.list_(items[0].type))
    if kind == "empty_list":
        return pa.scalar([], pa.list_(_arrow_type(value.type)))
    raise NotSupportedError(f"Substrait literal {kind!r} in a filter")


class _Names:
    """The base schema's columns as names: position paths become name paths."""

    def __init__(self, base: sp.NamedStruct | None, schema: pa.Schema) -> None:
        self.schema = schema
        self.tree: list[tuple[str, list[Any]]] | None = None
        if base is not None and base.names:
            names = iter(base.names)
            try:
                self.tree = [(next(names), self._children(t, names)) for t in base.struct.types]
            except StopIteration:  # a malformed message: the server answered it as INTERNAL
                raise InvalidInputError("the Substrait base schema has fewer names than fields") from None

    def _children(self, t: sp.Type, names: Any) -> list[Any]:
        kind = t.WhichOneof("kind")
        if kind == "struct":
            return [(next(names), self._children(c, names)) for c in t.struct.types]
        if kind == "list":
            self._children(t.list.type, names)  # struct names inside lists are listed too
        elif kind == "map":
            self._children(t.map.key, names)
            self._children(t.map.value, names)
        return []

    def resolve(self, seg: sp.Expression.ReferenceSegment) -> Node:
        if seg.WhichOneof("reference_type") != "struct_field":
            raise NotSupportedError("a Substrait reference that does not start at a column")
        i = seg.struct_field.field
        path: list[str] = []
        if self.tree is not None:
            if not 0 <= i < len(self.tree):
                raise InvalidInputError(f"Substrait field {i} is outside the base schema")
            name, kids = self.tree[i]
        else:
            if not 0 <= i < len(self.schema):
                raise InvalidInputError(f"Substrait field {i} is outside the schema")
            name, kids = self.schema.names[i], None
        path.append(name)
        if name not in self.schema.names:
            raise InvalidInputError(f"no column {name!r}; columns are {self.schema.names}")
        t: pa.DataType = self.schema.field(name).type
        child = seg.struct_field.child if seg.struct_field.HasField("child") else None
        node: Node | None = None
        while child is not None:
            kind = child.WhichOneof("reference_type")
            if kind == "struct_field" and node is None:
                j = child.struct_field.field
                if not pa.types.is_struct(t) or not 0 <= j < t.num_fields:
                    raise InvalidInputError(f"Substrait field {j} of {'.'.join(path)} does not exist")
                sub = kids[j][0] if kids is not None and j < len(kids) else t.field(j).name
                kids = kids[j][1] if kids is not None and j < len(kids) else None
                if t.get_field_index(sub) < 0:
                    raise InvalidInputError(f"no field {sub!r} in {'.'.join(path)}")
                path.append(sub)
                t = t.field(sub).type
                child = child.struct_field.child if child.struct_field.HasField("child") else None
            elif kind == "list_element":
                base = node if node is not None else Column(tuple(path), t)
                index = pa.scalar(child.list_element.offset + 1, pa.int64())  # Substrait counts from 0
                node = Call("list_get", (base, Literal(index)))
                child = child.list_element.child if child.list_element.HasField("child") else None
            else:
                raise NotSupportedError(f"Substrait reference segment {kind!r} in a filter")
        return node if node is not None else Column(tuple(path), t)


class _Decoder:
    def __init__(self, message: sp.ExtendedExpression, schema: pa.Schema) -> None:
        self.functions = {
            d.extension_function.function_anchor: d.extension_function.name.split(":")[0]
            for d in message.extensions
            if d.WhichOneof("mapping_type") == "extension_function"
        }
        base = message.base_schema if message.HasField("base_schema") else None
        self.names = _Names(base, schema)

    def expr(self, e: sp.Expression) -> Node:
        kind = e.WhichOneof("rex_type")
        if kind == "literal":
            return Literal(_literal(e.literal))
        if kind == "selection":
            sel = e.selection
            if sel.WhichOneof("root_type") not in (None, "root_reference"):
                raise NotSupportedError("Substrait references to outer or computed rows")
            if sel.WhichOneof("reference_type") != "direct_reference":
                raise NotSupportedError("masked Substrait references")
            return self.names.resolve(sel.direct_reference)
        if kind == "scalar_function":
            return self.call(e.scalar_function)
        if kind == "singular_or_list":
            options: list[Literal] = []
            for o in e.singular_or_list.options:
                node = self.expr(o)
                if not isinstance(node, Literal):
                    raise NotSupportedError("Substrait IN lists of non-literals")
                if node.value.is_valid:
                    options.append(node)
            return InList(self.expr(e.singular_or_list.value), tuple(options))
        if kind == "cast":
            safe = e.cast.failure_behavior != sp.Expression.Cast.FAILURE_BEHAVIOR_RETURN_NULL
            return Cast(self.expr(e.cast.input), _arrow_type(e.cast.type), safe)
        raise NotSupportedError(f"Substrait expression {kind or 'of an unknown kind'!r} in a filter")

    def call(self, f: sp.Expression.ScalarFunction) -> Node:
        name = self.functions.get(f.function_reference)
        if name is None:
            raise InvalidInputError(f"Substrait function reference {f.function_reference} is not declared")
        args: list[Node] = []
        for a in f.arguments:
            if a.WhichOneof("arg_type") != "value":
                raise NotSupportedError(f"Substrait function {name!r} with enum or type arguments")
            args.append(self.expr(a.value))
        options = {o.name: tuple(o.preference) for o in f.options}
        if name in _COMPARE and len(args) == 2:
            return Compare(_COMPARE[name], args[0], args[1])
        if name in ("and", "or") and args:
            return (And if name == "and" else Or)(tuple(args))
        if name == "not" and len(args) == 1:
            return Not(args[0])
        if name == "is_null" and len(args) == 1:
            return IsNull(args[0])
        if name == "is_not_null" and len(args) == 1:
            return Not(IsNull(args[0]))
        if name == "is_nan" and len(args) == 1:
            return IsNan(args[0])
        if name in ("is_true", "is_false") and len(args) == 1:
            return IsBool(args[0], name == "is_true")
        if name in ("is_not_true", "is_not_false") and len(args) == 1:
            return Not(IsBool(args[0], name == "is_not_true"))
        if name in _ARITH and len(args) == 2:
            return Arith(_ARITH[name], args[0], args[1])
        if name == "negate" and len(args) == 1:
            return Negate(args[0])
        if name in ("like", "ilike") and len(args) == 2 and isinstance(args[1], Literal):
            pattern = args[1].value.as_py()
            if isinstance(pattern, str):
                return Like(args[0], pattern, name == "ilike")
        if (
            name in ("starts_with", "ends_with", "contains")
            and "CASE_INSENSITIVE" in options.get("case_sensitivity", ())[:1]
        ):
            raise NotSupportedError(f"case-insensitive Substrait {name}")
        if name in _CALLS:
            return Call(_CALLS[name], tuple(args))
        raise NotSupportedError(f"Substrait function {name!r} is not supported in filters")


def predicate_from_substrait(data: bytes, schema: pa.Schema) -> Node:
    """The IR of the one expression in a Substrait ``ExtendedExpression``, bound to ``schema``.

    Raises
    ------
    InvalidInputError
        Bytes that are not an ExtendedExpression, not exactly one expression, unknown columns.
    NotSupportedError
        A construct this decoder does not model.
    """
    try:
        message = sp.ExtendedExpression.FromString(data)
    except (DecodeError, RuntimeWarning) as e:
        raise InvalidInputError(f"filter_substrait is not a Substrait ExtendedExpression: {e}") from None
    refs = list(message.referred_expr)
    if len(refs) != 1:
        raise InvalidInputError(f"filter_substrait must hold exactly one expression, it holds {len(refs)}")
    if not refs[0].HasField("expression"):
        raise NotSupportedError("filter_substrait holds a measure, not an expression")
    try:
        return _Decoder(message, schema).expr(refs[0].expression)
    except RecursionError:
        raise InvalidInputError("filter_substrait is nested too deeply") from None
