"""The scalar functions of the filter dialect: each builds its pyarrow Expression from the IR.

:data:`FUNCTIONS` maps a function's name to its arity and builder; :class:`.expr_arrow.ToArrow`
calls the builder with itself (for its arguments' types and Expressions) when it meets a
:class:`.Call`. Split from :mod:`.expr_arrow`, which imports this module (not the reverse, but for
type checking).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError, NotSupportedError
from lance_format.dataset import regexp as regexps
from lance_format.dataset import udfs
from lance_format.dataset.expr import (
    Call,
    Cast,
    Compare,
    Literal,
    Node,
)
from lance_format.dataset.numeric_types import (
    implicitly_coerces,
    is_number,
    union_type,
)
from lance_format.dataset.value_text import list_text_supported


class ToArrow(Protocol):
    """What a function's builder needs of :class:`.expr_arrow.ToArrow` (which imports this module:
    a protocol keeps the two out of an import circle)."""

    def visit(self, node: Node) -> pc.Expression: ...

    def type_of(self, node: Node) -> pa.DataType: ...

    def guarded(self, node: Node, keep: pc.Expression) -> pc.Expression: ...

    def cast_value(
        self, value: pc.Expression, source: pa.DataType, to: pa.DataType, safe: bool
    ) -> pc.Expression: ...


__all__ = ["FUNCTIONS", "presented_type", "regexp_call", "rust_timestamp_text"]


def _literal_str(node: Node, what: str) -> str:
    if not isinstance(node, Literal) or not pa.types.is_string(node.type) or not node.value.is_valid:
        raise NotSupportedError(f"{what} needs a string literal, got {node}")
    return str(node.value.as_py())


def _literal_int(node: Node, what: str) -> int:
    if not isinstance(node, Literal) or not pa.types.is_integer(node.type) or not node.value.is_valid:
        raise NotSupportedError(f"{what} needs an integer literal, got {node}")
    return int(node.value.as_py())


def _string_literal(node: Node) -> bool:
    return isinstance(node, Literal) and pa.types.is_string(node.type) and node.value.is_valid


def _per_row(b: ToArrow, name: str, args: tuple[Node, ...]) -> pc.Expression | None:
    """``name(args)`` when an argument past the first is not a string literal: NULL when one is a
    NULL literal (as in DataFusion), else computed row by row (:func:`.udfs.text_function`).
    ``None``: every such argument is a string literal (pyarrow's kernels take it)."""
    if all(_string_literal(a) for a in args[1:]):
        return None
    types = [b.type_of(a) for a in args]
    if any(isinstance(a, Literal) and not a.value.is_valid for a in args[1:]):
        return pc.scalar(pa.scalar(None, udfs.text_result_type(name, types)))
    for a, t in zip(args, types, strict=True):
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise InvalidInputError(f"{name}() takes strings, got {t} for {a}")
    return udfs.call(udfs.text_function(name, types), [b.visit(a) for a in args])


def _strpos(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """1-based character position of a substring, 0 when absent (empty substring: 1)."""
    per_row = _per_row(b, "strpos", args)
    if per_row is not None:
        return per_row
    s, sub = b.visit(args[0]), _literal_str(args[1], "strpos")
    out = udfs.text_result_type("strpos", [b.type_of(a) for a in args])
    if not sub:
        return pc.if_else(s.is_valid(), pc.scalar(pa.scalar(1, out)), pc.scalar(pa.scalar(None, out)))
    before = pc.list_element(pc.split_pattern(s, pattern=sub, max_splits=1), 0)
    found = pc.add(pc.utf8_length(before).cast(out), pc.scalar(pa.scalar(1, out)))
    return pc.if_else(pc.match_substring(s, pattern=sub), found, pc.scalar(pa.scalar(0, out)))


def _substr(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``substr(s, start[, count])``: 1-based start, characters before 1 count against ``count``."""
    s = b.visit(args[0])
    start = _literal_int(args[1], "substr") - 1
    stop = None
    if len(args) > 2:
        count = _literal_int(args[2], "substr")
        if count < 0:
            raise InvalidInputError(f"substr: negative length {count}")
        stop = max(start + count, 0)
    return pc.utf8_slice_codeunits(s, start=max(start, 0), stop=stop if stop is not None else 2**62)


def _trim(kind: str) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    fn = {"both": pc.utf8_trim, "left": pc.utf8_ltrim, "right": pc.utf8_rtrim}[kind]

    def build(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
        per_row = _per_row(b, {"both": "trim", "left": "ltrim", "right": "rtrim"}[kind], args)
        if per_row is not None and len(args) > 1:
            return per_row
        chars = _literal_str(args[1], "trim") if len(args) > 1 else " "
        return fn(b.visit(args[0]), characters=chars)

    return build


def _regexp(kind: str, b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``regexp_like`` (``kind`` "like") or ``regexp_match`` ("match") of a string and a pattern,
    a literal or a string per row (``regexp_like(s, p)``, as pylance takes it); the flags, if any,
    a literal ('i')."""
    flags = _literal_str(args[2], "regexp flags") if len(args) > 2 else ""
    if set(flags) - {"i"}:
        raise NotSupportedError(f"regexp flags {flags!r} (only 'i' is supported)")
    value, pattern = args[0], args[1]
    vt, pt = b.type_of(value), b.type_of(pattern)
    for what, t in (("value", vt), ("pattern", pt)):
        if not (_is_text(t) or pa.types.is_null(t)):
            raise InvalidInputError(f"regexp_{kind}() takes a string {what}, got {t}")
    # regexp_match: string views as strings while computed (see presented_type)
    types = _presented_types(b, args)
    out = pa.bool_() if kind == "like" else pa.list_(_kernel_type(regexps.match_type(types).value_type))
    if pa.types.is_null(vt) or pa.types.is_null(pt):
        return pc.scalar(pa.scalar(None, out))
    if kind == "like" and _string_literal(pattern):
        text = _literal_str(pattern, "regexp")
        return pc.match_substring_regex(b.visit(value), pattern=text, ignore_case="i" in flags)
    name = udfs.regexp(kind, vt, pt, "i" in flags, out)
    return udfs.call(name, [b.visit(value), b.visit(pattern)])


def _like_rows(ignore_case: bool) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    """``s [I]LIKE p`` with a pattern per row (a literal pattern is a :class:`.Like` node)."""

    def build(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
        vt, pt = b.type_of(args[0]), b.type_of(args[1])
        if not _is_text(vt):
            raise InvalidInputError(f"LIKE takes a string value, got {vt}")
        name = udfs.regexp("sql_like", vt, pt, ignore_case, pa.bool_())
        return udfs.call(name, [b.visit(args[0]), b.visit(args[1])])

    return build


def regexp_call(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``regexp_like(s, pattern[, flags])``: whether ``s`` holds a match (NULL for a NULL ``s`` or
    pattern)."""
    return _regexp("like", b, args)


def _regexp_match(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``regexp_match(s, pattern[, flags])``: the list of captures (of the whole match when the
    pattern has no group), NULL when nothing matches. As a condition it is ``.. IS NOT NULL``
    (``sql.as_condition``), which ``visit_isnull`` answers with :func:`regexp_call`."""
    return _regexp("match", b, args)


def _array_length(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    lt = b.type_of(args[0])
    if not (pa.types.is_list(lt) or pa.types.is_large_list(lt) or pa.types.is_fixed_size_list(lt)):
        raise InvalidInputError(f"array_length needs a list, got {lt}")
    # DataFusion's array_length is UInt64 (NULL for a NULL list).
    return pc.list_value_length(b.visit(args[0])).cast(pa.uint64())


def _list_of(lt: pa.DataType, item: pa.DataType) -> pa.DataType:
    """A list type like ``lt`` (list, large list, fixed-size list) of ``item``."""
    if pa.types.is_large_list(lt):
        return pa.large_list(item)
    if pa.types.is_fixed_size_list(lt):
        return pa.list_(item, lt.list_size)
    return pa.list_(item)


def _array_has(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``array_has(list, value)`` typed as DataFusion types it: the list's items and the value meet
    in their union type (:func:`.numeric_types.union_type`: a list of int32 with an int64 as
    int64s, with a float as floats, with a ``Decimal(21, 0)`` as decimals), which the value must
    reach by an implicit coercion (:func:`.numeric_types.implicitly_coerces`; so a uint64, or a
    decimal with a fraction, is refused)."""
    lists, value = args
    lt = b.type_of(lists)
    if not (pa.types.is_list(lt) or pa.types.is_large_list(lt) or pa.types.is_fixed_size_list(lt)):
        raise InvalidInputError(f"array_has needs a list, got {lt}")
    item, vt = lt.value_type, b.type_of(value)
    if pa.types.is_null(vt) or pa.types.is_dictionary(item):
        element = item  # a NULL value is NULL in the item type; dictionaries compare as their values
    else:
        try:
            element = union_type([item, vt])
        except InvalidInputError:
            raise InvalidInputError(f"array_has of {lt} and {vt}: no common type") from None
        if not implicitly_coerces(element, vt):
            raise InvalidInputError(f"array_has of {lt} and {vt}: {vt} does not coerce to {element}")
    v = b.visit(value)
    if isinstance(value, Literal):
        v = pc.scalar(value.value.cast(element) if value.value.is_valid else pa.scalar(None, element))
    elif vt != element:
        v = (
            b.cast_value(v, vt, element, True)
            if pa.types.is_timestamp(vt)
            else v.cast(element, safe=not (is_number(vt) and pa.types.is_floating(element)))
        )
    if pa.types.is_timestamp(item) and item.tz is None and element.tz is not None:
        # The list's plain timestamps would be wall times in the value's zone: compare the
        # value's wall time with them instead (pyarrow casts no lists that way).
        v, element = pc.local_timestamp(v), pa.timestamp(element.unit)
    lists_t, values = lt, b.visit(lists)
    if item != element:
        # safe=False: integers past 2**53 round to the nearest float, as DataFusion's cast does
        lists_t = _list_of(lt, element)
        values = values.cast(lists_t, safe=not (is_number(item) and pa.types.is_floating(element)))
    return udfs.call(udfs.array_has(lists_t, element), [values, v])


def _list_get(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    lt = b.type_of(args[0])
    index = b.visit(args[1])
    if isinstance(args[1], Literal):
        index = pc.scalar(args[1].value.cast(pa.int64()))
    return udfs.call(udfs.list_get(lt), [b.visit(args[0]), index])


def _unary(fn: Callable[[Any], pc.Expression]) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    return lambda b, args: fn(b.visit(args[0]))


def _pattern(
    name: str, fn: Callable[..., pc.Expression]
) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    def build(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
        per_row = _per_row(b, name, args)
        if per_row is not None:
            return per_row
        return fn(b.visit(args[0]), pattern=_literal_str(args[1], name))

    return build


#: The NaN x86's square root (and so DataFusion's) gives for a negative number: the sign bit set, so
#: it orders below every number (pyarrow's kernel returns a positive NaN instead).
_NEGATIVE_NAN = pc.scalar(-math.nan)


def _sqrt(value: pc.Expression) -> pc.Expression:
    return pc.if_else(pc.less(value, 0), _NEGATIVE_NAN, pc.sqrt(value))


def _string_parts(b: ToArrow, args: tuple[Node, ...]) -> tuple[list[pc.Expression], pc.Expression]:
    """The arguments of a concatenation and its empty separator, all large strings when any is
    (the kernel takes one string type)."""
    parts = [b.visit(a) for a in args]
    if any(pa.types.is_large_string(b.type_of(a)) for a in args):
        return [p.cast(pa.large_string()) for p in parts], pc.scalar(pa.scalar("", pa.large_string()))
    return parts, pc.scalar("")


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_bytes(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t))


def _null_literal(node: Node) -> bool:
    return isinstance(node, Literal) and not node.value.is_valid


def _as_text(b: ToArrow, node: Node) -> Node:
    """``node`` as text the way DataFusion's string functions coerce their arguments: strings as
    they are, anything else as ``CAST(node AS STRING)`` (Rust's text: ``1.0``, ``true``)."""
    t = b.type_of(node)
    if _is_text(t):
        return node
    if pa.types.is_nested(t) and not list_text_supported(t):
        raise NotSupportedError(f"{t} values as text (their text differs from DataFusion's)")
    return Cast(node, pa.string())


def _concat_type(types: list[pa.DataType]) -> pa.DataType:
    """The type of ``concat`` / ``concat_ws`` of arguments of ``types``, as DataFusion picks its
    kernel: the arguments' own type when they are all one string type, string views when all are
    strings of some kind or NULL (``concat(ls, s)``, ``concat(s, NULL)``), else strings (the rest
    are written as text: ``concat(ls, i8)`` is a string)."""
    text = [_is_text(t) or pa.types.is_string_view(t) for t in types]
    if text[0] and all(t == types[0] for t in types):
        return types[0]
    if all(is_text or pa.types.is_null(t) for is_text, t in zip(text, types, strict=True)):
        return pa.string_view()
    return pa.string()


def _kernel_type(t: pa.DataType) -> pa.DataType:
    """``t``, or the string type that stands in for string views while a value is computed:
    pyarrow's kernels take no views (``is_in``, ``starts_with`` ...), so a value is cast to views
    only as a computed column's result (:func:`presented_type`). A string, not a large string:
    DataFusion types functions of views as of strings (``length`` is an int32)."""
    return pa.string() if t == pa.string_view() else t


def _in_kernel_type(value: pc.Expression, target: pa.DataType) -> pc.Expression:
    """``value`` (a string or large string) as :func:`_kernel_type` of ``target``."""
    return value.cast(_kernel_type(target))


def _presented_types(b: ToArrow, args: tuple[Node, ...]) -> list[pa.DataType]:
    """The arguments' types as DataFusion has them (string views where :func:`presented_type`
    says so): ``concat(concat(ls, s), s)`` is of a view and a string, so a view too."""
    return [presented_type(b, a) or b.type_of(a) for a in args]


#: Functions whose result is text of their (first) argument's type: views give views.
_TEXT_PRESERVING = frozenset({"upper", "lower", "reverse", "trim", "ltrim", "rtrim", "substr"})


def presented_type(b: ToArrow, node: Node) -> pa.DataType | None:
    """The type pylance gives a computed column of ``node`` when it is one :func:`_kernel_type`
    stands in for (string views: ``concat(ls, s)``, ``regexp_match(ls, 'a')``, ``upper`` or an
    element of them); ``None``: the type ``node`` is computed in is pylance's."""
    view = pa.string_view()
    if not isinstance(node, Call):
        return None
    if node.name in _TEXT_PRESERVING or node.name == "concat_op":
        inner = [presented_type(b, a) for a in node.args[: 2 if node.name == "concat_op" else 1]]
        return view if view in inner else None
    if node.name == "list_get":
        listed = presented_type(b, node.args[0])
        return view if listed == pa.list_(view) else None
    types = _presented_types(b, node.args)
    if node.name == "regexp_match":
        t = regexps.match_type(types)
        return t if t.value_type == view else None
    if node.name in ("concat", "concat_ws"):
        return view if _concat_type(types) == view else None
    return None


def _concat(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    # concat() skips NULL arguments (DataFusion); `||` (op "concat_op") propagates them. Other
    # types are written as text first (concat(s, 1.5) is 's1.5').
    target = _concat_type(_presented_types(b, args))
    kept = tuple(_as_text(b, a) for a in args if not _null_literal(a))
    if not kept:
        return pc.scalar(pa.scalar("", _kernel_type(target)))
    parts, empty = _string_parts(b, kept)
    return _in_kernel_type(
        pc.binary_join_element_wise(*(pc.coalesce(p, empty) for p in parts), empty), target
    )


def _concat_ws(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``concat_ws(sep, a, ..)``: the non-NULL arguments (written as text) joined by ``sep``; NULL
    for a NULL ``sep``, ``''`` when every argument is NULL, as DataFusion's.

    Each argument is prefixed with ``sep`` when one before it is not NULL, and the parts are
    joined with nothing (pyarrow's ``null_handling="skip"`` drops rows when a row's arguments are
    all NULL, so it is not used)."""
    target = _concat_type(_presented_types(b, args))
    if _null_literal(args[0]):
        return pc.scalar(pa.scalar(None, _kernel_type(target)))
    kept = tuple(_as_text(b, a) for a in args[1:] if not _null_literal(a))
    parts, empty = _string_parts(b, (_as_text(b, args[0]), *kept))
    sep, values = parts[0], parts[1:]
    joined: list[pc.Expression] = []
    before: pc.Expression | None = None  # some argument so far is not NULL
    for v in values:
        text = pc.coalesce(v, empty)
        if before is not None:
            text = pc.if_else(before & v.is_valid(), pc.binary_join_element_wise(sep, v, empty), text)
        joined.append(text)
        before = v.is_valid() if before is None else before | v.is_valid()
    out = pc.binary_join_element_wise(*joined, empty) if joined else empty
    # NULL where the separator is (sep itself there, of the parts' type)
    return _in_kernel_type(pc.if_else(sep.is_valid(), out, sep), target)


def _concat_op(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``a || b`` typed as DataFusion types it: two byte strings join as bytes; with a string on
    one side the other is written as text (``s || i``), a byte string there is refused; a NULL
    makes the result NULL."""
    left, right = args
    ta, tb = b.type_of(left), b.type_of(right)
    if _null_literal(left) or _null_literal(right):
        other = tb if _null_literal(left) else ta
        if not (_is_text(other) or _is_bytes(other)):
            raise InvalidInputError(f"cannot infer a common string type for {ta} || {tb}")
        return pc.scalar(pa.scalar(None, other))
    if _is_bytes(ta) and _is_bytes(tb):
        large = pa.types.is_large_binary(ta) or pa.types.is_large_binary(tb)
        t = pa.large_binary() if large else pa.binary()
        empty = pc.scalar(pa.scalar(b"", t))
        return pc.binary_join_element_wise(b.visit(left).cast(t), b.visit(right).cast(t), empty)
    if not (_is_text(ta) or _is_text(tb)) or _is_bytes(ta) or _is_bytes(tb):
        raise InvalidInputError(f"cannot infer a common string type for {ta} || {tb}")
    parts, empty = _string_parts(b, (_as_text(b, left), _as_text(b, right)))
    return pc.binary_join_element_wise(*parts, empty)


def _case_map(upper: bool) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    def build(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
        t = b.type_of(args[0])
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise InvalidInputError(f"{'upper' if upper else 'lower'}() needs a string, got {t}")
        return udfs.call(udfs.case_map(t, upper), [b.visit(args[0])])

    return build


def _coalesce(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``coalesce(..)`` as DataFusion evaluates it: every argument cast to one type (see
    :func:`.numeric_types.union_type`: ``coalesce(i8, 1)`` is an int64, ``coalesce(u64, -1)`` a
    ``Decimal(20, 0)``), each cast only on the rows every argument before it left NULL, as
    DataFusion's rewrite to ``CASE WHEN a IS NOT NULL THEN a WHEN ..`` evaluates it: ``coalesce(u64,
    s)`` reads ``s`` as a number only where ``u64`` is NULL, so other text there does not fail."""
    types = [b.type_of(a) for a in args]
    target = union_type(types)
    parts: list[pc.Expression] = []
    pending: pc.Expression | None = None  # rows every argument so far left NULL
    for a, t in zip(args, types, strict=True):
        if _null_literal(a):
            continue
        # evaluated only where it is taken: coalesce(i8, abs(i8)) never takes abs(-128)
        value = b.visit(a) if pending is None else b.guarded(a, pending)
        if t != target:
            masked = value if pending is None else pc.if_else(pending, value, pc.scalar(pa.scalar(None, t)))
            parts.append(b.cast_value(masked, t, target, safe=True))
        else:
            parts.append(value)
        pending = value.is_null() if pending is None else pending & value.is_null()
    if not parts:
        return pc.scalar(pa.scalar(None, target))
    return pc.coalesce(*parts) if len(parts) > 1 else parts[0]


def _replace(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``replace(s, from, to)``: every non-overlapping ``from`` in ``s`` by ``to``, left to right.

    An empty ``from`` matches between every two characters and at both ends (``replace('ab', '',
    'x')`` is ``'xaxbx'``, ``replace('', '', 'x')`` is ``'x'``), as DataFusion's (Rust's
    ``str::replace``); pyarrow's literal kernel loops forever on an empty pattern, while its regex
    kernel's empty match gives exactly that. A NULL ``from`` or ``to`` makes every row NULL.
    """
    t = b.type_of(args[0])
    values = t.value_type if pa.types.is_dictionary(t) else t
    if not (pa.types.is_string(values) or pa.types.is_large_string(values)):
        raise InvalidInputError(f"replace() needs a string, got {t}")
    text = b.visit(args[0])
    if pa.types.is_dictionary(t):
        text = text.cast(values)
    if any(isinstance(a, Literal) and not a.value.is_valid for a in args[1:]):
        return pc.if_else(pc.scalar(False), text, pc.scalar(pa.scalar(None, values)))
    per_row = _per_row(b, "replace", (Cast(args[0], values) if values != t else args[0], *args[1:]))
    if per_row is not None:
        return per_row
    pattern, replacement = _literal_str(args[1], "replace"), _literal_str(args[2], "replace")
    if not pattern:
        # RE2 reads backslashes in the replacement as group references: escape them.
        escaped = replacement.replace("\\", "\\\\")
        return pc.replace_substring_regex(text, pattern="", replacement=escaped)
    return pc.replace_substring(text, pattern=pattern, replacement=replacement)


def _float_operand(b: ToArrow, node: Node) -> pc.Expression:
    """A number as DataFusion's float functions take it: floats as they are, others as float64."""
    value, t = b.visit(node), b.type_of(node)
    if pa.types.is_floating(t):
        return value
    # integers past 2**53 round to the nearest float (pyarrow's safe cast refuses them)
    return value.cast(pa.float64(), safe=not pa.types.is_integer(t))


def _math(name: str) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    """``ln``, ``log10``, ``log2``, ``exp``, ``power(x, y)`` and ``log([base, ]x)`` in floating point
    (a decimal or an integer as float64), as DataFusion's: ``ln(0)`` is -inf, ``ln(-1)`` NaN;
    ``log`` is Rust's ``x.log(base)``, ``ln(x) / ln(base)`` (base 10 with one argument), which is not
    ``log10`` (``log(1e300)`` is 299.99999999999994, ``log10(1e300)`` 300)."""
    unary = {"ln": pc.ln, "log10": pc.log10, "log2": pc.log2, "exp": pc.exp}

    def build(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
        for a in args:
            t = b.type_of(a)
            if not (is_number(t) or pa.types.is_decimal(t) or pa.types.is_null(t)):
                raise InvalidInputError(f"{name}() takes numbers, got {t}")
        if name == "power" and pa.types.is_decimal(b.type_of(args[0])):
            # DataFusion keeps the decimal type (its digits truncated): not computed here
            raise NotSupportedError("power() of a decimal")
        values = [_float_operand(b, a).cast(pa.float64()) for a in args]
        if name in unary:
            return unary[name](values[0])
        if name == "power":
            return pc.power(values[0], values[1])
        base, x = (pc.scalar(10.0), values[0]) if len(values) == 1 else values
        return pc.divide(pc.ln(x), pc.ln(base))

    return build


def _extreme(greatest: bool) -> Callable[[ToArrow, tuple[Node, ...]], pc.Expression]:
    """``greatest(..)`` / ``least(..)``: the arguments in their union type (as ``coalesce``'s),
    NULLs skipped; a NaN is above every number, as DataFusion orders floats (pyarrow's kernels skip
    it)."""

    def build(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
        types = [b.type_of(a) for a in args]
        target = union_type(types)
        values = [
            b.cast_value(b.visit(a), t, target, True) if t != target else b.visit(a)
            for a, t in zip(args, types, strict=True)
            if not _null_literal(a)
        ]
        if not values:
            return pc.scalar(pa.scalar(None, target))
        kernel = pc.max_element_wise if greatest else pc.min_element_wise
        out = kernel(*values, skip_nulls=True) if len(values) > 1 else values[0]
        if pa.types.is_floating(target) and len(values) > 1:
            nan = functools.reduce(
                operator.or_, [pc.coalesce(pc.is_nan(v), pc.scalar(False)) for v in values]
            )
            every = functools.reduce(operator.and_, [pc.coalesce(pc.is_nan(v), v.is_null()) for v in values])
            # greatest: any NaN wins; least: NaN only when every value is NaN or NULL
            out = pc.if_else(nan if greatest else every & nan, pc.scalar(pa.scalar(math.nan, target)), out)
        return out

    return build


def _nullif(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    """``nullif(a, b)``: NULL where ``a = b`` (DataFusion's equality), else ``a``, in the union type."""
    types = [b.type_of(a) for a in args]
    target = union_type(types)
    value = b.visit(args[0])
    if types[0] != target:
        value = b.cast_value(value, types[0], target, True)
    equal = b.visit(Compare("eq", args[0], args[1]))
    return pc.if_else(pc.coalesce(equal, pc.scalar(False)), pc.scalar(pa.scalar(None, target)), value)


def _round(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    # DataFusion rounds half away from zero, to n digits as round(x * 10^n) / 10^n.
    digits = 0
    if len(args) == 2:
        if not isinstance(args[1], Literal) or not pa.types.is_integer(args[1].type):
            raise NotSupportedError("round() takes a literal integer number of digits")
        digits = int(args[1].value.as_py()) if args[1].value.is_valid else 0
    t = b.type_of(args[0])
    if pa.types.is_decimal128(t):
        return _round_decimal(b.visit(args[0]), t, digits)
    value = _float_operand(b, args[0])
    if digits == 0:
        return pc.round(value, round_mode="half_towards_infinity")
    scale = pc.scalar(10.0**digits)
    return pc.divide(pc.round(pc.multiply(value, scale), round_mode="half_towards_infinity"), scale)


def _trunc(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    # DataFusion's trunc of -0.0 is 0.0 (of -1e-300 it is -0.0, as Rust's trunc); trunc(x, n) is
    # trunc(x * 10^n) / 10^n, in float64
    value = _float_operand(b, args[0])
    zero = pc.scalar(0).cast(b.type_of(args[0]) if pa.types.is_floating(b.type_of(args[0])) else pa.float64())
    if len(args) == 2:
        digits = _literal_int(args[1], "trunc")
        t = b.type_of(args[0])
        # DataFusion's trunc(x, n) takes an integer x as a float32 (its first signature)
        float_t = t if pa.types.is_floating(t) else pa.float32() if pa.types.is_integer(t) else pa.float64()
        scale = pc.scalar(pa.scalar(10.0**digits, float_t))
        return pc.divide(pc.trunc(pc.multiply(value.cast(float_t), scale)), scale)
    return pc.if_else(value == pc.scalar(0), zero, pc.trunc(value))


def _sqrt_of(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    return _sqrt(_float_operand(b, args[0]))  # a decimal as float64, as DataFusion takes it


def _round_decimal(value: pc.Expression, t: pa.DataType, digits: int) -> pc.Expression:
    """``round(d, digits)`` of a decimal ``d`` of type ``t``, in DataFusion's type: the same
    precision, ``digits`` fraction digits (at most the scale, at least 0). Rounded half away from
    zero in one more digit, which a carry (99.99 to 100) may need."""
    wider = (
        pa.decimal128(min(t.precision + 1, 38), t.scale) if t.precision < 38 else pa.decimal256(39, t.scale)
    )
    rounded = pc.round(value.cast(wider), ndigits=digits, round_mode="half_towards_infinity")
    return rounded.cast(pa.decimal128(t.precision, max(0, min(digits, t.scale))))


def rust_timestamp_text(t: pa.DataType) -> bool:
    """Whether :func:`.value_text.timestamp_text` spells ``t`` as Rust does: timestamps without a time zone
    or in UTC (Rust writes another zone's local time and offset; pyarrow writes UTC)."""
    return bool(pa.types.is_timestamp(t) and (t.tz is None or t.tz in ("UTC", "+00:00", "Z")))


def _spelled_alike(t: pa.DataType) -> bool:
    """Whether pyarrow spells values of ``t`` as text exactly as Arrow's Rust cast does (integers,
    booleans, dates, decimals); floats and timestamps it spells otherwise (``1e+20``, not ``1e20``)."""
    return bool(
        pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_date(t) or pa.types.is_decimal(t)
    )


def _length(b: ToArrow, args: tuple[Node, ...]) -> pc.Expression:
    # Characters of a string; DataFusion casts other scalars to text first (length(-12) is 3).
    t = b.type_of(args[0])
    values = t.value_type if pa.types.is_dictionary(t) else t
    if _spelled_alike(values):
        return pc.utf8_length(b.visit(Cast(args[0], pa.string())))
    if pa.types.is_floating(values) and values.bit_width in (32, 64):
        value = b.visit(args[0])
        value = value.cast(values) if values != t else value
        return pc.utf8_length(udfs.call(udfs.float_text(values), [value]))
    if rust_timestamp_text(values) or list_text_supported(values):
        # a list is measured as its text too: length([1, 2]) is 6, the characters of '[1, 2]'
        return pc.utf8_length(b.visit(Cast(args[0], pa.string())))
    if pa.types.is_floating(values) or pa.types.is_temporal(values) or pa.types.is_nested(values):
        raise NotSupportedError(f"length() of {values} values (their text differs from DataFusion's)")
    return pc.utf8_length(b.visit(args[0]))


#: Scalar functions of the dialect: name -> (arity range, builder).
FUNCTIONS: dict[str, tuple[tuple[int, int], Callable[[ToArrow, tuple[Node, ...]], pc.Expression]]] = {
    "lower": ((1, 1), _case_map(upper=False)),
    "upper": ((1, 1), _case_map(upper=True)),
    # Int32 of strings, Int64 of large strings (the kernels' types are DataFusion's).
    "length": ((1, 1), _length),
    "octet_length": ((1, 1), _unary(pc.binary_length)),
    "reverse": ((1, 1), _unary(pc.utf8_reverse)),
    "abs": ((1, 1), _unary(pc.abs_checked)),
    "ceil": ((1, 1), _unary(pc.ceil)),
    "floor": ((1, 1), _unary(pc.floor)),
    "round": ((1, 2), _round),
    "trunc": ((1, 2), _trunc),
    "sqrt": ((1, 1), _sqrt_of),
    "starts_with": ((2, 2), _pattern("starts_with", pc.starts_with)),
    "ends_with": ((2, 2), _pattern("ends_with", pc.ends_with)),
    "contains": ((2, 2), _pattern("contains", pc.match_substring)),
    "strpos": ((2, 2), _strpos),
    "replace": ((3, 3), _replace),
    "substr": ((2, 3), _substr),
    "trim": ((1, 2), _trim("both")),
    "ltrim": ((1, 2), _trim("left")),
    "rtrim": ((1, 2), _trim("right")),
    "regexp_like": ((2, 3), regexp_call),
    "regexp_match": ((2, 3), _regexp_match),
    "like": ((2, 2), _like_rows(ignore_case=False)),
    "ilike": ((2, 2), _like_rows(ignore_case=True)),
    "concat": ((1, 64), _concat),
    "concat_ws": ((2, 64), _concat_ws),
    "concat_op": ((2, 2), _concat_op),
    "array_has": ((2, 2), _array_has),
    "array_length": ((1, 1), _array_length),
    "list_get": ((2, 2), _list_get),
    "coalesce": ((1, 64), _coalesce),
    "ln": ((1, 1), _math("ln")),
    "log10": ((1, 1), _math("log10")),
    "log2": ((1, 1), _math("log2")),
    "exp": ((1, 1), _math("exp")),
    "power": ((2, 2), _math("power")),
    "log": ((1, 2), _math("log")),
    "greatest": ((1, 64), _extreme(greatest=True)),
    "least": ((1, 64), _extreme(greatest=False)),
    "nullif": ((2, 2), _nullif),
}
