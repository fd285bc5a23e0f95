"""Small parts of pylance's ``LanceDataset`` surface built on the public methods of ours.

Read-only views (``metadata``, ``schema_metadata``, ``has_index``, ``fragment_ids``), pylance's
deprecated metadata setters, ``slice``, ``truncate_table`` and the static ``drop``. Kept apart so
:mod:`lance_format.dataset.dataset` stays the dataset's core.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_format.core.errors import InvalidInputError, InvalidTypeError, NotFoundError
from lance_format.dataset.tags import Reference
from lance_format.io.store import store_for_uri

if TYPE_CHECKING:
    from lance_format.dataset.delta import DatasetDelta

__all__ = ["PylanceCompatMixin", "check_accepted_sizes"]


def check_accepted_sizes(**sizes: Any) -> None:
    """Refuse a size hint pylance takes that is not a positive integer (``None``: unset).

    These hints (cache and page sizes, the I/O block size) tune pylance's machinery; ours sizes
    its caches by the session's settings, so they only have to be valid.
    """
    for name, value in sizes.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise InvalidTypeError(f"{name} must be an integer, got {value!r}")
        if value <= 0:
            raise InvalidInputError(f"{name} must be positive, got {value}")


class PylanceCompatMixin:
    """``metadata``, ``schema_metadata``, ``has_index``, ``fragment_ids``, ``slice``,
    ``truncate_table``, ``drop`` and the deprecated ``replace_*_metadata`` of pylance's
    ``LanceDataset``, through the dataset's public methods."""

    if TYPE_CHECKING:  # provided by LanceDataset
        manifest: Any

        def __init__(
            self, uri: Any, version: Any = None, storage_options: Any = None, *, session: Any = None
        ) -> None: ...

        def delete(self, predicate: Any) -> dict[str, int]: ...

        @property
        def snapshot(self) -> Any: ...

        def describe_indices(self) -> list[Any]: ...

        def scanner(self, *args: Any, **kwargs: Any) -> Any: ...

        def update_schema_metadata(self, values: dict[str, str | None], *, replace: bool = False) -> Any: ...

        def update_field_metadata(
            self, field_updates: dict[str, dict[str, str | None]], *, replace: bool = False
        ) -> None: ...

    @property
    def metadata(self) -> dict[str, str]:
        """The table metadata of this version (what :meth:`update_metadata` sets)."""
        return dict(self.manifest.table_metadata)

    @property
    def schema_metadata(self) -> dict[str, str]:
        """The schema-level metadata of this version, as strings."""
        return {k: v.decode("utf-8", "replace") for k, v in self.manifest.schema.metadata.items()}

    @property
    def has_index(self) -> bool:
        """Whether this version has any index."""
        return len(self.describe_indices()) > 0

    def fragment_ids(self) -> BitMap:
        """The ids of this version's fragments, as a roaring bitmap (pylance returns its own
        ``Bitmap`` class; ``pyroaring.BitMap`` iterates, tests membership and sizes alike)."""
        return BitMap(f.id for f in self.manifest.fragments)

    def truncate_table(self) -> None:
        """Delete every row, keeping the schema: a new version with no fragments, committed as
        pylance does (a ``Delete`` of every fragment with the predicate ``true``)."""
        self.delete("true")

    @staticmethod
    def drop(
        base_uri: str | os.PathLike[str],
        storage_options: dict[str, str] | None = None,
        ignore_not_found: bool | None = None,
    ) -> None:
        """Delete the dataset at ``base_uri`` and everything else under it.

        Raises :class:`~lance_format.errors.NotFoundError` (a ``FileNotFoundError``, as pylance's
        is an ``OSError``) when nothing is there, unless ``ignore_not_found``.
        """
        uri = os.fspath(base_uri)
        if not isinstance(uri, str):
            raise InvalidTypeError(f"base_uri must be a string or path, got {base_uri!r}")
        store = store_for_uri(uri, storage_options)
        try:
            if not store.delete_all() and not ignore_not_found:
                raise NotFoundError(f"no dataset to drop at {uri}")
        finally:
            store.close()

    def delta(
        self,
        compared_against: int | None = None,
        *,
        begin_version: int | None = None,
        end_version: int | None = None,
    ) -> DatasetDelta:
        """What changed between two versions: ``compared_against`` and this one (in either
        order), or ``begin_version`` (exclusive) to ``end_version`` (inclusive); pylance's
        ``DatasetDelta`` (transactions, inserted and updated rows, deleted row ids).

        Raises :class:`~lance_format.errors.InvalidInputError` (a ``ValueError``, as pylance's)
        when neither form, or only half of the range, is given.
        """
        from lance_format.dataset.delta import DatasetDelta, delta_range

        snap = self.snapshot
        begin, end = delta_range(snap.version, compared_against, begin_version, end_version)
        return DatasetDelta(snap, begin, end)

    def shallow_clone(
        self,
        target_path: str | os.PathLike[str],
        reference: Reference,
        storage_options: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> Self:
        """A new dataset at ``target_path`` whose first version is the version ``reference``
        names (a number, a tag, or ``(branch, version)``), reading this dataset's files in place
        (this root becomes a base path of the clone; no data is copied). Later writes to the clone
        go to its own root. ``kwargs``: pylance's ``dataset()`` arguments for opening the clone."""
        return self._cloned(target_path, reference, storage_options, kwargs, shallow=True)

    def deep_clone(
        self,
        target_path: str | os.PathLike[str],
        reference: Reference,
        storage_options: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> Self:
        """A new, self-contained dataset at ``target_path`` whose first version is the version
        ``reference`` names, with copies of every file that version needs (data, deletion and
        index files). ``kwargs``: pylance's ``dataset()`` arguments for opening the clone."""
        return self._cloned(target_path, reference, storage_options, kwargs, shallow=False)

    def _cloned(
        self,
        target_path: str | os.PathLike[str],
        reference: Reference,
        storage_options: dict[str, str] | None,
        kwargs: dict[str, Any],
        *,
        shallow: bool,
    ) -> Self:
        from lance_format.dataset.clone import clone_dataset

        session = kwargs.pop("session", None) or self.snapshot.session
        check_accepted_sizes(
            **{k: kwargs.pop(k) for k in list(kwargs) if k.endswith(("_size", "_bytes", "block_size"))}
        )
        if kwargs:
            raise InvalidInputError(f"unexpected arguments for the clone: {sorted(kwargs)}")
        clone_dataset(self.snapshot, target_path, reference, storage_options, shallow=shallow)
        return type(self)(os.fspath(target_path), storage_options=storage_options, session=session)

    def replace_schema_metadata(self, new_metadata: dict[str, str | None]) -> None:
        """Replace the schema metadata (deprecated in pylance: ``update_schema_metadata(...,
        replace=True)``)."""
        warnings.warn(
            "replace_schema_metadata is deprecated; use update_schema_metadata(metadata, replace=True)",
            DeprecationWarning,
            stacklevel=2,
        )
        self.update_schema_metadata(new_metadata, replace=True)

    def replace_field_metadata(self, field_name: str, new_metadata: dict[str, str | None]) -> None:
        """Replace one field's metadata (deprecated in pylance: ``update_field_metadata({name:
        metadata}, replace=True)``)."""
        warnings.warn(
            "replace_field_metadata is deprecated; use update_field_metadata({name: metadata}, replace=True)",
            DeprecationWarning,
            stacklevel=2,
        )
        self.update_field_metadata({field_name: new_metadata}, replace=True)

    def slice(self, start: int, end: int, columns: Sequence[str] | dict[str, str] | None = None) -> pa.Table:
        """Rows ``start`` (inclusive) to ``end`` (exclusive) by position, as an offset/limit scan.

        Raises :class:`~lance_format.errors.InvalidInputError` (a ``ValueError``, as pylance's) for
        a negative ``start`` or an ``end`` before it.
        """
        for name, value in (("start", start), ("end", end)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise InvalidTypeError(f"{name} must be an integer, got {value!r}")
        if start < 0:
            raise InvalidInputError(f"start must be non-negative, got {start}")
        if end < start:
            raise InvalidInputError(f"end ({end}) must be >= start ({start})")
        return self.scanner(offset=start, limit=end - start, columns=columns).to_table()
