"""Compiled kernels: the numba decorator every hot encode/decode loop uses, and its cache directory.

Kernels are ``@njit(nogil=True, cache=True)``: native speed, and they release the GIL so pages and
columns decode on every core of the process. Compiled machine code is cached on disk so a process
start loads it instead of compiling again (seconds per kernel). The cache directory comes from

1. ``LANCE_FORMAT_KERNEL_CACHE_DIR`` (the engine's own setting),
2. ``NUMBA_CACHE_DIR`` (numba's),
3. ``<temp dir>/lance-format-kernels-<uid>`` (writable in a read-only container whose ``/tmp`` is
   an emptyDir, as the Helm chart mounts it).

When the chosen directory cannot be written, kernels compile in memory on first use instead (each
process pays the compile time once; :func:`lance_format.encodings.compile_kernels` pays it at start).

``LANCE_FORMAT_KERNEL_SEED_DIR`` names kernels compiled ahead (the server image compiles them at
build time): files the cache lacks are copied from there before numba starts, so a fresh container
loads its kernels in about a second instead of compiling them for a minute or more. numba keys each
entry on the source file and the CPU, so a seed built for another CPU is simply not used.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, TypeVar, cast

from lance_format.core.config import KERNEL_CACHE_ENV, kernel_cache_dir_from_env, kernel_seed_dir_from_env

__all__ = [
    "KERNEL_CACHE_ENV",
    "kernel",
    "kernel_cache_dir",
    "kernel_cache_enabled",
    "seed_kernel_cache",
    "warm",
]


F = TypeVar("F", bound=Callable[..., Any])


def _default_dir() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"lance-format-kernels-{uid}")


def kernel_cache_dir() -> str:
    """The directory compiled kernels are cached in (see the module docstring for the order)."""
    return kernel_cache_dir_from_env() or _default_dir()


def _writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def seed_kernel_cache(cache_dir: str, seed_dir: str) -> int:
    """Copy the compiled kernels of ``seed_dir`` that ``cache_dir`` lacks, or holds older copies of,
    into it; returns how many files were copied (0 when the seed is missing: kernels then compile
    as usual).

    A cache entry older than the seed's is one a previous image left on a kept volume: numba would
    find it stale and compile again, so the seed's replaces it. A newer entry was compiled here
    after the seed was built and stays.
    """
    copied = 0
    if not os.path.isdir(seed_dir):
        return 0
    for root, _dirs, files in os.walk(seed_dir):
        target = os.path.join(cache_dir, os.path.relpath(root, seed_dir))
        for name in files:
            source = os.path.join(root, name)
            dest = os.path.join(target, name)
            try:
                if os.path.exists(dest) and os.stat(dest).st_mtime >= os.stat(source).st_mtime:
                    continue  # compiled here after the seed was built
                os.makedirs(target, exist_ok=True)
                shutil.copy2(source, dest)
            except OSError:
                continue  # a seed file we cannot copy is compiled instead
            copied += 1
    return copied


_CACHE_DIR = kernel_cache_dir()
_CACHE_ON = _writable(_CACHE_DIR)
_SEED_DIR = kernel_seed_dir_from_env()
if _CACHE_ON and _SEED_DIR:
    seed_kernel_cache(_CACHE_DIR, _SEED_DIR)
if _CACHE_ON:
    # numba reads its cache location when a kernel is decorated: set it before importing numba so
    # its config (which re-reads the environment) agrees.
    os.environ["NUMBA_CACHE_DIR"] = _CACHE_DIR

import numba  # noqa: E402

if _CACHE_ON:
    setattr(numba.config, "CACHE_DIR", _CACHE_DIR)  # noqa: B010 - not in numba's stubs


def kernel_cache_enabled() -> bool:
    """Whether compiled kernels are cached on disk (False: the cache directory is not writable)."""
    return _CACHE_ON


def kernel(fn: F) -> F:
    """Compile ``fn`` with numba in nopython mode, releasing the GIL, cached on disk when possible."""
    return cast(F, numba.njit(nogil=True, cache=_CACHE_ON)(fn))


def warm(fn: Callable[..., Any], *args: Any, readonly: tuple[int, ...] = ()) -> None:
    """Call kernel ``fn`` on (tiny) ``args`` so it is compiled or loaded from the cache now.

    numba compiles one specialization per argument type, and a read-only array (bytes read from a
    file, an Arrow buffer) is a different type from a writable one: each argument index listed in
    ``readonly`` is tried both ways, so no request meets a kernel still to compile.
    """
    import numpy as np

    for flags in itertools.product((False, True), repeat=len(readonly)):
        call = list(args)
        for i, ro in zip(readonly, flags, strict=True):
            if ro:
                a = np.array(call[i])
                a.setflags(write=False)
                call[i] = a
        fn(*call)
