"""Defects the long protocol fuzz run (tests/fuzz, issue 14) found, each pinned by a test.

A write or commit that stores something no later read can handle turns every later call on that
dataset into INTERNAL: such input must be refused up front as INVALID_ARGUMENT.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flight_server.catalog import Catalog
from flight_server.handlers.put import StreamCancelled, write_stream
from flight_server.requests import END_OF_WRITE, ActionRequest, WriteRequest
from lance_format.core.errors import NotFoundError
from tests.server.service_fixtures import Served, seed, table


def _dup_names(n: int) -> pa.Table:
    return pa.Table.from_arrays([pa.array(range(n)), pa.array(range(n))], names=["", ""])


@pytest.mark.parametrize("mode", ["create", "overwrite", "stage"])
def test_write_refuses_duplicate_column_names(served: Served, mode: str) -> None:
    # The fuzzer created a dataset with two columns named "": every later take and scan of it
    # ended INTERNAL (a bare KeyError from pyarrow's Schema.field). pylance refuses the write.
    c = served.client
    name = "fresh" if mode == "create" else "ds"
    if mode != "create":
        seed(served, "ds", n=20)

    def send() -> object:
        if mode == "stage":
            return c.stage(name, _dup_names(5))
        return c.write(name, _dup_names(5), mode=mode)

    with pytest.raises(pa.ArrowInvalid, match="duplicate field name"):
        send()
    if mode != "create":
        assert c.take("ds", [0, 1]).num_rows == 2
        assert c.scan("ds", with_row_id=True).num_rows == 20


def test_engine_refuses_duplicate_column_names(tmp_path: Any) -> None:
    import lance_format
    from lance_format.core.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="duplicate field name 'a'"):
        lance_format.write_dataset(
            pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"]), str(tmp_path / "d")
        )


def _staged_doc(served: Served) -> dict[str, Any]:
    result = served.client.stage("ds", table(10, 5000))
    doc = json.loads(result.fragments[0])
    assert isinstance(doc, dict)
    return doc


def _commit(served: Served, doc: dict[str, Any]) -> int:
    return served.client.action("commit", ActionRequest("ds", fragments=(json.dumps(doc).encode(),))).version


def _set(path: str, value: object) -> Any:
    def apply(doc: dict[str, Any]) -> None:
        target: Any = doc
        *head, last = path.split(".")
        for key in head:
            target = target[int(key)] if key.isdigit() else target[key]
        target[last] = value

    return apply


@pytest.mark.parametrize(
    "mutate",
    [
        # Integers that do not fit their manifest field: the fuzzer's id -2**63 failed the manifest
        # encoder with a bare ValueError (INTERNAL).
        _set("id", -(2**63)),
        _set("id", 2**64),
        _set("physical_rows", -1),
        _set("files.0.file_major_version", -1),
        _set("files.0.file_size_bytes", 2**64),
        _set("files.0.fields", [2**31]),
        _set("files.0.base_id", -1),
        _set("deletion_file", {"file_type": "bitmap", "read_version": 1, "id": -1}),
    ],
)
def test_commit_refuses_out_of_range_integers(served: Served, mutate: Any) -> None:
    seed(served, "ds", n=20)
    doc = _staged_doc(served)
    mutate(doc)
    with pytest.raises(pa.ArrowInvalid, match="outside"):
        _commit(served, doc)
    assert served.client.scan("ds").num_rows == 20


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        # Each of these was committed and then failed every read of the dataset.
        (_set("files.0.fields", [0, 0, 0, 0]), "twice"),  # ArrowInvalid from a cast: INTERNAL
        (_set("files.0.fields", [10**6, 1, 2, 3]), "schema lacks"),
        (_set("physical_rows", 2**32), "holds 10 rows"),
        (_set("physical_rows", 3), "holds 10 rows"),
        (_set("files.0.file_minor_version", 0), "file version"),
        (_set("files.0.file_size_bytes", 7), "bytes"),
        (_set("files.0.column_indices", [0, 1, 2, 99]), "no column 99"),
        (_set("files.0.path", "0" * 24 + "missing.lance"), "does not exist"),
        (_set("deletion_file", {"file_type": "bitmap", "read_version": 1, "id": 5}), "deletion file"),
        (_set("files", []), "no data files"),
    ],
)
def test_commit_refuses_fragments_that_do_not_describe_their_files(
    served: Served, mutate: Any, match: str
) -> None:
    seed(served, "ds", n=20)
    doc = _staged_doc(served)
    assert _commit(served, dict(doc)) == 2  # the document as staged commits
    mutate(doc)
    with pytest.raises(pa.ArrowInvalid, match=match):
        _commit(served, doc)
    c = served.client
    assert c.scan("ds").num_rows == 30
    assert c.scan("ds", with_row_id=True).num_rows == 30


class _Gone(Exception):
    pass


def _checkpoint_after(n: int) -> Any:
    calls = [0]

    def check() -> None:
        calls[0] += 1
        if calls[0] > n:
            raise _Gone()

    return check


def test_compaction_stops_at_a_checkpoint_with_nothing_committed(tmp_path: Any) -> None:
    # The fuzz run's compaction of a 300-column dataset grown to dozens of fragments ran past the
    # client's 30 s deadline and on after it: work is fragments x columns, so it must be stoppable.
    import lance_format

    path = str(tmp_path / "d")
    for i in range(6):
        lance_format.write_dataset(table(10, 100 * i), path, mode="append" if i else "create")
    ds = lance_format.dataset(path)
    with pytest.raises(_Gone):
        ds.compact_files(checkpoint=_checkpoint_after(3))
    again = lance_format.dataset(path)
    assert again.version == 6
    assert len(again.get_fragments()) == 6
    assert again.compact_files()["fragments_removed"] == 6
    assert lance_format.dataset(path).count_rows() == 60


def test_compact_action_stops_when_the_call_is_cancelled(served: Served) -> None:
    from flight_server.handlers.actions import run_action
    from flight_server.streams import CallCancelled

    c = served.client
    seed(served, "ds", n=60, rows_per_file=10)

    def cancelled() -> None:
        raise CallCancelled()

    with pytest.raises(CallCancelled):
        run_action(served.server.catalog, "compact", ActionRequest("ds"), checkpoint=cancelled)
    assert c.stats("ds")["fragments"] == 6
    assert c.compact("ds")["fragments_removed"] == 6


@dataclass
class _Chunk:
    data: pa.RecordBatch | None
    app_metadata: pa.Buffer | None = None


class _Stream:
    """What write_stream reads of a do_put reader: one batch and the end-of-write marker."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self.schema = batch.schema
        self.chunks = [_Chunk(batch), _Chunk(None, pa.py_buffer(END_OF_WRITE))]

    def __iter__(self) -> Iterator[_Chunk]:
        yield from self.chunks


