"""Zone maps: per-zone min / max / null and NaN counts of one column (pylance's ZONEMAP index).

An index file ``_indices/{uuid}/zonemap.lance`` holds one row per zone with the columns ``min``,
``max`` (the column's type), ``null_count``, ``nan_count`` (uint32), ``fragment_id``,
``zone_start``, ``zone_length`` (uint64) and the schema metadata ``rows_per_zone``. A zone covers
``rows_per_zone`` rows that were live when it was built; ``zone_start`` is the physical offset of
its first row and ``zone_length`` the span up to its last one (rows deleted at build time inside
the span are counted in the span but not in the statistics). Float ``max`` is NaN when the zone
holds a NaN (NaN orders above every number), ``min`` only when every value is NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import CorruptFileError, NotSupportedError
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.table.model import IndexMetadata

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = [
    "DEFAULT_ROWS_PER_ZONE",
    "ZONEMAP_FILE",
    "ZoneMap",
    "build_zonemap",
    "load_zonemap",
    "write_zonemap",
]

#: pylance's default: one zone every two 4096-row batches, small enough to prune well, large
#: enough that the index stays a few KiB per million rows. Overridable by argument or by the
#: setting ``zonemap_rows_per_zone`` (``LANCE_ZONEMAP_DEFAULT_ROWS_PER_ZONE``, pylance's name, too).
DEFAULT_ROWS_PER_ZONE = 8192
ZONEMAP_FILE = "zonemap.lance"
_ROWS_PER_ZONE_KEY = "rows_per_zone"
#: Bytes charged per cached zone map beyond its arrays (Python objects, index metadata).
_ZONEMAP_OVERHEAD_BYTES = 4096

_U32_COLUMNS = ("null_count", "nan_count")
_U64_COLUMNS = ("fragment_id", "zone_start", "zone_length")


@dataclass(frozen=True)
class ZoneMap:
    """The zones of one ZONEMAP index, as arrays (one entry per zone)."""

    index: IndexMetadata
    rows_per_zone: int
    min: pa.Array
    max: pa.Array
    null_count: npt.NDArray[np.int64]
    nan_count: npt.NDArray[np.int64]
    fragment_id: npt.NDArray[np.int64]
    zone_start: npt.NDArray[np.int64]
    zone_length: npt.NDArray[np.int64]

    @property
    def nbytes(self) -> int:
        """Memory held by the arrays."""
        ints = self.null_count.nbytes * 5
        return int(self.min.nbytes + self.max.nbytes + ints)

    @classmethod
    def from_table(cls, index: IndexMetadata, table: pa.Table, where: str) -> ZoneMap:
        """Validate and convert the rows of a ``zonemap.lance`` file."""
        names = set(table.column_names)
        missing = {"min", "max", *_U32_COLUMNS, *_U64_COLUMNS} - names
        if missing:
            raise CorruptFileError(where, f"zone map lacks columns {sorted(missing)}")
        ints = {}
        for name in (*_U32_COLUMNS, *_U64_COLUMNS):
            col = table.column(name)
            if not pa.types.is_integer(col.type) or col.null_count:
                raise CorruptFileError(where, f"zone map column {name!r} is {col.type} with nulls")
            ints[name] = col.to_numpy().astype(np.int64)
        meta = table.schema.metadata or {}
        try:
            rpz = int(meta.get(_ROWS_PER_ZONE_KEY.encode(), DEFAULT_ROWS_PER_ZONE))
        except ValueError:
            raise CorruptFileError(where, "zone map rows_per_zone is not an integer") from None
        return cls(
            index,
            rpz,
            table.column("min").combine_chunks(),
            table.column("max").combine_chunks(),
            ints["null_count"],
            ints["nan_count"],
            ints["fragment_id"],
            ints["zone_start"],
            ints["zone_length"],
        )


def load_zonemap(ds: Snapshot, index: IndexMetadata) -> ZoneMap:
    """The zones of ``index`` (read once per process; index files never change)."""
    store, key = ds.cache.locate(index.base_id, "_indices", f"{index.uuid}/{ZONEMAP_FILE}", ds.bases)
    ckey = (store.uri, "zonemap", key)
    zm: ZoneMap | None = ds.cache.metadata.get(ckey)
    if zm is None:
        size = dict(index.files).get(ZONEMAP_FILE) or None
        table = LanceFileReader(key, store=store, size=size).read_all().to_table()
        zm = ZoneMap.from_table(index, table, f"{store.uri}/{key}")
        ds.cache.metadata.put(ckey, zm, zm.nbytes + _ZONEMAP_OVERHEAD_BYTES)
    return zm


def _zone_stats(values: pa.Array, zone_of: npt.NDArray[np.int64]) -> tuple[pa.Array, pa.Array]:
    """Per-zone ``(min, max)`` with pylance's NaN ordering (rows sorted by zone)."""
    is_float = pa.types.is_floating(values.type)
    nan = pc.is_nan(values).fill_null(False) if is_float else None
    plain = pc.if_else(nan, pa.scalar(None, values.type), values) if nan is not None else values
    grouped = (
        pa.table({"z": zone_of, "v": plain})
        .group_by("z", use_threads=False)
        .aggregate([("v", "min"), ("v", "max")])
        .sort_by("z")
    )
    mins, maxs = grouped.column("v_min").combine_chunks(), grouped.column("v_max").combine_chunks()
    if nan is not None:
        nzones = len(grouped)
        any_nan = np.bincount(zone_of, weights=nan.to_numpy(zero_copy_only=False), minlength=nzones) > 0
        nan_scalar = pa.scalar(float("nan"), values.type)
        maxs = pc.if_else(pa.array(any_nan), nan_scalar, maxs)
        # Only NaNs (and nulls): NaN is also the smallest value there is.
        mins = pc.if_else(
            pa.array(any_nan & pc.is_null(mins).to_numpy(zero_copy_only=False)), nan_scalar, mins
        )
    return mins, maxs


