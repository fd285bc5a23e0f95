"""General-purpose buffer compression as Lance frames it (``zstd``, ``lz4``).

* zstd: an 8-byte little-endian uncompressed length, then one zstd frame. Readers also accept a bare
  zstd frame (no prefix), which older writers produced; the two are told apart by the zstd magic.
* lz4: an LZ4 *block* preceded by its 4-byte little-endian uncompressed size.
"""

from __future__ import annotations

import struct

import lz4.block
import zstandard

from lance_format.core.errors import CorruptFileError, NotSupportedError

__all__ = ["compress", "decompress"]

_ZSTD_MAGIC = 0xFD2FB528
# zstd's own default; pylance uses the crate default (3) when no level is configured.
DEFAULT_ZSTD_LEVEL = 3


def compress(scheme: str, data: bytes | memoryview, level: int | None = None) -> bytes:
    """Compress one buffer with ``scheme`` in Lance's framing."""
    if scheme == "zstd":
        body = zstandard.ZstdCompressor(level=DEFAULT_ZSTD_LEVEL if level is None else level).compress(data)
        return struct.pack("<Q", len(data)) + body
    if scheme == "lz4":
        return bytes(lz4.block.compress(bytes(data), store_size=True))
    raise NotSupportedError(f"buffer compression {scheme!r} is not supported")


def decompress(scheme: str, data: bytes | memoryview, path: str = "<buffer>") -> bytes:
    """Undo :func:`compress`; malformed input raises :class:`CorruptFileError`."""
    raw = bytes(data)
    if not raw:
        return b""
    try:
        if scheme == "zstd":
            magic = struct.unpack_from("<I", raw)[0] if len(raw) >= 4 else 0
            if len(raw) < 8 or magic == _ZSTD_MAGIC:
                return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
            (size,) = struct.unpack_from("<Q", raw)
            out = zstandard.ZstdDecompressor().decompress(raw[8:], max_output_size=size)
            if len(out) != size:
                raise ValueError(f"expected {size} bytes, got {len(out)}")
            return out
        if scheme == "lz4":
            return bytes(lz4.block.decompress(raw))
    except (zstandard.ZstdError, lz4.block.LZ4BlockError, ValueError, struct.error) as e:
        raise CorruptFileError(path, f"{scheme} buffer does not decompress: {e}") from None
    raise NotSupportedError(f"{path}: buffer compression {scheme!r} is not supported")
