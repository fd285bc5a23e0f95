"""Lance file format v2: :class:`LanceFileReader` and :class:`LanceFileWriter`.

The schema's protobuf conversion (``field_from_pb``, ``field_to_pb``, ``map_to_dict``) is exported
for the table layer's own protobuf edge: manifests carry the same ``Field`` message as file footers.
"""

from lance_format.file._serde import field_from_pb, field_to_pb, map_to_dict
from lance_format.file.format import LanceFileVersion
from lance_format.file.reader import FileMetadata, LanceFileReader, ReaderResults
from lance_format.file.writer import LanceFileWriter

__all__ = [
    "FileMetadata",
    "LanceFileReader",
    "LanceFileVersion",
    "LanceFileWriter",
    "ReaderResults",
    "field_from_pb",
    "field_to_pb",
    "map_to_dict",
]
