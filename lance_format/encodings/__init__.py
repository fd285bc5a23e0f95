"""Encodings: how a column's values become page buffers and back.

``v20`` holds the 2.0 array encodings; ``v21`` the 2.1/2.2 structural layouts; ``codecs`` the
buffer-level compression both use. This module dispatches on the file version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from lance_format.core.types import LanceField
    from lance_format.encodings.base import DecodeContext, IOGen, RowRuns

__all__ = ["FileVersion", "compile_kernels", "decode_column_encoding", "decode_field", "decode_page_encoding"]


class FileVersion(Protocol):
    """What dispatch needs of a file's version (:class:`lance_format.file.LanceFileVersion` is one;
    the file layer sits above this one, so it is named by what it does)."""

    @property
    def structural(self) -> bool:
        """Whether the file uses the 2.1+ structural layouts."""
        ...


def compile_kernels() -> float:
    """Compile (or load from the kernel cache) every encode/decode kernel; seconds taken.

    See :func:`lance_format.encodings.kernels.compile_kernels`.
    """
    from lance_format.encodings.kernels import compile_kernels as compile_all

    return compile_all()


def _codec_module(structural: bool) -> Any:
    """``v21`` or ``v20``, imported on first use (this package's import stays light) and then
    kept: a function-level import costs ~1.5 us per call, paid per column on every take."""
    mod = _MODULES.get(structural)
    if mod is None:
        if structural:
            from lance_format.encodings import v21 as mod
        else:
            from lance_format.encodings import v20 as mod
        _MODULES[structural] = mod
    return mod


_MODULES: dict[bool, Any] = {}


def decode_page_encoding(version: FileVersion, raw: tuple[str, bytes], path: str) -> Any:
    """Parse a page's serialized encoding into its dataclass tree."""
    if version.structural:
        return _codec_module(True).page_layout_from_raw(raw, path)
    return _codec_module(False).page_encoding_from_raw(raw, path)


def decode_column_encoding(version: FileVersion, raw: tuple[str, bytes], path: str) -> Any:
    """Parse a column's serialized column-level encoding (``ColumnEncoding``)."""
    return _codec_module(False).column_encoding_from_raw(raw, path)


def decode_field(
    version: FileVersion,
    ctx: DecodeContext,
    field: LanceField,
    columns_of: dict[int, int],
    runs: RowRuns,
) -> IOGen[pa.Array]:
    """Decoder generator for the selected rows of one top-level field (see ``base``)."""
    return _codec_module(version.structural).decode_field(ctx, field, columns_of, runs)  # type: ignore[no-any-return]
