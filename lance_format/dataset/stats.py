"""``ds.stats`` and ``ds.validate()``: what a version holds and whether its files agree with it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from lance_format.core.errors import CorruptFileError, InvalidInputError

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot
    from lance_format.table.model import DataFragment

__all__ = ["DataStatistics", "DatasetStats", "FieldStatistics", "LanceStats", "validate"]

#: pylance's default ``max_rows_per_group``: fragments with fewer rows count as small files.
DEFAULT_MAX_ROWS_PER_GROUP = 1024


class DatasetStats(TypedDict):
    """pylance's ``DatasetStats`` (a dict)."""

    num_deleted_rows: int
    num_fragments: int
    num_small_files: int


@dataclass(frozen=True)
class FieldStatistics:
    """Bytes one field's column occupies in the data files."""

    id: int
    bytes_on_disk: int


@dataclass(frozen=True)
class DataStatistics:
    """Per-field storage statistics, in schema order (pylance's ``DataStatistics``)."""

    fields: list[FieldStatistics]


class LanceStats:
    """pylance's ``ds.stats`` namespace."""

    def __init__(self, ds: Snapshot) -> None:
        self._ds = ds

    def dataset_stats(self, max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP) -> DatasetStats:
        """Deleted rows, fragments, and fragments of fewer than ``max_rows_per_group`` rows."""
        if isinstance(max_rows_per_group, bool) or not isinstance(max_rows_per_group, int):
            raise InvalidInputError(f"max_rows_per_group must be an integer, got {max_rows_per_group!r}")
        frags = self._ds.manifest.fragments
        return {
            "num_deleted_rows": sum(f.num_deleted_rows for f in frags),
            "num_fragments": len(frags),
            "num_small_files": sum(1 for f in frags if f.physical_rows < max_rows_per_group),
        }

    def data_stats(self) -> DataStatistics:
        """Bytes on disk of every field (children included, in schema order): the page and column
        buffers of its column in each data file, as pylance counts them."""
        ds = self._ds
        sizes = {f.id: 0 for f in ds.lance_schema.walk()}
        for frag in ds.manifest.fragments:
            for df in frag.files:
                columns = ds.data_file_reader(df).metadata().columns
                for field_id, col in zip(df.fields, df.column_indices, strict=False):
                    if field_id not in sizes or not 0 <= col < len(columns):
                        continue
                    info = columns[col]
                    sizes[field_id] += sum(info.buffer_sizes) + sum(sum(p.buffer_sizes) for p in info.pages)
        return DataStatistics([FieldStatistics(fid, n) for fid, n in sizes.items()])


def validate(ds: Snapshot) -> None:
    """Check that the version's files agree with its manifest; raise :class:`CorruptFileError`.

    Checks fragment ids are unique, every data file opens and holds the fragment's physical rows,
    and deletion files only name rows that exist.
    """
    seen: set[int] = set()
    for frag in ds.manifest.fragments:
        if frag.id in seen:
            raise CorruptFileError(ds.uri, f"fragment id {frag.id} appears twice in version {ds.version}")
        seen.add(frag.id)
        _validate_fragment(ds, frag)


def _validate_fragment(ds: Snapshot, frag: DataFragment) -> None:
    for df in frag.files:
        meta = ds.data_file_reader(df, cached=False).metadata()
        rows = meta.num_rows
        if rows != frag.physical_rows:
            raise CorruptFileError(
                f"{ds.uri}/data/{df.path}",
                f"fragment {frag.id}'s file has {rows} rows, the manifest says {frag.physical_rows}",
            )
        if df.file_size_bytes and meta.file_size != df.file_size_bytes:
            raise CorruptFileError(
                f"{ds.uri}/data/{df.path}",
                f"the file has {meta.file_size} bytes, the manifest says {df.file_size_bytes}",
            )
    deleted = ds.deleted_offsets(frag)
    if len(deleted) and int(deleted[-1]) >= frag.physical_rows:
        raise CorruptFileError(
            ds.uri, f"fragment {frag.id} deletes row {int(deleted[-1])} of {frag.physical_rows}"
        )
