"""The Lance table format: manifests, fragments, deletion files, transactions and commits."""

from lance_format.table.commit import CommitOptions, commit_transaction
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
    "Manifest",
    "ManifestNaming",
    "Overwrite",
    "Restore",
    "Transaction",
    "WriterVersion",
    "commit_transaction",
    "load_manifest",
]
