"""``regexp_like``, ``regexp_match`` and ``LIKE`` with a pattern per row, as DataFusion answers them.

pyarrow's regex kernels take one pattern for the whole array and give no list of captures, so:

- a pattern that differs by row (``regexp_like(s, p)`` of a column ``p``) is run once per distinct
  pattern, on the rows that have it (:func:`like_rows`, :func:`match_rows`): a loop over patterns,
  not rows;
- ``regexp_match`` is a list of the captured groups, or of the whole match when the pattern has no
  group; a group that took no part in the match is left out (``regexp_match('a', '(a)(x)?')`` is
  ``['a']``); NULL when nothing matches. Built from ``extract_regex`` (the groups' text) and
  ``extract_regex_span`` (which of them took part) of the pattern with every group named
  (:func:`named_groups`).

A NULL value or pattern is NULL; a pattern is compiled only for rows whose value is not NULL.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["like_rows", "match_lists", "match_rows", "match_type", "named_groups"]


def named_groups(pattern: str) -> tuple[str, bool]:
    """``pattern`` with every capturing group named ``g0``, ``g1``, .. in order, and whether it had
    any group; without one the whole pattern becomes group ``g0`` (the match is the capture).

    Parentheses escaped or inside a character class are not groups, nor ``(?:..)`` and flag groups;
    ``(?P<name>..)`` and ``(?<name>..)`` are, and are renamed (extract_regex needs every group
    named, and the names only order them).
    """
    out: list[str] = []
    i, n, depth, count = 0, len(pattern), 0, 0
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if depth:  # inside a class: only its own brackets count ([[:alpha:]] nests one)
            depth += {"[": 1, "]": -1}.get(c, 0)
            out.append(c)
            i += 1
            continue
        if c == "[":
            depth, start = 1, i + 1
            start += pattern.startswith("^", start)
            start += pattern.startswith("]", start)  # a ']' first in a class is literal
            out.append(pattern[i:start])
            i = start
            continue
        opened = _group_opening(pattern, i) if c == "(" else 0
        if opened:
            out.append(f"(?P<g{count}>")
            count += 1
            i += opened
            continue
        out.append(c)
        i += 1
    if not count:
        return f"(?P<g0>{pattern})", False
    return "".join(out), True


def _group_opening(pattern: str, i: int) -> int:
    """Characters of the capturing group's opening at ``pattern[i]`` (a ``(``): 1 for ``(``, the
    whole ``(?P<name>`` for a named one; 0 for a group that captures nothing (``(?:``, ``(?i)``,
    lookarounds)."""
    if not pattern.startswith("(?", i):
        return 1
    named = pattern.startswith("(?P<", i) or (
        pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i)
    )
    end = pattern.find(">", i)
    return end + 1 - i if named and end > 0 else 0


def match_type(types: list[pa.DataType]) -> pa.DataType:
    """The type of ``regexp_match`` of arguments of ``types`` (value, pattern[, flags]), as
    DataFusion picks its kernel: lists of strings when every argument is a string, of large
    strings when every one is a large string, else of string views (it coerces the mix, and a
    NULL, to views)."""
    for t in (pa.string(), pa.large_string()):
        if all(a == t for a in types):
            return pa.list_(t)
    return pa.list_(pa.string_view())


def _flags(pattern: str, ignore_case: bool) -> str:
    return "(?i)" + pattern if ignore_case else pattern


def match_lists(values: pa.Array, pattern: str, ignore_case: bool, out_type: pa.DataType) -> pa.Array:
    """``regexp_match(values, pattern)`` of one pattern (see the module docstring), of type
    ``out_type`` (see :func:`match_type`)."""
    return _captures(values, pattern, ignore_case).cast(out_type)


def _captures(values: pa.Array, pattern: str, ignore_case: bool) -> pa.Array:
    """:func:`match_lists` as a list of ``values``' own string type (string views take no ``take``)."""
    named, grouped = named_groups(pattern)
    named = _flags(named, ignore_case)
    texts = pc.extract_regex(values, pattern=named)
    spans = pc.extract_regex_span(values, pattern=named)
    matched = spans.is_valid().to_numpy(zero_copy_only=False)
    k = spans.type.num_fields
    # took_part[i, j]: row i matched and its group j took part in the match (its span is not NULL)
    took_part = np.stack(
        [matched & spans.field(j).is_valid().to_numpy(zero_copy_only=False) for j in range(k)], axis=1
    )
    if not grouped:
        took_part[:, 0] = matched
    rows, groups = np.nonzero(took_part)  # row by row, the groups in order
    every = pa.concat_arrays([texts.field(j) for j in range(k)])
    items = every.take(pa.array(groups * len(values) + rows, pa.int64()))
    offsets = np.concatenate([[0], np.cumsum(took_part.sum(axis=1))]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), items, mask=pa.array(~matched))


def _pattern_groups(values: pa.Array, patterns: pa.Array) -> tuple[np.ndarray, list[tuple[str, np.ndarray]]]:
    """The rows where neither value nor pattern is NULL, and each distinct pattern with its rows."""
    valid = pc.and_(values.is_valid(), patterns.is_valid()).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(valid)
    encoded = pc.dictionary_encode(patterns.take(pa.array(rows, pa.int64())).cast(pa.string()))
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(encoded.dictionary) + 1))
    groups = [
        (str(p), rows[order[bounds[k] : bounds[k + 1]]]) for k, p in enumerate(encoded.dictionary.to_pylist())
    ]
    return valid, groups


def like_rows(values: pa.Array, patterns: pa.Array, ignore_case: bool, sql: bool = False) -> pa.Array:
    """``regexp_like(values, patterns)`` with a pattern per row; ``sql``: SQL ``LIKE`` patterns
    (``%``, ``_``, ``\\`` escapes) instead of regexes."""
    valid, groups = _pattern_groups(values, patterns)
    out = np.zeros(len(values), bool)
    kernel = pc.match_like if sql else pc.match_substring_regex
    for pattern, rows in groups:
        taken = values.take(pa.array(rows, pa.int64()))
        hit = kernel(taken, pattern=pattern, ignore_case=ignore_case)
        out[rows] = hit.to_numpy(zero_copy_only=False)
    return pa.array(out, pa.bool_(), mask=~valid)


def match_rows(values: pa.Array, patterns: pa.Array, ignore_case: bool, out_type: pa.DataType) -> pa.Array:
    """``regexp_match(values, patterns)`` with a pattern per row, of type ``out_type``."""
    _, groups = _pattern_groups(values, patterns)
    parts = [pa.nulls(1, pa.list_(values.type))]  # row 0 of the result: every row without a match
    where = np.zeros(len(values), np.int64)  # NULL value or pattern: row 0
    start = 1
    for pattern, rows in groups:
        parts.append(_captures(values.take(pa.array(rows, pa.int64())), pattern, ignore_case))
        where[rows] = np.arange(start, start + len(rows))
        start += len(rows)
    return pa.concat_arrays(parts).take(pa.array(where)).cast(out_type)
