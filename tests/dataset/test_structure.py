"""The dataset layer's shape: no import circles in ``lance_format/dataset/`` and no reaching into
another module's private members from ``dataset/`` or ``file/`` (operations work on the public,
read-only :class:`~lance_format.dataset.snapshot.Snapshot`, not on ``LanceDataset``'s insides).

Every import counts, deferred ones (inside a function) and ``TYPE_CHECKING`` ones included: a
circle hidden in a function is still a circle in the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "lance_format.dataset"


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _import_graph(package: str) -> dict[str, set[str]]:
    """``{module: modules of package it imports}`` for every module of ``package``."""
    folder = ROOT.joinpath(*package.split("."))
    modules = {_module_of(p): p for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from pkg import mod`` imports the submodule ``pkg.mod`` when there is one.
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                if t in modules and t != mod and t != package:
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles_in_the_dataset_package() -> None:
    graph = _import_graph(PACKAGE)
    assert "lance_format.dataset.snapshot" in graph
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_a_circle() -> None:
    # The check above can fail: a two-module circle through a deferred import is reported.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def _private_reach_ins(path: Path) -> list[str]:
    """``obj._name`` reads on something other than self/cls, of names the file does not define."""
    tree = ast.parse(path.read_text())
    defined: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            defined.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            defined.add(n.id)
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Attribute):
            continue
        name = n.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
            continue
        if name not in defined:
            out.append(f"{path.relative_to(ROOT)}:{n.lineno} {ast.unparse(n)}")
    return out


def test_dataset_and_file_do_not_reach_into_private_members() -> None:
    found = []
    for sub in ("dataset", "file"):
        for path in sorted((ROOT / "lance_format" / sub).glob("*.py")):
            found += _private_reach_ins(path)
    # pyarrow has no public constructor for a call by name (its UDF documentation uses
    # ``Expression._call``): udfs.call is the one place that uses it.
    allowed = {"lance_format/dataset/udfs.py"}
    assert [f for f in found if f.split(":")[0] not in allowed] == []


def test_a_scanner_takes_a_dataset_or_its_snapshot(tmp_path: Path) -> None:
    import pyarrow as pa

    import lance_format
    from lance_format.dataset.scanner import LanceScanner

    ds = lance_format.write_dataset(pa.table({"a": [1, 2, 3]}), str(tmp_path / "t.lance"))
    assert ds.snapshot.snapshot is ds.snapshot
    for source in (ds, ds.snapshot):
        assert LanceScanner(source, filter="a > 1").to_table().column("a").to_pylist() == [2, 3]


def test_commits_take_a_snapshot_and_the_facade_wraps_them(tmp_path: Path) -> None:
    # operations.commit_operation returns a Snapshot (of the session of the dataset it is given);
    # LanceDataset.commit wraps it, as pylance's staticmethod returns a dataset.
    import pyarrow as pa

    import lance_format
    from lance_format.dataset import Snapshot
    from lance_format.dataset.operations import LanceOperation, commit_operation, write_fragments

    session = lance_format.Session()
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"a": [1, 2]}), uri)
    ds = lance_format.dataset(uri, session=session)
    frags = write_fragments(pa.table({"a": [3]}), ds.snapshot)
    assert isinstance(frags, list)
    snap = commit_operation(ds.snapshot, LanceOperation.Append(frags), read_version=ds.version)
    assert isinstance(snap, Snapshot)
    assert snap.session is session
    assert snap.version == 2
    more = write_fragments(pa.table({"a": [4]}), ds)
    assert isinstance(more, list)
    new = lance_format.LanceDataset.commit(ds, LanceOperation.Append(more), read_version=2)
    assert isinstance(new, lance_format.LanceDataset)
    assert new.session is session
    assert new.to_table().column("a").to_pylist() == [1, 2, 3, 4]
