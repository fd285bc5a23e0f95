"""The SQL dialect of filters as sqlglot reads it, and what pylance's parser reads otherwise.

:class:`LanceSQL` is sqlglot's default dialect with DataFusion's quoting and its parser's precedences;
the ``refuse_*`` functions refuse, by tokens, what sqlglot reads but pylance does not (its parser is
sqlparser-rs, its planner DataFusion's): ``IS UNKNOWN``, cast type names it does not have, names it
does not know. :func:`enclosing_function` tells the call a node is an argument of (pylance hands a
call's arguments to DataFusion's SQL planner, which types some of them its own way).
"""

from __future__ import annotations

from typing import Any

from sqlglot import TokenType, parser, tokens
from sqlglot import expressions as exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

from lance_format.core.errors import NotSupportedError

__all__ = [
    "LanceSQL",
    "enclosing_function",
    "refuse_binary_casts_in_functions",
    "refuse_foreign_spellings",
    "refuse_is_unknown",
    "refuse_type_spellings",
    "tokens_if",
]


class LanceSQL(Dialect):
    """sqlglot's default dialect with DataFusion's quoting (backticks and ``X'..'`` byte strings)
    and its parser's precedence of ``IS``: below comparisons, so ``a = 5 IS NULL`` is ``(a = 5) IS
    NULL``, as sqlparser-rs reads it (sqlglot's default reads ``a = (5 IS NULL)``)."""

    class Tokenizer(tokens.Tokenizer):
        IDENTIFIERS = ['"', "`"]
        HEX_STRINGS = [("x'", "'"), ("X'", "'")]

    class Parser(parser.Parser):
        # sqlglot releases before 30 have no such setting (there IS keeps sqlglot's precedence)
        if hasattr(parser, "IsPredicatePrecedence"):
            IS_PREDICATE_PRECEDENCE = parser.IsPredicatePrecedence.LOW
        # log10(x) and log2(x) as themselves: sqlglot reads them as log(10, x), which DataFusion
        # computes otherwise (ln(x) / ln(10), not log10's exact powers of ten)
        FUNCTIONS = {
            **parser.Parser.FUNCTIONS,
            "LOG10": lambda args: exp.Anonymous(this="log10", expressions=args),
            "LOG2": lambda args: exp.Anonymous(this="log2", expressions=args),
        }


def tokens_if(text: str, word: str) -> list[Any]:
    """The tokens of ``text`` when it holds ``word`` (lower case) at all, else none (the common
    case costs a substring test, not a tokenizer run). Text that does not tokenize gives none:
    the parser reports it."""
    if word not in text.lower():
        return []
    try:
        return list(LanceSQL().tokenize(text))
    except SqlglotError:
        return []


#: Function names sqlglot reads as functions of the dialect that pylance does not know ("Invalid
#: function 'lcase'"): sqlglot's aliases of lower, upper, length, strpos, starts_with ...
_FOREIGN_FUNCTIONS = frozenset(
    {"lcase", "ucase", "len", "array_size", "locate", "position", "mod", "startswith", "endswith"}
)
#: Tokens that end an operand: after one, LIKE is the operator, not a call of ``like(..)``.
_OPERAND_ENDS = frozenset(
    {TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER, TokenType.R_PAREN}
    | {TokenType.R_BRACKET, TokenType.NULL, TokenType.TRUE, TokenType.FALSE}
)


def refuse_foreign_spellings(text: str) -> None:
    """Refuse what sqlglot reads but pylance does not: the names of :data:`_FOREIGN_FUNCTIONS`
    called, ``like(..)``/``ilike(..)`` as functions (sqlglot swaps their arguments: ``like(s,
    'a%')`` was a wrong answer), and the ``RLIKE``/``REGEXP`` operators."""
    lowered = text.lower()
    if not any(w in lowered for w in (*_FOREIGN_FUNCTIONS, "like", "regexp")):
        return
    try:
        toks = list(LanceSQL().tokenize(text))
    except SqlglotError:
        return  # the parser reports it
    for i, tok in enumerate(toks):
        called = i + 1 < len(toks) and toks[i + 1].token_type == TokenType.L_PAREN
        before = i - 1 - (i > 0 and toks[i - 1].token_type == TokenType.NOT)  # s NOT LIKE (..)
        after_operand = before >= 0 and toks[before].token_type in _OPERAND_ENDS
        word = tok.text.lower()
        foreign = tok.token_type == TokenType.VAR and word in _FOREIGN_FUNCTIONS and called
        like_call = tok.token_type in (TokenType.LIKE, TokenType.ILIKE) and called and not after_operand
        if foreign or like_call or tok.token_type == TokenType.RLIKE:
            raise NotSupportedError(
                f"filter {text!r}: {tok.text} is not supported (pylance does not know it)"
            )


