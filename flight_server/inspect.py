"""``lance-flight inspect URI``: a dataset's versions, fragments, schema, encodings and indexes.

What ``parquet-tools inspect`` is for Parquet: plain-text tables read from the manifest and the
data files' column metadata (no data pages are read), for any dataset this engine opens, whoever
wrote it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import lance_format
from lance_format.dataset import LanceDataset
from lance_format.file import LanceFileReader
from lance_format.file.reader import assign_columns

__all__ = ["format_table", "inspect_dataset"]

#: Longest encoding description shown; deeper trees are cut with an ellipsis.
MAX_ENCODING_CHARS = 72


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> str:
    """Rows as an aligned text table (columns of numbers right-aligned), under an optional title."""
    values = [list(row) for row in rows]
    right = [
        bool(values) and all(isinstance(r[i], int | float) and not isinstance(r[i], bool) for r in values)
        for i in range(len(headers))
    ]
    cells = [[_cell(v) for v in row] for row in values]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]

    def line(texts: Sequence[str], align: Sequence[bool]) -> str:
        parts = [t.rjust(w) if r else t.ljust(w) for t, w, r in zip(texts, widths, align, strict=True)]
        return "  ".join(parts).rstrip()

    out = [title] if title else []
    out.append(line(list(headers), right))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r, right) for r in cells)
    if not cells:
        out.append("(none)")
    return "\n".join(out)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if value is None:
        return "-"
    return str(value)


def _size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _encoding(value: Any) -> str:
    """A short description of an encoding dataclass tree: ``MiniBlockLayout(Flat, ...)``."""
    if not dataclasses.is_dataclass(value):
        return type(value).__name__
    inner: list[str] = []
    for f in dataclasses.fields(value):
        child = getattr(value, f.name)
        items = child if isinstance(child, (tuple, list)) else (child,)
        inner.extend(_encoding(c) for c in items if dataclasses.is_dataclass(c))
    text = f"{type(value).__name__}({', '.join(inner)})" if inner else type(value).__name__
    return text if len(text) <= MAX_ENCODING_CHARS else text[: MAX_ENCODING_CHARS - 3] + "..."


def _columns(ds: LanceDataset) -> list[tuple[str, str, int, int]]:
    """Per column (dotted path): its page encodings, pages and bytes, summed over the data files."""
    paths: dict[int, str] = {}

    def walk(field: Any, prefix: str) -> None:
        path = f"{prefix}{field.name}"
        paths[field.id] = path
        for child in field.children:
            walk(child, f"{path}.")

    for field in ds.lance_schema.fields:
        walk(field, "")
    stats: dict[str, tuple[set[str], int, int]] = {}
    for fragment in ds.get_fragments():
        for data_file in fragment.data_files():
            reader = LanceFileReader(
                f"data/{data_file.path}", store=ds.store, size=data_file.file_size_bytes or None
            )
            meta = reader.metadata()
            by_column = {col: fid for fid, col in assign_columns(meta.lance_schema, meta.version).items()}
            for column in meta.columns:
                field_id = by_column.get(column.index)
                name = paths.get(field_id, f"#{column.index}") if field_id is not None else f"#{column.index}"
                encodings, pages, nbytes = stats.get(name, (set(), 0, 0))
                encodings |= {_encoding(p.encoding) for p in column.pages}
                nbytes += sum(sum(p.buffer_sizes) for p in column.pages) + sum(column.buffer_sizes)
                stats[name] = (encodings, pages + len(column.pages), nbytes)
            reader.close()
    return [
        (name, "; ".join(sorted(enc)) or "-", pages, nbytes) for name, (enc, pages, nbytes) in stats.items()
    ]


def inspect_dataset(
    uri: str, version: int | str | None = None, storage_options: dict[str, str] | None = None
) -> str:
    """The report ``lance-flight inspect`` prints for the dataset at ``uri``.

    Parameters
    ----------
    uri:
        The dataset's directory or object-store URI.
    version:
        A version number or tag (default: the latest).
    storage_options:
        Object-store options (endpoint, region, credentials).
    """
    ds = lance_format.dataset(uri, version=version, storage_options=storage_options)
    fragments = ds.get_fragments()
    total_bytes = sum(f.file_size_bytes for fr in fragments for f in fr.data_files())
    summary = [
        ("uri", uri),
        ("version", f"{ds.version} (latest {ds.latest_version})"),
        ("rows", ds.count_rows()),
        ("fragments", len(fragments)),
        ("data files", sum(len(fr.data_files()) for fr in fragments)),
        ("data bytes", f"{total_bytes:,} ({_size(total_bytes)})"),
        ("file format", ds.data_storage_version),
        ("stable row ids", ds.has_stable_row_ids),
    ]
    tags = ds.tags.list()
    sections = [format_table(["property", "value"], summary, "Dataset")]
    versions = []
    for entry in ds.versions():
        meta = entry.get("metadata") or {}
        named = ", ".join(sorted(t for t, v in tags.items() if _tag_version(v) == entry["version"]))
        versions.append(
            (entry["version"], str(entry["timestamp"])[:19], _int(meta.get("total_rows")), named or "-")
        )
    sections.append(format_table(["version", "timestamp", "rows", "tags"], versions, "Versions"))
    sections.append(
        format_table(
            ["column", "type", "nullable"],
            [(f.name, str(f.type), f.nullable) for f in ds.schema],
            "Schema",
        )
    )
    sections.append(
        format_table(
            ["id", "rows", "deleted", "files", "bytes"],
            [
                (
                    fr.fragment_id,
                    fr.physical_rows,
                    fr.num_deletions,
                    len(fr.data_files()),
                    _size(sum(f.file_size_bytes for f in fr.data_files())),
                )
                for fr in fragments
            ],
            "Fragments",
        )
    )
    sections.append(
        format_table(
            ["column", "encoding", "pages", "bytes"],
            [(name, enc, pages, _size(nbytes)) for name, enc, pages, nbytes in _columns(ds)],
            "Columns (page encodings and sizes over all data files)",
        )
    )
    sections.append(
        format_table(
            ["name", "type", "columns", "version", "fragments"],
            [
                (i["name"], i["type"], ", ".join(i["fields"]), i["version"], len(i["fragment_ids"]))
                for i in ds.list_indices()
            ],
            "Indexes",
        )
    )
    return "\n\n".join(sections) + "\n"


def _tag_version(value: Any) -> int | None:
    if isinstance(value, dict):
        return value.get("version")
    return getattr(value, "version", value if isinstance(value, int) else None)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
