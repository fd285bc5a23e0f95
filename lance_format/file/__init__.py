"""Lance file format v2: :class:`LanceFileReader` and :class:`LanceFileWriter`."""

from lance_format.file.format import LanceFileVersion
from lance_format.file.reader import FileMetadata, LanceFileReader, ReaderResults
from lance_format.file.writer import LanceFileWriter

__all__ = ["FileMetadata", "LanceFileReader", "LanceFileVersion", "LanceFileWriter", "ReaderResults"]
