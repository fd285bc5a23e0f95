"""Tunables are resolved once, by the config modules, into a session's config: no other module reads
a ``LANCE_*`` variable from the environment, and none resolves an engine setting per call."""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.session import Session

ROOT = Path(__file__).resolve().parents[2]
#: The modules that read the environment for settings (documented in docs/configuration.md).
CONFIG_MODULES = {
    "lance_format/core/config.py",  # LANCE_FORMAT_* (engine)
    "flight_server/config.py",  # LANCE_FLIGHT_* (server: flag > env > YAML > default)
    "flight_server/settings.py",  # client_env: the Spark source's LANCE_FLIGHT_URI / _TOKEN
}


def _modules() -> list[tuple[str, ast.AST]]:
    """``(path from the root, syntax tree)`` of every module but the config modules."""
    paths = sorted(p for pkg in ("lance_format", "flight_server") for p in (ROOT / pkg).rglob("*.py"))
    rels = [(p.relative_to(ROOT).as_posix(), p) for p in paths]
    return [(rel, ast.parse(p.read_text(encoding="utf-8"))) for rel, p in rels if rel not in CONFIG_MODULES]


def _reads_environment(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            return True
        if isinstance(node, ast.Name) and node.id in ("environ", "getenv"):
            return True
    return False


def _lance_names(tree: ast.AST) -> list[str]:
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("LANCE_")
    ]


def test_only_the_config_modules_read_lance_variables_from_the_environment() -> None:
    offenders = []
    for rel, tree in _modules():
        names = _lance_names(tree)
        if names and _reads_environment(tree):
            offenders.append(f"{rel}: {sorted(set(names))}")
    assert offenders == [], "read LANCE_* settings through lance_format.core.config / flight_server.config"


def test_no_engine_setting_is_read_from_the_environment_per_call() -> None:
    """``env_setting`` (environment, else default) is for import-time constants; a function that
    calls it would re-read the environment at every call instead of using its session's config."""
    offenders = []
    for rel, tree in _modules():
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for call in ast.walk(fn):
                if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "env_setting":
                    offenders.append(f"{rel}:{call.lineno} in {fn.name}()")
    assert offenders == []


def test_the_v20_dictionary_threshold_is_the_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2.0 string page is dictionary-encoded by its writer's session's threshold, not by whatever
    the environment says at the time of the write."""
    table = pa.table({"s": [f"v{i % 20}" for i in range(2000)]})  # 20 distinct values
    monkeypatch.setenv("LANCE_FORMAT_DICT_ENCODING_THRESHOLD", "5")  # after the sessions resolved
    plain = Session(dict_encoding_threshold=10)
    dictionary = Session(dict_encoding_threshold=100)

    def encodings(session: Session, name: str) -> set[str]:
        ds = lance_format.write_dataset(
            table, str(tmp_path / name), data_storage_version="2.0", session=session
        )
        reader = ds.data_file_reader(ds.snapshot.manifest.fragments[0].files[0])
        assert ds.to_table().equals(table)
        return {type(p.encoding).__name__ for c in reader.metadata().columns for p in c.pages}

    assert "Dictionary" not in encodings(plain, "plain.lance")
    assert "Dictionary" in encodings(dictionary, "dict.lance")
    plain.close()
    dictionary.close()


#: Modules resolving a setting at import (``env_setting`` at module level): the process-wide
#: objects the default session owns, sized from the environment before any session exists. Any
#: other module takes its settings from the session passed to it.
IMPORT_TIME_SETTINGS = {
    "lance_format/io/cache.py",  # the default session's metadata, page and decoded caches
    "lance_format/io/scheduler.py",  # its I/O gate and read-ahead budget
    "lance_format/io/descriptors.py",  # the process's open-file budget
    "lance_format/dataset/session.py",  # its dataset pool
    "lance_format/dataset/cleanup.py",  # the default age of unverified files
}


def test_only_the_default_sessions_objects_resolve_settings_at_import() -> None:
    """The encode split threads, for one, were resolved at import into a process-wide pool; now
    they are the writing session's (``encode_threads``)."""
    found = set()
    for rel, tree in _modules():
        for node in getattr(tree, "body", []):
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "env_setting":
                    found.add(rel)
    assert found <= IMPORT_TIME_SETTINGS, sorted(found - IMPORT_TIME_SETTINGS)


def test_the_split_threads_are_the_sessions_encode_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    session = Session(encode_threads=3)
    monkeypatch.setenv("LANCE_FORMAT_ENCODE_THREADS", "1")  # after the session resolved
    assert session.runtime.split_pool.workers == 3 == session.runtime.encode_pool.workers
    session.close()
