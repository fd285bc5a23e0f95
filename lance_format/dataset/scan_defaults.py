"""pylance's ``default_scan_options``: scanner arguments a dataset handle applies to its scans.

``lance_format.dataset(uri, default_scan_options={...})`` takes what pylance 14 takes: a dict keyed
by the names of pylance's ``ScannerBuilder`` methods (``with_row_id``, ``filter``, ``columns``,
``limit``, ``with_fragments`` ...). They apply, as in pylance, to ``scanner``, ``to_table``,
``to_batches``, ``head``, ``slice``, ``count_rows`` with an Expression filter and ``schema`` (which
becomes the scan's projected schema, ``_rowid`` included when asked for), and not to ``take``,
``take_rows``, ``sample``, ``count_rows()`` / ``count_rows("sql")`` nor a fragment's scans. An
argument given to the call wins over its default; ``columns=None`` means "the default columns".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError, InvalidTypeError

__all__ = ["check_default_scan_options", "with_scan_defaults"]

#: pylance's ``ScannerBuilder`` setter -> the ``scanner()`` argument it sets.
_SETTERS: dict[str, str] = {
    "batch_readahead": "batch_readahead",
    "batch_size": "batch_size",
    "batch_size_bytes": "batch_size_bytes",
    "blob_handling": "blob_handling",
    "columns": "columns",
    "disable_scoring_autoprojection": "disable_scoring_autoprojection",
    "fast_search": "fast_search",
    "filter": "filter",
    "fragment_readahead": "fragment_readahead",
    "full_text_search": "full_text_query",
    "include_deleted_rows": "include_deleted_rows",
    "io_buffer_size": "io_buffer_size",
    "late_materialization": "late_materialization",
    "limit": "limit",
    "nearest": "nearest",
    "offset": "offset",
    "order_by": "order_by",
    "prefilter": "prefilter",
    "scan_in_order": "scan_in_order",
    "scan_stats_callback": "scan_stats_callback",
    "strict_batch_size": "strict_batch_size",
    "use_scalar_index": "use_scalar_index",
    "use_stats": "use_stats",
    "with_fragments": "fragments",
    "with_index_segments": "index_segments",
    "with_row_address": "with_row_address",
    "with_row_id": "with_row_id",
}

#: Setters taking several arguments: pylance calls them with a dict value as keywords.
_KEYWORD_SETTERS = frozenset({"nearest", "full_text_search"})


def check_default_scan_options(options: object) -> dict[str, Any] | None:
    """``options`` as a dataset keeps them (a copy; ``None`` for none). Keys and values are checked
    at scan time, as pylance checks them."""
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise InvalidTypeError(f"default_scan_options must be a dict, got {type(options).__name__}")
    return dict(options)


def _defaults(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` as ``scanner()`` arguments."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        target = _SETTERS.get(key)
        if target is None:
            raise InvalidInputError(f"Unknown option {key}")  # pylance's ValueError
        if isinstance(value, dict) and key not in _KEYWORD_SETTERS:
            # pylance calls the setter with the dict as keywords, which its one parameter refuses.
            raise InvalidTypeError(f"default scan option {key} takes a value, not a dict of keywords")
        if key == "order_by" and value is not None and any(isinstance(o, str) for o in value):
            # pylance turns names into orderings only for scanner()'s own order_by.
            raise InvalidTypeError("orderings must be a list of ColumnOrdering. Got <class 'str'> instead.")
        out[target] = value
    return out


def with_scan_defaults(options: dict[str, Any] | None, given: dict[str, Any]) -> dict[str, Any]:
    """``scanner()``'s arguments: those ``given`` (not ``None``) over the defaults of ``options``.

    ``columns`` follows pylance: the call's columns when given, else the default ones.
    """
    if not options:
        return given
    out = _defaults(options)
    before, after = out.get("filter"), given.get("filter")
    if (
        before is not None
        and after is not None
        and isinstance(before, pc.Expression) != isinstance(after, pc.Expression)
    ):
        # pylance keeps a SQL and an Expression filter apart, and refuses to have both.
        raise InvalidInputError("cannot specify both a string filter and a substrait filter")
    out.update({k: v for k, v in given.items() if v is not None})
    return out
