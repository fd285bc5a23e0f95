"""A bad call raises an error of ours that is also the built-in exception pylance raises for it.

Code written for pylance catches ``OSError`` around a merge, ``TypeError`` around a take of strings,
``ValueError`` around opening a missing dataset; with ``import lance_format as lance`` the same
``except`` must catch our typed error (:mod:`lance_format.errors`). Every method below is called with
every value of :data:`BAD_VALUES` in each of its argument slots, on both engines: where pylance
raises, ours must raise a :class:`~lance_format.errors.LanceError` that is an instance of pylance's
exception's built-in class (``pyarrow.ArrowInvalid`` is a ``ValueError``; a pyo3 panic only asks for
a typed error); where pylance answers, so must we.
"""

from __future__ import annotations

import builtins
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import LanceError

lance = pytest.importorskip("lance", reason="pylance (the test oracle) is not installed")

pytestmark = pytest.mark.interop

TABLE = pa.table(
    {
        "a": pa.array(range(10), pa.int64()),
        "s": [str(i) for i in range(10)],
        "st": [{"x": i} for i in range(10)],
    }
)

#: Values that are wrong somewhere: of the wrong type, out of range, naming nothing, empty.
BAD_VALUES: dict[str, Any] = {
    "str": "x",
    "empty str": "",
    "float": 1.5,
    "negative": -1,
    "2**64": 2**64,
    "list of str": ["nope"],
    "list of negative": [-1],
    "list of float": [0.5],
    "dict": {"nope": 1},
    "bytes": b"x",
    "object": object(),
}

Method = Callable[[Any, Any], object]

#: (method, value) pairs left out, with why: pylance 14.0.2 reads a dict ``filter=`` as something
#: else and answers the scan unfiltered; ours refuses anything but SQL text or an Expression.
KNOWN = {("to_table(filter)", "dict")}

#: Calls that only read, each taking the bad value in one slot.
READS: dict[str, Method] = {
    "take(indices)": lambda ds, v: ds.take(v),
    "take(columns)": lambda ds, v: ds.take([0], columns=v),
    "to_table(columns)": lambda ds, v: ds.to_table(columns=v),
    "to_table(filter)": lambda ds, v: ds.to_table(filter=v),
    "to_table(limit)": lambda ds, v: ds.to_table(limit=v),
    "to_table(offset)": lambda ds, v: ds.to_table(offset=v),
    "to_table(batch_size)": lambda ds, v: ds.to_table(batch_size=v),
    "to_table(order_by)": lambda ds, v: ds.to_table(order_by=v),
    "to_table(with_row_id)": lambda ds, v: ds.to_table(with_row_id=v),
    "count_rows(filter)": lambda ds, v: ds.count_rows(filter=v),
    "head(n)": lambda ds, v: ds.head(v),
    "checkout_version(v)": lambda ds, v: ds.checkout_version(v),
    "get_fragment(id)": lambda ds, v: ds.get_fragment(v),
    "fragment.take(indices)": lambda ds, v: ds.get_fragments()[0].take(v),
    "fragment.to_table(filter)": lambda ds, v: ds.get_fragments()[0].to_table(filter=v),
    "tags.get_version(name)": lambda ds, v: ds.tags.get_version(v),
}

#: Calls that may commit (each runs on its own copy of the dataset).
WRITES: dict[str, Method] = {
    "delete(predicate)": lambda ds, v: ds.delete(v),
    "add_columns(transforms)": lambda ds, v: ds.add_columns(v),
    "drop_columns(columns)": lambda ds, v: ds.drop_columns(v),
    "alter_columns(alteration)": lambda ds, v: ds.alter_columns(v),
    "create_scalar_index(column)": lambda ds, v: ds.create_scalar_index(v, "BTREE"),
    "tags.create(version)": lambda ds, v: ds.tags.create("t", v),
    "merge(data)": lambda ds, v: ds.merge(v, "a"),
    "update_schema_metadata(values)": lambda ds, v: ds.update_schema_metadata(v),
}

