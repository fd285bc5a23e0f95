"""Contract tests every ObjectStore backend passes, plus RangeReader accounting."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest

from lance_format.core.errors import CorruptFileError, NotFoundError, NotSupportedError
from lance_format.io.descriptors import DescriptorCache
from lance_format.io.fsspec_store import FsspecStore
from lance_format.io.reader import RangeReader
from lance_format.io.store import LocalStore, MemoryStore, ObjectStore, store_for_uri


@pytest.fixture(params=["local", "memory", "fsspec", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectStore]:
    if request.param == "local":
        s: ObjectStore = LocalStore(str(tmp_path))
    elif request.param == "s3":
        server = request.getfixturevalue("s3_server")
        s = store_for_uri(request.getfixturevalue("s3_uri"), server.storage_options)
    elif request.param == "fsspec":
        # fsspec's own in-memory filesystem, driven through the generic fsspec backend.
        s = FsspecStore(f"memory-fsspec://bucket/{uuid.uuid4().hex}", fs=fsspec.filesystem("memory"))
    else:
        s = MemoryStore(f"test-{tmp_path.name}")
    yield s
    s.close()


def test_write_read_size(store: ObjectStore) -> None:
    store.write("a/b.bin", b"0123456789")
    assert store.size("a/b.bin") == 10
    assert store.read_range("a/b.bin", 2, 5) == b"234"
    assert store.read_all("a/b.bin") == b"0123456789"
    assert store.read_tail("a/b.bin", 4) == (10, b"6789")
    assert store.read_tail("a/b.bin", 100) == (10, b"0123456789")
    store.write("a/b.bin", b"xy")
    assert store.read_all("a/b.bin") == b"xy"


def test_missing_object_is_not_found(store: ObjectStore) -> None:
    with pytest.raises(NotFoundError):
        store.size("nope")
    with pytest.raises(FileNotFoundError):  # NotFoundError is a FileNotFoundError
        store.read_range("nope", 0, 1)
    assert not store.exists("nope")
    store.delete("nope")  # absent: ignored


def test_modified_tells_when_an_object_was_written(store: ObjectStore) -> None:
    before = time.time()
    store.write("m/a.bin", b"x")
    assert store.put_if_not_exists("m/b.bin", b"y")
    for key in ("m/a.bin", "m/b.bin"):
        stamp = store.modified(key)
        assert stamp is not None
        # Object stores keep whole seconds (S3's Last-Modified); clocks may differ a little.
        assert before - 5 <= stamp <= time.time() + 5
    assert store.modified("m/nope") is None
    store.delete("m/a.bin")
    assert store.modified("m/a.bin") is None


def test_put_if_not_exists_is_exclusive(store: ObjectStore) -> None:
    assert store.put_if_not_exists("v/1", b"first")
    assert not store.put_if_not_exists("v/1", b"second")
    assert store.read_all("v/1") == b"first"


def test_put_if_not_exists_one_winner_under_contention(store: ObjectStore) -> None:
    wins: list[int] = []
    lock = threading.Lock()

    def attempt(i: int) -> None:
        if store.put_if_not_exists("race", str(i).encode()):
            with lock:
                wins.append(i)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert store.read_all("race") == str(wins[0]).encode()


def test_list_is_one_level(store: ObjectStore) -> None:
    store.write("d/x", b"1")
    store.write("d/y", b"22")
    store.write("d/sub/z", b"333")
    assert sorted(store.list("d")) == [("d/x", 1), ("d/y", 2)]
    assert list(store.list("missing")) == []


def test_list_dirs_names_the_folders_one_level_down(store: ObjectStore) -> None:
    store.write("top/a/_versions/1.manifest", b"m")
    store.write("top/a/data/f.lance", b"d")
    store.write("top/b/x", b"1")
    store.write("top/file", b"2")
    assert sorted(store.list_dirs("top")) == ["a", "b"]
    assert sorted(store.list_dirs("top/a")) == ["_versions", "data"]
    assert list(store.list_dirs("top/b")) == []
    assert list(store.list_dirs("missing")) == []


def test_walk_and_delete_all_reach_every_folder(store: ObjectStore) -> None:
    keys = ["top.bin", "a/1.bin", "a/b/2.bin", "a/b/c/3.bin", "z/4.bin"]
    for i, key in enumerate(keys):
        store.write(key, b"x" * i)
    assert sorted(store.walk()) == sorted((k, i) for i, k in enumerate(keys))
    assert sorted(k for k, _ in store.walk("a")) == ["a/1.bin", "a/b/2.bin", "a/b/c/3.bin"]
    assert store.delete_all() == len(keys)
    assert list(store.walk()) == []
    if store.remote:
        # SeaweedFS's filer keeps the emptied folders as prefixes (S3 itself has none): no objects.
        assert all(not list(store.walk(d)) for d in store.list_dirs())
    else:
        assert list(store.list_dirs()) == []
    assert store.delete_all() == 0


def test_range_reader_counts_requests_and_bytes(store: ObjectStore) -> None:
    store.write("f", bytes(range(256)) * 100)
    r = RangeReader(store, "f", size=25600)
    out = r.read([(0, 10), (20, 10), (20_000, 5)])
    assert [bytes(b) for b in out] == [
        bytes(range(10)),
        bytes(range(20, 30)),
        (bytes(range(256)) * 100)[20000:20005],
    ]
    if store.plan_limits.max_gap < 20_000:
        assert r.stats.requests == 2  # the first two merge (gap 10 < 4 KiB)
        assert r.stats.bytes_read == 30 + 5
    else:  # object stores merge across the 20 KB gap: one round trip is cheaper than two
        assert r.stats.requests == 1
        assert r.stats.bytes_read == 20_005


def test_range_reader_truncated_object_is_corrupt(store: ObjectStore) -> None:
    store.write("short", b"abc")
    r = RangeReader(store, "short", size=100)  # a size that lies, as a stale manifest could
    with pytest.raises(CorruptFileError, match="truncated"):
        r.read([(0, 50)])


def test_store_for_uri(tmp_path: Path) -> None:
    assert isinstance(store_for_uri(str(tmp_path)), LocalStore)
    assert isinstance(store_for_uri(f"file://{tmp_path}"), LocalStore)
    assert isinstance(store_for_uri("memory://bucket"), MemoryStore)
    with pytest.raises(NotSupportedError):
        store_for_uri("gopher://x/y")


def test_list_tagged_tells_an_object_rewritten_under_its_name_apart(store: ObjectStore) -> None:
    store.write("t/a.bin", b"same-size-1")
    (key, size, first), *_ = list(store.list_tagged("t"))
    assert (key, size) == ("t/a.bin", 11)
    assert list(store.list("t")) == [("t/a.bin", 11)]
    time.sleep(0.01)  # stores whose tag is a timestamp need the clock to move
    store.delete("t/a.bin")
    store.write("t/a.bin", b"same-size-2")
    (_, _, second), *_ = list(store.list_tagged("t"))
    assert first is not None
    assert second is not None
    assert first != second


def test_local_store_reads_a_file_replaced_behind_its_back(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    store.write("d/f.bin", b"old bytes")
    assert store.read_all("d/f.bin") == b"old bytes"  # descriptor now cached
    # Another process deletes the file and writes a new one under the same name.
    (tmp_path / "d" / "f.bin").unlink()
    (tmp_path / "d" / "f.bin").write_bytes(b"NEW BYTES")
    assert store.read_all("d/f.bin") == b"NEW BYTES"
    assert store.read_ranges("d/f.bin", [(0, 3)]) == [b"NEW"]
    (tmp_path / "d" / "f.bin").unlink()
    with pytest.raises(NotFoundError):
        store.read_all("d/f.bin")
    store.close()


def test_local_store_eviction_never_closes_a_descriptor_in_use(tmp_path: Path) -> None:
    """Many threads read many files through a store that can keep only 2 descriptors open: each
    read must return its own file's bytes (closing a descriptor another thread reads makes that
    read fail, or read whichever file the kernel hands the number to next)."""

    class TinyStore(LocalStore):
        descriptors = DescriptorCache(2)

    store = TinyStore(str(tmp_path))
    files = {f"f/{i}.bin": bytes([i]) * 4096 for i in range(12)}
    for key, data in files.items():
        store.write(key, data)
    errors: list[str] = []

    def reader(seed: int) -> None:
        keys = list(files)
        for n in range(400):
            key = keys[(seed * 7 + n) % len(keys)]
            try:
                got = store.read_ranges(key, [(0, 2048), (2048, 4096)])
            except Exception as e:  # any failure is the finding
                errors.append(f"{key}: {e!r}")
                return
            if b"".join(got) != files[key]:
                errors.append(f"{key}: read another file's bytes")
                return

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.open_descriptors() <= 2
    store.close()
    assert store.open_descriptors() == 0


def test_descriptors_stay_bounded_across_many_local_stores(tmp_path: Path) -> None:
    """Descriptors are bounded for the whole process, not per store: a server that opens (and
    drops) many datasets, each with stores of its own, must not run out of descriptors."""

    class SharedStore(LocalStore):
        descriptors = DescriptorCache(8)

    for i in range(40):
        store = SharedStore(str(tmp_path / f"ds{i}"))
        store.write("data/f.bin", b"x" * 10)
        store.write("data/g.bin", b"y" * 10)
        assert store.read_all("data/f.bin") == b"x" * 10
        assert store.read_all("data/g.bin") == b"y" * 10
    assert len(SharedStore.descriptors) == 8


def test_local_listing_skips_a_file_removed_while_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by tests/race's threaded run: a cleanup listed data/ while another client renamed its
    # temporary file into place, and the listing's stat of the vanished name raised an untyped
    # FileNotFoundError out of cleanup.
    store = LocalStore(str(tmp_path))
    store.write("data/a.lance", b"a")
    store.write("data/b.lance", b"bb")
    real = os.scandir

    def scandir_then_remove(path: Any) -> Any:
        entries = list(real(path))
        os.remove(os.path.join(str(path), "a.lance"))
        return iter(entries)

    monkeypatch.setattr(os, "scandir", scandir_then_remove)
    assert list(store.list("data")) == [("data/b.lance", 2)]
