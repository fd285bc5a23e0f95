"""Config and metadata updates: table config, table metadata, schema metadata, field metadata.

Each commits one ``UpdateConfig`` transaction as pylance writes it (an ``UpdateMap`` per map, with
its ``replace`` flag), planned again on the latest version when a concurrent commit changed a key
in common.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from lance_format.core.errors import InvalidInputError, InvalidTypeError
from lance_format.dataset.mutate import with_retries
from lance_format.table.commit import commit_transaction
from lance_format.table.model import Manifest, Transaction, UpdateConfig, UpdateMap

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["update_field_metadata", "update_map"]

#: The maps :func:`update_map` changes, by pylance's method name.
MAPS = ("config", "table_metadata", "schema_metadata")


def _check(values: dict[str, str | None], what: str) -> dict[str, str | None]:
    if not isinstance(values, dict):
        raise InvalidTypeError(f"{what} updates must be a dict, got {type(values).__name__}")
    for k, v in values.items():
        if not isinstance(k, str) or not (v is None or isinstance(v, str)):
            raise InvalidTypeError(f"{what} keys and values must be strings (or None), got {k!r}: {v!r}")
    return dict(values)


def _commit(ds: Snapshot, op: UpdateConfig) -> Manifest:
    def attempt(current: Snapshot) -> Manifest:
        txn = Transaction(current.version, str(uuid.uuid4()), op)
        return commit_transaction(current.store, txn, current.manifest, current.naming)

    return with_retries(ds, attempt)


def update_map(ds: Snapshot, which: str, values: dict[str, str | None], replace: bool) -> Manifest:
    """Commit upserts (str) and deletions (``None``) to one of :data:`MAPS`."""
    if which not in MAPS:
        raise InvalidInputError(f"unknown map {which!r}; one of {MAPS}")
    updates = _check(values, which)
    if which == "config":
        op = UpdateConfig(updates, bool(replace))
    elif which == "table_metadata":
        op = UpdateConfig({}, table_metadata_updates=UpdateMap(updates, bool(replace)))
    else:
        op = UpdateConfig({}, schema_metadata_updates=UpdateMap(updates, bool(replace)))
    return _commit(ds, op)


def update_field_metadata(
    ds: Snapshot, field_updates: dict[str, dict[str, str | None]], replace: bool
) -> Manifest:
    """Commit metadata updates of fields, by name or by path into nested fields (``"s.x"``)."""
    if not isinstance(field_updates, dict):
        raise InvalidTypeError(f"field_updates must be a dict, got {type(field_updates).__name__}")
    by_id: dict[int, UpdateMap] = {}
    for name, values in field_updates.items():
        try:
            fid = ds.lance_schema.field_by_path(name).id
        except (KeyError, ValueError) as e:
            raise InvalidInputError(f"no field {name!r} in the schema") from e
        by_id[fid] = UpdateMap(_check(values, f"field {name!r} metadata"), bool(replace))
    return _commit(ds, UpdateConfig({}, field_metadata_updates=by_id))
