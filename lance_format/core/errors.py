"""The one error hierarchy of :mod:`lance_format`.

Every error the engine raises derives from :class:`LanceError`. Where a built-in exception means the
same thing, the class inherits from it too, so ``except FileNotFoundError`` keeps working for callers
that do not know our types.
"""

from __future__ import annotations

__all__ = [
    "CommitConflictError",
    "CorruptFileError",
    "DatasetAlreadyExistsError",
    "InternalError",
    "InvalidInputError",
    "LanceError",
    "NotFoundError",
    "NotSupportedError",
    "RetryableCommitConflictError",
    "SchemaMismatchError",
    "SessionClosedError",
    "StorageError",
    "VersionNotFoundError",
]


class LanceError(Exception):
    """Base class of every error raised by :mod:`lance_format`."""


class InvalidInputError(LanceError, ValueError):
    """The caller passed an argument that cannot be honoured (bad column, index, filter, ...)."""


class SchemaMismatchError(InvalidInputError):
    """Data does not match the schema it is written against."""


class NotFoundError(LanceError, FileNotFoundError):
    """A file, dataset, version or tag does not exist."""


class VersionNotFoundError(NotFoundError, ValueError):
    """A version or tag of an existing dataset does not exist.

    Also a :class:`ValueError`, which is what pylance raises for it: code written for pylance
    (``except ValueError``) keeps working.
    """


class DatasetAlreadyExistsError(LanceError, FileExistsError):
    """A dataset was to be created where one already exists."""


class CorruptFileError(LanceError):
    """A file's bytes do not follow the Lance format (truncated, wrong magic, bad metadata)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: corrupt Lance file: {reason}")
        self.path = path
        self.reason = reason


class SessionClosedError(InvalidInputError):
    """Work was handed to a closed :class:`~lance_format.dataset.session.Session` (or one of its
    pools): like I/O on a closed file, a ``ValueError`` of the caller."""


class NotSupportedError(LanceError, NotImplementedError):
    """Valid input that uses a feature, version or encoding this implementation does not handle."""


class StorageError(LanceError, OSError):
    """The object store failed in a way retries did not fix."""


class CommitConflictError(LanceError):
    """A concurrent commit made this transaction impossible; it will not succeed on retry."""


class RetryableCommitConflictError(CommitConflictError):
    """A concurrent commit won the race; re-reading and retrying can succeed."""


class InternalError(LanceError, RuntimeError):
    """A bug: an invariant of this implementation did not hold."""
