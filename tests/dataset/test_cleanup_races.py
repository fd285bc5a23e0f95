"""Cleanup racing a commit: a version committed while cleanup runs keeps every file it needs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import LanceError, VersionNotFoundError
from lance_format.table import tags as tags_module


def _overwritten(tmp_path: Path) -> str:
    """A dataset whose version 1 (rows 0..99) is overwritten by version 2 (rows 0..4): removing
    version 1 removes its data file."""
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"a": list(range(100))}), uri)
    lance_format.write_dataset(pa.table({"a": list(range(5))}), uri, mode="overwrite")
    return uri


@contextmanager
def _before_manifest_put(store: Any, action: Callable[[], None]) -> Iterator[None]:
    """Runs ``action`` once, just before the first manifest put through ``store``."""
    real_put = store.put_if_not_exists
    done: list[bool] = []

    def action_then_put(key: str, data: bytes) -> bool:
        if key.startswith("_versions/") and not done:
            done.append(True)
            action()
        return bool(real_put(key, data))

    store.put_if_not_exists = action_then_put
    try:
        yield
    finally:
        del store.put_if_not_exists


def test_a_restore_committed_during_cleanup_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = _overwritten(tmp_path)
    ds = lance_format.dataset(uri)
    assert ds.version == 2
    real_list_tags = tags_module.list_tags
    restored: list[int] = []

    def list_tags_then_restore(store: Any) -> Any:
        # Another client restores version 1 after cleanup has read the versions it will keep.
        if not restored:
            old = lance_format.dataset(uri).checkout_version(1)
            old.restore()
            restored.append(lance_format.dataset(uri).version)
        return real_list_tags(store)

    monkeypatch.setattr(tags_module, "list_tags", list_tags_then_restore)
    ds.cleanup_old_versions(older_than=timedelta(0))
    assert restored == [3]
    latest = lance_format.dataset(uri)
    assert latest.version == 3
    assert latest.to_table().column("a").to_pylist() == list(range(100))


def test_a_stale_handle_commit_does_not_fill_a_cleaned_up_version(tmp_path: Path) -> None:
    # Found by tests/race (seed 1): a handle opened at version 1 deletes a row after another client
    # appended (versions 2, 3) and cleaned up versions 1 and 2. The delete tried version 2, whose
    # manifest cleanup had removed, so its put-if-not-exists won: it committed below the latest
    # version and the row stayed in the latest one (a silent lost write).
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"a": [1, 2, 3, 4]}), uri)
    stale = lance_format.dataset(uri)
    lance_format.write_dataset(pa.table({"a": [5]}), uri, mode="append")
    lance_format.write_dataset(pa.table({"a": [6]}), uri, mode="append")
    lance_format.dataset(uri).cleanup_old_versions(older_than=timedelta(0))
    assert [v["version"] for v in lance_format.dataset(uri).versions()] == [3]
    stale.delete("a = 1")
    assert stale.version == 4
    latest = lance_format.dataset(uri)
    assert latest.version == 4
    assert sorted(latest.to_table().column("a").to_pylist()) == [2, 3, 4, 5, 6]
    assert [v["version"] for v in latest.versions()] == [3, 4]


def test_a_tag_created_during_cleanup_keeps_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another client tags version 1 after cleanup has listed the tags, before it removes version 1.
    uri = _overwritten(tmp_path)
    ds = lance_format.dataset(uri)
    real_list_tags = tags_module.list_tags
    tagged: list[str] = []

    def list_tags_then_tag(store: Any) -> Any:
        found = real_list_tags(store)
        if not tagged:
            lance_format.dataset(uri, session=lance_format.Session()).tags.create("keep", 1)
            tagged.append("keep")
        return found

    monkeypatch.setattr(tags_module, "list_tags", list_tags_then_tag)
    ds.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    monkeypatch.undo()
    assert tagged == ["keep"]
    fresh = lance_format.dataset(uri, session=lance_format.Session())
    assert fresh.tags.list()["keep"]["version"] == 1
    assert lance_format.dataset(uri, "keep", session=fresh.session).to_table().column(
        "a"
    ).to_pylist() == list(range(100))


def test_a_tag_is_withdrawn_when_cleanup_removed_its_version_meanwhile(tmp_path: Path) -> None:
    # The creator's side of the same race: the version is gone once the tag is written.
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"a": [1]}), uri)
    lance_format.write_dataset(pa.table({"a": [2]}), uri, mode="overwrite")
    lance_format.dataset(uri).cleanup_old_versions(older_than=timedelta(0))
    store = lance_format.dataset(uri).store
    with pytest.raises(VersionNotFoundError):
        tags_module.create_tag(store, "late", 1, 100)
    assert tags_module.list_tags(store) == {}


def test_a_restore_committing_during_cleanup_keeps_the_files_it_copies(tmp_path: Path) -> None:
    # Another client's cleanup runs in full between the restore's read of version 1 and its
    # manifest put: it removed version 1 and its files, and the restored version 3 was unreadable.
    uri = _overwritten(tmp_path)
    old = lance_format.dataset(uri, session=lance_format.Session()).checkout_version(1)
    cleaner = lance_format.dataset(uri, session=lance_format.Session())
    cleaned: list[int] = []

    def cleanup() -> None:
        cleaned.append(cleaner.cleanup_old_versions(older_than=timedelta(0)).old_versions)

    with _before_manifest_put(old.store, cleanup):
        old.restore()
    assert len(cleaned) == 1
    latest = lance_format.dataset(uri, session=lance_format.Session())
    assert latest.version == 3
    assert latest.to_table().column("a").to_pylist() == list(range(100))


def _as_another_process(tmp_path: Path, uri: str) -> str:
    """``uri`` through a symbolic link: this process's commit lock is per dataset path, so commits
    through it race the commits through ``uri`` as another process's do (by the store's put)."""
    link = tmp_path / "elsewhere"
    link.symlink_to(Path(uri).parent, target_is_directory=True)
    return str(link / Path(uri).name)


def test_a_commit_does_not_fill_a_version_committed_and_cleaned_up_after_its_listing(tmp_path: Path) -> None:
    # Between a commit's listing of the versions (latest: 1) and its put of version 2, another
    # process appends versions 2 and 3 and cleans up versions 1 and 2. The put of version 2 won:
    # the delete landed under version 3, which still had the row (a lost write).
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"a": [1, 2, 3, 4]}), uri)
    other = _as_another_process(tmp_path, uri)
    ds = lance_format.dataset(uri, session=lance_format.Session())
    meanwhile: list[int] = []

    def commit_and_clean_up() -> None:
        session = lance_format.Session()
        lance_format.write_dataset(pa.table({"a": [5]}), other, mode="append", session=session)
        lance_format.write_dataset(pa.table({"a": [6]}), other, mode="append", session=session)
        cleaner = lance_format.dataset(other, session=session)
        meanwhile.append(cleaner.cleanup_old_versions(older_than=timedelta(0)).old_versions)

    with _before_manifest_put(ds.store, commit_and_clean_up):
        ds.delete("a = 1")
    assert len(meanwhile) == 1
    latest = lance_format.dataset(uri, session=lance_format.Session())
    assert sorted(latest.to_table().column("a").to_pylist()) == [2, 3, 4, 5, 6]
    assert ds.version == latest.version == 4


def test_a_reader_of_a_tag_created_during_cleanup_waits_for_its_version_to_be_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tag on version 1 is created after cleanup listed the tags, before it removed version 1:
    # cleanup puts the manifest back once it lists the tags again. A reader opening the tag in
    # between got VersionNotFoundError for a tag that exists (and keeps its version).
    uri = _overwritten(tmp_path)
    real_list_tags = tags_module.list_tags
    real_referenced = getattr(tags_module, "referenced", None)
    failed_once = threading.Event()  # or the reader is done
    calls: list[int] = []
    read: list[Any] = []

    def referenced(store: Any, version: int) -> bool:
        failed_once.set()  # asked only once a read of the version failed
        assert real_referenced is not None
        return bool(real_referenced(store, version))

    def read_tag() -> None:
        try:
            read.append(lance_format.dataset(uri, "keep", session=lance_format.Session()).to_table())
        except Exception as e:  # the assertion below shows it
            read.append(e)
        failed_once.set()

    reader = threading.Thread(target=read_tag)

    def list_tags_racing(store: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:  # cleanup's first listing: the tag comes right after it
            found = real_list_tags(store)
            lance_format.dataset(uri, session=lance_format.Session()).tags.create("keep", 1)
            return found
        if len(calls) == 2:  # after the manifests' deletes, before the put-back
            reader.start()
            assert failed_once.wait(10)
        return real_list_tags(store)

    monkeypatch.setattr(tags_module, "list_tags", list_tags_racing)
    monkeypatch.setattr(tags_module, "referenced", referenced, raising=False)
    lance_format.dataset(uri).cleanup_old_versions(
        older_than=timedelta(0), error_if_tagged_old_versions=False
    )
    reader.join(10)
    monkeypatch.undo()
    assert len(read) == 1
    assert isinstance(read[0], pa.Table), read
    assert read[0].column("a").to_pylist() == list(range(100))


def test_an_overwrite_of_an_old_version_s_fragments_committing_during_cleanup_keeps_them(
    tmp_path: Path,
) -> None:
    # LanceDataset.commit(Overwrite(fragments of version 1)) while another client's cleanup runs
    # in full just before its manifest put: cleanup removed version 1 and its data file, and the
    # committed version 3 named a file that was gone. The fragments' metadata now says which
    # version it was read from, and the commit pins that version.
    uri = _overwritten(tmp_path)
    old = lance_format.dataset(uri, session=lance_format.Session()).checkout_version(1)
    frags = [f.metadata for f in old.get_fragments()]
    cleaner = lance_format.dataset(uri, session=lance_format.Session())
    committer = lance_format.dataset(uri, session=lance_format.Session())

    def cleanup() -> None:
        cleaner.cleanup_old_versions(older_than=timedelta(0))

    # A typed refusal loses nothing (version 2 stays the latest): suppressed.
    with _before_manifest_put(committer.store, cleanup), contextlib.suppress(LanceError):
        lance_format.LanceDataset.commit(
            committer, lance_format.LanceOperation.Overwrite(old.schema, frags), read_version=2
        )
    latest = lance_format.dataset(uri, session=lance_format.Session())
    want = list(range(100)) if latest.version == 3 else list(range(5))
    assert sorted(latest.to_table().column("a").to_pylist()) == want
