"""Regenerate lance_format/_proto/ from protos/*.proto, or check that it is up to date.

Usage: ``python scripts/gen_protos.py [--check]`` (or ``./dev protos [--check]``). Needs the test
extra: grpcio-tools (which bundles protoc) and mypy-protobuf (which writes the ``.pyi`` stubs).

protoc writes flat imports between the generated modules (``import file_pb2 as file__pb2``);
inside the ``lance_format._proto`` package they must be relative, so they are rewritten here.
``--check`` generates into a temporary directory and compares it with the committed files.
"""

from __future__ import annotations

import argparse
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
#: The Flight service's own messages (package lance_flight.v1) and the Flight SQL messages it
#: serves (package arrow.flight.protocol.sql) go to flight_server/_proto.
FLIGHT_PROTOS = (
    Path("lance_flight") / "v1" / "flight.proto",
    Path("arrow") / "flight" / "protocol" / "sql" / "flight_sql.proto",
)
FLIGHT_OUT = ROOT / "flight_server" / "_proto"
VERSION_LINE = re.compile(r"^# Protobuf Python Version: (\S+)$", re.M)


class GenerationError(RuntimeError):
    """The tools needed to regenerate the code are missing or protoc failed."""


def _mypy_plugin() -> Path:
    """The protoc-gen-mypy executable that belongs to this interpreter's environment."""
    local = Path(sys.executable).parent / "protoc-gen-mypy"
    if local.exists():
        return local
    found = shutil.which("protoc-gen-mypy")
    if found is None:
        raise GenerationError("protoc-gen-mypy not found: install mypy-protobuf (the test extra)")
    return Path(found)


def generate_flight(dest: Path) -> list[str]:
    """Generate the Flight service's messages into ``dest`` (flat: ``flight_pb2.py`` ...)."""
    with tempfile.TemporaryDirectory(prefix="lance-flight-protos-") as tmp:
        _protoc(Path(tmp), [str(p) for p in FLIGHT_PROTOS])
        for proto in FLIGHT_PROTOS:
            for path in (Path(tmp) / proto.parent).glob("*_pb2.py*"):
                shutil.move(str(path), dest / path.name)
    (dest / "__init__.py").write_text(INIT)
    return sorted(p.name for p in dest.iterdir() if p.is_file())


def _protoc(dest: Path, protos: list[str]) -> None:
    try:
        import grpc_tools  # type: ignore[import-untyped]
    except ImportError as exc:
        raise GenerationError("grpc_tools not importable: install grpcio-tools (the test extra)") from exc
    well_known = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/*.proto
    cmd = [
        sys.executable, "-m", "grpc_tools.protoc",
        f"-I{PROTOS}", f"-I{well_known}",
        f"--plugin=protoc-gen-mypy={_mypy_plugin()}",
        f"--python_out={dest}", f"--mypy_out={dest}",
        *protos,
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=PROTOS, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise GenerationError(f"protoc failed:\n{proc.stderr}")


def generate(dest: Path) -> list[str]:
    """Run protoc over every .proto into ``dest``; return the names of the files written."""
    protos = sorted(p.name for p in PROTOS.glob("*.proto"))
    _protoc(dest, protos)
    modules = [Path(p).stem + "_pb2" for p in protos]
    flat_import = re.compile(rf"^import ({'|'.join(map(re.escape, modules))})\b", re.M)
    for path in sorted(dest.glob("*_pb2.py*")):
        path.write_text(flat_import.sub(r"from . import \1", path.read_text()))
    (dest / "__init__.py").write_text(INIT)
    return sorted(p.name for p in dest.iterdir() if p.is_file())


def _files(directory: Path) -> dict[str, bytes]:
    if not directory.is_dir():
        return {}
    generated = (p for p in directory.iterdir() if p.is_file() and p.suffix in (".py", ".pyi"))
    return {p.name: p.read_bytes() for p in generated}


def stale_files(fresh: Path, committed: Path) -> list[str]:
    """Describe each difference between freshly generated and committed files (empty when equal)."""
    new, old = _files(fresh), _files(committed)
    problems = []
    for name in sorted(new.keys() | old.keys()):
        if name not in old:
            problems.append(f"{name}: missing")
        elif name not in new:
            problems.append(f"{name}: no longer generated (delete it)")
        elif new[name] != old[name]:
            problems.append(f"{name}: differs")
    return problems


def _protobuf_version(module: Path) -> str | None:
    """The protobuf runtime version a generated module was made for (from its header)."""
    if not module.exists():
        return None
    match = VERSION_LINE.search(module.read_text(errors="replace"))
    return match.group(1) if match else None


def check(fresh: Path, fresh_flight: Path | None = None) -> int:
    problems = stale_files(fresh, OUT)
    if fresh_flight is not None:
        problems += [f"flight_server/_proto/{p}" for p in stale_files(fresh_flight, FLIGHT_OUT)]
    if not problems:
        print("lance_format/_proto is up to date with protos/")
        return 0
    print("lance_format/_proto is out of date with protos/; run `./dev protos` and commit the result:")
    for line in problems:
        print(f"  {line}")
    ours, theirs = _protobuf_version(fresh / "file_pb2.py"), _protobuf_version(OUT / "file_pb2.py")
    if ours and theirs and ours != theirs:
        print(
            f"note: the committed code was generated for protobuf {theirs} but this grpcio-tools emits "
            f"{ours}; install the grpcio-tools version pinned in pyproject.toml"
        )
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed code is stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lance-protos-") as tmp:
        fresh = Path(tmp) / "lance"
        fresh_flight = Path(tmp) / "flight"
        fresh.mkdir()
        fresh_flight.mkdir()
        try:
            written = generate(fresh)
            flight_written = generate_flight(fresh_flight)
        except GenerationError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.check:
            return check(fresh, fresh_flight)
        for src, out, names in ((fresh, OUT, written), (fresh_flight, FLIGHT_OUT, flight_written)):
            changed = _update(src, out, names)
            print(f"regenerated {out.relative_to(ROOT)}: {len(names)} files, {len(changed)} changed")
    return 0


def _update(fresh: Path, out: Path, written: list[str]) -> list[str]:
    """Update ``out`` in place (unchanged files are not touched) so concurrent imports keep working."""
    out.mkdir(parents=True, exist_ok=True)
    new, old = _files(fresh), _files(out)
    for name in old.keys() - new.keys():
        (out / name).unlink()
    changed = [name for name in written if new[name] != old.get(name)]
    for name in changed:
        (out / name).write_bytes(new[name])
    return changed


if __name__ == "__main__":
    raise SystemExit(main())