def refuse_is_unknown(text: str) -> None:
    """Refuse ``IS [NOT] UNKNOWN`` as pylance does (sqlglot reads it as ``IS NULL``)."""
    toks = tokens_if(text, "unknown")
    for i, tok in enumerate(toks):
        if tok.text.upper() == "UNKNOWN" and tok.token_type != TokenType.STRING:
            prev = [t.text.upper() for t in toks[max(0, i - 2) : i]]
            if "IS" in prev:
                raise NotSupportedError(f"filter {text!r}: IS [NOT] UNKNOWN is not supported")


#: Type names pylance's planner casts to (sqlglot reads more, and reads several names as one:
#: ``REAL`` as ``FLOAT``, ``BOOL`` as ``BOOLEAN``, ``INT8`` as ``TINYINT``, ``TEXT`` as ``STRING``).
_CAST_TYPE_NAMES = frozenset(
    {"TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE", "STRING", "BINARY", "DATE"}
    | {"TIMESTAMP", "DATETIME", "DECIMAL", "BOOLEAN"}
)
_INTEGER_TYPE_NAMES = frozenset({"TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT"})


def refuse_type_spellings(text: str) -> None:
    """Refuse a cast to a type pylance's planner does not name (``VARCHAR``, ``REAL``, ``BOOL``,
    ``DOUBLE PRECISION``, ``INT8``...), as it refuses them; integers may be ``UNSIGNED``."""
    toks = tokens_if(text, "as")
    for i, tok in enumerate(toks[:-1]):
        if tok.token_type != TokenType.ALIAS:
            continue
        name = toks[i + 1].text.upper()
        after = toks[i + 2].text.upper() if i + 2 < len(toks) else ")"
        if after == "UNSIGNED" and name in _INTEGER_TYPE_NAMES:
            after = toks[i + 3].text.upper() if i + 3 < len(toks) else ")"
        if name not in _CAST_TYPE_NAMES or after not in ("(", ")"):
            spelled = " ".join(t.text for t in toks[i + 1 : i + 3])
            raise NotSupportedError(f"filter {text!r}: CAST to {spelled} is not supported")


#: Function calls of the dialect that sqlglot models as binary predicates.
_BINARY_CALLS = (exp.RegexpLike, exp.ArrayContains, exp.ArrayContainsAll)


def enclosing_function(node: exp.Expression) -> exp.Func | None:
    """The function call ``node`` is (somewhere) an argument of, or ``None``: pylance's planner
    hands a call's arguments to DataFusion's SQL planner, which types some of them its own way."""
    parent = node.parent
    while parent is not None:
        # sqlglot models connectives, operators and predicates as functions too: only real
        # function calls count.
        operator = isinstance(parent, exp.Binary | exp.Unary | exp.Connector | exp.Predicate)
        called = isinstance(parent, _BINARY_CALLS)  # functions sqlglot models as operators
        if (
            isinstance(parent, exp.Func)
            and (called or not operator)
            and not isinstance(parent, exp.Cast | exp.Array)
        ):
            return parent
        parent = parent.parent
    return None


def refuse_binary_casts_in_functions(tree: exp.Expression) -> None:
    """Refuse ``CAST(x AS BINARY)`` as a function's argument (``concat(CAST(s AS BINARY))``), as
    pylance's planner refuses it ("Unsupported SQL type BINARY" while parsing the function); at
    the top of an expression, in a comparison or under ``||`` it is taken."""
    for cast in tree.find_all(exp.Cast):  # TryCast is a Cast
        if cast.to.this != exp.DataType.Type.BINARY:
            continue
        function = enclosing_function(cast)
        if function is not None:
            raise NotSupportedError(f"CAST to BINARY as an argument of {function.sql(dialect=LanceSQL)!r}")