def build_zonemap(ds: Snapshot, column: str, rows_per_zone: int) -> pa.Table:
    """The zone rows of ``column`` over the live rows of every fragment of ``ds``."""
    field = ds.schema.field(column)
    if pa.types.is_nested(field.type) or pa.types.is_dictionary(field.type):
        raise NotSupportedError(f"ZONEMAP indices on {field.type} columns are not supported")
    parts: list[pa.Table] = []
    for frag in ds.manifest.fragments:
        reader = ds.fragment_reader(frag)
        values = reader.read_range([column], 0, frag.physical_rows).column(0).combine_chunks()
        offsets = np.arange(frag.physical_rows, dtype=np.int64)
        keep = reader.keep_mask()
        if keep is not None:
            values, offsets = values.filter(pa.array(keep)), offsets[keep]
        n = len(offsets)
        if n == 0:
            continue
        zone_of = np.arange(n, dtype=np.int64) // rows_per_zone
        firsts = np.arange(0, n, rows_per_zone)
        lasts = np.minimum(firsts + rows_per_zone, n) - 1
        nulls = np.bincount(zone_of, weights=values.is_null().to_numpy(zero_copy_only=False))
        nan: npt.NDArray[np.bool_] = np.zeros(n, bool)
        if pa.types.is_floating(field.type):
            nan = pc.is_nan(values).fill_null(False).to_numpy(zero_copy_only=False)
        nans = np.bincount(zone_of, weights=nan, minlength=len(firsts))
        mins, maxs = _zone_stats(values, zone_of)
        parts.append(
            pa.table(
                {
                    "min": mins.cast(field.type),
                    "max": maxs.cast(field.type),
                    "null_count": pa.array(nulls.astype(np.uint32)),
                    "nan_count": pa.array(nans.astype(np.uint32)),
                    "fragment_id": pa.array(np.full(len(firsts), frag.id, np.uint64)),
                    "zone_start": pa.array(offsets[firsts].astype(np.uint64)),
                    "zone_length": pa.array((offsets[lasts] - offsets[firsts] + 1).astype(np.uint64)),
                }
            )
        )
    schema = _file_schema(field.type, rows_per_zone)
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts).cast(schema)


def _file_schema(value_type: pa.DataType, rows_per_zone: int) -> pa.Schema:
    fields = [pa.field("min", value_type), pa.field("max", value_type)]
    fields += [pa.field(n, pa.uint32(), nullable=False) for n in _U32_COLUMNS]
    fields += [pa.field(n, pa.uint64(), nullable=False) for n in _U64_COLUMNS]
    return pa.schema(fields, metadata={_ROWS_PER_ZONE_KEY: str(rows_per_zone)})


def write_zonemap(ds: Snapshot, index_uuid: str, zones: pa.Table) -> int:
    """Write ``zones`` as ``_indices/{index_uuid}/zonemap.lance``; returns the file size."""
    writer = LanceFileWriter(f"_indices/{index_uuid}/{ZONEMAP_FILE}", zones.schema, store=ds.store)
    if zones.num_rows:
        writer.write_batch(zones)
    writer.close()
    return writer.size
