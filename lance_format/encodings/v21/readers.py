"""Page readers: one :class:`PageReader` per 2.1/2.2 page layout, in a registry keyed by its dataclass.

A read looks the reader up once per page (:func:`read_page`). To add a layout: its dataclass in
:mod:`.model`, its parsing in ``_serde``, a module reading it and a ``PageReader`` subclass here
decorated with :func:`register`; ``tests/encodings/test_registry.py`` checks every layout has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from lance_format.core.errors import NotSupportedError
from lance_format.encodings.base import DecodeContext, IOGen, PageInfo, RowRuns
from lance_format.encodings.v21 import model as m
from lance_format.encodings.v21.blob import read_blob
from lance_format.encodings.v21.constant import read_constant
from lance_format.encodings.v21.fullzip import read_fullzip
from lance_format.encodings.v21.miniblock import read_miniblock
from lance_format.encodings.v21.miniblock_merge import can_merge
from lance_format.encodings.v21.page import PageData

__all__ = ["PageReader", "can_merge_pages", "page_reader_for", "read_page", "register", "registered"]

L = TypeVar("L")


class PageReader(Generic[L]):
    """Reads the selected rows of pages of one layout."""

    def read(
        self, ctx: DecodeContext, column: int, page_index: int, page: PageInfo, layout: L, runs: RowRuns
    ) -> IOGen[PageData]:
        """Decoder generator for page-local, sorted, disjoint row ``runs`` of one page."""
        raise NotImplementedError

    def can_merge(self, layout: L) -> bool:
        """Whether takes may read consecutive pages of this layout as one batch."""
        return False


_REGISTRY: dict[type[Any], PageReader[Any]] = {}

R = TypeVar("R", bound=type[PageReader[Any]])


def register(layout: type[Any]) -> Callable[[R], R]:
    """Class decorator: the reader of pages whose layout is the dataclass ``layout``."""

    def add(cls: R) -> R:
        if layout in _REGISTRY:
            raise ValueError(f"{layout.__name__} already has a page reader")
        _REGISTRY[layout] = cls()
        return cls

    return add


def registered() -> Mapping[type[Any], PageReader[Any]]:
    """Every layout type with its reader (read-only)."""
    return MappingProxyType(_REGISTRY)


def page_reader_for(layout: object, path: str = "") -> PageReader[Any]:
    """The reader of pages of ``layout``.

    Raises
    ------
    NotSupportedError
        A layout this reader does not know.
    """
    reader = _REGISTRY.get(type(layout))
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
    reader = page_reader_for(layout, ctx.path)
    return (yield from reader.read(ctx, column, page_index, page, layout, runs))


def can_merge_pages(layout: object) -> bool:
    """Whether takes may read consecutive pages of ``layout`` as one batch (any layout)."""
    reader = _REGISTRY.get(type(layout))
    return reader is not None and reader.can_merge(layout)


@register(m.MiniBlockLayout)
class MiniBlockReader(PageReader[m.MiniBlockLayout]):
    """Small values in independently decodable chunks (:mod:`.miniblock`)."""

    def read(
        self,
        ctx: DecodeContext,
        column: int,
        page_index: int,
        page: PageInfo,
        layout: m.MiniBlockLayout,
        runs: RowRuns,
    ) -> IOGen[PageData]:
        return read_miniblock(ctx, column, page_index, page, layout, runs)

    def can_merge(self, layout: m.MiniBlockLayout) -> bool:
        return can_merge(layout)


@register(m.FullZipLayout)
class FullZipReader(PageReader[m.FullZipLayout]):
    """Large values each behind a control word (:mod:`.fullzip`)."""

    def read(
        self,
        ctx: DecodeContext,
        column: int,
        page_index: int,
        page: PageInfo,
        layout: m.FullZipLayout,
        runs: RowRuns,
    ) -> IOGen[PageData]:
        return read_fullzip(ctx, column, page_index, page, layout, runs)


@register(m.AllNullLayout)
class ConstantReader(PageReader[m.AllNullLayout]):
    """All-null and constant pages (:mod:`.constant`)."""

    def read(
        self,
        ctx: DecodeContext,
        column: int,
        page_index: int,
        page: PageInfo,
        layout: m.AllNullLayout,
        runs: RowRuns,
    ) -> IOGen[PageData]:
        return read_constant(ctx, column, page_index, page, layout, runs)


@register(m.BlobLayout)
class BlobReader(PageReader[m.BlobLayout]):
    """Blob descriptions in an inner layout, the bytes elsewhere (:mod:`.blob`)."""

    def read(
        self,
        ctx: DecodeContext,
        column: int,
        page_index: int,
        page: PageInfo,
        layout: m.BlobLayout,
        runs: RowRuns,
    ) -> IOGen[PageData]:
        return read_blob(ctx, column, page_index, page, layout, runs, read_page)
