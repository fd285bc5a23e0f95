"""``lance-flight``: the command line.

``lance-flight serve [flags]`` serves the datasets under a root over Arrow Flight. With no flags it
serves ``./lance-data`` (created if missing) on ``grpc://127.0.0.1:8815`` with metrics and probes
on ``http://127.0.0.1:9090``. Settings: flag > ``LANCE_FLIGHT_*`` environment variable > YAML
config file (``--config``) > default; ``docs/configuration.md`` lists them all.

``lance-flight inspect URI`` prints a dataset's versions, fragments, schema, per-column encodings
and sizes, and indexes. ``lance-flight --version`` prints the version.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import lance_format

__all__ = ["main", "version_text"]

USAGE = """usage: lance-flight [--version] <command> [options]

commands:
  serve    serve Lance datasets over Arrow Flight (`lance-flight serve --help` lists its flags)
  inspect  show a dataset's versions, fragments, schema, column encodings and indexes
"""


def version_text() -> str:
    """``lance-flight X.Y.Z`` and the versions of the runtime it depends on most."""
    import platform

    import pyarrow as pa

    runtime = f"Python {platform.python_version()}, pyarrow {pa.__version__}"
    return f"lance-flight {lance_format.__version__} ({runtime})"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status (2 for bad usage or settings)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(version_text())
        return 0
    command, rest = args[0], args[1:]
    if command == "serve":
        return _serve(rest)
    if command == "inspect":
        return _inspect(rest)
    print(f"lance-flight: unknown command {command!r}\n\n{USAGE}", end="", file=sys.stderr)
    return 2


def _serve(rest: list[str]) -> int:
    try:
        import prometheus_client  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as exc:
        print(
            f"lance-flight serve needs the server extra ({exc.name} is missing): "
            "pip install 'lance-flight[server]'",
            file=sys.stderr,
        )
        return 2
    from flight_server.config import ConfigError, build_parser, load_settings

    if any(a in ("-h", "--help") for a in rest):
        build_parser().print_help()
        return 0
    try:
        settings = load_settings(rest)
    except ConfigError as exc:
        print(f"lance-flight serve: error: {exc}", file=sys.stderr)
        return 2
    from flight_server.logging import configure_logging
    from flight_server.workers import ServerStartError, serve

    configure_logging(settings.log_level, settings.log_format)
    try:
        return serve(settings)
    except (ServerStartError, OSError) as exc:
        print(f"lance-flight serve: error: {exc}", file=sys.stderr)
        return 1


def _inspect_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lance-flight inspect",
        description="Show a Lance dataset: versions, fragments, schema, per-column encodings and sizes, "
        "indexes. Reads only metadata (manifests and column metadata), never data pages.",
    )
    parser.add_argument("uri", metavar="URI", help="dataset directory, or s3://bucket/path.lance, ...")
    parser.add_argument(
        "--version", dest="at", metavar="VERSION", help="a version number or tag (default: the latest)"
    )
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="object-store option, repeatable (e.g. aws_endpoint=http://127.0.0.1:8333)",
    )
    return parser


def _inspect(rest: list[str]) -> int:
    from flight_server.inspect import inspect_dataset
    from lance_format.core.errors import LanceError

    try:
        ns = _inspect_parser().parse_args(rest)
    except SystemExit as exc:  # --help (0) or bad usage (2), already printed by argparse
        return int(exc.code or 0)
    options = {}
    for item in ns.storage_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"lance-flight inspect: error: --storage-option {item!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        options[key] = value
    version: int | str | None = int(ns.at) if ns.at is not None and ns.at.isdigit() else ns.at
    try:
        print(inspect_dataset(ns.uri, version, options or None), end="")
    except (LanceError, OSError, KeyError, ValueError) as exc:
        print(f"lance-flight inspect: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
