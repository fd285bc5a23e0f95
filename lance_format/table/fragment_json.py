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


def fragment_from_json(doc: dict[str, Any]) -> DataFragment:
    """The inverse of :func:`fragment_to_json` (also reads pylance's output)."""
    try:
        files = tuple(
            DataFile(
                str(f["path"]),
                tuple(int(x) for x in f["fields"]),
                tuple(int(x) for x in f.get("column_indices", [])),
                int(f.get("file_major_version", 0)),
                int(f.get("file_minor_version", 0)),
                int(f.get("file_size_bytes") or 0),
                None if f.get("base_id") is None else int(f["base_id"]),
            )
            for f in doc["files"]
        )
        deletion = None
        d = doc.get("deletion_file")
        if d:
            kind = DeletionFileType.BITMAP if d["file_type"] == "bitmap" else DeletionFileType.ARROW_ARRAY
            deletion = DeletionFile(
                kind,
                int(d["read_version"]),
                int(d["id"]),
                int(d.get("num_deleted_rows") or 0),
                None if d.get("base_id") is None else int(d["base_id"]),
            )
        return DataFragment(int(doc.get("id", 0)), files, int(doc["physical_rows"]), deletion)
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidInputError(f"bad fragment metadata: {e!r}") from None
