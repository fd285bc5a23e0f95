"""Statements edited as written: spans of the client's SQL text, not sqlglot's regeneration of it.

sqlglot reads statements in a dialect that knows ``VERSION AS OF`` and placeholders, but writing
its tree back out changes what the SQL means in DataFusion's dialect (and our filter parser's,
which is the same): a double-quoted name becomes a string literal, ``ltrim(s, chars)`` swaps its
arguments, integer ``/`` becomes a float division. So the engine edits the text itself: it swaps
table references and placeholders for what DataFusion needs, and hands our scanner a WHERE clause
as the client wrote it; everything in between stays byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet

import sqlglot
from sqlglot import Token, TokenType, exp

__all__ = [
    "Edit",
    "apply_edits",
    "assigned_texts",
    "clause_text",
    "insert_source_text",
    "node_span",
    "tokens",
]

#: ``(start, end, text)``: characters ``start`` to ``end`` (inclusive) of a statement replaced by ``text``.
Edit = tuple[int, int, str]

_OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE}
_NAMES = {TokenType.VAR, TokenType.IDENTIFIER}


def tokens(sql: str, dialect: str) -> list[Token]:
    """The tokens of ``sql`` as ``dialect``'s tokenizer (the one that parsed it) sees them."""
    return list(sqlglot.Dialect.get_or_raise(dialect).tokenize(sql))


def node_span(node: exp.Expression) -> tuple[int, int] | None:
    """The characters ``node`` was parsed from (``None``: not known, e.g. a node made in code)."""
    spans = [(n.meta["start"], n.meta["end"]) for n in node.walk() if "start" in n.meta and "end" in n.meta]
    if not spans:
        return None
    return min(s for s, _ in spans), max(e for _, e in spans)


def apply_edits(sql: str, edits: Iterable[Edit]) -> str:
    """``sql`` with each span replaced (spans must not overlap)."""
    out, pos = [], 0
    for start, end, text in sorted(edits):
        if start < pos:
            raise ValueError("overlapping edits")
        out += [sql[pos:start], text]
        pos = end + 1
    return "".join(out) + sql[pos:]


def clause_text(
    sql: str,
    dialect: str,
    keyword: TokenType,
    until: AbstractSet[TokenType],
    qualifiers: set[str],
    literal: Callable[[int], str] | None = None,
) -> str | None:
    """The text of the top-level clause after ``keyword`` up to one of ``until`` (or the end).

    A ``qualifier.`` prefix naming one of ``qualifiers`` is dropped (the clause reads one table);
    with ``literal``, each placeholder becomes ``literal(n)``, ``n`` its 0-based parameter (``$n``
    is ``n - 1``, a ``?`` counts the ``?`` before it in the statement). ``None`` when the statement
    has no such clause.
    """
    toks = tokens(sql, dialect)
    found = _clause(toks, keyword, until)
    if found is None:
        return None
    return _rewrite(sql, toks, *found, qualifiers, literal)


def assigned_texts(
    sql: str,
    dialect: str,
    until: AbstractSet[TokenType],
    qualifiers: set[str],
    literal: Callable[[int], str] | None = None,
) -> list[str] | None:
    """The values of ``UPDATE ... SET a = <value>, ...`` in order, as written (edited as
    :func:`clause_text` edits a clause); ``None`` when there is no SET clause."""
    toks = tokens(sql, dialect)
    found = _clause(toks, TokenType.SET, until)
    if found is None:
        return None
    values, depth, eq = [], 0, None
    for i in range(found[0], found[1] + 1):
        kind = toks[i].token_type if i < found[1] else TokenType.COMMA
        if depth == 0 and kind == TokenType.EQ and eq is None:
            eq = i
        elif depth == 0 and kind == TokenType.COMMA:
            if eq is None or eq + 1 >= i:
                return None
            values.append(_rewrite(sql, toks, eq + 1, i, qualifiers, literal))
            eq = None
        depth += kind in _OPEN
        depth -= kind in _CLOSE
    return values


_SOURCE_STARTS = {TokenType.SELECT, TokenType.VALUES, TokenType.WITH}


def insert_source_text(
    sql: str, dialect: str, until: AbstractSet[TokenType], literal: Callable[[int], str] | None = None
) -> str | None:
    """The rows' query of ``INSERT INTO t [(columns)] <query>`` as written: from its ``SELECT``,
    ``WITH`` or ``VALUES`` to the end (or one of ``until``), or inside the parentheses that hold it;
    placeholders replaced by ``literal(n)`` as in :func:`clause_text`. ``None``: no such query."""
    toks = tokens(sql, dialect)
    depth, begin = 0, None
    for i, tok in enumerate(toks):
        if tok.token_type in _SOURCE_STARTS:
            begin = i
            break
        depth += tok.token_type in _OPEN
        depth -= tok.token_type in _CLOSE
    if begin is None:
        return None
    end, level = len(toks), 0
    for i in range(begin, len(toks)):
        kind = toks[i].token_type
        if level == 0 and (kind in until or (depth and kind in _CLOSE)):
            end = i
            break
        level += kind in _OPEN
        level -= kind in _CLOSE
    if end <= begin:
        return None
    return _rewrite(sql, toks, begin, end, set(), literal)


def _clause(toks: list[Token], keyword: TokenType, until: AbstractSet[TokenType]) -> tuple[int, int] | None:
    """Tokens ``(begin, end)`` of the top-level clause after ``keyword`` up to one of ``until``."""
    depth, begin = 0, None
    end = len(toks)
    for i, tok in enumerate(toks):
        if depth == 0 and begin is None and tok.token_type == keyword:
            begin = i + 1
        elif depth == 0 and begin is not None and tok.token_type in until:
            end = i
            break
        if tok.token_type in _OPEN:
            depth += 1
        elif tok.token_type in _CLOSE:
            depth -= 1
    if begin is None or begin >= end:
        return None
    return begin, end


def _rewrite(
    sql: str,
    toks: list[Token],
    begin: int,
    end: int,
    qualifiers: set[str],
    literal: Callable[[int], str] | None,
) -> str:
    """The text of tokens ``begin`` to ``end - 1``: qualifiers dropped, placeholders replaced."""
    edits: list[Edit] = []
    marks = [k for k, t in enumerate(toks) if t.token_type == TokenType.PLACEHOLDER]
    i = begin
    while i < end:
        tok = toks[i]
        after = toks[i + 1] if i + 1 < end else None
        before = toks[i - 1] if i > begin else None
        if (
            tok.token_type in _NAMES
            and tok.text in qualifiers
            and after is not None
            and after.token_type == TokenType.DOT
            and (before is None or before.token_type != TokenType.DOT)
        ):
            edits.append((tok.start, after.end, ""))
            i += 2
            continue
        if literal is not None and tok.token_type == TokenType.PLACEHOLDER:
            edits.append((tok.start, tok.end, literal(marks.index(i))))
        elif (
            literal is not None
            and tok.token_type == TokenType.PARAMETER
            and after is not None
            and after.token_type == TokenType.NUMBER
            and after.start == tok.end + 1
        ):
            edits.append((tok.start, after.end, literal(int(after.text) - 1)))
            i += 1
        i += 1
    first, last = toks[begin], toks[end - 1]
    edits = [(s - first.start, e - first.start, t) for s, e, t in edits]
    return apply_edits(sql[first.start : last.end + 1], edits)
