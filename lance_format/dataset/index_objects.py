"""pylance's ``Index`` / ``IndexFile`` dataclasses: what ``LanceOperation.CreateIndex`` takes from a
distributed index build (the index files are written first, then their metadata is committed)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lance_format.core.errors import InvalidInputError, NotSupportedError
from lance_format.table.model import IndexMetadata

__all__ = ["Index", "IndexDescription", "IndexFile", "IndexSegmentDescription", "index_metadata"]


@dataclass
class IndexFile:
    """One file of an index under ``_indices/{uuid}/`` and its size."""

    path: str
    size_bytes: int


@dataclass
class Index:
    """An index (or index segment) of a dataset, as pylance's ``lance.dataset.Index``.

    Attributes
    ----------
    uuid, name:
        The index's directory (``_indices/{uuid}``) and name.
    fields:
        Field ids the index is keyed on.
    dataset_version:
        The version the index was built on.
    fragment_ids:
        Fragments the index covers: any iterable of ints (a set, a list, a roaring bitmap).
    index_version:
        The index format version.
    created_at, base_id, files:
        Creation time, the base the files live in (multi-base datasets), the files and sizes.
    index_details:
        ``(type_url, bytes)`` of the packed ``google.protobuf.Any`` naming the index kind.
    covering_fields:
        Fields the index only carries (not supported: refused at commit).
    """

    uuid: str
    name: str
    fields: list[int]
    dataset_version: int
    fragment_ids: Any
    index_version: int
    created_at: datetime | None = None
    base_id: int | None = None
    files: list[IndexFile] | None = None
    index_details: tuple[str, bytes] | None = None
    covering_fields: list[int] = field(default_factory=list)


@dataclass
class IndexSegmentDescription:
    """One segment of an index (pylance's ``lance.indices.IndexSegmentDescription``)."""

    uuid: str
    fragment_ids: set[int]
    dataset_version_at_last_update: int
    index_version: int
    created_at: datetime | None
    base_id: int | None
    size_bytes: int | None
    covering_fields: list[int] = field(default_factory=list)


@dataclass
class IndexDescription:
    """An index and its segments, as pylance's ``describe_indices()`` reports it.

    ``num_rows_indexed`` counts the live rows of the fragments that exist and that a segment
    covers; ``total_size_bytes`` sums the segments' files; ``details`` is empty for the kinds
    written here.
    """

    name: str
    type_url: str
    index_type: str
    num_rows_indexed: int
    fields: list[int]
    field_names: list[str]
    segments: list[IndexSegmentDescription]
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def num_segments(self) -> int:
        """How many segments the index has."""
        return len(self.segments)

    @property
    def total_size_bytes(self) -> int:
        """Bytes of every segment's files."""
        return sum(s.size_bytes or 0 for s in self.segments)


def index_metadata(index: Index | IndexMetadata) -> IndexMetadata:
    """The table model's record of ``index`` (an ``IndexMetadata`` passes through)."""
    if isinstance(index, IndexMetadata):
        return index
    if not isinstance(index, Index):
        raise InvalidInputError(
            f"CreateIndex takes lance_format.dataset.Index objects, got {type(index).__name__}"
        )
    if index.covering_fields:
        raise NotSupportedError(f"index {index.name!r}: covering fields (reader feature 128)")
    fragments = _ints(index.fragment_ids, "fragment_ids")
    details_url, details = index.index_details or ("", b"")
    created = index.created_at
    return IndexMetadata(
        uuid=str(index.uuid),
        name=index.name,
        fields=tuple(_ints(index.fields, "fields")),
        dataset_version=int(index.dataset_version),
        fragment_ids=frozenset(fragments),
        details_type_url=details_url,
        details=bytes(details),
        index_version=int(index.index_version),
        created_at_ms=int(created.timestamp() * 1000) if created is not None else None,
        base_id=index.base_id,
        files=tuple((f.path, int(f.size_bytes)) for f in index.files or ()),
    )


def _ints(values: Iterable[Any], what: str) -> list[int]:
    try:
        out = [int(v) for v in values]
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"Index.{what} must be integers: {e}") from e
    if any(v < 0 for v in out):
        raise InvalidInputError(f"Index.{what} must not be negative")
    return out