def _cancelled_after(n: int) -> Callable[[], bool]:
    calls = [0]

    def cancelled() -> bool:
        calls[0] += 1
        return calls[0] > n

    return cancelled


@pytest.mark.parametrize("mode", ["create", "stage"])
def test_write_stops_between_files_when_the_call_is_cancelled(tmp_path: Path, mode: str) -> None:
    # The fuzz run's do_put of 144 rows x 300 columns with max_rows_per_file=10 (one file per ten
    # rows) ran past the client's deadline: the stream had ended, so nothing looked again.
    catalog = Catalog(str(tmp_path))
    batch = table(40).to_batches()[0]
    req = WriteRequest("ds", mode, 1, end_marker=True)
    with pytest.raises(StreamCancelled):
        write_stream(catalog, req, _Stream(batch), 1 << 30, cancelled=_cancelled_after(3))
    data = tmp_path / "ds" / "data"
    written = list(data.iterdir()) if data.exists() else []
    assert len(written) <= (0 if mode == "stage" else 3)  # a failed stage removes its files
    with pytest.raises(NotFoundError):
        catalog.open("ds", shared=False)


def test_overwrite_commit_of_data_staged_on_an_evolved_dataset_reads_back(served: Served) -> None:
    # Data staged with the dataset's own schema carries its field ids; after a column was dropped
    # and re-added they are not the fresh ids of the commit's Arrow schema. Old main committed the
    # files under fresh ids (every later scan failed on a cast); the commit check refuses that, so
    # the commit must take the dataset's ids.
    c = served.client
    seed(served, "ds", n=20)
    c.drop_columns("ds", ["x"])
    c.add_columns("ds", {"x": "CAST(id AS DOUBLE)"})
    schema = c.schema("ds")
    data = table(5).select(schema.names).cast(schema)
    staged = c.stage("ds", data)
    c.commit("ds", [staged], mode="overwrite")
    assert c.scan("ds").equals(data)


@pytest.mark.parametrize("column", ["_rowid", "_rowaddr", "_rowoffset"])
def test_dataset_columns_cannot_take_reserved_names(served: Served, column: str) -> None:
    # The fuzz run wrote a column named "_rowid" into a dataset; every take with_row_id of it then
    # selected a column that existed twice (a bare KeyError: INTERNAL). pylance refuses the name.
    c = served.client
    data = pa.table({column: pa.array([1, 2], pa.uint64()), "a": [1, 2]})
    with pytest.raises(pa.ArrowInvalid, match="reserved name"):
        c.write("fresh", data)
    seed(served, "ds", n=20)
    with pytest.raises(pa.ArrowInvalid, match="reserved name"):
        c.write("ds", data, mode="overwrite")
    with pytest.raises(pa.ArrowInvalid, match="reserved name"):
        c.add_columns("ds", {column: "id * 2"})
    with pytest.raises(pa.ArrowInvalid, match="reserved name"):
        c.stage("ds", data)  # staged under its own schema (for an overwrite)
    assert c.scan("ds", with_row_id=True).num_rows == 20


def test_commit_of_a_data_file_name_longer_than_a_file_name_can_be_is_invalid_input(served: Served) -> None:
    # Fuzz finding (seed 20261124, call #4016): the local store's stat failed with ENAMETOOLONG,
    # answered as INTERNAL (StorageError) instead of the client's bad input.
    seed(served, "ds", n=20)
    doc = _staged_doc(served)
    doc["files"][0]["path"] = "a" * 600 + ".lance"
    with pytest.raises(pa.ArrowInvalid, match="not a data file name"):
        _commit(served, doc)
    assert served.client.scan("ds").num_rows == 20


def test_a_substrait_filter_naming_fewer_fields_than_it_types_is_invalid_argument(served: Served) -> None:
    # Seed 18002 of the long fuzz run: a delete whose filter_substrait's base schema has fewer
    # names than fields (a mutated blob) ended INTERNAL (StopIteration); nothing may be deleted.
    import pyarrow.compute as pc
    import pyarrow.substrait as ps

    from lance_format._proto import substrait_pb2

    data = seed(served, "ds", n=20)
    message = substrait_pb2.ExtendedExpression.FromString(
        bytes(ps.serialize_expressions([pc.field("id") > 1], ["f"], data.schema))
    )
    del message.base_schema.names[2:]
    blob = message.SerializeToString()
    with pytest.raises(pa.ArrowInvalid, match="fewer names"):  # INVALID_ARGUMENT
        served.client.action("delete", ActionRequest("ds", filter_substrait=blob))
    assert served.client.scan("ds").num_rows == 20
