"""The ``.manifest`` file container: u32-length-prefixed sections and a 16-byte footer.

Layout (as pylance 14.0.2 writes it)::

    [u32 len][IndexSection]      optional
    [u32 len][Transaction]       inline copy; its position goes in Manifest field 23
    [u32 len][Manifest]          must end exactly at the footer
    u64 manifest_pos, u16 0, u16 2, b"LANC"
"""

from __future__ import annotations

import struct
from dataclasses import replace

from lance_format.core.errors import CorruptFileError, NotFoundError
from lance_format.io.store import ObjectStore
from lance_format.table import _serde
from lance_format.table.model import Manifest, Transaction

__all__ = ["decode_manifest_file", "encode_manifest", "encode_manifest_file", "read_manifest", "read_section"]

MAGIC = b"LANC"
_FOOTER = struct.Struct("<QHH4s")
_U32 = struct.Struct("<I")
#: Bytes read from the end of a manifest first; small manifests come in one request.
PREFETCH_BYTES = 64 * 1024
#: The container version in the footer.
MAJOR, MINOR = 0, 2


def _sections(
    transaction: Transaction | None, index_section: bytes | None
) -> tuple[list[bytes], int | None, int | None, int]:
    """Encoded leading sections, the index and transaction positions, and the manifest position."""
    parts: list[bytes] = []
    pos = 0
    index_pos = txn_pos = None
    if index_section is not None:
        index_pos = pos
        parts += [_U32.pack(len(index_section)), index_section]
        pos += 4 + len(index_section)
    if transaction is not None:
        txn = _serde.transaction_to_bytes(transaction)
        txn_pos = pos
        parts += [_U32.pack(len(txn)), txn]
        pos += 4 + len(txn)
    return parts, index_pos, txn_pos, pos


def encode_manifest(
    manifest: Manifest, transaction: Transaction | None, index_section: bytes | None = None
) -> tuple[bytes, Manifest]:
    """The bytes of a manifest file, and the manifest with its section positions filled in."""
    parts, index_pos, txn_pos, pos = _sections(transaction, index_section)
    manifest = replace(manifest, index_section=index_pos, transaction_section=txn_pos)
    body = _serde.manifest_to_bytes(manifest)
    parts += [_U32.pack(len(body)), body, _FOOTER.pack(pos, MAJOR, MINOR, MAGIC)]
    return b"".join(parts), manifest


def encode_manifest_file(
    manifest: Manifest, transaction: Transaction | None, index_section: bytes | None = None
) -> bytes:
    """The bytes of a manifest file; section positions are filled into the manifest."""
    return encode_manifest(manifest, transaction, index_section)[0]


def decode_manifest_file(data: bytes, path: str, file_size: int | None = None) -> tuple[int, Manifest]:
    """``(manifest position, manifest)`` from the tail bytes of a manifest file.

    ``data`` must be the last bytes of the file (``file_size`` total; the whole file when omitted).
    """
    size = len(data) if file_size is None else file_size
    start = size - len(data)
    if size < _FOOTER.size + 4:
        raise CorruptFileError(path, f"manifest file of {size} bytes is too small")
    pos, _major, _minor, magic = _FOOTER.unpack_from(data, len(data) - _FOOTER.size)
    if magic != MAGIC:
        raise CorruptFileError(path, f"bad manifest magic {magic!r}")
    if pos < start or pos + 4 > size - _FOOTER.size:
        raise CorruptFileError(path, f"manifest position {pos} is outside the file")
    (length,) = _U32.unpack_from(data, pos - start)
    if length != size - pos - 4 - _FOOTER.size:
        raise CorruptFileError(
            path, f"manifest length {length} does not end at the footer (expected {size - pos - 20})"
        )
    body = bytes(data[pos - start + 4 : pos - start + 4 + length])
    return pos, _serde.manifest_from_bytes(body, path)


def read_manifest(store: ObjectStore, key: str, size: int | None = None) -> Manifest:
    """Read and decode a manifest file: one request for small files, at most two otherwise."""
    path = f"{store.uri}/{key}"
    try:
        if size is None:
            size, tail = store.read_tail(key, PREFETCH_BYTES)
        else:
            tail = store.read_range(key, max(0, size - PREFETCH_BYTES), size)
    except NotFoundError:
        raise NotFoundError(f"{path}: manifest not found") from None
    if len(tail) >= _FOOTER.size and tail[-4:] == MAGIC:
        pos = _FOOTER.unpack_from(tail, len(tail) - _FOOTER.size)[0]
        if pos < size - len(tail):
            tail = store.read_range(key, pos, size - len(tail)) + tail
    return decode_manifest_file(tail, path, size)[1]


def read_section(store: ObjectStore, key: str, pos: int) -> bytes:
    """A u32-length-prefixed section of a manifest file (index section or inline transaction)."""
    head = store.read_range(key, pos, pos + 4)
    if len(head) != 4:
        raise CorruptFileError(f"{store.uri}/{key}", f"section at {pos} is outside the file")
    (length,) = _U32.unpack(head)
    data = store.read_range(key, pos + 4, pos + 4 + length)
    if len(data) != length:
        raise CorruptFileError(f"{store.uri}/{key}", f"section at {pos} is truncated")
    return data
