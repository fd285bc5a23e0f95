"""The ``lance-flight`` command's entry point: process-wide options that must be set before
pyarrow loads, then :func:`flight_server.cli.main`.

Arrow's memory pool (mimalloc) reads its options once, when pyarrow's library loads, so they are
environment variables set here, before anything imports pyarrow (this package's ``__init__``
imports nothing). See docs/configuration.md, "Arrow's allocator".
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["POOL_ENVIRONMENT", "main"]

#: mimalloc keeps the pages it freed instead of handing them back to the OS after a second: a
#: serving process's scans come in bursts, and each burst got its pages back zeroed by the kernel
#: (~27,000 faults and a sixth of the server's CPU per 10M-row scan). A value the user set wins.
POOL_ENVIRONMENT = {"MIMALLOC_PURGE_DELAY": "-1"}


def main(argv: Sequence[str] | None = None) -> int:
    """Set :data:`POOL_ENVIRONMENT` (where unset) and run the command line."""
    for name, value in POOL_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    from flight_server.cli import main as cli_main

    return cli_main(argv)
