"""The requests and results of the Flight protocol as frozen dataclasses.

Everything but :mod:`flight_server._serde` works on these; the wire form (protobuf messages of
``protos/lance_flight/v1/flight.proto``) is converted there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = [
    "END_OF_WRITE",
    "ActionRequest",
    "ActionResult",
    "ScanRequest",
    "TagEntry",
    "TakeRequest",
    "VersionEntry",
    "WriteMode",
    "WriteRequest",
    "WriteResult",
]

#: ``auto`` is what a plain path descriptor means: create the dataset if missing, else append.
WriteMode = Literal["auto", "create", "append", "overwrite", "stage"]


@dataclass(frozen=True)
class ScanRequest:
    """A scan of one dataset version (a descriptor command or an endpoint ticket).

    ``fragment_ids`` / ``row_start`` / ``row_end`` are set by the planner on endpoint tickets:
    the scan covers those fragments, or live rows ``[row_start, row_end)`` of the one fragment.
    """

    dataset: str
    version: int | None = None
    tag: str | None = None
    columns: tuple[str, ...] | None = None
    filter_sql: str | None = None
    filter_substrait: bytes | None = None
    limit: int | None = None
    offset: int | None = None
    batch_size: int | None = None
    with_row_id: bool = False
    with_row_address: bool = False
    fragment_ids: tuple[int, ...] = ()
    row_start: int | None = None
    row_end: int | None = None
    max_rows_per_endpoint: int = 0


@dataclass(frozen=True, eq=False)
class TakeRequest:
    """Rows by row id or by logical offset (exactly one of the two), in the order asked."""

    dataset: str
    version: int | None = None
    tag: str | None = None
    row_ids: npt.NDArray[np.uint64] | None = None
    indices: npt.NDArray[np.uint64] | None = None
    columns: tuple[str, ...] | None = None
    with_row_id: bool = False
    with_row_address: bool = False

    @property
    def count(self) -> int:
        """How many rows are asked for."""
        chosen = self.row_ids if self.row_ids is not None else self.indices
        return 0 if chosen is None else len(chosen)


@dataclass(frozen=True)
class WriteRequest:
    """What a ``do_put`` writes and how."""

    dataset: str
    mode: WriteMode = "auto"
    max_rows_per_file: int | None = None
    data_storage_version: str | None = None
    enable_stable_row_ids: bool = False
    #: The stream ends with :data:`END_OF_WRITE` as app_metadata; without it nothing is committed.
    end_marker: bool = False


#: The app_metadata-only message that ends a write stream whose request set ``end_marker``.
END_OF_WRITE = b"lance-flight:end"


@dataclass(frozen=True)
class WriteResult:
    """``do_put``'s answer: the new version, or (stage mode) the staged fragments."""

    dataset: str
    version: int = 0
    rows_written: int = 0
    fragments: tuple[bytes, ...] = ()
    schema: pa.Schema | None = None


@dataclass(frozen=True)
class ActionRequest:
    """The body of any action; each action reads the fields it needs (see ``list_actions``)."""

    dataset: str = ""
    version: int | None = None
    tag: str = ""
    filter_sql: str | None = None
    filter_substrait: bytes | None = None
    transforms: dict[str, str] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    target_rows_per_fragment: int = 0
    older_than_seconds: float | None = None
    delete_unverified: bool = False
    schema: pa.Schema | None = None
    fragments: tuple[bytes, ...] = ()
    mode: WriteMode = "auto"
    read_version: int | None = None
    data_storage_version: str = ""
    enable_stable_row_ids: bool = False
    if_exists: bool = False


@dataclass(frozen=True)
class VersionEntry:
    """One version of a dataset."""

    version: int
    timestamp_ns: int
    metadata: dict[str, str]


@dataclass(frozen=True)
class TagEntry:
    """A tag and the version it names."""

    name: str
    version: int


@dataclass(frozen=True)
class ActionResult:
    """The answer of any action (fields not relevant to the action stay empty)."""

    dataset: str = ""
    version: int = 0
    rows: int = 0
    versions: tuple[VersionEntry, ...] = ()
    tags: tuple[TagEntry, ...] = ()
    counters: dict[str, int] = field(default_factory=dict)
    datasets: tuple[str, ...] = ()
    status: str = ""
    schema: pa.Schema | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain-dict view (what the Python client returns for stats-like actions)."""
        return {
            "dataset": self.dataset,
            "version": self.version,
            "rows": self.rows,
            "counters": dict(self.counters),
            "status": self.status,
        }
