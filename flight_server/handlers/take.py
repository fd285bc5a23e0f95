"""Takes: rows by row id or logical offset, in the order asked, within the take-size limit."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from flight_server.catalog import Catalog
from flight_server.handlers.scan import open_version
from flight_server.requests import TakeRequest
from lance_format import LanceDataset
from lance_format.core.errors import InvalidInputError

__all__ = ["check_take_size", "take_rows", "take_table"]


def check_take_size(count: int, max_rows: int) -> None:
    """Refuse takes above ``limits.maxTakeRows`` (a scan in disguise, buffered whole in memory)."""
    if count > max_rows:
        raise InvalidInputError(
            f"take of {count} rows exceeds the server limit of {max_rows} (limits.maxTakeRows); "
            "use a scan or split the take"
        )


def take_rows(
    ds: LanceDataset,
    req: TakeRequest,
    row_ids: npt.NDArray[np.uint64] | None,
    indices: npt.NDArray[np.uint64] | None,
) -> pa.Table:
    """Rows of ``ds`` by ``row_ids`` or ``indices`` with ``req``'s columns and options."""
    columns = list(req.columns) if req.columns is not None else None
    if row_ids is not None:
        return ds.take_rows(
            row_ids, columns, with_row_id=req.with_row_id, with_row_address=req.with_row_address
        )
    if indices is None:
        raise InvalidInputError("a take needs row_ids or indices")
    return ds.take(indices, columns, with_row_id=req.with_row_id, with_row_address=req.with_row_address)


def take_table(catalog: Catalog, req: TakeRequest, max_rows: int) -> pa.Table:
    """The rows a take ticket asks for."""
    check_take_size(req.count, max_rows)
    ds = open_version(catalog, req.dataset, req.version, req.tag)
    return take_rows(ds, req, req.row_ids, req.indices)
