"""Open file descriptors of local files, shared by every :class:`~lance_format.io.store.LocalStore`.

Reads on local disk are ``pread`` calls on descriptors kept open between reads (an ``open`` per
read costs more than the read of a small page). One process-wide cache bounds them all: a cache
per store would let a server that opens many datasets, or opens and deletes them, hold an
unbounded number of descriptors until the process runs out.

A descriptor is pinned while a read uses it, so evicting or forgetting it never closes it under
that read (which would fail it, or make it read whatever file the kernel gives the number to
next); the last reader closes it. A cached descriptor of a file since deleted or replaced under
its name (a dataset dropped and written again, by us or another process) is not reused.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from lance_format.core.config import env_setting
from lance_format.core.errors import NotFoundError, StorageError

__all__ = [
    "DESCRIPTORS",
    "Descriptor",
    "DescriptorCache",
    "default_max_open_files",
]


#: Descriptors kept open per process: engine setting ``max_open_files`` from the environment at
#: import (``LANCE_FORMAT_MAX_OPEN_FILES``; :mod:`lance_format.core.config` says why its default);
#: a server's session resizes :data:`DESCRIPTORS` from its config.
MAX_OPEN_FILES = env_setting("max_open_files")


def default_max_open_files() -> int:
    """Descriptors kept open by default (:data:`MAX_OPEN_FILES`)."""
    return MAX_OPEN_FILES


class Descriptor:
    """One open descriptor and how many reads are using it."""

    __slots__ = ("evicted", "fd", "users")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.users = 1
        self.evicted = False


class DescriptorCache:
    """A least-recently-used set of open read-only descriptors keyed by absolute path.

    Parameters
    ----------
    max_open:
        Descriptors kept open when no read holds them (pinned ones above it close on release).
    """

    def __init__(self, max_open: int) -> None:
        self.max_open = max(1, int(max_open))
        self._open: OrderedDict[str, Descriptor] = OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, path: str) -> Descriptor:
        """The descriptor of ``path``, pinned for the caller, who must :meth:`release` it.

        Raises
        ------
        NotFoundError
            ``path`` does not exist or is a directory.
        StorageError
            The file cannot be opened.
        """
        with self._lock:
            held = self._open.get(path)
            if held is not None:
                try:
                    stale = os.fstat(held.fd).st_nlink == 0  # deleted, or replaced by a rename
                except OSError:
                    stale = True
                if not stale:
                    held.users += 1
                    self._open.move_to_end(path)
                    return held
                self._drop_locked(path)
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError as e:
                raise NotFoundError(f"{path}: no such file") from e
            except IsADirectoryError as e:
                raise NotFoundError(f"{path}: is a directory") from e
            except OSError as e:
                raise StorageError(f"{path}: {e.strerror}") from e
            while len(self._open) >= self.max_open:
                self._drop_locked(next(iter(self._open)))
            held = Descriptor(fd)
            self._open[path] = held
            return held

    def release(self, held: Descriptor) -> None:
        """End a read begun with :meth:`acquire`."""
        with self._lock:
            held.users -= 1
            if held.evicted and held.users == 0:
                os.close(held.fd)

    def forget(self, path: str) -> None:
        """Stop caching ``path``'s descriptor (it was written or deleted through us)."""
        with self._lock:
            self._drop_locked(path)

    def forget_under(self, folder: str) -> None:
        """Stop caching every descriptor of a file under ``folder``."""
        prefix = folder.rstrip("/") + "/"
        with self._lock:
            for path in [p for p in self._open if p.startswith(prefix)]:
                self._drop_locked(path)

    def count_under(self, folder: str) -> int:
        """Descriptors cached for files under ``folder``."""
        prefix = folder.rstrip("/") + "/"
        with self._lock:
            return sum(1 for p in self._open if p.startswith(prefix))

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)

    def _drop_locked(self, path: str) -> None:
        held = self._open.pop(path, None)
        if held is not None:
            held.evicted = True
            if held.users == 0:
                os.close(held.fd)


#: The process's descriptor cache, used by every :class:`~lance_format.io.store.LocalStore`.
DESCRIPTORS = DescriptorCache(default_max_open_files())
