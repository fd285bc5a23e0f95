"""``LanceDataset``: one version of a Lance table, with reads, takes, deletes, versions and tags."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds

from lance_format.core.errors import (
    DatasetNotFoundError,
    InvalidInputError,
    InvalidTypeError,
    NotFoundError,
    OutOfRangeError,
)
from lance_format.core.types import LanceSchema
from lance_format.dataset import write
from lance_format.dataset.arrow_dataset import ArrowDatasetMixin, check_arrow_options
from lance_format.dataset.cache import cached_manifest
from lance_format.dataset.cleanup import CleanupStats
from lance_format.dataset.compact import Optimize
from lance_format.dataset.compat import PylanceCompatMixin
from lance_format.dataset.filters import Filter
from lance_format.dataset.fragment import ReaderCache
from lance_format.dataset.lance_fragment import LanceFragment
from lance_format.dataset.multibase import check_base_store_params
from lance_format.dataset.operations import (
    Committable,
    Target,
    commit_batch_operations,
    commit_operation,
)
from lance_format.dataset.operations import Transaction as PlannedTransaction
from lance_format.dataset.scan_defaults import check_default_scan_options, with_scan_defaults
from lance_format.dataset.scanner import LanceScanner
from lance_format.dataset.session import Session
from lance_format.dataset.snapshot import Snapshot, reader_cache
from lance_format.dataset.tags import Tags
from lance_format.dataset.take import (
    as_u64,
    logical_to_addresses,
    stable_ids_to_addresses,
    take_addresses,
    take_computed,
)
from lance_format.io.store import ObjectStore
from lance_format.table.flags import STABLE_ROW_IDS
from lance_format.table.model import DataFile, Manifest, Transaction
from lance_format.table.naming import ManifestNaming
from lance_format.table.versions import VersionInfo, read_transaction

if TYPE_CHECKING:
    from lance_format.dataset.evolve import ColumnsToAdd
    from lance_format.dataset.index_objects import IndexDescription
    from lance_format.dataset.merge_insert import MergeInsertBuilder
    from lance_format.dataset.multibase import DatasetBasePath
    from lance_format.dataset.stats import LanceStats
    from lance_format.file import LanceFileReader

__all__ = ["LanceDataset", "LanceFragment"]


def _check_retries(conflict_retries: object, retry_timeout: object) -> None:
    if isinstance(conflict_retries, bool) or not isinstance(conflict_retries, int) or conflict_retries < 0:
        raise InvalidInputError(f"conflict_retries must be a non-negative integer, got {conflict_retries!r}")
    if not isinstance(retry_timeout, timedelta):
        raise InvalidTypeError(f"retry_timeout must be a datetime.timedelta, got {retry_timeout!r}")


class LanceDataset(PylanceCompatMixin, ArrowDatasetMixin, pds.Dataset):  # type: ignore[misc]
    """A Lance dataset pinned to one version.

    Also a ``pyarrow.dataset.Dataset``: DuckDB, DataFusion and Polars query it with projections and
    filters pushed down into :meth:`scanner` (zone maps apply).

    Parameters
    ----------
    uri:
        Local path, ``file://`` or ``memory://`` URI of the dataset root.
    version:
        Version number or tag name; the latest version when omitted.
    storage_options:
        Options for the object store.
    default_scan_options:
        pylance's scanner defaults for this handle (see :mod:`lance_format.dataset.scan_defaults`).
    base_store_params:
        Object-store options by base path URI, for the stores of those bases (they replace
        ``storage_options`` there), as pylance's.
    """

    def __init__(
        self,
        uri: str | os.PathLike[str],
        version: int | str | None = None,
        storage_options: dict[str, str] | None = None,
        *,
        store: ObjectStore | None = None,
        manifest: Manifest | None = None,
        naming: ManifestNaming | None = None,
        cache: ReaderCache | None = None,
        snapshot: Snapshot | None = None,
        session: Session | None = None,
        default_scan_options: dict[str, Any] | None = None,
        base_store_params: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self._default_scan_options = check_default_scan_options(default_scan_options)
        params = check_base_store_params(base_store_params)
        if snapshot is None:
            uri = os.fspath(uri)
            if manifest is None or naming is None:
                snapshot = Snapshot.open(
                    uri,
                    version,
                    storage_options,
                    store=store,
                    cache=cache,
                    session=session,
                    base_store_params=params,
                )
            else:
                store = store or (session or Session.default()).store_for(uri, storage_options)
                cache = cache or reader_cache(store, storage_options, session, params)
                snapshot = Snapshot(uri, store, manifest, naming, cache, storage_options, session)
        self._snapshot = snapshot
        self.uri = snapshot.uri

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> LanceDataset:
        """The facade over ``snapshot``."""
        return cls(snapshot.uri, snapshot=snapshot)

    @property
    def snapshot(self) -> Snapshot:
        """The pinned version this handle reads now (swapped when this handle commits)."""
        return self._snapshot

    @property
    def session(self) -> Session:
        """The session whose caches and object stores serve this dataset."""
        return self._snapshot.session

    @property
    def manifest(self) -> Manifest:
        """The manifest of the version this handle reads."""
        return self._snapshot.manifest

    # -- metadata --------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The version this object reads."""
        return self.manifest.version

    @property
    def latest_version(self) -> int:
        """The newest committed version (one listing of ``_versions/``)."""
        latest = VersionInfo(self.store).latest
        if latest is None:
            raise DatasetNotFoundError(f"{self.uri}: dataset not found")
        return latest

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of this version; with ``default_scan_options``, the schema of a scan
        with them (``_rowid`` included when they ask for it), as pylance's."""
        if self._default_scan_options is None:
            return self._snapshot.schema
        return self.scanner().projected_schema

    @property
    def lance_schema(self) -> LanceSchema:
        """The Lance field tree (with field ids) of this version."""
        return self.manifest.schema

    @property
    def data_storage_version(self) -> str:
        """File format version of the data files (``"2.0"``, ``"2.1"`` ...)."""
        return self.manifest.data_format.version

    @property
    def max_field_id(self) -> int:
        """The largest field id in the schema."""
        return self.manifest.schema.max_field_id

    @property
    def has_stable_row_ids(self) -> bool:
        """Whether rows carry stable ids (``enable_stable_row_ids=True``)."""
        return bool(self.manifest.reader_feature_flags & STABLE_ROW_IDS)

    @property
    def tags(self) -> Tags:
        """Named versions of this dataset (create, delete, update, list)."""
        return Tags(self._snapshot)

    @property
    def store(self) -> ObjectStore:
        """The object store holding the dataset."""
        return self._snapshot.store

    def config(self) -> dict[str, str]:
        """The table config key/value pairs of this version."""
        return dict(self.manifest.config)

    def get_version(self) -> dict[str, Any]:
        """This version's entry of :meth:`versions` (number, timestamp, totals), read from the
        manifest already loaded, as pylance's ``get_version``."""
        return _version_entry(self.manifest)

    def versions(self) -> list[dict[str, Any]]:
        """Every version with its timestamp and totals, oldest first (pylance's shape)."""
        info = VersionInfo(self.store)
        out = []
        for v in sorted(info.entries):
            key, size = info.entries[v]
            m = cached_manifest(self.store, v, key, size, info.tags.get(v), self._snapshot.cache.metadata)
            out.append(_version_entry(m))
        return out

    def checkout_version(self, version: int | str) -> LanceDataset:
        """The dataset at another version (number or tag), with this handle's scan defaults."""
        snapshot = self._snapshot.at_version(version)
        return LanceDataset(snapshot.uri, snapshot=snapshot, default_scan_options=self._default_scan_options)

    def checkout_latest(self) -> LanceDataset:
        """The dataset at its newest version."""
        return self.checkout_version(self.latest_version)

    def get_fragments(self, filter: Filter | None = None) -> list[LanceFragment]:
        """The fragments of this version, in order.

        ``filter`` is accepted as pyarrow's is: fragments are not partitioned by value, so every
        fragment may hold matching rows and all are returned (scans still prune by zone maps).
        """
        return [LanceFragment(self, f) for f in self.manifest.fragments]

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
        """The fragment with ``fragment_id``, or ``None``."""
        if isinstance(fragment_id, bool) or not isinstance(fragment_id, int | np.integer):
            raise InvalidTypeError(f"fragment ids are integers, not {fragment_id!r}")
        if not 0 <= fragment_id < 2**64:
            raise OutOfRangeError(f"fragment ids are unsigned 64-bit integers, got {fragment_id}")
        for f in self.manifest.fragments:
            if f.id == fragment_id:
                return LanceFragment(self, f)
        return None

    # -- reading ---------------------------------------------------------------------------------
    def scanner(
        self,
        columns: Sequence[str] | dict[str, str] | None = None,
        filter: Filter | None = None,
        limit: int | None = None,
        offset: int | None = None,
        batch_size: int | None = None,
        with_row_id: bool | None = None,
        with_row_address: bool | None = None,
        fragments: Sequence[LanceFragment] | None = None,
        use_scalar_index: bool | None = None,
        **arrow_options: Any,
    ) -> LanceScanner:
        """A scan of this version; see :meth:`to_table` for the parameters.

        Also takes pylance's options (see :mod:`lance_format.dataset.scan_options`): ``order_by``
        (``ColumnOrdering`` or names), ``strict_batch_size``, ``include_deleted_rows`` (with
        ``with_row_id``; deleted rows get null ``_rowid`` / ``_rowaddr``), and the tuning options
        ``scan_in_order``, ``prefilter``, ``late_materialization``, ``batch_readahead``,
        ``fragment_readahead``, ``io_buffer_size``, which do not change results. ``columns`` may
        name ``_rowid`` and ``_rowaddr``. pyarrow's scan tuning options (``use_threads`` ...) are
        accepted and ignored: our scanner has its own read-ahead.
        """
        given = dict(
            columns=columns,
            filter=filter,
            limit=limit,
            offset=offset,
            batch_size=batch_size,
            with_row_id=with_row_id,
            with_row_address=with_row_address,
            fragments=fragments,
            use_scalar_index=use_scalar_index,
            **arrow_options,
        )
        kwargs = with_scan_defaults(self._default_scan_options, given)
        frags = kwargs.pop("fragments", None)
        if frags is not None:
            frags = [f.fragment for f in frags]
        return LanceScanner.open(self._snapshot, fragments=frags, **kwargs)

    def to_table(
        self,
        columns: Sequence[str] | dict[str, str] | None = None,
        filter: Filter | None = None,
        limit: int | None = None,
        offset: int | None = None,
        batch_size: int | None = None,
        with_row_id: bool | None = None,
        with_row_address: bool | None = None,
        fragments: Sequence[LanceFragment] | None = None,
        use_scalar_index: bool | None = None,
        **arrow_options: Any,
    ) -> pa.Table:
        """Read rows as one table.

        Parameters
        ----------
        columns:
            Column names to read (all when omitted), or ``{name: SQL expression}``.
        filter:
            SQL-style predicate string or pyarrow compute Expression.
        limit, offset:
            Rows to return and rows to skip (after filtering).
        batch_size:
            Rows per internal batch.
        with_row_id, with_row_address:
            Add ``_rowid`` / ``_rowaddr`` (``uint64``) columns.
        fragments:
            Scan only these fragments.
        use_scalar_index:
            Let scalar indices skip row ranges that cannot match ``filter`` (results are the
            same either way; only the bytes read differ); on unless ``False``.
        arrow_options:
            pylance's further scan options and pyarrow's tuning options (see :meth:`scanner`).
        """
        return self.scanner(
            columns,
            filter,
            limit,
            offset,
            batch_size,
            with_row_id,
            with_row_address,
            fragments,
            use_scalar_index=use_scalar_index,
            **arrow_options,
        ).to_table()

    def to_batches(self, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        """Stream batches; takes the parameters of :meth:`to_table`."""
        return self.scanner(**kwargs).to_batches()

    def count_rows(self, filter: Filter | None = None, **arrow_options: Any) -> int:
        """Live rows (matching ``filter`` when given).

        As pylance, ``default_scan_options`` apply to a count with a pyarrow Expression filter
        only (pylance scans for it; it counts SQL filters natively, without them).
        """
        check_arrow_options(arrow_options)
        if filter is None:
            return self.manifest.num_rows
        if isinstance(filter, pc.Expression):
            return self.scanner(columns=[], filter=filter).count_rows()
        return LanceScanner.open(self._snapshot, columns=[], filter=filter).count_rows()

    def head(self, num_rows: int, **kwargs: Any) -> pa.Table:
        """The first ``num_rows`` rows (takes the other parameters of :meth:`to_table`)."""
        return self.scanner(limit=num_rows, **kwargs).to_table()

    def take(
        self,
        indices: Sequence[int] | npt.ArrayLike,
        columns: Sequence[str] | dict[str, str] | None = None,
        *,
        with_row_id: bool = False,
        with_row_address: bool = False,
        **arrow_options: Any,
    ) -> pa.Table:
        """Rows at logical offsets (deleted rows skipped), in the order given; repeats allowed.

        ``columns`` names columns or struct members (``"s.x"`` brings ``s`` with that member), or
        maps output names to SQL expressions (``{"twice": "id * 2"}``).
        """
        check_arrow_options(arrow_options)
        addresses = logical_to_addresses(self._snapshot, as_u64(indices, "indices"))
        if isinstance(columns, dict):
            return take_computed(
                self._snapshot, addresses, columns, with_row_id=with_row_id, with_row_address=with_row_address
            )
        return take_addresses(
            self._snapshot, addresses, columns, with_row_id=with_row_id, with_row_address=with_row_address
        )

    def take_rows(
        self,
        row_ids: Sequence[int] | npt.ArrayLike,
        columns: Sequence[str] | dict[str, str] | None = None,
        *,
        with_row_id: bool = False,
        with_row_address: bool = False,
    ) -> pa.Table:
        """Rows by row id (stable ids when enabled, else addresses ``frag << 32 | offset``).

        Deleted rows are left out; the rest come back in the order given, repeats included.
        """
        ids = as_u64(row_ids, "row ids")
        if self.has_stable_row_ids:
            ids = stable_ids_to_addresses(self._snapshot, ids)
        if isinstance(columns, dict):
            return take_computed(
                self._snapshot, ids, columns, with_row_id=with_row_id, with_row_address=with_row_address
            )
        return take_addresses(
            self._snapshot, ids, columns, with_row_id=with_row_id, with_row_address=with_row_address
        )

    _take_rows = take_rows

    # -- indices ---------------------------------------------------------------------------------
    def list_indices(self) -> list[dict[str, Any]]:
        """The indices of this version (pylance's ``list_indices`` shape)."""
        from lance_format.dataset.indices import describe_indices

        return describe_indices(self._snapshot)

    def describe_indices(self) -> list[IndexDescription]:
        """The indices of this version with their segments (pylance's ``describe_indices``)."""
        from lance_format.dataset.indices import index_descriptions

        return index_descriptions(self._snapshot)

    def drop_index(self, name: str) -> None:
        """Drop the index called ``name`` (all its segments; a new version), as pylance's; a
        missing name raises :class:`~lance_format.errors.IndexNotFoundError`."""
        from lance_format.dataset.indices import drop_index

        self.adopt(drop_index(self._snapshot, name))

    def create_scalar_index(
        self,
        column: str,
        index_type: str = "ZONEMAP",
        name: str | None = None,
        *,
        replace: bool = True,
        rows_per_zone: int | None = None,
    ) -> None:
        """Build a scalar index over ``column`` and commit it as a new version.

        Parameters
        ----------
        column:
            Top-level column to index.
        index_type:
            ``"ZONEMAP"``: per-zone min / max / null and NaN counts, which filtered scans (here and
            in pylance) use to skip zones that cannot match.
        name:
            Index name (``"{column}_idx"`` when omitted).
        replace:
            Replace an index of the same name (else that is an error).
        rows_per_zone:
            Live rows per zone (8192, or ``LANCE_ZONEMAP_DEFAULT_ROWS_PER_ZONE``, when omitted).
        """
        from lance_format.dataset.indices import create_scalar_index

        snap = self._snapshot
        scan = partial(LanceScanner, snap)
        self.adopt(create_scalar_index(snap, column, index_type, name, replace, rows_per_zone, scan))

    # -- writing ---------------------------------------------------------------------------------
    def delete(
        self,
        predicate: Filter,
        *,
        conflict_retries: int = 10,
        retry_timeout: timedelta = timedelta(seconds=30),
    ) -> dict[str, int]:
        """Delete the rows matching ``predicate`` (new version with deletion files).

        Returns ``{"num_deleted_rows": n}`` like pylance 14. ``conflict_retries`` and
        ``retry_timeout`` are pylance's: validated, the commit retries by the engine's own rules.
        """
        from lance_format.dataset.mutate import delete_rows

        _check_retries(conflict_retries, retry_timeout)

        manifest, n = delete_rows(self._snapshot, predicate)
        self.adopt(manifest)
        return {"num_deleted_rows": n}

    @property
    def optimize(self) -> Optimize:
        """``ds.optimize.compact_files(...)``, as in pylance."""
        return Optimize(self)

    def restore(self) -> None:
        """Make this (old) version the latest again, as a new version."""
        from lance_format.dataset.mutate import restore_version

        self.adopt(restore_version(self._snapshot))

    def add_columns(
        self,
        transforms: ColumnsToAdd | Any,
        read_columns: list[str] | None = None,
        reader_schema: pa.Schema | None = None,
        batch_size: int | None = None,
    ) -> None:
        """Add columns (a new version), as pylance's ``add_columns`` takes them.

        ``transforms`` is ``{name: SQL expression}`` over existing columns; all-null columns (a
        ``pa.Field``, a list of them or a ``pa.Schema``: metadata only, no data files); a UDF
        (``lance_format.batch_udf``-decorated, or any callable from a RecordBatch of
        ``read_columns``, which may name ``_rowid`` / ``_rowaddr``, to a RecordBatch or pandas
        DataFrame of the new columns; called on live rows in batches of ``batch_size``); or a
        reader (RecordBatchReader, Table, ... cast to ``reader_schema``) holding the new columns'
        values for every live row in order.
        """
        from lance_format.dataset.evolve import add_columns
        from lance_format.dataset.mutate import with_retries

        if isinstance(transforms, dict | pa.Field | pa.Schema) or (
            isinstance(transforms, list) and all(isinstance(f, pa.Field) for f in transforms)
        ):
            if read_columns is not None or reader_schema is not None:
                raise InvalidInputError("read_columns and reader_schema are for UDFs and readers")
            self.adopt(with_retries(self._snapshot, lambda snap: add_columns(snap, transforms)))
            return
        from lance_format.dataset.fragment_api import add_computed_columns

        self.adopt(add_computed_columns(self._snapshot, transforms, read_columns, reader_schema, batch_size))

    def merge(
        self,
        data_obj: Any,
        left_on: str,
        right_on: str | None = None,
        schema: pa.Schema | None = None,
    ) -> None:
        """Add ``data_obj``'s columns joined on ``left_on`` = ``right_on`` (a new version).

        Parameters
        ----------
        data_obj
            A table, batch reader, pandas DataFrame or anything ``write_dataset`` reads: the key
            column ``right_on`` and the new columns.
        left_on
            The dataset's key column, or ``_rowid`` / ``_rowaddr`` (``uint64`` keys), as pylance.
        right_on
            The key column of ``data_obj`` (``left_on`` when ``None``); it is not added.
        schema
            ``data_obj``'s schema, for inputs that need one (batch iterables).

        Rows without a match get nulls; a key repeated in ``data_obj`` takes its last row. Every
        fragment gets one data file of the new columns (pylance's ``LanceOperation.Merge``), as
        ``LanceFragment.merge`` of each fragment committed together would write it.
        """
        from lance_format.dataset.fragment_api import merge_on_key

        self.adopt(merge_on_key(self._snapshot, data_obj, left_on, right_on, schema))

    def drop_columns(self, columns: list[str]) -> None:
        """Remove columns from the schema; data files holding only dropped columns leave the
        manifest (files shared with kept columns stay until compaction)."""
        from lance_format.dataset.evolve import drop_columns
        from lance_format.dataset.mutate import with_retries

        self.adopt(with_retries(self._snapshot, lambda snap: drop_columns(snap, columns)))

    def alter_columns(self, *alterations: dict[str, Any]) -> None:
        """Rename columns or struct members, change their nullability, or cast them.

        Each alteration is ``{"path": column, "name": new_name, "nullable": bool, "data_type":
        pa.DataType}`` (all but ``path`` optional; ``path`` may be ``struct.member``). Renames and
        nullability are metadata only; a cast rewrites the field into new data files, as pylance.
        See :func:`lance_format.dataset.alter.alter_columns`.
        """
        from lance_format.dataset.alter import alter_columns
        from lance_format.dataset.mutate import with_retries

        self.adopt(with_retries(self._snapshot, lambda snap: alter_columns(snap, list(alterations))))

    def compact_files(
        self,
        target_rows_per_fragment: int = 1024 * 1024,
        *,
        materialize_deletions: bool = True,
        materialize_deletions_threshold: float = 0.1,
        checkpoint: Callable[[], None] | None = None,
    ) -> dict[str, int]:
        """Rewrite small fragments (or fragments with deletions) into fewer, full ones.

        ``checkpoint`` (optional) is called between fragments; what it raises stops the compaction
        with nothing committed (a server passes one that raises when its caller has gone).
        """
        from lance_format.dataset.compact import compact_files
        from lance_format.dataset.mutate import with_retries

        manifest, stats = with_retries(
            self._snapshot,
            lambda snap: compact_files(
                snap,
                target_rows_per_fragment,
                materialize_deletions=materialize_deletions,
                materialize_deletions_threshold=materialize_deletions_threshold,
                checkpoint=checkpoint,
            ),
        )
        self.adopt(manifest)
        return stats

    def update(
        self,
        updates: dict[str, str],
        where: Filter | None = None,
        *,
        conflict_retries: int = 10,
        retry_timeout: timedelta = timedelta(seconds=30),
    ) -> dict[str, int]:
        """Set columns to SQL expressions on rows matching ``where``; ``{"num_rows_updated": n}``.
        ``conflict_retries`` and ``retry_timeout`` as in :meth:`delete`."""
        from lance_format.dataset.mutate import update_rows

        _check_retries(conflict_retries, retry_timeout)

        manifest, n = update_rows(self._snapshot, updates, where)
        self.adopt(manifest)
        return {"num_rows_updated": n}

    def update_config(self, values: dict[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set (str) or remove (``None``) table config keys, all others first when ``replace``;
        commits a new version and returns the new config, as pylance does."""
        from lance_format.dataset.metadata import update_map

        self.adopt(update_map(self._snapshot, "config", values, replace))
        return self.config()

    def update_metadata(self, values: dict[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Like :meth:`update_config`, for the table metadata; returns the new table metadata."""
        from lance_format.dataset.metadata import update_map

        self.adopt(update_map(self._snapshot, "table_metadata", values, replace))
        return dict(self.manifest.table_metadata)

    def update_schema_metadata(
        self, values: dict[str, str | None], *, replace: bool = False
    ) -> dict[str, str]:
        """Like :meth:`update_config`, for the schema metadata; returns the new schema metadata."""
        from lance_format.dataset.metadata import update_map

        self.adopt(update_map(self._snapshot, "schema_metadata", values, replace))
        return {k: v.decode("utf-8", "replace") for k, v in self.manifest.schema.metadata.items()}

    def update_field_metadata(
        self, field_updates: dict[str, dict[str, str | None]], *, replace: bool = False
    ) -> None:
        """Update the metadata of fields: ``{field name: {key: value or None}}`` (new version)."""
        from lance_format.dataset.metadata import update_field_metadata

        self.adopt(update_field_metadata(self._snapshot, field_updates, replace))

    def delete_config_keys(self, keys: list[str]) -> None:
        """Remove table config keys (new version)."""
        from lance_format.dataset.mutate import update_config

        self.adopt(update_config(self._snapshot, dict.fromkeys(keys)))

    def read_transaction(self, version: int | None = None) -> Transaction | None:
        """The transaction that created ``version`` (this version when omitted)."""
        snap = self._snapshot if version is None else self._snapshot.at_version(version)
        return read_transaction(self.store, snap.manifest, snap.naming)

    def migrate_manifest_paths_v2(self) -> None:
        """Rename ``{N}.manifest`` (V1) manifests to the V2 scheme, as pylance's method does."""
        from lance_format.table.naming import migrate_to_v2

        migrate_to_v2(self.store)
        self._snapshot = self._snapshot.at(self.manifest, ManifestNaming.V2)

    def cleanup_old_versions(
        self,
        older_than: timedelta | None = None,
        retain_versions: int | None = None,
        *,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        delete_rate_limit: int | None = None,
        versions: list[int] | None = None,
        delete_concurrency: int | None = None,
        older_than_seconds: float | None = None,
        min_orphan_age_seconds: float = 0.0,
    ) -> CleanupStats:
        """Remove old versions and the files no kept version or tag references (pylance's signature).

        Parameters
        ----------
        older_than:
            Remove only versions older than this. With none of ``older_than``,
            ``retain_versions`` and ``versions`` given, two weeks.
        retain_versions:
            Keep the last N versions (positive).
        delete_unverified:
            Also remove files no version references (left by killed writers) once they are older
            than the cutoff, however young; without it they must also be older than
            :data:`~lance_format.dataset.cleanup.UNVERIFIED_AGE_S` (7 days, as in pylance).
        error_if_tagged_old_versions:
            Raise :class:`InvalidInputError` when a tagged version matches the policy (tagged
            versions are never removed); False keeps them silently.
        delete_rate_limit:
            At most this many deletes per second.
        versions:
            Consider only these versions.
        delete_concurrency:
            Maximum concurrent deletes (positive); deletes run one at a time.
        older_than_seconds:
            ``older_than`` in seconds (the Flight action's unit); not combinable with it.
        min_orphan_age_seconds:
            Files no version references that are younger than this are kept whatever the other
            arguments say, ``delete_unverified`` included: they may be a write in flight (not in
            pylance; a server passes its bound on a write's duration).

        Returns
        -------
        CleanupStats
        """
        from lance_format.dataset.cleanup import cleanup_old_versions, seconds_argument

        conc = delete_concurrency
        if conc is not None and (isinstance(conc, bool) or not isinstance(conc, int) or conc <= 0):
            raise InvalidInputError(f"delete_concurrency must be a positive integer, got {conc!r}")
        if older_than_seconds is not None:
            if older_than is not None:
                raise InvalidInputError("pass either older_than or older_than_seconds, not both")
            seconds = seconds_argument(older_than_seconds, "older_than_seconds")
            # Ages beyond timedelta's range are older than any version: nothing that old exists.
            limit = timedelta.max.total_seconds()
            older_than = timedelta.max if seconds >= limit else timedelta(seconds=seconds)
        return cleanup_old_versions(
            self._snapshot,
            older_than,
            retain_versions,
            error_if_tagged_old_versions=error_if_tagged_old_versions,
            delete_rate_limit=delete_rate_limit,
            versions=versions,
            delete_unverified=delete_unverified,
            min_orphan_age_seconds=seconds_argument(min_orphan_age_seconds, "min_orphan_age_seconds"),
        )

    # -- pylance API additions (issue 17); operations live in their own modules ------------------
    @property
    def storage_options(self) -> dict[str, str] | None:
        """The object-store options this dataset was opened with."""
        return self._snapshot.storage_options

    @property
    def manifest_naming(self) -> ManifestNaming:
        """How this dataset names its manifests (V1 or V2)."""
        return self._snapshot.naming

    def adopt(self, manifest: Manifest) -> None:
        """Point this handle at ``manifest``, a version an operation just committed."""
        self._snapshot = self._snapshot.at(manifest)

    def data_file_reader(self, data_file: DataFile, *, cached: bool = True) -> LanceFileReader:
        """The open reader of one of this version's data files (``cached=False``: opened afresh,
        its size measured rather than taken from the manifest)."""
        return self._snapshot.data_file_reader(data_file, cached=cached)

    def to_pandas(
        self,
        columns: Sequence[str] | dict[str, str] | None = None,
        filter: Filter | None = None,
        limit: int | None = None,
        offset: int | None = None,
        **kwargs: Any,
    ) -> Any:
        """Read rows as a pandas DataFrame; takes the parameters of :meth:`to_table`."""
        return self.to_table(columns, filter, limit, offset, **kwargs).to_pandas()

    def sample(
        self,
        num_rows: int,
        columns: Sequence[str] | dict[str, str] | None = None,
        randomize_order: bool = True,
        **kwargs: Any,
    ) -> pa.Table:
        """``num_rows`` distinct rows picked uniformly at random (all rows when there are fewer).

        The rows come back in dataset order unless ``randomize_order``; other keyword arguments
        go to :meth:`take` (``with_row_id``, ``with_row_address``).
        """
        if isinstance(num_rows, bool) or not isinstance(num_rows, int | np.integer) or num_rows < 0:
            raise InvalidInputError(f"num_rows must be a non-negative integer, got {num_rows!r}")
        total = self.count_rows()
        rng = np.random.default_rng()
        picked = np.sort(rng.choice(total, size=min(int(num_rows), total), replace=False))
        if randomize_order:
            rng.shuffle(picked)
        if isinstance(columns, dict):  # {name: SQL expression} over the sampled rows
            from lance_format.dataset.filters import evaluate, parse_value

            exprs = {str(k): parse_value(v, self._snapshot.schema) for k, v in columns.items()}
            return evaluate(self.take(picked), exprs)
        return self.take(picked, None if columns is None else list(columns), **kwargs)

    def insert(self, data: Any, *, mode: str = "append", **kwargs: Any) -> None:
        """Append (or, with ``mode="overwrite"``, replace) rows; this handle moves to the new version.

        Takes the keyword arguments of :func:`~lance_format.dataset.entry.write_dataset`.
        """
        if mode not in ("append", "overwrite", "create"):
            raise InvalidInputError(f"mode must be 'append', 'overwrite' or 'create', got {mode!r}")
        kwargs.setdefault("storage_options", self.storage_options)
        kwargs.setdefault("session", self.session)
        kwargs.setdefault("base_store_params", self._snapshot.base_store_params)
        new = write.write_snapshot(data, self.uri, mode=mode, **kwargs)
        self.adopt(new.manifest)

    def get_transactions(self, recent_transactions: int = 10) -> list[Transaction | None]:
        """The transactions of this version and the ones before it, newest first (``None`` where
        a version's transaction is gone), at most ``recent_transactions`` of them."""
        if isinstance(recent_transactions, bool) or not isinstance(recent_transactions, int):
            raise InvalidInputError(f"recent_transactions must be an integer, got {recent_transactions!r}")
        out: list[Transaction | None] = []
        for v in range(self.version, max(0, self.version - recent_transactions), -1):
            try:
                snap = self._snapshot.at_version(v)
            except NotFoundError:
                out.append(None)
                continue
            out.append(read_transaction(self.store, snap.manifest, snap.naming))
        return out

    @property
    def stats(self) -> LanceStats:
        """``ds.stats.dataset_stats()`` / ``ds.stats.data_stats()``, as in pylance."""
        from lance_format.dataset.stats import LanceStats

        return LanceStats(self._snapshot)

    def validate(self) -> None:
        """Check this version's files against its manifest (raises :class:`CorruptFileError`)."""
        from lance_format.dataset.stats import validate

        validate(self._snapshot)

    def merge_insert(self, on: str | Sequence[str]) -> MergeInsertBuilder:
        """Start an upsert keyed on ``on``; configure with ``when_*`` calls, then ``execute(data)``.

        ``ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(t)``
        returns ``{"num_inserted_rows", "num_updated_rows", "num_deleted_rows"}`` as in pylance.
        """
        from lance_format.dataset.merge_insert import MergeInsertBuilder

        return MergeInsertBuilder(self._snapshot, on, self.adopt)

    def add_bases(
        self, new_bases: list[Any], transaction_properties: dict[str, str] | None = None
    ) -> LanceDataset:
        """Register more base paths (``DatasetBasePath``) for later writes (a new version);
        returns this dataset, moved to that version."""
        from lance_format.dataset.multibase import add_bases

        snap = self._snapshot
        self.adopt(add_bases(snap.store, snap.manifest, snap.naming, new_bases, transaction_properties))
        return self

    def base_paths(self) -> dict[int, DatasetBasePath]:
        """This version's base paths by id."""
        from lance_format.dataset.multibase import base_paths

        return base_paths(self.manifest)

    @staticmethod
    def commit(
        base_uri: Target,
        operation: Committable,
        read_version: int | None = None,
        commit_lock: Any = None,
        storage_options: dict[str, str] | None = None,
        enable_v2_manifest_paths: bool | None = None,
        detached: bool | None = False,
        max_retries: int = 20,
        *,
        commit_message: str | None = None,
        enable_stable_row_ids: bool | None = None,
        base_store_params: dict[str, dict[str, str]] | None = None,
        **unsupported: Any,
    ) -> LanceDataset:
        """The dataset at a new version committing ``operation`` (see ``operations.commit_operation``)."""
        snapshot = commit_operation(
            base_uri,
            operation,
            read_version,
            commit_lock,
            storage_options,
            enable_v2_manifest_paths,
            detached,
            max_retries,
            commit_message=commit_message,
            enable_stable_row_ids=enable_stable_row_ids,
            base_store_params=base_store_params,
            **unsupported,
        )
        return LanceDataset.from_snapshot(snapshot)

    @staticmethod
    def commit_batch(
        dest: Target,
        transactions: Sequence[PlannedTransaction],
        commit_lock: Any = None,
        storage_options: dict[str, str] | None = None,
        enable_v2_manifest_paths: bool | None = None,
        detached: bool | None = False,
        max_retries: int = 20,
        **unsupported: Any,
    ) -> dict[str, Any]:
        """Commit append transactions as one version: ``{"dataset": ..., "merged": Transaction}``."""
        tail = (commit_lock, storage_options, enable_v2_manifest_paths, detached, max_retries)
        snapshot, merged = commit_batch_operations(dest, transactions, *tail, **unsupported)
        return {"dataset": LanceDataset.from_snapshot(snapshot), "merged": merged}

    def __len__(self) -> int:
        return self.count_rows()

    def __reduce__(self) -> tuple[Any, ...]:
        # pyarrow's Cython base cannot pickle a Python-made dataset: reopen by URI and version.
        params = self._snapshot.base_store_params
        state = (self.uri, self.version, self.storage_options, self._default_scan_options, params)
        return (_reopen, state)

    def __repr__(self) -> str:
        return f"LanceDataset(uri={self.uri!r}, version={self.version})"


def _reopen(
    uri: str,
    version: int,
    storage_options: dict[str, str] | None,
    defaults: dict[str, Any] | None,
    base_store_params: dict[str, dict[str, str]] | None = None,
) -> LanceDataset:
    return LanceDataset(
        uri, version, storage_options, default_scan_options=defaults, base_store_params=base_store_params
    )


def _version_entry(m: Manifest) -> dict[str, Any]:
    data_files = sum(len(f.files) for f in m.fragments)
    deletions = [f for f in m.fragments if f.deletion_file is not None]
    meta = {
        "total_data_file_rows": str(sum(f.physical_rows for f in m.fragments)),
        "total_data_files": str(data_files),
        "total_deletion_file_rows": str(sum(f.num_deleted_rows for f in deletions)),
        "total_deletion_files": str(len(deletions)),
        "total_files_size": str(sum(d.file_size_bytes for f in m.fragments for d in f.files)),
        "total_fragments": str(len(m.fragments)),
        "total_rows": str(m.num_rows),
    }
    # pylance's naive local-time datetime, computed as pylance does: float arithmetic on the
    # nanoseconds (so it can differ from exact truncation by one microsecond).
    ns = m.timestamp_ns
    ts = datetime.fromtimestamp(ns // 1e9) + timedelta(microseconds=(ns % 1e9) // 1e3)
    return {"version": m.version, "timestamp": ts, "metadata": meta}
