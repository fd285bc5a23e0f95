"""Print pip constraints pinning every runtime dependency to its declared lower bound.

Usage: ``python scripts/min_constraints.py [EXTRA ...] > constraints.txt`` (default extras: server).
``./dev test`` under ``CI=true`` installs the project with these constraints into a separate venv and
runs a subset of the tests there, so a lower bound that is too low fails CI instead of a user.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*?)\s*(?:;.*)?$")
_LOWER = re.compile(r">=\s*([^,\s]+)")


def lower_bounds(extras: list[str]) -> dict[str, str]:
    """Name -> declared minimum of the base dependencies and those of ``extras``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    out: dict[str, str] = {}
    for requirement in requirements:
        match = _REQ.match(requirement)
        if match is None:
            raise SystemExit(f"cannot parse requirement {requirement!r}")
        name, spec = match.group(1).lower(), match.group(2)
        if name == project["name"]:
            continue  # a self-reference (an extra pulling in another extra)
        lower = _LOWER.search(spec)
        pinned = re.search(r"==\s*([^,\s]+)", spec)
        if lower is None and pinned is None:
            raise SystemExit(f"{requirement!r} declares no lower bound")
        out[name] = (pinned or lower).group(1)  # type: ignore[union-attr]
    return out


def main(argv: list[str]) -> int:
    for name, version in sorted(lower_bounds(argv or ["server"]).items()):
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
