"""Lance file format 2.0: array encodings (``model``), their protobuf form, decoding and encoding.

Modules: ``model`` (the encoding trees), ``_serde`` (protobuf), ``buffers`` (reading selected values
out of page buffers), ``pages`` (decoding one page's encoding tree), ``decode`` (fields: structs,
lists, blobs), ``leaves`` (encoding a page of values) and ``encode`` (fields, as pylance writes them).
"""

from lance_format.encodings.v20._serde import (
    column_encoding_from_raw,
    column_encoding_to_bytes,
    page_encoding_from_raw,
)
from lance_format.encodings.v20.decode import decode_field
from lance_format.encodings.v20.encode import (
    check_writable,
    column_encoding_for,
    encode_field,
    is_packed_struct,
)

__all__ = [
    "check_writable",
    "column_encoding_for",
    "column_encoding_from_raw",
    "column_encoding_to_bytes",
    "decode_field",
    "encode_field",
    "is_packed_struct",
    "page_encoding_from_raw",
]
