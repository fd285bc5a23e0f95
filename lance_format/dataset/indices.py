"""The indices of a dataset version: reading the index section, creating ZONEMAP indices."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lance_format.core.errors import (
    ColumnNotFoundError,
    IndexNotFoundError,
    InvalidInputError,
    InvalidTypeError,
    NotSupportedError,
)
from lance_format.table import index_section_from_bytes, zonemap_details_to_bytes
from lance_format.table.commit import commit_transaction
from lance_format.table.model import CreateIndex, IndexMetadata, Manifest, Transaction
from lance_format.table.naming import manifest_key
from lance_format.table.versions import read_index_section

if TYPE_CHECKING:
    from lance_format.dataset.index_objects import IndexDescription
    from lance_format.dataset.snapshot import Snapshot

__all__ = [
    "ZONEMAP_TYPE_URL",
    "create_scalar_index",
    "dataset_indices",
    "describe_indices",
    "index_descriptions",
]

#: ``google.protobuf.Any`` type of zone map details, as pylance writes it.
ZONEMAP_TYPE_URL = "/lance.table.ZoneMapIndexDetails"
#: Index kind pylance 14 stores for zone maps; newer readers key on the details type.
ZONEMAP_INDEX_VERSION = 0
#: Bytes charged per cached index entry (Python objects of the dataclass and its bitmap).
_INDEX_CHARGE_BYTES = 1024


def dataset_indices(ds: Snapshot) -> tuple[IndexMetadata, ...]:
    """The indices recorded in ``ds``'s version (its index section is read once per process)."""
    m = ds.manifest
    if m.index_section is None:
        return ()
    key = manifest_key(m.version, ds.naming)
    ckey = (ds.store.uri, "index_section", key, m.timestamp_ns)
    cached: tuple[IndexMetadata, ...] | None = ds.cache.metadata.get(ckey)
    if cached is None:
        data = read_index_section(ds.store, m, ds.naming)
        cached = index_section_from_bytes(data, f"{ds.store.uri}/{key}") if data else ()
        ds.cache.metadata.put(ckey, cached, _INDEX_CHARGE_BYTES * (len(cached) + 1))
    return cached


def drop_index(ds: Snapshot, name: str) -> Manifest:
    """Commit ``ds`` without the index called ``name`` (every segment of it): a ``CreateIndex``
    that only removes, as pylance records ``drop_index``; the new manifest."""
    if not isinstance(name, str):
        raise InvalidTypeError(f"an index is named by a string, not {name!r}")
    dropped = tuple(i for i in dataset_indices(ds) if i.name == name)
    if not dropped:
        raise IndexNotFoundError(f"{ds.uri}: no index named {name!r}")
    txn = Transaction(ds.version, str(uuid.uuid4()), CreateIndex((), dropped))
    return replace(commit_transaction(ds.store, txn, ds.manifest, ds.naming), index_section_bytes=None)


def describe_indices(ds: Snapshot) -> list[dict[str, Any]]:
    """pylance's ``list_indices()`` entries: name, type, uuid, fields, version, fragment_ids; by
    name, as pylance orders them (segments of one name in manifest order)."""
    paths = {f.id: f.name for f in ds.lance_schema.walk()}
    return [
        {
            "name": i.name,
            "type": i.kind,
            "uuid": i.uuid,
            "fields": [paths.get(f, str(f)) for f in i.fields],
            "version": i.dataset_version,
            "fragment_ids": set(i.fragment_ids),
            "base_id": i.base_id,
        }
        for i in sorted(dataset_indices(ds), key=lambda i: i.name)
    ]


def index_descriptions(ds: Snapshot) -> list[IndexDescription]:
    """pylance's ``describe_indices()``: one entry per index name, by name as pylance orders
    them, its segments in manifest order."""
    from lance_format.dataset.index_objects import IndexDescription, IndexSegmentDescription

    paths = {f.id: f.name for f in ds.lance_schema.walk()}
    live = {f.id: f.physical_rows - f.num_deleted_rows for f in ds.manifest.fragments}
    by_name: dict[str, list[IndexMetadata]] = {}
    for i in sorted(dataset_indices(ds), key=lambda i: i.name):
        by_name.setdefault(i.name, []).append(i)
    out = []
    for name, segs in by_name.items():
        first = segs[0]
        covered = set().union(*(s.fragment_ids for s in segs))
        out.append(
            IndexDescription(
                name=name,
                type_url=first.details_type_url,
                index_type=first.kind,
                num_rows_indexed=sum(live.get(f, 0) for f in covered),
                fields=list(first.fields),
                field_names=[paths.get(f, str(f)) for f in first.fields],
                segments=[
                    IndexSegmentDescription(
                        uuid=s.uuid,
                        fragment_ids=set(s.fragment_ids),
                        dataset_version_at_last_update=s.dataset_version,
                        index_version=s.index_version or 0,
                        created_at=None
                        if s.created_at_ms is None
                        else datetime.fromtimestamp(s.created_at_ms / 1000, UTC),
                        base_id=s.base_id,
                        size_bytes=sum(size for _, size in s.files) if s.files else None,
                    )
                    for s in segs
                ],
            )
        )
    return out


