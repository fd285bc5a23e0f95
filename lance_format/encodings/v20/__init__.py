"""Lance file format 2.0: array encodings (``model``), their protobuf form, decoding and encoding."""

from lance_format.encodings.v20._serde import column_encoding_from_bytes as column_encoding_from_raw
from lance_format.encodings.v20._serde import page_encoding_from_raw
from lance_format.encodings.v20.decode import decode_field
from lance_format.encodings.v20.encode import check_writable, column_encoding_for, encode_field

__all__ = [
    "check_writable",
    "column_encoding_for",
    "column_encoding_from_raw",
    "decode_field",
    "encode_field",
    "page_encoding_from_raw",
]
