"""The README and docs/ as a newcomer reads them: links resolve inside the repository, the
quickstarts run as written, and the licence is the full Apache-2.0 text."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
#: Backticked repository paths worth checking (files and directories the docs send people to).
_PATH = re.compile(
    r"`((?:docs|deploy|helm|scripts|protos|examples|loadtest|flight_server|lance_format)/[\w./-]*)`"
)


def _section_code(page: str, heading: str) -> str:
    section = page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python block under {heading!r}"
    return match.group(1)


def test_license_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert len(text) > 10_000
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_stay_inside_the_repository(page: Path) -> None:
    text = page.read_text()
    assert "DESIGN.md" not in text  # the team's design notes are not part of the repository
    for target in _LINK.findall(text):
        if re.match(r"^[a-z]+://", target) or target.startswith("#"):
            continue
        resolved = (page.parent / target.split("#")[0]).resolve()
        assert resolved.is_relative_to(ROOT), f"{page.name}: {target} points outside the repository"
        assert resolved.exists(), f"{page.name}: {target} does not exist"
    for path in _PATH.findall(text):
        assert (ROOT / path.rstrip("/.")).exists(), f"{page.name}: `{path}` does not exist"


def test_readme_library_quickstart_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {}
    exec(_section_code((ROOT / "README.md").read_text(), "Library quickstart"), scope)
    ds = scope["ds"]
    assert ds.count_rows() == 1980  # ids 0..9 deleted from both copies
    assert [v["version"] for v in ds.versions()] == [1, 2, 3]


def test_readme_client_section_runs(tmp_path: Path) -> None:
    from tests.server.service_fixtures import start, stop

    served = start(tmp_path / "root")
    try:
        code = _section_code((ROOT / "README.md").read_text(), "Python client")
        assert '"grpc://127.0.0.1:8815"' in code
        exec(code.replace('"grpc://127.0.0.1:8815"', repr(served.location)), {})
        assert served.client.scan("events").num_rows == 4
        # create, append, compact (two versions, as pylance: ids reserved, then the rewrite)
        assert served.client.versions("events")[-1].version == 4
    finally:
        stop(served)


def test_client_reference_covers_every_public_method() -> None:
    from flight_server.client import LanceFlightClient

    reference = (ROOT / "docs" / "client.md").read_text()
    public = [
        n
        for n in vars(LanceFlightClient)
        if not n.startswith("_") and callable(getattr(LanceFlightClient, n))
    ]
    missing = [n for n in public if f"`{n}(" not in reference]
    assert not missing, missing


def test_configuration_doc_lists_the_serve_flags() -> None:
    from flight_server.config import OPTIONS

    text = (ROOT / "docs" / "configuration.md").read_text()
    assert all(opt.flag in text for opt in OPTIONS if opt.flag), "every flag documented"
    assert os.path.exists(ROOT / "docs" / "architecture.md")
