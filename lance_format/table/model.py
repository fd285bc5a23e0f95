"""The table format as frozen dataclasses: manifests, fragments, files, transactions.

Fields mirror Lance's ``table.proto`` / ``transaction.proto`` messages (see :mod:`._serde` for the
wire mapping). Nothing here touches protobuf or storage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from lance_format.core.records import fast_init
from lance_format.core.types import LanceSchema

__all__ = [
    "COMMIT_MESSAGE_KEY",
    "OLD_COMMIT_MESSAGE_KEY",
    "Append",
    "BasePath",
    "Clone",
    "CreateIndex",
    "DataFile",
    "DataFragment",
    "DataStorageFormat",
    "Delete",
    "DeletionFile",
    "DeletionFileType",
    "ExternalFile",
    "IndexMetadata",
    "Manifest",
    "Merge",
    "Operation",
    "Overwrite",
    "Project",
    "ReserveFragments",
    "Restore",
    "Rewrite",
    "RewriteGroup",
    "RewrittenIndex",
    "Transaction",
    "UnknownOperation",
    "Update",
    "UpdateBases",
    "UpdateConfig",
    "UpdateMap",
    "WriterVersion",
]


class DeletionFileType(IntEnum):
    """``DeletionFile.file_type``: an Arrow IPC file of offsets or a Roaring bitmap."""

    ARROW_ARRAY = 0
    BITMAP = 1

    @property
    def suffix(self) -> str:
        """File name extension of this kind."""
        return "arrow" if self is DeletionFileType.ARROW_ARRAY else "bin"


@fast_init
@dataclass(frozen=True)
class DataFile:
    """One data file of a fragment (``path`` relative to ``{root}/data/``)."""

    path: str
    fields: tuple[int, ...]
    column_indices: tuple[int, ...]
    file_major_version: int = 2
    file_minor_version: int = 0
    file_size_bytes: int = 0
    base_id: int | None = None


@dataclass(frozen=True)
class DeletionFile:
    """A fragment's deleted physical row offsets, stored in ``_deletions/``."""

    file_type: DeletionFileType
    read_version: int
    id: int
    num_deleted_rows: int = 0
    base_id: int | None = None

    def key(self, fragment_id: int) -> str:
        """Object key relative to the dataset root."""
        return f"_deletions/{fragment_id}-{self.read_version}-{self.id}.{self.file_type.suffix}"


@dataclass(frozen=True)
class ExternalFile:
    """A byte range of another file holding a sequence too large to inline."""

    path: str
    offset: int
    size: int


@fast_init
@dataclass(frozen=True)
class DataFragment:
    """A horizontal slice of the table: data files that share rows, plus deletions and row ids.

    The row-id and row-version sequences are kept serialized (``bytes``) or as an external reference;
    they are decoded only when stable row ids are used.
    """

    id: int
    files: tuple[DataFile, ...]
    physical_rows: int
    deletion_file: DeletionFile | None = None
    row_ids: bytes | ExternalFile | None = None
    last_updated_at_versions: bytes | ExternalFile | None = None
    created_at_versions: bytes | ExternalFile | None = None
    #: Planned, never stored: this many trailing rows get fresh stable row ids at commit, after
    #: the ``row_ids`` (and ``created_at_versions``) of the rows before them (a merge-insert writes
    #: the rows it updates and those it inserts into one fragment, as pylance does).
    pending_row_ids: int = 0

    @property
    def num_deleted_rows(self) -> int:
        """Rows marked deleted."""
        return self.deletion_file.num_deleted_rows if self.deletion_file else 0

    @property
    def num_rows(self) -> int:
        """Rows not deleted."""
        return self.physical_rows - self.num_deleted_rows


@fast_init
@dataclass(frozen=True)
class WriterVersion:
    """Which library wrote a manifest."""

    library: str
    version: str
    prerelease: str | None = None
    build_metadata: str | None = None


@fast_init
@dataclass(frozen=True)
class DataStorageFormat:
    """The data file format of a dataset (``"lance"``, version ``"2.0"`` ...)."""

    file_format: str = "lance"
    version: str = "2.0"


@dataclass(frozen=True)
class BasePath:
    """An extra root that data files may live under (``DataFile.base_id``)."""

    id: int
    name: str | None
    is_dataset_root: bool
    path: str


