"""pylance's distributed-write API against pylance itself: ``LanceOperation.*``, ``commit``,
``commit_batch``, ``Transaction``, ``FragmentMetadata`` JSON, ``write_fragments``,
``LanceFragment.create`` and the fragment methods whose results those operations commit.

Most tests run the same steps with each package (``mod`` is ``lance`` or ``lance_format``) on
copies of one dataset and compare the tables cell by cell; the cross tests write with one package
and commit or read with the other.
"""

from __future__ import annotations

import importlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

import lance_format
import lance_format.fragment
from lance_format.core.errors import CommitConflictError, NotSupportedError
from lance_format.dataset import Index as OurIndex

lance = pytest.importorskip("lance")
pytest.importorskip("lance.fragment")  # makes lance.fragment an attribute of lance

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

MODULES = [lance_format, lance]  # _both returns (ours, theirs)


def _table(n: int = 10, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def _rows(t: pa.Table) -> dict[str, list[Any]]:
    return t.sort_by("id").to_pydict() if "id" in t.column_names else t.to_pydict()


def _both(tmp_path: Path, base: Path | None, steps: Callable[[ModuleType, str], Any]) -> list[Any]:
    """``steps(mod, uri)`` for each package, on its own copy of ``base`` (or an empty path)."""
    out = []
    for mod in MODULES:
        uri = tmp_path / mod.__name__
        if base is not None:
            shutil.copytree(base, uri)
        out.append(steps(mod, str(uri)))
    return out


def _base(tmp_path: Path, n: int = 10, rows_per_file: int = 5) -> Path:
    path = tmp_path / "base"
    lance.write_dataset(_table(n), str(path), max_rows_per_file=rows_per_file)
    return path


def test_write_fragments_overwrite_then_append(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        frags = mod.fragment.write_fragments(_table(4), uri, max_rows_per_file=3)
        assert [f.id for f in frags] == [0, 0]
        assert [f.physical_rows for f in frags] == [3, 1]
        ds = mod.LanceDataset.commit(uri, mod.LanceOperation.Overwrite(_table(1).schema, frags))
        more = mod.fragment.write_fragments(_table(2, 100), uri)
        ds = mod.LanceDataset.commit(uri, mod.LanceOperation.Append(more), read_version=ds.version)
        frag_ids = [f.fragment_id for f in mod.dataset(uri).get_fragments()]
        return ds.version, frag_ids, _rows(mod.dataset(uri).to_table())

    ours, theirs = _both(tmp_path, None, steps)
    assert ours == theirs


@pytest.mark.parametrize(("writer", "committer"), [(lance, lance_format), (lance_format, lance)])
def test_fragments_shipped_as_json_between_packages(tmp_path: Path, writer: Any, committer: Any) -> None:
    uri = str(tmp_path / "ds")
    writer.write_dataset(_table(3), uri)
    shipped = [json.dumps(f.to_json()) for f in writer.fragment.write_fragments(_table(4, 10), uri)]
    frags = [committer.FragmentMetadata.from_json(doc) for doc in shipped]
    committer.LanceDataset.commit(uri, committer.LanceOperation.Append(frags), read_version=1)
    expected = _rows(pa.concat_tables([_table(3), _table(4, 10)]))
    for reader in MODULES:
        assert _rows(reader.dataset(uri).to_table()) == expected


def test_fragment_metadata_json_equals_pylance(tmp_path: Path) -> None:
    base = _base(tmp_path)
    lance.dataset(str(base)).delete("id in (1, 7)")
    ours = [f.metadata.to_json() for f in lance_format.dataset(str(base)).get_fragments()]
    theirs = [f.metadata.to_json() for f in lance.dataset(str(base)).get_fragments()]
    assert ours == theirs
    assert ours[0]["deletion_file"] is not None
    # And back: our from_json reads pylance's document to the same fragment.
    again = lance_format.FragmentMetadata.from_json(json.dumps(theirs[0]))
    assert again.to_json() == theirs[0]
    assert again.num_rows == 4
    assert again.num_deletions == 1


def test_read_version_is_required_except_overwrite_and_restore(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        frags = mod.fragment.write_fragments(_table(2, 50), uri)
        with pytest.raises(ValueError, match="read_version is required"):
            mod.LanceDataset.commit(uri, mod.LanceOperation.Append(frags))
        ds = mod.LanceDataset.commit(uri, mod.LanceOperation.Restore(1))
        return ds.version, _rows(ds.to_table())

    ours, theirs = _both(tmp_path, _base(tmp_path), steps)
    assert ours == theirs


def test_return_transaction_and_commit_message(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        txn = mod.fragment.write_fragments(_table(3, 20), uri, return_transaction=True)
        assert isinstance(txn, mod.Transaction)
        assert txn.read_version == 1
        assert type(txn.operation).__name__ == "Append"
        with pytest.raises(ValueError, match="commit_message"):  # a Transaction carries its own
            mod.LanceDataset.commit(uri, txn, commit_message="from a worker")
        ds = mod.LanceDataset.commit(uri, txn.operation, 1, commit_message="from a worker")
        new = mod.fragment.write_fragments(_table(2, 90), uri, mode="overwrite", return_transaction=True)
        assert type(new.operation).__name__ == "Overwrite"
        after = mod.LanceDataset.commit(uri, new)
        return ds.version, after.version, _rows(ds.to_table()), _rows(after.to_table())

    ours, theirs = _both(tmp_path, _base(tmp_path), steps)
    assert ours == theirs
    # The message is in the transaction's properties, where pylance reads it.
    txn = lance.dataset(str(tmp_path / "lance_format"), version=2).get_transactions(1)[0]
    assert txn.transaction_properties.get("__lance_commit_message") == "from a worker"


def test_fragment_create_and_commit_batch(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        a = mod.LanceFragment.create(uri, _table(2, 30))
        b = mod.LanceFragment.create(uri, _table(3, 40), fragment_id=7)
        assert (a.id, b.id, a.physical_rows, b.physical_rows) == (0, 7, 2, 3)
        txns = [mod.Transaction(1, mod.LanceOperation.Append([f])) for f in (a, b)]
        result = mod.LanceDataset.commit_batch(uri, txns)
        merged = result["merged"]
        assert len(merged.operation.fragments) == 2
        return result["dataset"].version, _rows(mod.dataset(uri).to_table())

    ours, theirs = _both(tmp_path, _base(tmp_path), steps)
    assert ours == theirs


def test_commit_batch_takes_appends_only(tmp_path: Path) -> None:
    uri = str(_base(tmp_path))
    op = lance_format.LanceOperation.Delete([], [0], "id < 5")
    with pytest.raises(NotSupportedError, match="append"):
        lance_format.LanceDataset.commit_batch(uri, [lance_format.Transaction(1, op)])


def test_fragment_delete_committed_as_delete(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        ds = mod.dataset(uri)
        f0, f1 = ds.get_fragments()
        kept = f0.delete("id in (1, 3)")
        assert f1.delete("id >= 0") is None  # every row gone
        assert kept is not None
        assert kept.num_deletions == 2
        op = mod.LanceOperation.Delete([kept], [f1.fragment_id], "id in (1, 3) or id >= 5")
        ds = mod.LanceDataset.commit(uri, op, read_version=ds.version)
        path = ds.get_fragments()[0].deletion_file()
        in_place = path is not None and path.startswith("_deletions/0-")
        return _rows(ds.to_table()), len(ds.get_fragments()), in_place

    ours, theirs = _both(tmp_path, _base(tmp_path), steps)
    assert ours == theirs
    assert ours[1] == 1
    assert ours[2]


def test_concurrent_deletes_of_one_fragment_conflict(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        ds = mod.dataset(uri)
        f0, f1 = ds.get_fragments()
        first = mod.LanceOperation.Delete([f0.delete("id = 0")], [], "id = 0")
        same = mod.LanceOperation.Delete([f0.delete("id = 1")], [], "id = 1")
        other = mod.LanceOperation.Delete([f1.delete("id = 9")], [], "id = 9")
        mod.LanceDataset.commit(uri, first, read_version=1)
        mod.LanceDataset.commit(uri, other, read_version=1)  # another fragment: rebased
        with pytest.raises(Exception, match=r"(?i)conflict") as err:
            mod.LanceDataset.commit(uri, same, read_version=1, max_retries=0)
        return _rows(mod.dataset(uri).to_table()), err.value

    ours, theirs = _both(tmp_path, _base(tmp_path), steps)
    assert ours[0] == theirs[0]
    assert isinstance(ours[1], CommitConflictError)
    assert "onflict" in str(theirs[1])


def test_merge_columns_committed_as_merge(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        ds = mod.dataset(uri)
        ds.delete("id = 2")
        ds = mod.dataset(uri)

        @mod.batch_udf()
        def doubled(batch: pa.RecordBatch) -> pa.RecordBatch:
            return pa.record_batch({"twice": pa.array([2 * x for x in batch["id"].to_pylist()])})

        frags, schema = [], None
        for frag in ds.get_fragments():
            meta, schema = frag.merge_columns(doubled, columns=["id"])
            frags.append(meta)
        ds = mod.LanceDataset.commit(uri, mod.LanceOperation.Merge(frags, schema), read_version=ds.version)
        sql = [f.merge_columns({"label": "concat(name, '!')"}) for f in ds.get_fragments()]
        ds = mod.LanceDataset.commit(
            uri, mod.LanceOperation.Merge([m for m, _ in sql], sql[-1][1]), read_version=ds.version
        )
        return _rows(ds.to_table()), ds.schema.names

    ours, theirs = _both(tmp_path, _base(tmp_path), steps)
    assert ours == theirs
    # What we committed, pylance reads the same.
    assert _rows(lance.dataset(str(tmp_path / "lance_format")).to_table()) == theirs[0]


def test_update_columns_committed_as_update(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        ds = mod.dataset(uri)
        frag = ds.get_fragments()[0]
        new = pa.table({"id": pa.array([1, 3, 99], pa.int64()), "name": ["one", "three", "none"]})
        meta, modified = frag.update_columns(new, left_on="id")
        ds = mod.LanceDataset.commit(
            uri,
            mod.LanceOperation.Update(updated_fragments=[meta], fields_modified=modified),
            read_version=ds.version,
        )
        by_rowid = pa.table({"_rowid": pa.array([(1 << 32) | 1], pa.uint64()), "name": ["six"]})
        meta, modified = ds.get_fragments()[1].update_columns(by_rowid)
        ds = mod.LanceDataset.commit(
            uri, mod.LanceOperation.Update(updated_fragments=[meta]), read_version=ds.version
        )
        return _rows(ds.to_table()), modified

    ours, theirs = _both(tmp_path, _base(tmp_path), steps)
    assert ours == theirs
    assert _rows(lance.dataset(str(tmp_path / "lance_format")).to_table()) == theirs[0]


def test_update_config_project_and_rewrite_operations(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        op = mod.LanceOperation
        ds = mod.dataset(uri)
        ds = mod.LanceDataset.commit(
            uri,
            op.UpdateConfig(
                config_updates=op.UpdateMap({"a": "1"}),
                table_metadata_updates=op.UpdateMap({"owner": "me"}),
            ),
            read_version=ds.version,
        )
        frags = ds.get_fragments()
        merged = mod.fragment.write_fragments(ds.to_table(), uri)
        ds = mod.LanceDataset.commit(
            uri,
            op.Rewrite([op.RewriteGroup([f.metadata for f in frags], merged)], []),
            read_version=ds.version,
        )
        ds = mod.LanceDataset.commit(uri, op.Project(ds.lance_schema), read_version=ds.version)
        return (
            ds.version,
            ds.config()["a"],
            len(ds.get_fragments()),
            _rows(ds.to_table()),
        )

    ours, theirs = _both(tmp_path, _base(tmp_path), steps)
    assert ours == theirs


def test_data_replacement(tmp_path: Path) -> None:
    def steps(mod: ModuleType, uri: str) -> Any:
        ds = mod.dataset(uri)
        frag = ds.get_fragments()[0]
        names = pa.table({"name": [f"new{i}" for i in range(5)]})
        scratch = f"{uri}_scratch"
        written = mod.fragment.write_fragments(names, scratch)[0].files[0]
        shutil.copy(Path(scratch) / "data" / written.path, Path(uri) / "data" / written.path)
        # The new file holds the dataset's field 1 ("name") as its column 0.
        major, minor = written.file_major_version, written.file_minor_version
        new_file = type(written)(written.path, [1], [0], major, minor)
        group = mod.LanceOperation.DataReplacementGroup(frag.fragment_id, new_file)
        op = mod.LanceOperation.DataReplacement([group])
        ds = mod.LanceDataset.commit(uri, op, read_version=ds.version)
        # Recorded as a DataReplacement, as both packages read the transaction back.
        kinds = [
            type(m.dataset(uri).get_transactions(1)[0].operation).__name__ for m in (lance, lance_format)
        ]
        return _rows(ds.to_table()), [len(f.data_files()) for f in ds.get_fragments()], kinds

    base = tmp_path / "base"
    lance.write_dataset(pa.table({"id": pa.array(range(5), pa.int64())}), str(base))
    lance.dataset(str(base)).add_columns({"name": "cast(id as string)"})  # "name" in a file of its own
    ours, theirs = _both(tmp_path, base, steps)
    assert ours == theirs
    assert ours[0]["name"] == [f"new{i}" for i in range(5)]
    assert ours[2] == ["DataReplacement", "DataReplacement"]


def test_unsupported_commit_options_are_refused(tmp_path: Path) -> None:
    uri = str(_base(tmp_path))
    frags = lance_format.fragment.write_fragments(_table(1), uri)
    append = lance_format.LanceOperation.Append(frags)
    with pytest.raises(NotSupportedError, match="detached"):
        lance_format.LanceDataset.commit(uri, append, 1, detached=True)
    with pytest.raises(NotSupportedError, match="commit_lock"):
        lance_format.LanceDataset.commit(uri, append, 1, commit_lock=object())
    meta = lance_format.FragmentMetadata(0, [], 1, overlays=[object()])
    with pytest.raises(NotSupportedError, match="overlays"):
        lance_format.LanceDataset.commit(uri, lance_format.LanceOperation.Append([meta]), 1)


def test_pylance_api_doc_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    page = (Path(__file__).parents[2] / "docs" / "pylance-api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 3
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "docs/pylance-api.md", "exec"), {})


@pytest.mark.parametrize("module", [lance, lance_format], ids=["pylance", "ours"])
def test_append_keeps_given_fragment_ids_as_pylance(tmp_path: Path, module: Any) -> None:
    """An ``Append`` keeps the non-zero ids its fragments carry, numbers the others after the
    largest id, orders the table's fragments by id and refuses a duplicate id (pylance's rules;
    we used to renumber every appended fragment)."""
    uri = str(tmp_path / "ds")
    module.write_dataset(pa.table({"id": [0]}), uri)
    given = [(9, 9), (0, 0), (5, 5), (1, 0)]  # (value, fragment id)
    frags = [module.LanceFragment.create(uri, pa.table({"id": [v]}), fragment_id=i) for v, i in given]
    module.LanceDataset.commit(uri, module.LanceOperation.Append(frags), read_version=1)
    ds = module.dataset(uri)
    assert [f.fragment_id for f in ds.get_fragments()] == [0, 1, 2, 5, 9]
    assert ds.to_table().column("id").to_pylist() == [0, 0, 1, 5, 9]
    late = module.LanceFragment.create(uri, pa.table({"id": [3]}), fragment_id=3)
    module.LanceDataset.commit(uri, module.LanceOperation.Append([late]), read_version=ds.version)
    module.write_dataset(pa.table({"id": [100]}), uri, mode="append")
    ds = module.dataset(uri)
    assert [f.fragment_id for f in ds.get_fragments()] == [0, 1, 2, 3, 5, 9, 10]
    assert ds.take([3, 6]).column("id").to_pylist() == [3, 100]
    dup = module.LanceFragment.create(uri, pa.table({"id": [7]}), fragment_id=1)
    with pytest.raises((OSError, ValueError), match="two fragments with id 1"):
        module.LanceDataset.commit(uri, module.LanceOperation.Append([dup]), read_version=ds.version)
    # Each package reads the other's result the same.
    other = lance_format if module is lance else lance
    assert other.dataset(uri).to_table().equals(ds.to_table())


def test_create_index_takes_pylance_index_objects(tmp_path: Path) -> None:
    """A distributed index build commits ``Index`` objects (here: one pylance built, re-committed
    under a new name); both engines commit the same operation and then list and use it alike."""
    src = str(tmp_path / "src")
    lance.write_dataset(pa.table({"a": list(range(100))}), src, max_rows_per_file=50)
    lance.dataset(src).create_scalar_index("a", "BTREE")
    seg = lance.dataset(src).describe_indices()[0].segments[0]
    listed = []
    for module, index_cls, sub in (
        (lance, importlib.import_module("lance.dataset").Index, "theirs"),
        (lance_format, OurIndex, "ours"),
    ):
        uri = str(tmp_path / sub)
        shutil.copytree(src, uri)
        old = index_cls(
            uuid=str(seg.uuid),
            name="a_idx",
            fields=[0],
            dataset_version=seg.dataset_version_at_last_update,
            fragment_ids={0, 1},
            index_version=seg.index_version,
            index_details=("/lance.table.BTreeIndexDetails", b""),
        )
        renamed = index_cls(**{**old.__dict__, "name": "by_a"})
        op = module.LanceOperation.CreateIndex(new_indices=[renamed], removed_indices=[old])
        module.LanceDataset.commit(uri, op, read_version=2)
        for reader in (lance, lance_format):
            ds = reader.dataset(uri)
            got = [
                (i["name"], i["type"], str(i["uuid"]), sorted(i["fragment_ids"])) for i in ds.list_indices()
            ]
            listed.append(got)
            assert ds.to_table(filter="a = 42").column("a").to_pylist() == [42]
    assert listed[0] == [("by_a", "BTree", str(seg.uuid), [0, 1])]
    assert all(x == listed[0] for x in listed)


def test_create_index_refuses_what_it_cannot_record(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance_format.write_dataset(pa.table({"a": [1, 2]}), uri)
    bad = OurIndex("u", "n", [0], 1, ["x"], 0)
    with pytest.raises(ValueError, match="fragment_ids must be integers"):
        lance_format.LanceDataset.commit(
            uri, lance_format.LanceOperation.CreateIndex([bad], []), read_version=1
        )
    covering = OurIndex("u", "n", [0], 1, {0}, 0, covering_fields=[1])
    with pytest.raises(NotSupportedError, match="covering"):
        lance_format.LanceDataset.commit(
            uri, lance_format.LanceOperation.CreateIndex([covering], []), read_version=1
        )


def test_data_replacement_takes_replaced_fragments_out_of_an_index(tmp_path: Path) -> None:
    """The index describes the old values: after a replacement, scans must read the fragment."""
    uri = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"id": pa.array(range(5), pa.int64())}), uri)
    lance.dataset(uri).add_columns({"name": "cast(id as string)"})
    ds = lance_format.dataset(uri)
    ds.create_scalar_index("name", "BTREE")
    scratch = str(tmp_path / "scratch")
    written = lance_format.fragment.write_fragments(
        pa.table({"name": [f"new{i}" for i in range(5)]}), scratch
    )
    data_file = written[0].files[0]
    shutil.copy(Path(scratch) / "data" / data_file.path, Path(uri) / "data" / data_file.path)
    new_file = type(data_file)(
        data_file.path, [1], [0], data_file.file_major_version, data_file.file_minor_version
    )
    op = lance_format.LanceOperation.DataReplacement(
        [lance_format.LanceOperation.DataReplacementGroup(0, new_file)]
    )
    ds = lance_format.LanceDataset.commit(uri, op, read_version=ds.version)
    assert ds.to_table(filter="name = 'new3'").column("id").to_pylist() == [3]
    assert ds.to_table(filter="name = '3'").num_rows == 0
    assert ds.list_indices()[0]["fragment_ids"] == set()
