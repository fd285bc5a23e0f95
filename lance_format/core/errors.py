"""The one error hierarchy of :mod:`lance_format`.

Every error the engine raises derives from :class:`LanceError`. Where a built-in exception means the
same thing, the class inherits from it too, so ``except FileNotFoundError`` keeps working for callers
that do not know our types. The built-ins are the ones pylance 14 raises for the same mistake, so
code written for pylance (``except OSError`` around a merge, ``except TypeError`` around a take of
strings) catches ours (tested call by call in ``tests/dataset/test_error_parity.py``).
"""

from __future__ import annotations

__all__ = [
    "ColumnNotFoundError",
    "CommitConflictError",
    "CorruptFileError",
    "DatasetAlreadyExistsError",
    "DatasetNotFoundError",
    "IndexNotFoundError",
    "InternalError",
    "InvalidInputError",
    "InvalidTypeError",
    "LanceError",
    "NotFoundError",
    "NotSupportedError",
    "OutOfRangeError",
    "RetryableCommitConflictError",
    "SchemaMismatchError",
    "SessionClosedError",
    "StorageError",
    "TagAlreadyExistsError",
    "VersionNotFoundError",
]


class LanceError(Exception):
    """Base class of every error raised by :mod:`lance_format`."""


class InvalidInputError(LanceError, ValueError, OSError):
    """The caller passed an argument that cannot be honoured (bad column, index, filter, ...).

    A ``ValueError``, and also an ``OSError``: pylance raises its "Invalid user input" errors as
    ``OSError`` from dataset operations (take, delete, count_rows, merge, add / alter columns,
    appends) and as ``ValueError`` from scans. Only an ``OSError`` with an ``errno`` is I/O.
    """


class InvalidTypeError(InvalidInputError, TypeError):
    """An argument of the wrong Python type (a string for a limit, a number for a filter): also a
    ``TypeError``, as pylance raises."""


class OutOfRangeError(InvalidInputError, OverflowError):
    """A number outside the range its argument takes (a negative row index or batch size): also an
    ``OverflowError``, as pylance raises (it converts them to unsigned integers)."""


class ColumnNotFoundError(InvalidInputError, KeyError):
    """A column the schema does not have, where pylance raises ``KeyError`` (an index's column)."""

    def __str__(self) -> str:  # KeyError's would quote the message
        return str(self.args[0]) if self.args else ""


class SchemaMismatchError(InvalidInputError):
    """Data does not match the schema it is written against."""


class NotFoundError(LanceError, FileNotFoundError):
    """A file, dataset, version or tag does not exist."""


class VersionNotFoundError(NotFoundError, ValueError):
    """A version or tag of an existing dataset does not exist.

    Also a :class:`ValueError`, which is what pylance raises for it: code written for pylance
    (``except ValueError``) keeps working.
    """


class IndexNotFoundError(NotFoundError, RuntimeError):
    """No index of that name: also a ``RuntimeError``, which pylance's ``drop_index`` raises."""


class DatasetNotFoundError(NotFoundError, ValueError):
    """No dataset at a URI: also a :class:`ValueError`, which pylance raises for it."""


class DatasetAlreadyExistsError(LanceError, FileExistsError):
    """A dataset was to be created where one already exists."""


class TagAlreadyExistsError(DatasetAlreadyExistsError, ValueError):
    """A tag was to be created under a name one already has: also a ``ValueError``, as pylance's."""


class CorruptFileError(LanceError):
    """A file's bytes do not follow the Lance format (truncated, wrong magic, bad metadata)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: corrupt Lance file: {reason}")
        self.path = path
        self.reason = reason


class SessionClosedError(InvalidInputError):
    """Work was handed to a closed :class:`~lance_format.dataset.session.Session` (or one of its
    pools): like I/O on a closed file, a ``ValueError`` of the caller."""


class NotSupportedError(LanceError, NotImplementedError, ValueError):
    """Valid input that uses a feature, version or encoding this implementation does not handle.

    Also a ``ValueError``: pylance raises its "Not supported" errors as one.
    """


class StorageError(LanceError, OSError):
    """The object store failed in a way retries did not fix."""


class CommitConflictError(LanceError):
    """A concurrent commit made this transaction impossible; it will not succeed on retry."""


class RetryableCommitConflictError(CommitConflictError):
    """A concurrent commit won the race; re-reading and retrying can succeed."""


class InternalError(LanceError, RuntimeError):
    """A bug: an invariant of this implementation did not hold."""