#: Single bad calls whose mistake is not a value of :data:`BAD_VALUES`.
SINGLE: dict[str, Method] = {
    "open a missing dataset": lambda ds, uri: type(ds)(uri + "_missing"),
    "open a missing version": lambda ds, uri: type(ds)(uri, version=99),
    "take past the end": lambda ds, uri: ds.take([100]),
    "fragment take past the end": lambda ds, uri: ds.get_fragments()[0].take([100]),
    "filter of a missing column": lambda ds, uri: ds.to_table(filter="nope > 1"),
    "count_rows of a missing column": lambda ds, uri: ds.count_rows(filter="nope > 1"),
    "delete of a missing column": lambda ds, uri: ds.delete("nope > 1"),
    "computed column of only literals": lambda ds, uri: ds.to_table(columns={"v": "1"}),
    "take of only literals": lambda ds, uri: ds.take([0, 1], columns={"v": "1", "w": "'x'"}),
    "computed column dividing by zero": lambda ds, uri: ds.to_table(columns={"v": "a / 0"}),
    "unsupported cast": lambda ds, uri: ds.to_table(columns={"v": "cast(a as int32)"}),
    "add an existing column": lambda ds, uri: ds.add_columns({"a": "a + 1"}),
    "add bad SQL": lambda ds, uri: ds.add_columns({"z": "a +"}),
    "alter a missing column": lambda ds, uri: ds.alter_columns({"path": "nope", "name": "x"}),
    "cast string to int": lambda ds, uri: ds.alter_columns({"path": "s", "data_type": pa.int64()}),
    "rename onto a column": lambda ds, uri: ds.alter_columns({"path": "a", "name": "s"}),
    "merge on keys of two types": lambda ds, uri: ds.merge(
        pa.table({"a": pa.array([1], pa.int32()), "w": [1]}), "a"
    ),
    "merge without the key": lambda ds, uri: ds.merge(pa.table({"w": [1]}), "a"),
    "tag created twice": lambda ds, uri: (ds.tags.create("dup", 1), ds.tags.create("dup", 1)),
    "append another schema": lambda ds, uri: _write(ds)(pa.table({"q": [1]}), uri, mode="append"),
    "append another type": lambda ds, uri: _write(ds)(
        pa.table({"a": ["x"], "s": ["y"], "st": [{"x": 1}]}), uri, mode="append"
    ),
    "write a number": lambda ds, uri: _write(ds)(5, uri + "_w"),
    "write an unknown file version": lambda ds, uri: _write(ds)(
        TABLE, uri + "_v", data_storage_version="9.9"
    ),
    "merge_insert of another schema": lambda ds, uri: (
        ds.merge_insert("a").when_matched_update_all().execute(pa.table({"a": [1], "q": [2]}))
    ),
    "cleanup_old_versions of a string": lambda ds, uri: ds.cleanup_old_versions("x"),
}


def _write(ds: Any) -> Callable[..., Any]:
    return lance.write_dataset if isinstance(ds, lance.LanceDataset) else lance_format.write_dataset


def _answer(call: Callable[[], object]) -> BaseException | None:
    try:
        call()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # pyo3's PanicException is a BaseException
        return e
    return None


def _builtin(exc: BaseException) -> type[BaseException]:
    """The first built-in class of ``exc``'s (``ArrowInvalid`` is a ``ValueError``)."""
    return next(k for k in type(exc).__mro__ if getattr(builtins, k.__name__, None) is k)


def _check(theirs: BaseException | None, ours: BaseException | None, what: str) -> None:
    if theirs is None:
        assert ours is None, f"{what}: pylance answers, ours raises {ours!r}"
        return
    assert isinstance(ours, LanceError), f"{what}: pylance raises {theirs!r}, ours {ours!r}"
    kind = _builtin(theirs)
    if type(theirs).__name__ == "PanicException" or kind in (AttributeError, RuntimeError):
        return  # pylance crashed or tripped over the value; a typed error is all we ask
    assert isinstance(ours, kind), f"{what}: pylance raises {kind.__name__} ({theirs}), ours {ours!r}"


@pytest.fixture(scope="module")
def uris(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("errors")
    out = {}
    for engine in (lance, lance_format):
        out[engine.__name__] = str(root / engine.__name__)
        engine.write_dataset(TABLE, out[engine.__name__], max_rows_per_file=5)
    return out


def _copies(uris: dict[str, str], tmp_path: Path) -> dict[str, str]:
    out = {}
    for name, uri in uris.items():
        out[name] = str(tmp_path / name)
        shutil.copytree(uri, out[name])
    return out


@pytest.mark.parametrize("value", list(BAD_VALUES))
@pytest.mark.parametrize("method", list(READS))
def test_bad_values_raise_pylances_builtin(uris: dict[str, str], method: str, value: str) -> None:
    if (method, value) in KNOWN:
        pytest.skip("a known difference (see KNOWN)")
    call, bad = READS[method], BAD_VALUES[value]
    theirs = _answer(lambda: call(lance.dataset(uris["lance"]), bad))
    ours = _answer(lambda: call(lance_format.dataset(uris["lance_format"]), bad))
    _check(theirs, ours, f"{method} of {value}")


@pytest.mark.parametrize("value", list(BAD_VALUES))
@pytest.mark.parametrize("method", list(WRITES))
def test_bad_values_of_writes_raise_pylances_builtin(
    uris: dict[str, str], tmp_path: Path, method: str, value: str
) -> None:
    call, bad = WRITES[method], BAD_VALUES[value]
    copies = _copies(uris, tmp_path)
    theirs = _answer(lambda: call(lance.dataset(copies["lance"]), bad))
    ours = _answer(lambda: call(lance_format.dataset(copies["lance_format"]), bad))
    _check(theirs, ours, f"{method} of {value}")


@pytest.mark.parametrize("case", list(SINGLE))
def test_bad_calls_raise_pylances_builtin(uris: dict[str, str], tmp_path: Path, case: str) -> None:
    copies = _copies(uris, tmp_path)
    theirs = _answer(lambda: SINGLE[case](lance.dataset(copies["lance"]), copies["lance"]))
    ours = _answer(lambda: SINGLE[case](lance_format.dataset(copies["lance_format"]), copies["lance_format"]))
    _check(theirs, ours, case)