@fast_init
@dataclass(frozen=True)
class Manifest:
    """One version of a table.

    ``index_section_bytes`` carries a serialized ``IndexSection`` through untouched so a commit on a
    dataset with indices keeps them; ``transaction_section`` is the position of the inline
    transaction in the manifest file (field 23 as pylance 14.0.2 writes it).
    """

    schema: LanceSchema
    fragments: tuple[DataFragment, ...]
    version: int
    data_format: DataStorageFormat = field(default_factory=DataStorageFormat)
    writer_version: WriterVersion | None = None
    timestamp_ns: int = 0
    tag: str = ""
    reader_feature_flags: int = 0
    writer_feature_flags: int = 0
    max_fragment_id: int | None = None
    transaction_file: str = ""
    next_row_id: int = 0
    config: dict[str, str] = field(default_factory=dict)
    table_metadata: dict[str, str] = field(default_factory=dict)
    base_paths: tuple[BasePath, ...] = ()
    branch: str | None = None
    version_aux_data: int = 0
    index_section: int | None = None
    transaction_section: int | None = None
    index_section_bytes: bytes | None = None

    @property
    def num_rows(self) -> int:
        """Live rows over all fragments."""
        return sum(f.num_rows for f in self.fragments)

    def next_fragment_id(self) -> int:
        """The id the next new fragment gets."""
        ids = [f.id for f in self.fragments]
        if self.max_fragment_id is not None:
            ids.append(self.max_fragment_id)
        return max(ids) + 1 if ids else 0


# -- transactions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Append:
    """Add fragments (ids are assigned when the manifest is built)."""

    fragments: tuple[DataFragment, ...]


@dataclass(frozen=True)
class Delete:
    """Replace fragments with new deletion files; drop fragments whose rows are all deleted."""

    updated_fragments: tuple[DataFragment, ...]
    deleted_fragment_ids: tuple[int, ...]
    predicate: str = ""


@dataclass(frozen=True)
class Overwrite:
    """Replace the whole table (schema and fragments)."""

    fragments: tuple[DataFragment, ...]
    schema: LanceSchema
    config_upsert_values: dict[str, str] = field(default_factory=dict)
    #: The base paths of a new dataset (ids 0 are assigned at commit: 1, 2, ...).
    initial_bases: tuple[BasePath, ...] = ()


@dataclass(frozen=True)
class Restore:
    """Make an old version the newest again."""

    version: int


@dataclass(frozen=True)
class Project:
    """Change the schema without touching data (drop or rename columns)."""

    schema: LanceSchema


@dataclass(frozen=True)
class Merge:
    """Replace all fragments and the schema (add columns)."""

    fragments: tuple[DataFragment, ...]
    schema: LanceSchema


@dataclass(frozen=True)
class RewriteGroup:
    """Fragments compacted into new ones."""

    old_fragments: tuple[DataFragment, ...]
    new_fragments: tuple[DataFragment, ...]


@dataclass(frozen=True)
class RewrittenIndex:
    """An index a rewrite remapped: ``old_id``'s files rewritten (row addresses moved to the new
    fragments, deleted rows dropped) as ``new_id`` with these details, version and files; the
    committed index keeps its name, fields and dataset version. ``old_id == new_id`` keeps it."""

    old_id: str
    new_id: str
    details_type_url: str = ""
    details: bytes = b""
    index_version: int = 0
    files: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Rewrite:
    """Compaction: groups of fragments rewritten, and the indices remapped to the new fragments."""

    groups: tuple[RewriteGroup, ...]
    rewritten_indices: tuple[RewrittenIndex, ...] = ()


@dataclass(frozen=True)
class Update:
    """Rows rewritten: fragments removed, updated and added (read for conflict checks)."""

    removed_fragment_ids: tuple[int, ...]
    updated_fragments: tuple[DataFragment, ...]
    new_fragments: tuple[DataFragment, ...]


@dataclass(frozen=True)
class UpdateMap:
    """Key upserts (value) and deletions (``None``); ``replace`` drops every other key first."""

    updates: dict[str, str | None]
    replace: bool = False

    def apply(self, current: dict[str, str]) -> dict[str, str]:
        """``current`` with these updates applied."""
        out = {} if self.replace else dict(current)
        for k, v in self.updates.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
        return out


