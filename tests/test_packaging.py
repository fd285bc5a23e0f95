"""Packaging: the library needs no server dependency, lower bounds are declared and testable, the
image's constraints pin every runtime dependency within its declared bounds."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SERVER_ONLY = ("prometheus_client", "yaml", "tqdm", "grpc")

#: Run in a fresh interpreter where the server extra's modules cannot be imported.
_WITHOUT_SERVER_DEPS = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SERVER_ONLY!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
"""


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_SERVER_DEPS + code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_library_and_client_work_without_the_server_extra(tmp_path: Path) -> None:
    result = _run(
        """
import pyarrow as pa
import lance_format
import flight_server.client, flight_server.inspect
ds = lance_format.write_dataset(pa.table({"a": [1, 2, 3]}), "x.lance")
assert lance_format.dataset("x.lance").to_table(filter="a > 1").num_rows == 2
assert flight_server.inspect.inspect_dataset("x.lance").startswith("Dataset")
from flight_server.client_streams import show_progress
assert show_progress(None) is False
from flight_server.cli import main
assert main(["--version"]) == 0
assert main(["serve"]) == 2
for name in ("prometheus_client", "yaml", "tqdm"):
    assert name not in sys.modules, name
""",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'lance-flight[server]'" in result.stderr


def test_server_dependencies_are_an_extra_that_test_and_loadtest_include() -> None:
    base = " ".join(PROJECT["dependencies"])
    for name in ("prometheus-client", "pyyaml", "tqdm", "grpcio"):
        assert name not in base
        assert any(r.startswith(name) for r in PROJECT["optional-dependencies"]["server"])
    for extra in ("test", "loadtest"):
        assert "lance-flight[server]" in [
            r.split("#")[0].strip() for r in PROJECT["optional-dependencies"][extra]
        ]


def test_min_constraints_pin_every_runtime_dependency() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from min_constraints import lower_bounds
    finally:
        sys.path.pop(0)
    pins = lower_bounds(["server"])
    declared = PROJECT["dependencies"] + PROJECT["optional-dependencies"]["server"]
    assert len(pins) == len(declared)
    assert pins["pyarrow"] == "19.0"
    assert pins["fsspec"] == "2024.12.0"


def test_image_constraints_pin_every_runtime_dependency_within_its_bounds() -> None:
    requirements = pytest.importorskip("packaging.requirements")
    utils = pytest.importorskip("packaging.utils")
    pinned: dict[str, str] = {}
    for line in (ROOT / "deploy" / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{line!r} is not pinned with =="
            pinned[utils.canonicalize_name(name)] = version
    for text in PROJECT["dependencies"] + PROJECT["optional-dependencies"]["server"]:
        req = requirements.Requirement(text)
        version = pinned.get(utils.canonicalize_name(req.name))
        assert version is not None, f"{req.name} is not pinned in deploy/constraints.txt"
        assert req.specifier.contains(version), f"{req.name}=={version} is outside {req.specifier}"
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert '--constraint deploy/constraints.txt ".[server]"' in dockerfile


def test_ci_runs_the_minimum_versions_job() -> None:
    dev = (ROOT / "dev").read_text()
    assert 'if [[ "${CI:-}" == "true" ]]; then min_versions; fi' in dev
    assert "scripts/min_constraints.py server" in dev
    listed = dev.split("MIN_TESTS=(", 1)[1].split(")", 1)[0].split()
    for path in listed:
        assert (ROOT / path).exists(), path


def test_image_constraints_pin_only_the_server_closure() -> None:
    """Pins outside the dependency closure of ``.[server]`` (s3fs, aiobotocore once s3 moved to
    obstore) are stale: they install nothing but mislead whoever reads the file."""
    requirements = pytest.importorskip("packaging.requirements")
    utils = pytest.importorskip("packaging.utils")
    from importlib import metadata

    roots = PROJECT["dependencies"] + PROJECT["optional-dependencies"]["server"]
    todo = [requirements.Requirement(t).name for t in roots]
    closure: set[str] = set()
    while todo:
        name = utils.canonicalize_name(todo.pop())
        if name in closure:
            continue
        closure.add(name)
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            req = requirements.Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    pinned = {
        utils.canonicalize_name(line.split("==")[0])
        for line in (ROOT / "deploy" / "constraints.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    }
    assert pinned - closure == set(), "pinned but not needed by lance-flight[server]"
