"""The ``pyarrow.dataset.Dataset`` / ``Fragment`` protocol for Lance datasets.

``LanceDataset`` and ``LanceFragment`` subclass pyarrow's Cython ``Dataset`` and ``Fragment`` so
DuckDB, DataFusion, Polars and pyarrow itself accept them and push projections and filters down
into our scanner (DuckDB and DataFusion call ``scanner(columns=..., filter=<Expression>)``, and
DataFusion scans ``get_fragments()`` one ``fragment.scanner(schema, ...)`` per partition).

pyarrow's base classes wrap a C++ object that our subclasses never create: every inherited member
that would touch it must be overridden, or a call dereferences a null pointer and the process
crashes. The mixins below override the members our own classes do not define; the ones that need a
C++ dataset (joins, sorts, ``replace_schema``) run over the rows read through our scanner.

pyarrow's own static entry points that take a ``Dataset`` argument and read its C++ object
directly cannot be overridden: ``pyarrow.dataset.Scanner.from_dataset(ds)`` crashes (as it does
for pylance's dataset) and ``pyarrow.dataset.dataset([ds, ...])`` refuses; call ``ds.scanner(...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds

from lance_format.core.errors import InvalidInputError

if TYPE_CHECKING:
    from lance_format.dataset.filters import Filter

__all__ = ["ARROW_SCAN_OPTIONS", "ArrowDatasetMixin", "ArrowFragmentMixin", "check_arrow_options"]

#: Keyword arguments of ``pyarrow.dataset.Dataset.scanner`` that tune pyarrow's own scan machinery
#: (threads, readahead, memory pool). Our scanner has its own read-ahead and I/O scheduler, so these
#: are accepted for compatibility and have no effect.
ARROW_SCAN_OPTIONS = frozenset(
    {
        "batch_readahead",
        "fragment_readahead",
        "fragment_scan_options",
        "use_threads",
        "cache_metadata",
        "memory_pool",
    }
)


def check_arrow_options(options: dict[str, Any]) -> None:
    """Refuse keyword arguments that are neither ours nor pyarrow's scan tuning options."""
    unknown = sorted(set(options) - ARROW_SCAN_OPTIONS)
    if unknown:
        raise TypeError(f"unexpected scan arguments: {', '.join(unknown)}")


def _in_memory(data: Any) -> Any:
    """A pyarrow dataset over a Lance dataset's rows (for operations that need a C++ dataset)."""
    if isinstance(data, ArrowDatasetMixin):
        return pds.dataset(data.to_table())
    return data


class ArrowDatasetMixin:
    """Members of ``pyarrow.dataset.Dataset`` a Lance dataset answers itself."""

    # Provided by LanceDataset.
    schema: pa.Schema

    def to_table(self, *args: Any, **kwargs: Any) -> pa.Table:
        raise NotImplementedError  # pragma: no cover - LanceDataset defines it

    def scanner(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError  # pragma: no cover - LanceDataset defines it

    @property
    def partition_expression(self) -> pc.Expression:
        """Always true: a Lance dataset is not partitioned by file paths."""
        return pc.scalar(True)

    def filter(self, expression: Filter) -> pds.Dataset:
        """The rows matching ``expression`` as an in-memory ``pyarrow.dataset.Dataset``.

        The filter runs in our scanner (zone maps apply); the result is materialized.
        """
        return pds.dataset(self.to_table(filter=expression))

    def sort_by(self, sorting: str | Sequence[tuple[str, str]], **kwargs: Any) -> pds.Dataset:
        """Rows sorted by ``sorting`` (pyarrow's argument), as an in-memory dataset."""
        return _in_memory(self).sort_by(sorting, **kwargs)

    def join(self, right_dataset: Any, keys: Any, *args: Any, **kwargs: Any) -> pds.Dataset:
        """pyarrow's ``Dataset.join`` over this dataset's rows (either side may be a Lance dataset)."""
        return _in_memory(self).join(_in_memory(right_dataset), keys, *args, **kwargs)

    def join_asof(self, right_dataset: Any, on: str, by: Any, tolerance: int, **kwargs: Any) -> pds.Dataset:
        """pyarrow's ``Dataset.join_asof`` over this dataset's rows."""
        return _in_memory(self).join_asof(_in_memory(right_dataset), on, by, tolerance, **kwargs)

    def replace_schema(self, schema: pa.Schema) -> pds.Dataset:
        """This dataset's rows under a compatible ``schema`` (cast), as an in-memory dataset."""
        try:
            return pds.dataset(self.to_table().cast(schema))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
            raise InvalidInputError(f"cannot replace the schema: {e}") from None

    def _get_fragments(self, filter: Any = None) -> Any:
        raise TypeError("a Lance dataset has no C++ fragments; use get_fragments()")

    def _scanner_options(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a Lance dataset has no C++ scan options; use scanner()")

    def _scan_options(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a Lance dataset has no C++ scan options; use scanner()")


class ArrowFragmentMixin:
    """Members of ``pyarrow.dataset.Fragment`` a Lance fragment answers itself."""

    _arrow_schema: pa.Schema

    @property
    def partition_expression(self) -> pc.Expression:
        """Always true: fragments are not partitioned by path."""
        return pc.scalar(True)

    @property
    def physical_schema(self) -> pa.Schema:
        """The dataset version's Arrow schema (every fragment presents the whole schema)."""
        return self._arrow_schema
