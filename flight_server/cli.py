"""``lance-flight``: the command line.

``lance-flight serve [flags]`` serves the datasets under a root over Arrow Flight. With no flags it
serves ``./lance-data`` (created if missing) on ``grpc://127.0.0.1:8815`` with metrics and probes
on ``http://127.0.0.1:9090``. Settings: flag > ``LANCE_FLIGHT_*`` environment variable > YAML
config file (``--config``) > default; ``docs/configuration.md`` lists them all.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from flight_server.config import ConfigError, build_parser, load_settings

__all__ = ["main"]

USAGE = """usage: lance-flight <command> [options]

commands:
  serve    serve Lance datasets over Arrow Flight (`lance-flight serve --help` lists its flags)
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status (2 for bad usage or settings)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command != "serve":
        print(f"lance-flight: unknown command {command!r}\n\n{USAGE}", end="", file=sys.stderr)
        return 2
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


if __name__ == "__main__":
    sys.exit(main())
