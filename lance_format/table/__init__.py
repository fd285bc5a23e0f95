"""The Lance table format: manifests, fragments, deletion files, transactions and commits."""

from lance_format.table._serde import (
    index_section_from_bytes,
    index_section_to_bytes,
    zonemap_details_to_bytes,
)
from lance_format.table.commit import CommitOptions, commit_transaction
from lance_format.table.committers import ExternalManifestStore, MemoryManifestStore
from lance_format.table.external_store import (
    SqliteManifestStore,
    register_manifest_store,
    unregister_manifest_store,
)
from lance_format.table.model import (
    Append,
    DataFile,
    DataFragment,
    DataStorageFormat,
    Delete,
    DeletionFile,
    DeletionFileType,
    Manifest,
    Overwrite,
    Restore,
    Transaction,
    WriterVersion,
)
from lance_format.table.naming import ManifestNaming
from lance_format.table.versions import load_manifest

__all__ = [
    "Append",
    "CommitOptions",
    "DataFile",
    "DataFragment",
    "DataStorageFormat",
    "Delete",
    "DeletionFile",
    "DeletionFileType",
    "ExternalManifestStore",
    "Manifest",
    "ManifestNaming",
    "MemoryManifestStore",
    "Overwrite",
    "Restore",
    "SqliteManifestStore",
    "Transaction",
    "WriterVersion",
    "commit_transaction",
    "index_section_from_bytes",
    "index_section_to_bytes",
    "load_manifest",
    "register_manifest_store",
    "unregister_manifest_store",
    "zonemap_details_to_bytes",
]