@dataclass(frozen=True)
class UpdateConfig:
    """Upsert (value) or delete (``None``) table config keys (all of them first when
    ``config_replace``); also table, schema and per-field metadata (by field id)."""

    config_updates: dict[str, str | None]
    config_replace: bool = False
    table_metadata_updates: UpdateMap | None = None
    schema_metadata_updates: UpdateMap | None = None
    field_metadata_updates: dict[int, UpdateMap] = field(default_factory=dict)

    def maps(self) -> dict[str, UpdateMap]:
        """Every map this operation changes, by name (field maps as ``field:{id}``)."""
        out: dict[str, UpdateMap] = {}
        if self.config_updates or self.config_replace:
            out["config"] = UpdateMap(self.config_updates, self.config_replace)
        if self.table_metadata_updates is not None:
            out["table_metadata"] = self.table_metadata_updates
        if self.schema_metadata_updates is not None:
            out["schema_metadata"] = self.schema_metadata_updates
        for fid, m in self.field_metadata_updates.items():
            out[f"field:{fid}"] = m
        return out


@dataclass(frozen=True)
class IndexMetadata:
    """One index (or index segment) recorded in a version's index section.

    ``fragment_ids`` are the fragments the index covers (rows of other fragments are unknown to
    it); ``details_type_url`` / ``details`` are the packed ``google.protobuf.Any`` that says which
    kind of index this is; ``files`` are ``(name, size)`` pairs under ``_indices/{uuid}/``.
    """

    uuid: str
    name: str
    fields: tuple[int, ...]
    dataset_version: int
    fragment_ids: frozenset[int]
    details_type_url: str = ""
    details: bytes = b""
    index_version: int | None = None
    created_at_ms: int | None = None
    base_id: int | None = None
    files: tuple[tuple[str, int], ...] = ()

    @property
    def kind(self) -> str:
        """The index kind from its details type (``"ZoneMap"``, ``"BTree"`` ...)."""
        return self.details_type_url.rsplit(".", 1)[-1].removesuffix("IndexDetails")


@dataclass(frozen=True)
class CreateIndex:
    """Indices added (``new_indices``) and replaced ones dropped (``removed_indices``)."""

    new_indices: tuple[IndexMetadata, ...] = ()
    removed_indices: tuple[IndexMetadata, ...] = ()


@dataclass(frozen=True)
class UpdateBases:
    """Register more base paths (ids 0 are assigned at commit, after the largest id in use)."""

    new_bases: tuple[BasePath, ...]


@dataclass(frozen=True)
class ReserveFragments:
    """Fragment ids reserved for a writer (only ``max_fragment_id`` moves)."""

    num_fragments: int


@dataclass(frozen=True)
class DataReplacement:
    """Data files swapped in place: each ``(fragment_id, new_file)`` replaces the fragment's file
    holding exactly the new file's fields (or joins the fragment where no file holds any of them)."""

    replacements: tuple[tuple[int, DataFile], ...]


@dataclass(frozen=True)
class Clone:
    """The first version of a dataset cloned from version ``ref_version`` of the one at
    ``ref_path`` (by the tag ``ref_name`` when given): shallow (its data stays in the source,
    a base path) or deep (copied). Committed by the clone itself, never planned on a base."""

    is_shallow: bool
    ref_name: str | None
    ref_version: int
    ref_path: str
    branch_name: str | None = None


@dataclass(frozen=True)
class UnknownOperation:
    """An operation this implementation does not model (treated as conflicting)."""

    name: str


Operation = (
    Append
    | Delete
    | Overwrite
    | Restore
    | Project
    | Merge
    | Rewrite
    | Update
    | UpdateConfig
    | CreateIndex
    | ReserveFragments
    | UpdateBases
    | DataReplacement
    | Clone
    | UnknownOperation
)


#: The transaction property pylance stores ``commit_message`` under.
COMMIT_MESSAGE_KEY = "__lance_commit_message"
#: Where lance-flight before issue 15 stored it (still read).
OLD_COMMIT_MESSAGE_KEY = "lance.commit.message"


@dataclass(frozen=True)
class Transaction:
    """One intended change, planned against ``read_version``."""

    read_version: int
    uuid: str
    operation: Operation
    tag: str = ""
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def transaction_properties(self) -> dict[str, str]:
        """The properties under pylance's name (``Transaction.transaction_properties``)."""
        return self.properties

    @property
    def commit_message(self) -> str | None:
        """The commit message: pylance's property, else the key older versions of ours wrote."""
        props = self.properties
        return props.get(COMMIT_MESSAGE_KEY, props.get(OLD_COMMIT_MESSAGE_KEY))

    def file_name(self) -> str:
        """Name of the transaction file under ``_transactions/``."""
        return f"{self.read_version}-{self.uuid}.txn"