_KINDS = {"ZONEMAP": "ZoneMap", "BTREE": "BTree", "BITMAP": "Bitmap"}


def _index_name(ds: Snapshot, column: str, kind: str, name: str | None, replace_existing: bool) -> str:
    """The name of a new index: ``name``, else ``{column}_idx``; as pylance 14.0.2 does, when that
    default names an index of another kind and nothing is replaced, ``{column}_idx_2`` (``_3``...)."""
    if name:
        return name
    base = f"{column}_idx"
    if replace_existing:
        return base
    taken = {i.name: i.kind for i in dataset_indices(ds)}
    if base not in taken or taken[base] == _KINDS[kind]:
        return base
    k = 2
    while f"{base}_{k}" in taken and taken[f"{base}_{k}"] != _KINDS[kind]:
        k += 1
    return f"{base}_{k}"


def create_scalar_index(
    ds: Snapshot,
    column: str,
    index_type: str,
    name: str | None,
    replace_existing: bool,
    rows_per_zone: int | None,
    scan: Callable[..., Any],
) -> Manifest:
    """Build a ZONEMAP, BTREE or BITMAP index over ``column`` and commit it; the new manifest.

    ``scan`` makes a scanner of ``ds`` from scanner keyword arguments (``columns``,
    ``with_row_id``): BTREE and BITMAP builds read the column through it. The caller passes it so
    this module, which the scan planner reads indices through, does not import the scanner.
    """
    from lance_format.dataset.zonemap import build_zonemap, write_zonemap

    kind = str(index_type).upper()
    if kind not in ("ZONEMAP", "BTREE", "BITMAP"):
        raise NotSupportedError(f"index type {index_type!r} is not supported; ZONEMAP, BTREE and BITMAP are")
    if isinstance(column, list | tuple) and not all(isinstance(c, str) for c in column):
        raise InvalidTypeError(f"columns to index are named by strings, got {column!r}")
    if isinstance(column, list | tuple | dict) or (isinstance(column, str) and column not in ds.schema.names):
        # pylance looks the names up in the schema: KeyError
        raise ColumnNotFoundError(f"no column {column!r} to index; columns are {ds.schema.names}")
    if not isinstance(column, str):
        raise InvalidTypeError(f"the column to index is named by a string, not {column!r}")
    if kind != "ZONEMAP":
        if rows_per_zone is not None:
            raise InvalidInputError("rows_per_zone is for ZONEMAP indices")
        from lance_format.dataset.scalar_index.search import build_index

        name = _index_name(ds, column, kind, name, replace_existing)
        existing = [i for i in dataset_indices(ds) if i.name == name]
        if existing and not replace_existing:
            raise InvalidInputError(f"index {name!r} already exists (pass replace=True to rebuild it)")
        index = build_index(ds, column, kind, name, scan)
        txn = Transaction(ds.version, str(uuid.uuid4()), CreateIndex((index,), tuple(existing)))
        return replace(commit_transaction(ds.store, txn, ds.manifest, ds.naming), index_section_bytes=None)
    rpz = ds.session.setting("zonemap_rows_per_zone") if rows_per_zone is None else rows_per_zone
    if isinstance(rpz, bool) or not isinstance(rpz, int) or rpz <= 0:
        raise InvalidInputError(f"rows_per_zone must be a positive integer, got {rows_per_zone!r}")
    name = _index_name(ds, column, kind, name, replace_existing)
    existing = [i for i in dataset_indices(ds) if i.name == name]
    if existing and not replace_existing:
        raise InvalidInputError(f"index {name!r} already exists (pass replace=True to rebuild it)")
    field_id = ds.lance_schema.field_by_name(column).id
    zones = build_zonemap(ds, column, rpz)
    ident = str(uuid.uuid4())
    size = write_zonemap(ds, ident, zones)
    index = IndexMetadata(
        uuid=ident,
        name=name,
        fields=(field_id,),
        dataset_version=ds.version,
        fragment_ids=frozenset(f.id for f in ds.manifest.fragments),
        details_type_url=ZONEMAP_TYPE_URL,
        details=zonemap_details_to_bytes(rpz),
        index_version=ZONEMAP_INDEX_VERSION,
        created_at_ms=time.time_ns() // 1_000_000,
        files=(("zonemap.lance", size),),
    )
    txn = Transaction(ds.version, str(uuid.uuid4()), CreateIndex((index,), tuple(existing)))
    new = commit_transaction(ds.store, txn, ds.manifest, ds.naming)
    return replace(new, index_section_bytes=None)
