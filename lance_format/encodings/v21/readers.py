"""Page readers: one :class:`PageReader` per 2.1/2.2 page layout, in a registry keyed by its dataclass.

A read looks the reader up once per page (:func:`read_page`). To add a layout: its dataclass in
:mod:`.model`, its parsing in ``_serde``, a module with its read function, and a ``PageReader``
registered here; ``tests/encodings/test_registry.py`` checks every layout has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from lance_format.core.errors import NotSupportedError
from lance_format.encodings.base import DecodeContext, IOGen, PageInfo, RowRuns
from lance_format.encodings.registry import Registry
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21.blob import read_blob
from lance_format.encodings.v21.constant import read_constant
from lance_format.encodings.v21.fullzip import read_fullzip
from lance_format.encodings.v21.miniblock import read_miniblock
from lance_format.encodings.v21.miniblock_merge import can_merge
from lance_format.encodings.v21.page import PageData

__all__ = ["PageReader", "can_merge_pages", "page_reader_for", "read_page", "register", "registered"]

L = TypeVar("L")


def _never(layout: object) -> bool:
    return False


@dataclass(frozen=True)
class PageReader(Generic[L]):
    """How pages of one layout are read.

    Attributes
    ----------
    read:
        ``(ctx, column, page_index, page, layout, runs)`` -> decoder generator of the page-local,
        sorted, disjoint row ``runs`` of one page.
    can_merge:
        Whether takes may read consecutive pages of a layout as one batch.
    """

    read: Callable[[DecodeContext, int, int, PageInfo, L, RowRuns], IOGen[PageData]]
    can_merge: Callable[[L], bool] = _never


_REGISTRY: Registry[PageReader[Any]] = Registry("a page reader")
_BY_TYPE = _REGISTRY.table  # looked up once per page


def register(layout: type[L], reader: PageReader[L]) -> None:
    """Register the reader of pages whose layout is the dataclass ``layout`` (one per layout)."""
    _REGISTRY.add(layout, reader)


def registered() -> Mapping[type[Any], PageReader[Any]]:
    """Every layout type with its reader (read-only)."""
    return _REGISTRY.view()


def page_reader_for(layout: object, path: str = "") -> PageReader[Any]:
    """The reader of pages of ``layout``.

    Raises
    ------
    NotSupportedError
        A layout this reader does not know.
    """
    reader = _REGISTRY.of(layout)
    if reader is None:
        raise NotSupportedError(f"{path}: page layout {type(layout).__name__} is not supported")
    return reader


def read_page(
    ctx: DecodeContext, column: int, page_index: int, page: PageInfo, runs: RowRuns
) -> IOGen[PageData]:
    """Decoder generator for page-local ``runs`` of one page, whatever its layout.

    Parameters
    ----------
    ctx:
        The file's decode context.
    column, page_index:
        Which page.
    page:
        The page (its ``encoding`` is a 2.1 page layout).
    runs:
        Page-local, sorted, disjoint row runs.

    Returns
    -------
    PageData
        Levels and visible values of the selected rows.

    Raises
    ------
    NotSupportedError
        A layout this reader does not know.
    """
    layout = page.encoding
    reader = _BY_TYPE.get(type(layout)) or page_reader_for(layout, ctx.path)
    return (yield from reader.read(ctx, column, page_index, page, layout, runs))


def can_merge_pages(layout: object) -> bool:
    """Whether takes may read consecutive pages of ``layout`` (any layout) as one batch."""
    reader = _REGISTRY.of(layout)
    return reader is not None and reader.can_merge(layout)


def _read_blob(
    ctx: DecodeContext, column: int, page_index: int, page: PageInfo, layout: m.BlobLayout, runs: RowRuns
) -> IOGen[PageData]:
    # The descriptions are in an inner layout, read through this registry.
    return read_blob(ctx, column, page_index, page, layout, runs, read_page)


register(m.MiniBlockLayout, PageReader(read_miniblock, can_merge))
register(m.FullZipLayout, PageReader(read_fullzip))
register(m.AllNullLayout, PageReader(read_constant))
register(m.BlobLayout, PageReader(_read_blob))
