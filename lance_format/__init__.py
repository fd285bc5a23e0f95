"""A pure-Python implementation of the Lance table and file formats, byte-compatible with pylance."""

from lance_format.dataset import LanceDataset, Session, dataset, write_dataset

__version__ = "0.1.0"

__all__ = ["LanceDataset", "Session", "__version__", "dataset", "write_dataset"]
