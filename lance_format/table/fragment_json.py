"""Fragment metadata as JSON, in the shape of pylance's ``FragmentMetadata.to_json()``.

Staged writers (Flight ``stage`` mode, Spark tasks) ship fragments to the committer this way.
"""

from __future__ import annotations

from typing import Any

from lance_format.core.errors import InvalidInputError
from lance_format.table.model import DataFile, DataFragment, DeletionFile, DeletionFileType

__all__ = ["fragment_from_json", "fragment_to_json"]

_KINDS = {DeletionFileType.ARROW_ARRAY: "array", DeletionFileType.BITMAP: "bitmap"}


def fragment_to_json(frag: DataFragment) -> dict[str, Any]:
    """A JSON-ready dict (stable row ids and version sequences are not carried)."""
    d = frag.deletion_file
    return {
        "id": frag.id,
        "files": [
            {
                "path": f.path,
                "fields": list(f.fields),
                "column_indices": list(f.column_indices),
                "file_major_version": f.file_major_version,
                "file_minor_version": f.file_minor_version,
                "file_size_bytes": f.file_size_bytes,
                "base_id": f.base_id,
            }
            for f in frag.files
        ],
        "overlays": [],
        "physical_rows": frag.physical_rows,
        "deletion_file": None
        if d is None
        else {
            "read_version": d.read_version,
            "id": d.id,
            "file_type": _KINDS[d.file_type],
            "num_deleted_rows": d.num_deleted_rows,
            "base_id": d.base_id,
        },
        "row_id_meta": None,
        "created_at_version_meta": None,
        "last_updated_at_version_meta": None,
    }


#: Bit widths of the manifest fields a fragment document fills (``DataFragment.id`` and the row
#: counts are ``uint64``, file versions and base ids ``uint32``, field ids and column indices
#: ``int32``): a value outside its field cannot be written to a manifest.
_U64 = (0, (1 << 64) - 1)
_U32 = (0, (1 << 32) - 1)
_I32 = (-(1 << 31), (1 << 31) - 1)


def _int(value: Any, what: str, bounds: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"bad fragment metadata: {what} must be an integer, got {value!r:.40}")
    if not bounds[0] <= value <= bounds[1]:
        raise InvalidInputError(f"bad fragment metadata: {what} {value} is outside {bounds[0]}..{bounds[1]}")
    return int(value)


def _opt(value: Any, what: str, bounds: tuple[int, int]) -> int | None:
    return None if value is None else _int(value, what, bounds)


def fragment_from_json(doc: dict[str, Any]) -> DataFragment:
    """The inverse of :func:`fragment_to_json` (also reads pylance's output).

    Raises :class:`InvalidInputError` for a malformed document, including integers that do not fit
    their manifest field.
    """
    try:
        files = tuple(
            DataFile(
                str(f["path"]),
                tuple(_int(x, "field id", _I32) for x in f["fields"]),
                tuple(_int(x, "column index", _I32) for x in f.get("column_indices", [])),
                _int(f.get("file_major_version", 0), "file_major_version", _U32),
                _int(f.get("file_minor_version", 0), "file_minor_version", _U32),
                _int(f.get("file_size_bytes") or 0, "file_size_bytes", _U64),
                _opt(f.get("base_id"), "base_id", _U32),
            )
            for f in doc["files"]
        )
        deletion = None
        d = doc.get("deletion_file")
        if d:
            kind = DeletionFileType.BITMAP if d["file_type"] == "bitmap" else DeletionFileType.ARROW_ARRAY
            deletion = DeletionFile(
                kind,
                _int(d["read_version"], "deletion read_version", _U64),
                _int(d["id"], "deletion id", _U64),
                _int(d.get("num_deleted_rows") or 0, "num_deleted_rows", _U64),
                _opt(d.get("base_id"), "deletion base_id", _U32),
            )
        frag_id = _int(doc.get("id", 0), "fragment id", _U64)
        return DataFragment(frag_id, files, _int(doc["physical_rows"], "physical_rows", _U64), deletion)
    except InvalidInputError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidInputError(f"bad fragment metadata: {e!r}") from None
