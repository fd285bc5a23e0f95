"""Regenerate lance_format/_proto/ from protos/*.proto (or check that it is up to date).

Usage: ``python scripts/gen_protos.py [--check]``. Needs the test extra (grpcio-tools, mypy-protobuf).
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "lance_format" / "_proto"
INIT = '"""Generated protobuf modules (do not edit; run ./dev protos)."""\n'


def generate(dest: Path) -> None:
    """Run protoc over every .proto into ``dest`` and make imports package-relative."""
    import grpc_tools

    include = Path(grpc_tools.__file__).parent / "_proto"
    protos = sorted(p.name for p in PROTOS.glob("*.proto"))
    cmd = [
        sys.executable, "-m", "grpc_tools.protoc",
        f"-I{PROTOS}", f"-I{include}",
        f"--plugin=protoc-gen-mypy={Path(sys.executable).parent / 'protoc-gen-mypy'}",
        f"--python_out={dest}", f"--mypy_out={dest}",
        *protos,
    ]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=PROTOS)
    modules = {Path(p).stem + "_pb2" for p in protos}
    for path in dest.glob("*_pb2.py*"):
        text = path.read_text()
        for mod in modules:
            # protoc emits `import file_pb2 as ...`; inside a package that must be relative.
            text = re.sub(rf"^import {mod}\b", f"from . import {mod}", text, flags=re.M)
        path.write_text(text)
    (dest / "__init__.py").write_text(INIT)


def differences(a: Path, b: Path) -> list[str]:
    names = sorted({p.name for p in a.glob("*.py*")} | {p.name for p in b.glob("*.py*")})
    return [
        n
        for n in names
        if not (a / n).exists() or not (b / n).exists() or not filecmp.cmp(a / n, b / n, False)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the committed code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        diff = differences(Path(tmp), OUT)
        if args.check:
            if diff:
                print(
                    f"lance_format/_proto is out of date with protos/ ({', '.join(diff)}); run ./dev protos"
                )
                return 1
            print("lance_format/_proto is up to date")
            return 0
        if OUT.exists():
            shutil.rmtree(OUT)
        shutil.copytree(tmp, OUT)
        print(f"regenerated {OUT.relative_to(ROOT)} ({len(list(OUT.glob('*_pb2.py')))} modules)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
