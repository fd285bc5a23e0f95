"""Feature flags: what a reader or writer must understand to touch a dataset."""

from __future__ import annotations

from lance_format.core.errors import NotSupportedError
from lance_format.table.model import Manifest

__all__ = [
    "DELETION_FILES",
    "STABLE_ROW_IDS",
    "check_reader_flags",
    "check_writer_flags",
    "compute_flags",
]

DELETION_FILES = 1
STABLE_ROW_IDS = 2
USE_V2_FORMAT_DEPRECATED = 4
TABLE_CONFIG = 8
BASE_PATHS = 16
DISABLE_TRANSACTION_FILE = 32
DATA_OVERLAY_FILES = 64
COVERED_INDEX_METADATA = 128

_NAMES = {
    DELETION_FILES: "deletion files",
    STABLE_ROW_IDS: "stable row ids",
    USE_V2_FORMAT_DEPRECATED: "v2 format (deprecated flag)",
    TABLE_CONFIG: "table config",
    BASE_PATHS: "base paths",
    DISABLE_TRANSACTION_FILE: "no transaction file",
    DATA_OVERLAY_FILES: "data overlay files",
    COVERED_INDEX_METADATA: "covered index metadata",
}

#: Flags this implementation can read datasets with (indices are not used, so their flag is harmless).
READER_SUPPORTED = (
    DELETION_FILES
    | STABLE_ROW_IDS
    | USE_V2_FORMAT_DEPRECATED
    | TABLE_CONFIG
    | BASE_PATHS
    | COVERED_INDEX_METADATA
)
#: Flags this implementation can write new versions under (it recomputes them on every commit).
WRITER_SUPPORTED = (
    DELETION_FILES
    | STABLE_ROW_IDS
    | USE_V2_FORMAT_DEPRECATED
    | TABLE_CONFIG
    | BASE_PATHS
    | DISABLE_TRANSACTION_FILE
)


def _describe(bits: int) -> str:
    names = []
    for bit in range(64):
        if bits & (1 << bit):
            names.append(_NAMES.get(1 << bit, f"unknown flag {1 << bit}"))
    return ", ".join(names)


def check_reader_flags(manifest: Manifest, path: str) -> None:
    """Raise :class:`NotSupportedError` if reading needs a feature we lack."""
    unknown = manifest.reader_feature_flags & ~READER_SUPPORTED
    if unknown:
        raise NotSupportedError(f"{path}: cannot read dataset: it uses {_describe(unknown)}")


def check_writer_flags(manifest: Manifest, path: str) -> None:
    """Raise :class:`NotSupportedError` if writing needs a feature we lack."""
    check_reader_flags(manifest, path)
    unknown = manifest.writer_feature_flags & ~WRITER_SUPPORTED
    if unknown:
        raise NotSupportedError(f"{path}: cannot write to dataset: it uses {_describe(unknown)}")


def compute_flags(manifest: Manifest) -> tuple[int, int]:
    """``(reader, writer)`` flags implied by a manifest's contents."""
    reader = 0
    if any(f.deletion_file is not None for f in manifest.fragments):
        reader |= DELETION_FILES
    stable = manifest.reader_feature_flags & STABLE_ROW_IDS
    if stable or any(f.row_ids is not None for f in manifest.fragments):
        reader |= STABLE_ROW_IDS
    if manifest.base_paths:
        reader |= BASE_PATHS
    writer = reader | (manifest.writer_feature_flags & DISABLE_TRANSACTION_FILE)
    if manifest.config:
        writer |= TABLE_CONFIG
    return reader, writer
