"""The C heap of a serving process (glibc ``malloc``): how many arenas it may use, and what it holds.

glibc gives each thread that allocates its own arena, up to eight per core, and an arena keeps the
memory freed into it for its own threads: memory freed in one arena never serves an allocation
in another, and little of it goes back to the OS (``malloc_trim`` returned 3-20 MiB of ~160 MiB
free in a fuzz-run server, measured). A server runs ~80 threads (gRPC's, the engine's pools, the
fair scheduler's), so over a long run each of up to 16 arenas on two cores (128 on sixteen) comes
to hold its own high-water mark of transient buffers (decoded pages, request and response
messages), and the resident size climbs long after the caches stopped growing: the fuzz run's
RSS went from ~760 MiB at 20k calls to ~1.16 GiB at 100k, its caches at 2-22 MiB each.
Capping the arenas (``limits.mallocArenas``, ``mallopt(M_ARENA_MAX)``) makes freed memory serve
every thread again; Arrow's buffers come from its own pool (mimalloc), which this does not touch.

Only a process that is the server changes its allocator (:func:`flight_server.workers.serve`
without a stop event, and each worker); a host process that runs a server in-process keeps its own.
Elsewhere than glibc (musl, macOS) these functions do nothing and report nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform
from dataclasses import dataclass

__all__ = ["HeapStats", "heap_stats", "limit_arenas"]

#: ``mallopt`` parameter number of the arena cap (glibc's ``malloc.h``).
_M_ARENA_MAX = -8


class _MallInfo2(ctypes.Structure):
    # glibc's struct mallinfo2 (2.33+): every field a size_t.
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc with the functions used here, else None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        for name in ("mallopt", "mallinfo2", "malloc_info", "open_memstream"):
            getattr(libc, name)
    except (OSError, AttributeError):
        return None
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    libc.mallinfo2.restype = _MallInfo2
    libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
    libc.open_memstream.restype = ctypes.c_void_p
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def limit_arenas(arenas: int) -> bool:
    """Let this process's ``malloc`` use at most ``arenas`` arenas from now on.

    Threads that already have an arena keep it; every thread that later needs one shares the
    existing ones once there are ``arenas``. Call it early, before the server's threads start.

    Parameters
    ----------
    arenas:
        The cap; ``0`` leaves the allocator as it is (glibc's eight per core, or the environment's
        ``MALLOC_ARENA_MAX``).

    Returns
    -------
    bool
        Whether the cap was set (False for ``0`` and where the C library is not glibc).
    """
    libc = _glibc()
    if arenas <= 0 or libc is None:
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, int(arenas)))


@dataclass(frozen=True)
class HeapStats:
    """What the C heap holds (glibc's ``mallinfo2`` and ``malloc_info``).

    Attributes
    ----------
    in_use:
        Bytes handed out by ``malloc`` and not freed (Python's objects of more than 512 bytes,
        numpy arrays, gRPC's and protobuf's buffers; not Arrow's pool, not Python's small-object
        arenas).
    free:
        Bytes freed into the arenas and kept by them: allocator slack, resident when touched.
    arenas:
        Arenas in use (the main one included).
    """

    in_use: int
    free: int
    arenas: int


def heap_stats() -> HeapStats | None:
    """This process's :class:`HeapStats`, or None where the C library is not glibc."""
    libc = _glibc()
    if libc is None:
        return None
    info = libc.mallinfo2()
    in_use = int(info.uordblks + info.hblkhd)  # arena chunks in use + chunks mmapped on their own
    return HeapStats(in_use=in_use, free=int(info.fordblks), arenas=_arena_count(libc))


def _arena_count(libc: ctypes.CDLL) -> int:
    """Arenas listed by ``malloc_info`` (its XML has one ``<heap nr=...>`` element per arena)."""
    buf = ctypes.c_void_p()
    size = ctypes.c_size_t()
    stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not stream:
        return 0
    try:
        libc.malloc_info(0, stream)
    finally:
        libc.fclose(stream)
    try:
        return ctypes.string_at(buf.value, size.value).count(b"<heap nr=") if buf.value else 0
    finally:
        libc.free(buf)
