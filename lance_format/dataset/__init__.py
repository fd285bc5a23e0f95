"""Datasets: open, scan, take, write, delete, versions and tags (mirrors pylance's API)."""

from lance_format.dataset.cleanup import CleanupStats
from lance_format.dataset.dataset import LanceDataset, LanceFragment
from lance_format.dataset.entry import commit, dataset, write_dataset
from lance_format.dataset.index_objects import Index, IndexFile
from lance_format.dataset.merge_insert import MergeInsertBuilder, MergeInsertConflictError, MergeInsertError
from lance_format.dataset.scan_options import ColumnOrdering
from lance_format.dataset.scanner import LanceScanner
from lance_format.dataset.session import Session
from lance_format.dataset.snapshot import Snapshot
from lance_format.dataset.stats import DatasetStats, DataStatistics, FieldStatistics, LanceStats
from lance_format.dataset.write import DEFAULT_DATA_STORAGE_VERSION, stage_fragments

__all__ = [
    "DEFAULT_DATA_STORAGE_VERSION",
    "CleanupStats",
    "ColumnOrdering",
    "DataStatistics",
    "DatasetStats",
    "FieldStatistics",
    "Index",
    "IndexFile",
    "LanceDataset",
    "LanceFragment",
    "LanceScanner",
    "LanceStats",
    "MergeInsertBuilder",
    "MergeInsertConflictError",
    "MergeInsertError",
    "Session",
    "Snapshot",
    "commit",
    "dataset",
    "stage_fragments",
    "write_dataset",
]
