"""The kernel seed directory (kernels compiled ahead, as the image bakes them in) fills a cache: what
the cache lacks or holds an older copy of is copied, what was compiled after the seed stays."""

from __future__ import annotations

import os
from pathlib import Path

from lance_format.core.jit import seed_kernel_cache


def _file(path: Path, text: str, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def test_seed_fills_missing_and_older_entries_and_keeps_newer_ones(tmp_path: Path) -> None:
    seed, cache = tmp_path / "seed", tmp_path / "cache"
    _file(seed / "pkg" / "a.nbi", "seed-a", 2_000)
    _file(seed / "pkg" / "b.nbi", "seed-b", 2_000)
    _file(seed / "pkg" / "c.nbi", "seed-c", 2_000)
    _file(cache / "pkg" / "b.nbi", "stale-b", 1_000)  # left by an older image on a kept volume
    _file(cache / "pkg" / "c.nbi", "fresh-c", 3_000)  # compiled here after the seed was built

    assert seed_kernel_cache(str(cache), str(seed)) == 2
    assert (cache / "pkg" / "a.nbi").read_text() == "seed-a"
    assert (cache / "pkg" / "b.nbi").read_text() == "seed-b"
    assert (cache / "pkg" / "c.nbi").read_text() == "fresh-c"
    # A second start copies nothing: the cache now holds the seed's entries.
    assert seed_kernel_cache(str(cache), str(seed)) == 0


def test_a_missing_seed_copies_nothing(tmp_path: Path) -> None:
    assert seed_kernel_cache(str(tmp_path / "cache"), str(tmp_path / "no-seed")) == 0
