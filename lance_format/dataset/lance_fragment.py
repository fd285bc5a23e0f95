"""``LanceFragment``: one fragment of a dataset version, as pylance's ``lance.LanceFragment``.

Kept apart from :mod:`lance_format.dataset.dataset` (which re-exports it) so that module stays
about the dataset; the fragment only reads through its dataset's snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.dataset as pds

from lance_format.core.errors import InvalidInputError, InvalidTypeError
from lance_format.core.types import LanceSchema
from lance_format.dataset.arrow_dataset import ArrowFragmentMixin, check_arrow_options
from lance_format.dataset.filters import Filter
from lance_format.dataset.operations import FragmentMetadata, create_fragment
from lance_format.dataset.scanner import LanceScanner
from lance_format.dataset.take import as_u64, take_addresses
from lance_format.table.model import DataFile, DataFragment

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["LanceFragment"]


class _Dataset(Protocol):
    """What a fragment needs of its ``LanceDataset`` (named structurally: that module imports
    this one)."""

    @property
    def snapshot(self) -> Snapshot: ...

    def get_fragment(self, fragment_id: int) -> LanceFragment | None: ...


class LanceFragment(ArrowFragmentMixin, pds.Fragment):  # type: ignore[misc]
    """One fragment of a dataset version (mirrors pylance's ``LanceFragment``).

    Also a ``pyarrow.dataset.Fragment``: DataFusion scans a dataset one ``fragment.scanner(...)`` per
    partition, with projection and filter pushed down.
    """

    def __init__(self, ds: _Dataset, frag: DataFragment) -> None:
        self._ds = ds
        #: The table model's fragment (what scans and takes use).
        self.fragment = frag

    @property
    def metadata(self) -> FragmentMetadata:
        """The fragment's metadata, as pylance's ``FragmentMetadata`` (``to_json`` ...)."""
        return replace(FragmentMetadata.of(self.fragment), source_version=self._ds.snapshot.version)

    @property
    def schema(self) -> pa.Schema:
        """The dataset version's schema (without the dataset's ``default_scan_options``, as
        pylance's)."""
        return self._ds.snapshot.schema

    @property
    def _arrow_schema(self) -> pa.Schema:
        return self._ds.snapshot.schema

    @property
    def fragment_id(self) -> int:
        """The fragment's id (the high 32 bits of its row addresses)."""
        return self.fragment.id

    @property
    def physical_rows(self) -> int:
        """Rows stored in the fragment's files, deleted ones included."""
        return self.fragment.physical_rows

    @property
    def num_deletions(self) -> int:
        """Rows of this fragment marked deleted."""
        return self.fragment.num_deleted_rows

    def count_rows(self, filter: Filter | None = None, **arrow_options: Any) -> int:
        """Live rows of this fragment (matching ``filter`` when given)."""
        check_arrow_options(arrow_options)
        if filter is None:
            return self.fragment.num_rows
        return self.scanner(columns=[], filter=filter).count_rows()

    def data_files(self) -> list[DataFile]:
        """The fragment's data files (:class:`~lance_format.table.model.DataFile`)."""
        return list(self.fragment.files)

    def deletion_file(self) -> str | None:
        """The path of the fragment's deletion file (relative to the dataset root), or ``None``."""
        d = self.fragment.deletion_file
        return None if d is None else d.key(self.fragment.id)

    def delete(self, predicate: Filter) -> FragmentMetadata | None:
        """Write a deletion file for the rows matching ``predicate``; the new metadata (``None``
        when no row is left) to commit with ``LanceOperation.Delete``."""
        from lance_format.dataset.fragment_api import delete_in_fragment

        return delete_in_fragment(self._ds.snapshot, self.fragment, predicate)

    def delete_rows(self, offsets: Iterable[int]) -> FragmentMetadata | None:
        """Delete the rows at these physical offsets within the fragment (0-based, deleted rows
        counted), as pylance's ``delete_rows``.

        Parameters
        ----------
        offsets
            Physical row offsets (converted with ``int()``, as pylance does); offsets already
            deleted and repeats are allowed.

        Returns
        -------
        FragmentMetadata or None
            The fragment with a new deletion file, or ``None`` when no row is left; commit it
            with ``LanceOperation.Delete`` (or ``Overwrite``).

        Raises
        ------
        InvalidInputError
            An offset at or past the fragment's physical rows.
        OutOfRangeError
            A negative offset or one beyond 32 bits.
        """
        from lance_format.dataset.fragment_api import delete_offsets_in_fragment

        return delete_offsets_in_fragment(self._ds.snapshot, self.fragment, offsets)

    def merge_columns(
        self,
        value_func: Any,
        columns: list[str] | None = None,
        batch_size: int | None = None,
        reader_schema: pa.Schema | None = None,
    ) -> tuple[FragmentMetadata, LanceSchema]:
        """Write new columns for this fragment (see :meth:`LanceDataset.add_columns`); returns
        ``(metadata, schema)`` to commit with ``LanceOperation.Merge``."""
        from lance_format.dataset.fragment_api import merge_columns

        return merge_columns(self._ds.snapshot, self.fragment, value_func, columns, batch_size, reader_schema)

    def merge(
        self,
        data_obj: Any,
        left_on: str,
        right_on: str | None = None,
        schema: pa.Schema | None = None,
    ) -> tuple[FragmentMetadata, LanceSchema]:
        """Left-join ``data_obj``'s columns into this fragment on ``left_on`` = ``right_on``, as
        pylance's ``LanceFragment.merge``.

        Parameters
        ----------
        data_obj
            A table, batch reader, pandas DataFrame or anything ``write_dataset`` reads: the key
            column ``right_on`` and the new columns.
        left_on
            The fragment's key column (``_rowid`` and ``_rowaddr`` too).
        right_on
            The key column of ``data_obj`` (``left_on`` when ``None``); it is not added.
        schema
            ``data_obj``'s schema, for inputs that need one (batch iterables).

        Returns
        -------
        tuple of FragmentMetadata and LanceSchema
            The fragment with one more data file holding the new columns, and the dataset schema
            with them; commit every fragment's with ``LanceOperation.Merge(fragments, schema)``.

        Raises
        ------
        InvalidInputError
            A key column missing on either side, key types that differ, a new column the
            dataset already has, ``data_obj`` of no rows or of the key only.

        Notes
        -----
        Rows without a match get nulls; a key repeated in ``data_obj`` takes its last row; null
        keys match nothing (as :meth:`LanceDataset.merge`).
        """
        from lance_format.dataset.fragment_api import merge_fragment_on_key

        return merge_fragment_on_key(self._ds.snapshot, self.fragment, data_obj, left_on, right_on, schema)

    def update_columns(
        self,
        data_obj: Any,
        left_on: str = "_rowid",
        right_on: str | None = None,
        schema: pa.Schema | None = None,
        *,
        with_offsets: bool = False,
    ) -> tuple[FragmentMetadata, list[int]] | tuple[FragmentMetadata, list[int], bytes]:
        """Rewrite existing columns from ``data_obj`` joined on ``left_on`` = ``right_on``; commit
        the result with ``LanceOperation.Update(updated_fragments=[...])``."""
        from lance_format.dataset.fragment_api import update_columns

        return update_columns(
            self._ds.snapshot, self.fragment, data_obj, left_on, right_on, schema, with_offsets=with_offsets
        )

    def scanner(self, schema: pa.Schema | None = None, **kwargs: Any) -> LanceScanner:
        """A scan of this fragment only; takes the parameters of :meth:`LanceDataset.scanner`
        (its dataset's ``default_scan_options`` do not apply, as in pylance).

        ``schema`` (pyarrow's first argument, the dataset schema) must be this version's schema.
        """
        if schema is not None and not schema.equals(self._ds.snapshot.schema):
            raise InvalidInputError("a Lance fragment is scanned with its dataset's own schema")
        if "fragments" in kwargs:
            raise InvalidTypeError("a fragment's scanner() got an unexpected keyword argument 'fragments'")
        return LanceScanner.open(self._ds.snapshot, fragments=[self.fragment], **kwargs)

    def to_pandas(self, **kwargs: Any) -> Any:
        """The fragment's rows as a pandas DataFrame; takes the parameters of :meth:`to_table`."""
        return self.to_table(**kwargs).to_pandas()

    def to_table(self, schema: pa.Schema | None = None, **kwargs: Any) -> pa.Table:
        """Read this fragment; takes the parameters of :meth:`LanceDataset.to_table`."""
        return self.scanner(schema, **kwargs).to_table()

    def to_batches(self, schema: pa.Schema | None = None, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        """Stream this fragment's batches; takes the parameters of :meth:`LanceDataset.scanner`."""
        return self.scanner(schema, **kwargs).to_batches()

    def head(self, num_rows: int, **kwargs: Any) -> pa.Table:
        """The fragment's first ``num_rows`` live rows."""
        return self.scanner(limit=num_rows, **kwargs).to_table()

    def take(
        self,
        indices: Sequence[int] | npt.ArrayLike,
        columns: Sequence[str] | None = None,
        **arrow_options: Any,
    ) -> pa.Table:
        """Rows at live-row offsets within this fragment, in the order given."""
        check_arrow_options(arrow_options)
        if isinstance(columns, dict):  # pylance's fragment take refuses it too (a TypeError there)
            raise InvalidInputError("a fragment's take takes column names, not {name: SQL expression}")
        wanted = as_u64(indices, "indices")
        if len(wanted) > 1 and bool((wanted[1:] < wanted[:-1]).any()):
            # pylance 14.0.2 refuses them too (repeats pass): its fragment reader reads forward only.
            at = int(np.flatnonzero(wanted[1:] < wanted[:-1])[0])
            raise InvalidInputError(
                f"Requested row indices are not strictly increasing at index {at}: "
                f"{int(wanted[at])} then {int(wanted[at + 1])} (a fragment's take reads in order)"
            )
        keep = self._ds.snapshot.fragment_reader(self.fragment).keep_mask()
        live = np.arange(self.physical_rows, dtype=np.uint64) if keep is None else np.flatnonzero(keep)
        if wanted.size and int(wanted.max()) >= len(live):
            bad = int(wanted.max())
            raise InvalidInputError(f"index {bad} out of range: the fragment has {len(live)} rows")
        addresses = (np.uint64(self.fragment_id) << np.uint64(32)) | live[wanted].astype(np.uint64)
        # pylance's fragment take keeps struct members in the order named (its dataset take does not).
        return take_addresses(self._ds.snapshot, addresses, columns, named_order=True)

    create = staticmethod(create_fragment)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_fragment_of, (self._ds, self.fragment_id))

    def __repr__(self) -> str:
        return f"LanceFragment(id={self.fragment_id}, physical_rows={self.physical_rows})"


def _fragment_of(ds: _Dataset, fragment_id: int) -> LanceFragment | None:
    return ds.get_fragment(fragment_id)
