"""A file's columns, each parsed from its metadata on first use.

Opening a file reads its whole metadata section in one request but parses only the footer, the
offset tables and the schema; a column's protobuf, its pages and their encodings are turned into a
:class:`~lance_format.encodings.base.ColumnInfo` the first time a read (or a caller of
:meth:`LanceFileReader.metadata`) asks for it. A take of one column of a wide file, or of a
projection, then pays for the columns it reads only (~50-100 us of Python per column otherwise,
and more after the thread waited on I/O).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar, overload

import numpy as np

from lance_format.core.errors import CorruptFileError
from lance_format.encodings import decode_column_encoding, decode_page_encoding
from lance_format.encodings.base import ColumnInfo, PageInfo
from lance_format.file import _serde
from lance_format.file.format import LanceFileVersion

__all__ = ["ColumnParser", "LazyColumns", "LazyPages", "LazySequence"]

T = TypeVar("T")

# Rows a column may claim in all: row offsets are int64 everywhere.
_MAX_ROWS = np.iinfo(np.int64).max


class ColumnParser:
    """Turns column ``i``'s bytes of a file's metadata section into its :class:`ColumnInfo`.

    Parameters
    ----------
    path:
        The file, for error messages.
    section, section_start:
        The column metadata section and its position in the file.
    entries:
        ``(position, length)`` of every column's metadata (checked to start in the section).
    version:
        The file's format version.
    data_limit:
        Where the footer starts: page buffers must end before it.
    num_rows:
        Rows in the file; every column has as many, except ``nested`` ones (2.0 list items).
    """

    __slots__ = ("data_limit", "entries", "nested", "num_rows", "path", "section", "section_start", "version")

    def __init__(
        self,
        path: str,
        section: bytes,
        section_start: int,
        entries: list[tuple[int, int]],
        version: LanceFileVersion,
        data_limit: int,
        num_rows: int,
    ) -> None:
        self.path = path
        self.section = section
        self.section_start = section_start
        self.entries = entries
        self.version = version
        self.data_limit = data_limit
        self.num_rows = num_rows
        self.nested: frozenset[int] = frozenset()

    def parse(self, index: int) -> ColumnInfo:
        path = self.path
        pos, length = self.entries[index]
        lo = pos - self.section_start
        if lo < 0 or length < 0 or lo + length > len(self.section):
            raise CorruptFileError(path, f"metadata range [{pos}, {pos + length}) is outside the file tail")
        raw = _serde.parse_column_metadata(memoryview(self.section)[lo : lo + length], path, index)
        version = self.version
        limit = self.data_limit
        starts = [0]  # summed in Python: numpy costs more than it saves on a few pages
        for j, p in enumerate(raw.pages):
            for off, sz in zip(p.buffer_offsets, p.buffer_sizes, strict=True):
                if off + sz > limit:
                    raise CorruptFileError(path, f"column {index} page {j} has a buffer outside the file")
            starts.append(starts[-1] + p.length)
        pages: Sequence[PageInfo]
        if len(raw.pages) == 1:
            pages = (_page_info(raw.pages[0], version, path),)
        else:
            # Several pages: each page's layout is parsed when a read first touches that page (a
            # one-row take reads one page of a column of hundreds).
            pages = LazyPages(raw.pages, version, path)
        total = starts[-1]
        if total > _MAX_ROWS:
            raise CorruptFileError(path, f"column {index} claims {total} rows")
        if total != self.num_rows and index not in self.nested:
            raise CorruptFileError(path, f"column {index} has {total} rows, file has {self.num_rows}")
        return ColumnInfo(
            index,
            decode_column_encoding(version, raw.encoding, path),
            pages,
            raw.buffer_offsets,
            raw.buffer_sizes,
            np.array(starts, dtype=np.int64),
        )


def _page_info(p: _serde.RawPage, version: LanceFileVersion, path: str) -> PageInfo:
    return PageInfo(
        p.buffer_offsets,
        p.buffer_sizes,
        p.length,
        p.priority,
        decode_page_encoding(version, p.encoding, path),
    )


class LazySequence(Sequence[T]):
    """Items by index, each made once, when first asked for, by :meth:`_parse` (thread-safe: two
    threads asking at once may both parse, and one result is kept)."""

    __slots__ = ("_done",)

    def __init__(self, size: int) -> None:
        self._done: list[T | None] = [None] * size

    def _parse(self, i: int) -> T:
        """Item ``i`` (``0 <= i < len(self)``), made from its serialized form."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._done)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self._done))))
        item = self._done[index]
        if item is None:
            i = range(len(self._done))[index]
            item = self._parse(i)
            self._done[i] = item
        return item

    def __iter__(self) -> Iterator[T]:
        for i in range(len(self._done)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazySequence | tuple | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"

    @property
    def parsed(self) -> int:
        """How many items have been parsed so far."""
        return sum(item is not None for item in self._done)


class LazyPages(LazySequence[PageInfo]):
    """The pages of a column, each page's layout parsed on first use (see :class:`LazyColumns`)."""

    __slots__ = ("_path", "_raw", "_version")

    def __init__(self, raw: list[_serde.RawPage], version: LanceFileVersion, path: str) -> None:
        super().__init__(len(raw))
        # A page's serialized form is dropped once parsed: a cached reader keeps one or the other.
        self._raw: list[_serde.RawPage | None] = list(raw)
        self._version = version
        self._path = path

    def _parse(self, i: int) -> PageInfo:
        raw = self._raw[i]
        if raw is None:  # parsed by another thread since the caller looked
            return self[i]
        page = _page_info(raw, self._version, self._path)
        self._done[i] = page
        self._raw[i] = None
        return page


class LazyColumns(LazySequence[ColumnInfo]):
    """The columns of a file by index, each parsed once, when first asked for (thread-safe: two
    threads asking at once may both parse, and one result is kept)."""

    __slots__ = ("parser",)

    def __init__(self, parser: ColumnParser) -> None:
        super().__init__(len(parser.entries))
        self.parser = parser

    def _parse(self, i: int) -> ColumnInfo:
        return self.parser.parse(i)
