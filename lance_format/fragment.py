"""pylance's ``lance.fragment`` names: fragments, their metadata and ``write_fragments``."""

from lance_format.dataset.dataset import LanceFragment
from lance_format.dataset.operations import FragmentMetadata, write_fragments
from lance_format.table.model import DataFile, DeletionFile

__all__ = ["DataFile", "DeletionFile", "FragmentMetadata", "LanceFragment", "write_fragments"]
