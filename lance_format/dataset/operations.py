"""pylance's distributed-write API: ``LanceOperation.*``, ``Transaction``, ``FragmentMetadata``,
the commits behind ``LanceDataset.commit`` / ``commit_batch``, and ``write_fragments``.

Workers (Spark executors, Ray tasks) write fragments with :func:`write_fragments` and ship their
:class:`FragmentMetadata` as JSON to one committer, which commits them with
:func:`commit_operation` (``LanceDataset.commit``) and a ``LanceOperation``. Commits return the
:class:`~lance_format.dataset.snapshot.Snapshot` of the new version; the facade wraps it. The
operations here are pylance-shaped front ends: at commit time each becomes the table model's
operation (:mod:`lance_format.table.model`) planned against ``read_version``, and concurrent
commits are resolved by the table's conflict rules
(:func:`lance_format.table.transaction.check_conflict`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from lance_format.core.errors import InvalidInputError, NotFoundError, NotSupportedError
from lance_format.core.types import LanceField, LanceSchema, fields_from_arrow
from lance_format.dataset.index_objects import index_metadata
from lance_format.dataset.multibase import (
    BaseStoreParams,
    check_base_store_params,
    new_bases,
    resolve_targets,
)
from lance_format.dataset.snapshot import Snapshot, SnapshotSource, reader_cache
from lance_format.dataset.write import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    commit_properties,
    stage_fragments,
    to_reader,
)
from lance_format.io.store import ObjectStore, store_for_uri
from lance_format.table import model
from lance_format.table.commit import CommitOptions, commit_transaction
from lance_format.table.fragment_json import fragment_from_json, fragment_to_json
from lance_format.table.model import DataFile, DataFragment, DataStorageFormat, DeletionFile, Manifest
from lance_format.table.naming import ManifestNaming
from lance_format.table.versions import load_manifest

__all__ = [
    "Committable",
    "FragmentMetadata",
    "LanceOperation",
    "Target",
    "Transaction",
    "commit_batch_operations",
    "commit_operation",
    "create_fragment",
    "schema_against",
    "write_fragments",
]


@dataclass
class FragmentMetadata:
    """A fragment as writers hand it to a committer (pylance's ``lance.FragmentMetadata``).

    ``row_id_meta``, ``created_at_version_meta`` and ``last_updated_at_version_meta`` carry a
    fragment's stable row ids and row versions through unchanged (their serialized form; they are
    not part of :meth:`to_json`). ``overlays`` must stay empty: data overlays are not supported.
    ``source_version`` (not in pylance, nor in :meth:`to_json`) is the version a fragment's
    metadata was read from (``LanceFragment.metadata``): a commit naming it pins that version, so a
    cleanup running meanwhile keeps the files (an ``Overwrite`` of an old version's fragments).
    """

    id: int
    files: list[DataFile]
    physical_rows: int
    deletion_file: DeletionFile | None = None
    row_id_meta: Any = None
    created_at_version_meta: Any = None
    last_updated_at_version_meta: Any = None
    overlays: list[Any] = field(default_factory=list)
    source_version: int | None = field(default=None, compare=False, repr=False)

    @property
    def num_deletions(self) -> int:
        """Rows of this fragment marked deleted."""
        return self.deletion_file.num_deleted_rows if self.deletion_file is not None else 0

    @property
    def num_rows(self) -> int:
        """Rows not deleted."""
        return self.physical_rows - self.num_deletions

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict in pylance's shape (``FragmentMetadata.from_json(json.dumps(d))``)."""
        return fragment_to_json(self.to_fragment())

    @staticmethod
    def from_json(json_data: str | bytes | dict[str, Any]) -> FragmentMetadata:
        """The fragment of a :meth:`to_json` document (a JSON string, as pylance takes, or a dict)."""
        doc = json_data if isinstance(json_data, dict) else json.loads(json_data)
        if not isinstance(doc, dict):
            raise InvalidInputError("fragment metadata JSON must be an object")
        if doc.get("overlays"):
            raise NotSupportedError("fragment metadata with data overlays")
        return FragmentMetadata.of(fragment_from_json(doc))

    @staticmethod
    def of(frag: DataFragment | FragmentMetadata) -> FragmentMetadata:
        """The metadata of a table-model fragment (a :class:`FragmentMetadata` as it is)."""
        if isinstance(frag, FragmentMetadata):
            return frag
        return FragmentMetadata(
            frag.id,
            list(frag.files),
            frag.physical_rows,
            frag.deletion_file,
            frag.row_ids,
            frag.created_at_versions,
            frag.last_updated_at_versions,
        )

    def to_fragment(self) -> DataFragment:
        """This fragment as the table model's :class:`~lance_format.table.model.DataFragment`."""
        if self.overlays:
            raise NotSupportedError("fragments with data overlays (LanceOperation.DataOverlay)")
        return DataFragment(
            int(self.id),
            tuple(self.files),
            int(self.physical_rows),
            self.deletion_file,
            self.row_id_meta,
            self.last_updated_at_version_meta,
            self.created_at_version_meta,
        )


#: What operations take as fragments: ours, or the table model's (``LanceFragment.metadata``).
FragmentLike = FragmentMetadata | DataFragment


def _frags(items: Iterable[FragmentLike]) -> tuple[DataFragment, ...]:
    out = []
    for f in items:
        if isinstance(f, FragmentMetadata):
            out.append(f.to_fragment())
        elif isinstance(f, DataFragment):
            out.append(f)
        else:
            raise InvalidInputError(f"expected FragmentMetadata, got {type(f).__name__}")
    return tuple(out)


def _int_ids(items: Iterable[Any], what: str) -> tuple[int, ...]:
    out = []
    for i in items:
        if isinstance(i, bool) or not isinstance(i, int):
            raise InvalidInputError(f"{what} must be integers, got {i!r}")
        out.append(int(i))
    return tuple(out)


def _renumbered(f: LanceField, next_id: list[int], parent: int) -> LanceField:
    fid = next_id[0]
    next_id[0] += 1
    return replace(
        f, id=fid, parent_id=parent, children=tuple(_renumbered(c, next_id, fid) for c in f.children)
    )


def schema_against(schema: Any, base: Manifest | None) -> LanceSchema:
    """A Lance schema for ``schema``: a :class:`LanceSchema` as it is; a ``pa.Schema`` keeps the
    field ids of same-named, same-typed columns of ``base`` and numbers new columns after every id
    the base uses (in its schema or its files), as a new column needs an id no file holds."""
    if isinstance(schema, LanceSchema):
        return schema
    if not isinstance(schema, pa.Schema):
        raise InvalidInputError(f"expected a pyarrow Schema or a LanceSchema, got {type(schema).__name__}")
    if base is None:
        return fields_from_arrow(schema)
    known = {f.name: f for f in base.schema.fields}
    in_files = (fid for frag in base.fragments for df in frag.files for fid in df.fields)
    counter = [max(base.schema.max_field_id, *in_files, -1) + 1]
    fresh = fields_from_arrow(schema)
    out = []
    for arrow_field, lance_field in zip(schema, fresh.fields, strict=True):
        old = known.get(arrow_field.name)
        if old is not None and old.to_arrow().type.equals(arrow_field.type):
            out.append(replace(old, nullable=arrow_field.nullable))
        else:
            out.append(_renumbered(lance_field, counter, -1))
    return LanceSchema(tuple(out), dict(fresh.metadata))


class _Operation:
    """What every ``LanceOperation`` has: the table-model operation it commits as."""

    #: Whether a commit needs no ``read_version`` (pylance: Overwrite and Restore only).
    needs_no_read_version: ClassVar[bool] = False

    def to_model(self, base: Manifest | None) -> model.Operation:
        """The table-model operation committing this on top of ``base``."""
        raise NotSupportedError(f"committing LanceOperation.{type(self).__name__}")


@dataclass
class _Planned(_Operation):
    """A table-model operation given to :func:`commit_operation` directly."""

    op: model.Operation

    @property
    def needs_no_read_version(self) -> bool:  # type: ignore[override]
        return isinstance(self.op, model.Overwrite | model.Restore)

    def to_model(self, base: Manifest | None) -> model.Operation:
        return self.op


class LanceOperation:
    """The operations :func:`commit_operation` takes (pylance's ``lance.LanceOperation`` namespace)."""

    BaseOperation = _Operation

    @dataclass
    class Overwrite(_Operation):
        """Replace the whole table with ``fragments`` under ``new_schema`` (or create it)."""

        new_schema: LanceSchema | pa.Schema
        fragments: Iterable[FragmentLike]
        initial_bases: list[Any] | None = None
        needs_no_read_version: ClassVar[bool] = True

        def to_model(self, base: Manifest | None) -> model.Operation:
            schema = schema_against(self.new_schema, None)
            frags = _frags(self.fragments)
            for f in frags:
                if f.deletion_file is not None:
                    # Ids are assigned anew and a deletion file is named by its fragment's id;
                    # pylance refuses these too.
                    raise InvalidInputError(
                        f"Overwrite fragments must be newly written, but fragment {f.id} carries "
                        f"deletion file {f.deletion_file.key(f.id)}. Use Delete to commit deletions "
                        "against existing fragments, or Merge to change their schema."
                    )
            return model.Overwrite(frags, schema, initial_bases=new_bases(self.initial_bases))

    @dataclass
    class Append(_Operation):
        """Add fragments (they get new ids at commit time)."""

        fragments: Iterable[FragmentLike]

        def to_model(self, base: Manifest | None) -> model.Operation:
            return model.Append(_frags(self.fragments))

    @dataclass
    class Delete(_Operation):
        """Replace fragments by copies with new deletion files; remove fully deleted ones."""

        updated_fragments: Iterable[FragmentLike]
        deleted_fragment_ids: Iterable[int]
        predicate: str

        def to_model(self, base: Manifest | None) -> model.Operation:
            return model.Delete(
                _frags(self.updated_fragments),
                _int_ids(self.deleted_fragment_ids, "deleted_fragment_ids"),
                str(self.predicate),
            )

    @dataclass
    class Merge(_Operation):
        """Replace every fragment and the schema (new columns' files added to fragments)."""

        fragments: Iterable[FragmentLike]
        schema: LanceSchema | pa.Schema
        preserves_nullability: bool = False

        def to_model(self, base: Manifest | None) -> model.Operation:
            return model.Merge(_frags(self.fragments), schema_against(self.schema, base))

    @dataclass
    class Project(_Operation):
        """Change the schema only (drop, rename, reorder columns)."""

        schema: LanceSchema | pa.Schema
        preserves_nullability: bool = False

        def to_model(self, base: Manifest | None) -> model.Operation:
            return model.Project(schema_against(self.schema, base))

    @dataclass
    class Restore(_Operation):
        """Make ``version`` the newest version again."""

        version: int
        needs_no_read_version: ClassVar[bool] = True

        def to_model(self, base: Manifest | None) -> model.Operation:
            return model.Restore(int(self.version))

    @dataclass
    class RewriteGroup:
        """Fragments rewritten (compacted) into new ones."""

        old_fragments: Iterable[FragmentLike]
        new_fragments: Iterable[FragmentLike]

    @dataclass
    class RewrittenIndex:
        """An index a rewrite remapped: ``old_id``'s files rewritten as ``new_id`` (its files
        written beforehand under ``_indices/{new_id}``) with these details and version."""

        old_id: str
        new_id: str
        new_details_type_url: str
        new_details_value: bytes
        new_index_version: int

    @dataclass
    class Rewrite(_Operation):
        """Compaction: each group's old fragments replaced by its new ones."""

        groups: Iterable[LanceOperation.RewriteGroup]
        rewritten_indices: Iterable[LanceOperation.RewrittenIndex] = ()

        def to_model(self, base: Manifest | None) -> model.Operation:
            groups = tuple(
                model.RewriteGroup(_frags(g.old_fragments), _frags(g.new_fragments)) for g in self.groups
            )
            remapped = tuple(
                model.RewrittenIndex(
                    str(r.old_id),
                    str(r.new_id),
                    r.new_details_type_url,
                    bytes(r.new_details_value),
                    int(r.new_index_version),
                )
                for r in self.rewritten_indices
            )
            return model.Rewrite(groups, remapped)

    @dataclass
    class Update(_Operation):
        """Rows rewritten: fragments removed, replaced by updated copies, and added.

        ``fields_modified``, ``fields_for_preserving_frag_bitmap``, ``update_mode`` and
        ``updated_fragment_offsets`` tell pylance which index entries to invalidate; this
        implementation keeps no such index state, so they do not change the result.
        """

        removed_fragment_ids: list[int] = field(default_factory=list)
        updated_fragments: list[FragmentLike] = field(default_factory=list)
        new_fragments: list[FragmentLike] = field(default_factory=list)
        fields_modified: list[int] = field(default_factory=list)
        fields_for_preserving_frag_bitmap: list[int] = field(default_factory=list)
        update_mode: str = ""
        updated_fragment_offsets: dict[int, bytes] | None = None

        def to_model(self, base: Manifest | None) -> model.Operation:
            return model.Update(
                _int_ids(self.removed_fragment_ids, "removed_fragment_ids"),
                _frags(self.updated_fragments),
                _frags(self.new_fragments),
            )

    @dataclass
    class UpdateMap:
        """Key upserts (str) and removals (``None``); ``replace`` drops every other key first."""

        updates: dict[str, str | None]
        replace: bool = False

        def to_model(self) -> model.UpdateMap:
            for k, v in self.updates.items():
                if not isinstance(k, str) or not (v is None or isinstance(v, str)):
                    raise InvalidInputError(f"map keys and values must be strings, got {k!r}: {v!r}")
            return model.UpdateMap(dict(self.updates), bool(self.replace))

    @dataclass
    class UpdateConfig(_Operation):
        """Change the table config, table metadata, schema metadata or field metadata (by id)."""

        config_updates: LanceOperation.UpdateMap | None = None
        table_metadata_updates: LanceOperation.UpdateMap | None = None
        schema_metadata_updates: LanceOperation.UpdateMap | None = None
        field_metadata_updates: dict[int, LanceOperation.UpdateMap] | None = None

        def to_model(self, base: Manifest | None) -> model.Operation:
            config = (
                self.config_updates.to_model() if self.config_updates is not None else model.UpdateMap({})
            )
            return model.UpdateConfig(
                config.updates,
                config.replace,
                None if self.table_metadata_updates is None else self.table_metadata_updates.to_model(),
                None if self.schema_metadata_updates is None else self.schema_metadata_updates.to_model(),
                {int(k): v.to_model() for k, v in (self.field_metadata_updates or {}).items()},
            )

    @dataclass
    class DataReplacementGroup:
        """A new data file for fragment ``fragment_id``, replacing the file with the same fields."""

        fragment_id: int
        new_file: DataFile

        def file(self) -> DataFile:
            """``new_file`` with its id lists as tuples (callers may build it with lists)."""
            f = self.new_file
            return replace(f, fields=tuple(f.fields), column_indices=tuple(f.column_indices))

    @dataclass
    class DataReplacement(_Operation):
        """Swap data files of columns in place (same rows, new values).

        Each group's file replaces the fragment's file holding exactly the same fields; where no
        file holds any of them (columns added as all-null) the file is added. Recorded as
        pylance's ``DataReplacement``; it conflicts with concurrent changes to those fragments.
        """

        replacements: list[LanceOperation.DataReplacementGroup]

        def to_model(self, base: Manifest | None) -> model.Operation:
            if base is None:
                raise InvalidInputError("DataReplacement needs an existing dataset")
            return model.DataReplacement(tuple((g.fragment_id, g.file()) for g in self.replacements))

    @dataclass
    class CreateIndex(_Operation):
        """Add (and drop) index metadata: :class:`~lance_format.dataset.index_objects.Index`
        objects as pylance's (or the table model's ``IndexMetadata``); removed ones match by uuid."""

        new_indices: list[Any]
        removed_indices: list[Any]

        def to_model(self, base: Manifest | None) -> model.Operation:
            new = tuple(index_metadata(i) for i in self.new_indices)
            return model.CreateIndex(new, tuple(index_metadata(i) for i in self.removed_indices))

    @dataclass
    class Clone(_Operation):
        """A shallow or deep clone, as ``read_transaction`` reports one. Clones are made by
        ``LanceDataset.shallow_clone`` / ``deep_clone``, not committed as an operation."""

        is_shallow: bool
        ref_name: str | None
        ref_version: int
        ref_path: str
        branch_name: str | None

    @dataclass
    class DataOverlayFile:
        """A data overlay file (not supported)."""

        data_file: DataFile
        offsets: Any
        committed_version: int | None = None

    @dataclass
    class DataOverlayGroup:
        """Data overlays of one fragment (not supported)."""

        fragment_id: int
        overlays: list[Any]

    @dataclass
    class DataOverlay(_Operation):
        """Layer overlay files over fragments (not supported)."""

        groups: list[Any]


@dataclass
class Transaction:
    """An operation planned against ``read_version`` (pylance's ``lance.Transaction``)."""

    read_version: int
    operation: _Operation
    uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    transaction_properties: dict[str, str] | None = field(default_factory=dict)


#: What :func:`commit_operation` commits: a ``LanceOperation``, a :class:`Transaction` of one, or
#: a table-model operation (passed through as it is).
Committable = _Operation | Transaction | model.Operation

#: Where a commit or a fragment write goes: a path or URI, or an open dataset (a ``LanceDataset``
#: or a :class:`~lance_format.dataset.snapshot.Snapshot`).
Target = str | Path | SnapshotSource


def _target(
    base_uri: Any, storage_options: dict[str, str] | None
) -> tuple[str, ObjectStore, Snapshot | None]:
    """``(uri, store, the snapshot when an open dataset was given)``."""
    if isinstance(base_uri, str | Path | os.PathLike):
        uri = os.fspath(base_uri)
        return uri, store_for_uri(uri, storage_options), None
    snap = getattr(base_uri, "snapshot", None)
    if not isinstance(snap, Snapshot):
        raise InvalidInputError(
            f"base_uri must be a path, URI or LanceDataset, got {type(base_uri).__name__}"
        )
    return snap.uri, snap.store, snap


def _format_of(fragments: Sequence[DataFragment]) -> DataStorageFormat | None:
    """The data format of a new dataset: that of its fragments' files (``None``: no files)."""
    for frag in fragments:
        for f in frag.files:
            return DataStorageFormat("lance", f"{f.file_major_version}.{f.file_minor_version}")
    return None


def commit_operation(
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
    base_store_params: BaseStoreParams | None = None,
    **unsupported: Any,
) -> Snapshot:
    """Commit ``operation`` (or a :class:`Transaction`) planned against ``read_version``
    (``LanceDataset.commit``).

    Parameters
    ----------
    base_uri:
        The dataset (path, URI, ``LanceDataset`` or :class:`Snapshot`).
    operation:
        A ``LanceOperation.*`` or a :class:`Transaction` (whose ``read_version`` is used).
    read_version:
        The version the operation was planned against; required except for ``Overwrite`` and
        ``Restore`` (as in pylance). Versions committed since are checked for conflicts.
    commit_lock, detached:
        Not supported (a :class:`NotSupportedError` when given).
    storage_options:
        Options for the object store.
    enable_v2_manifest_paths:
        For a new dataset: ``False`` names manifests the V1 way; V2 otherwise.
    max_retries:
        Attempts after a lost race before giving up.
    commit_message:
        Stored in the transaction's properties, as pylance does.
    enable_stable_row_ids:
        For a new dataset: give rows stable ids.
    base_store_params:
        Options of some bases' stores by base URI, for the returned dataset's reads (an open
        dataset given as ``base_uri`` keeps its own), as pylance's.

    Returns
    -------
    Snapshot
        The new version (of the same session and caches when ``base_uri`` was an open dataset).
    """
    given = {k: v for k, v in unsupported.items() if v is not None and k != "commit_timeout"}
    if commit_lock is not None or detached or given:
        names = ["commit_lock"] * (commit_lock is not None) + ["detached"] * bool(detached) + sorted(given)
        raise NotSupportedError(f"commit options {names}")
    properties: dict[str, str] = {}
    txn_uuid = str(uuid.uuid4())
    if isinstance(operation, Transaction):
        if commit_message is not None:
            raise InvalidInputError(
                "commit_message is not supported when calling commit with a Transaction: "
                "set it in the transaction's properties"
            )
        read_version = operation.read_version
        properties.update(operation.transaction_properties or {})
        txn_uuid = operation.uuid
        operation = operation.operation
    if isinstance(operation, model.Operation):  # the table model's own operations pass through
        operation = _Planned(operation)
    if not isinstance(operation, _Operation):
        raise InvalidInputError(f"expected a LanceOperation or Transaction, got {type(operation).__name__}")
    properties.update(commit_properties(commit_message))
    uri, store, source = _target(base_uri, storage_options)
    base: Manifest | None
    naming: ManifestNaming | None
    try:
        base, naming = load_manifest(store, read_version)
    except NotFoundError:
        if read_version is not None and read_version != 0:
            raise
        base, naming = None, None
    if base is not None and read_version is None and not operation.needs_no_read_version:
        raise InvalidInputError("read_version is required for all operations except Overwrite and Restore")
    named = getattr(operation, "fragments", ())
    # Fragments read from a version (LanceFragment.metadata) name its files: pin it while committing.
    sources = frozenset(
        f.source_version
        for f in (named if isinstance(named, list | tuple) else ())
        if isinstance(f, FragmentMetadata) and f.source_version is not None
    )
    op = operation.to_model(base)
    fragments = op.fragments if isinstance(op, model.Overwrite) else ()
    options = CommitOptions(
        naming=ManifestNaming.V1 if enable_v2_manifest_paths is False else ManifestNaming.V2,
        data_format=_format_of(fragments) if base is None else None,
        stable_row_ids=bool(enable_stable_row_ids),
        max_retries=int(max_retries),
        pinned_versions=sources,
    )
    txn = model.Transaction(base.version if base else 0, txn_uuid, op, properties=properties)
    manifest = commit_transaction(store, txn, base, naming, options)
    if source is not None:
        return source.at(manifest, naming or options.naming)
    cache = reader_cache(store, storage_options, base_store_params=check_base_store_params(base_store_params))
    return Snapshot(uri, store, manifest, naming or options.naming, cache, storage_options)


def commit_batch_operations(
    dest: Target,
    transactions: Sequence[Transaction],
    commit_lock: Any = None,
    storage_options: dict[str, str] | None = None,
    enable_v2_manifest_paths: bool | None = None,
    detached: bool | None = False,
    max_retries: int = 20,
    **unsupported: Any,
) -> tuple[Snapshot, Transaction]:
    """Commit several append transactions as one version (pylance's rule: appends only), as
    ``LanceDataset.commit_batch``.

    Returns ``(the new version, the one Transaction committed)``.
    """
    txns = list(transactions)
    if not txns:
        raise InvalidInputError("commit_batch needs at least one transaction")
    frags: list[FragmentLike] = []
    for t in txns:
        if not isinstance(t, Transaction) or not isinstance(t.operation, LanceOperation.Append):
            raise NotSupportedError("only append transactions are supported in batch commits")
        frags.extend(t.operation.fragments)
    first = txns[0]
    merged = Transaction(
        first.read_version, LanceOperation.Append(frags), first.uuid, first.transaction_properties
    )
    snapshot = commit_operation(
        dest,
        merged,
        commit_lock=commit_lock,
        storage_options=storage_options,
        enable_v2_manifest_paths=enable_v2_manifest_paths,
        detached=detached,
        max_retries=max_retries,
        **unsupported,
    )
    return snapshot, merged


_WRITE_MODES = ("append", "overwrite", "create")


def _current(store: ObjectStore) -> Manifest | None:
    try:
        return load_manifest(store)[0]
    except NotFoundError:
        return None


def write_fragments(
    data: Any,
    dataset_uri: Target,
    schema: pa.Schema | None = None,
    *,
    return_transaction: bool = False,
    mode: str = "append",
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int | None = 1024,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    data_cache_bytes: int | None = None,
    max_page_bytes: int | None = None,
    progress: Any = None,
    data_storage_version: str | None = None,
    use_legacy_format: bool | None = None,
    storage_options: dict[str, str] | None = None,
    enable_stable_row_ids: bool = False,
    target_bases: list[str] | None = None,
    target_all_bases: bool | None = None,
    initial_bases: list[Any] | None = None,
    base_store_params: BaseStoreParams | None = None,
    **unsupported: Any,
) -> list[FragmentMetadata] | Transaction:
    """Write data files without committing them (pylance's ``lance.fragment.write_fragments``).

    Returns the new fragments' metadata (ids 0: the commit assigns them), or with
    ``return_transaction`` a :class:`Transaction` to commit: an ``Append`` against the current
    version, or an ``Overwrite`` when ``mode="overwrite"`` or there is no dataset yet.
    ``max_rows_per_group``, ``data_cache_bytes`` and ``max_page_bytes`` tune pylance's writer
    only and change no result; ``use_legacy_format=True`` (the 0.1 format) is not supported.
    ``base_store_params`` gives target bases' stores their own options, as pylance's.
    """
    given = {k: v for k, v in unsupported.items() if v not in (None, False, "reference")}
    if given:
        raise NotSupportedError(f"write_fragments options {sorted(given)}")
    if use_legacy_format:
        raise NotSupportedError("the legacy (0.1) file format")
    if mode not in _WRITE_MODES:
        raise InvalidInputError(f"mode must be one of {_WRITE_MODES}, got {mode!r}")
    uri, store, _ = _target(dataset_uri, storage_options)
    base = _current(store)
    overwrite = mode == "overwrite" or base is None
    if initial_bases and not overwrite:
        raise InvalidInputError("initial_bases is only for a new dataset or mode='overwrite'")
    bases = new_bases(initial_bases) if initial_bases else (base.base_paths if base else ())
    params = check_base_store_params(base_store_params)
    targets = resolve_targets(bases, target_bases, target_all_bases, storage_options, store.runtime, params)
    if base is not None and not overwrite and data_storage_version is None:
        data_storage_version = base.data_format.version
    reader = to_reader(data, schema)
    staged = stage_fragments(
        reader,
        uri,
        schema,
        max_rows_per_file=max_rows_per_file,
        data_storage_version=data_storage_version,
        store=store,
        overwrite=overwrite,
        max_bytes_per_file=max_bytes_per_file,
        progress=progress,
        targets=targets,
    )
    frags = [FragmentMetadata.of(f) for f in staged]
    if not return_transaction:
        return frags
    version = base.version if base is not None else 0
    if not overwrite:
        return Transaction(version, LanceOperation.Append(frags))
    return Transaction(version, LanceOperation.Overwrite(reader.schema, frags, list(initial_bases or [])))


def create_fragment(
    dataset_uri: Target,
    data: Any,
    fragment_id: int | None = None,
    schema: pa.Schema | None = None,
    max_rows_per_group: int | None = 1024,
    progress: Any = None,
    mode: str = "append",
    *,
    data_storage_version: str | None = None,
    use_legacy_format: bool | None = None,
    storage_options: dict[str, str] | None = None,
    **unsupported: Any,
) -> FragmentMetadata:
    """Write ``data`` as one fragment in one data file (pylance's ``LanceFragment.create``).

    The fragment's id is ``fragment_id`` (0 when omitted); an ``Append`` commit gives it a new id.
    """
    frags = write_fragments(
        data,
        dataset_uri,
        schema,
        mode=mode,
        max_rows_per_file=2**63 - 1,
        max_bytes_per_file=2**63 - 1,
        progress=progress,
        data_storage_version=data_storage_version,
        use_legacy_format=use_legacy_format,
        storage_options=storage_options,
        **unsupported,
    )
    assert isinstance(frags, list)
    if not frags:
        raise InvalidInputError("cannot create a fragment from no rows")
    frag = frags[0]
    frag.id = 0 if fragment_id is None else int(fragment_id)
    return frag
