"""Byte-level facts of the Lance v2 file container: footer, offset tables, versions, padding."""

from __future__ import annotations

import operator
import struct
from dataclasses import dataclass
from enum import Enum

from lance_format.core.errors import CorruptFileError, NotSupportedError
from lance_format.core.records import fast_init

__all__ = [
    "FOOTER_LEN",
    "MAGIC",
    "PAD_BYTE",
    "PAGE_ALIGN",
    "Footer",
    "LanceFileVersion",
    "parse_footer",
    "parse_offset_table",
]

MAGIC = b"LANC"
FOOTER_LEN = 40
_FOOTER = struct.Struct("<QQQIIHH4s")
#: Page and global buffers start at multiples of this (readers of 2.1+ assert it for global buffers).
PAGE_ALIGN = 64
#: What pylance pads buffers with.
PAD_BYTE = b"H"


class LanceFileVersion(Enum):
    """Data storage versions, with the numbers in a file's footer and in a manifest's ``DataFile``."""

    V2_0 = "2.0"
    V2_1 = "2.1"
    V2_2 = "2.2"

    @property
    def footer(self) -> tuple[int, int]:
        """``(major, minor)`` written in the file footer (2.0 files say 0.3)."""
        return {"2.0": (0, 3), "2.1": (2, 1), "2.2": (2, 2)}[self.value]

    @property
    def manifest(self) -> tuple[int, int]:
        """``(file_major_version, file_minor_version)`` recorded for the file in a manifest."""
        return {"2.0": (2, 0), "2.1": (2, 1), "2.2": (2, 2)}[self.value]

    @property
    def structural(self) -> bool:
        """Whether the file uses the 2.1+ structural layouts (rep/def, mini-block, full-zip)."""
        return self is not LanceFileVersion.V2_0

    @staticmethod
    def from_footer(major: int, minor: int, path: str = "<file>") -> LanceFileVersion:
        if (major, minor) in ((0, 3), (2, 0)):
            return LanceFileVersion.V2_0
        if (major, minor) == (2, 1):
            return LanceFileVersion.V2_1
        if (major, minor) == (2, 2):
            return LanceFileVersion.V2_2
        if major == 0 and minor in (0, 1, 2):
            raise NotSupportedError(f"{path}: legacy Lance file (format {major}.{minor}) is not supported")
        raise NotSupportedError(f"{path}: unsupported Lance file format version {major}.{minor}")

    @staticmethod
    def parse(value: str | LanceFileVersion) -> LanceFileVersion:
        """Accept ``"2.0"``, ``"2.1"``, ``"2.2"``, ``"stable"`` (= 2.2, as pylance 14) or an enum."""
        if isinstance(value, LanceFileVersion):
            return value
        found = _VERSION_NAMES.get(value) if isinstance(value, str) else None
        if found is None:
            raise NotSupportedError(f"unsupported Lance file version {value!r}")
        return found


#: Every name :meth:`LanceFileVersion.parse` accepts (a lookup: every writer parses one).
_VERSION_NAMES = {
    **{v.value: v for v in LanceFileVersion},
    **{f"v{v.value}": v for v in LanceFileVersion},
    "stable": LanceFileVersion.V2_2,
}


@fast_init
@dataclass(frozen=True)
class Footer:
    """The 40-byte footer at the end of every v2 file."""

    column_meta_start: int
    column_meta_offsets_start: int
    global_buff_offsets_start: int
    num_global_buffers: int
    num_columns: int
    major_version: int
    minor_version: int

    def pack(self) -> bytes:
        return _FOOTER.pack(
            self.column_meta_start,
            self.column_meta_offsets_start,
            self.global_buff_offsets_start,
            self.num_global_buffers,
            self.num_columns,
            self.major_version,
            self.minor_version,
            MAGIC,
        )


def parse_footer(tail: bytes | memoryview, file_size: int, path: str) -> Footer:
    """Parse and sanity-check the footer from the file's last bytes."""
    if file_size < FOOTER_LEN or len(tail) < FOOTER_LEN:
        raise CorruptFileError(path, f"file is {file_size} bytes, too short for a Lance footer")
    raw = bytes(tail[-FOOTER_LEN:])
    cm, cmo, gbo, ngb, ncol, major, minor, magic = _FOOTER.unpack(raw)
    if magic != MAGIC:
        raise CorruptFileError(path, f"bad magic {magic!r} (expected {MAGIC!r}); not a Lance file")
    LanceFileVersion.from_footer(major, minor, path)
    end = file_size - FOOTER_LEN
    if not (cmo + 16 * ncol <= gbo and gbo + 16 * ngb == end):
        raise CorruptFileError(
            path,
            f"footer offsets are inconsistent (column metadata offsets at {cmo} for {ncol} columns, "
            f"global buffer offsets at {gbo} for {ngb} buffers, footer at {end})",
        )
    if cm > cmo:
        raise CorruptFileError(path, f"column metadata start {cm} is past its offset table at {cmo}")
    if ngb < 1:
        raise CorruptFileError(path, "no global buffers (the file descriptor is missing)")
    return Footer(cm, cmo, gbo, ngb, ncol, major, minor)


def parse_offset_table(
    data: bytes | memoryview, count: int, limit: int, what: str, path: str
) -> list[tuple[int, int]]:
    """Decode ``count`` ``(u64 position, u64 size)`` entries and check each lies within ``[0, limit)``.

    Plain ``struct`` and Python ints: a file of a few columns paid ~8 numpy calls (~20 us, 2-3x
    that after the thread waited on I/O) per table on every open."""
    if len(data) < 16 * count:
        raise CorruptFileError(path, f"{what} table is truncated")
    flat = struct.unpack_from(f"<{2 * count}Q", data)
    positions, sizes = flat[0::2], flat[1::2]
    if count and max(map(operator.add, positions, sizes)) > limit:
        raise CorruptFileError(path, f"{what} table points outside the file")
    return list(zip(positions, sizes, strict=True))
