"""A pure-Python implementation of the Lance table and file formats, byte-compatible with pylance."""

from lance_format.dataset import (
    CleanupStats,
    DataStatistics,
    FieldStatistics,
    Index,
    IndexFile,
    LanceDataset,
    LanceScanner,
    MergeInsertBuilder,
    Session,
    dataset,
    write_dataset,
)
from lance_format.dataset.dataset import LanceFragment
from lance_format.dataset.multibase import DatasetBasePath
from lance_format.dataset.operations import FragmentMetadata, LanceOperation, Transaction
from lance_format.dataset.udf_columns import BatchUDF, batch_udf

__version__ = "0.1.0"

__all__ = [
    "BatchUDF",
    "CleanupStats",
    "DataStatistics",
    "DatasetBasePath",
    "FieldStatistics",
    "FragmentMetadata",
    "Index",
    "IndexFile",
    "LanceDataset",
    "LanceFragment",
    "LanceOperation",
    "LanceScanner",
    "MergeInsertBuilder",
    "Session",
    "Transaction",
    "__version__",
    "batch_udf",
    "dataset",
    "write_dataset",
]
