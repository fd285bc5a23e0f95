"""The engine's tunables: one table of settings, one environment prefix, one config dataclass.

Every tunable of ``lance_format`` is a :class:`Setting` in :data:`SETTINGS` (documented, the same
rows, in ``docs/configuration.md``) and a field of :class:`EngineConfig`. Values are resolved in this
order: an argument (``Session(decode_threads=2)``), the environment (``LANCE_FORMAT_*``), a config
mapping (the server's YAML ``engine:`` section), the default.

A few variables had other names before (``LANCE_DECODE_THREADS``, ``LANCE_DICT_ENCODING_THRESHOLD``,
``LANCE_FILE_WRITER_*``, ``LANCE_ZONEMAP_DEFAULT_ROWS_PER_ZONE``; some are pylance's own names).
They still work, with a :class:`DeprecationWarning`; the ``LANCE_FORMAT_*`` name wins when both
are set.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lance_format.core.errors import InvalidInputError

__all__ = [
    "ENV_PREFIX",
    "KERNEL_CACHE_ENV",
    "KERNEL_SEED_ENV",
    "SETTINGS",
    "EngineConfig",
    "Setting",
    "env_setting",
    "kernel_cache_dir_from_env",
    "kernel_seed_dir_from_env",
    "resolve_config",
]

#: The one prefix of the engine's environment variables.
ENV_PREFIX = "LANCE_FORMAT_"


@dataclass(frozen=True)
class Setting:
    """One tunable: its config name, default, smallest allowed value and older variable names."""

    name: str
    default: int
    minimum: int
    why: str
    aliases: tuple[str, ...] = ()

    @property
    def env(self) -> str:
        """The environment variable (``LANCE_FORMAT_`` + the upper-cased name)."""
        return ENV_PREFIX + self.name.upper()


_MIB = 1024 * 1024

#: Every tunable of the engine, with the reason for its default.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "metadata_cache_bytes",
        256 * _MIB,
        0,
        "Manifests, file footers and column metadata, deletion vectors, row-id indexes: reopening a "
        "version reads nothing again. 256 MiB holds the metadata of thousands of files.",
    ),
    Setting(
        "page_cache_bytes",
        0,
        0,
        "Raw pages of random reads (takes). Off for library use (the OS page cache serves local "
        "files); the server turns it on for object stores.",
    ),
    Setting(
        "decoded_cache_bytes",
        0,
        0,
        "Decoded Arrow blocks of hot rows, so repeated takes copy instead of decoding. Off for "
        "library use; the server turns it on.",
    ),
    Setting(
        "io_parallelism",
        64,
        1,
        "Object-store requests in flight per process: a GET waits 10-50 ms, so dozens keep a link "
        "busy; Lance's default for cloud stores, and the S3 client's connection pool.",
    ),
    Setting(
        "object_store_latency_us",
        20_000,
        0,
        "Microseconds from an object-store request to its first byte, for the merge gap of takes "
        "(what to read between two wanted ranges to save a request): in-region S3 answers in "
        "~10-30 ms; with io_parallelism requests in flight, each request beyond a wave adds "
        "latency / io_parallelism to a read. 20 ms with 64 in flight gives 64 KiB gaps (Lance's).",
    ),
    Setting(
        "readahead_bytes",
        64 * _MIB,
        1,
        "Decoded bytes a scan may hold ahead of its consumer: covers an object store's latency-"
        "bandwidth product (~50 ms x ~1 GB/s) and bounds memory per scan.",
    ),
    Setting(
        "scan_chunk_rows",
        256 * 1024,
        1,
        "Physical rows a scan decodes per step (one task of its read-ahead): 256K, not 128K, cut a "
        "cold scan's CPU ~14% (a 1M-row table of four columns, 154 -> 132 ms: per-chunk planning, "
        "reads and hand-offs halved); a chunk of ~100 B rows decodes to ~26 MB, and readahead_bytes "
        "bounds the chunks in flight.",
    ),
    Setting(
        "readahead_chunks",
        4,
        1,
        "Scan chunks decoded ahead of the consumer at once (each scan_chunk_rows rows): four keep "
        "object-store latency and the decoding of the next fragments overlapping with the consumer "
        "while memory stays a few chunks (readahead_bytes bounds their bytes as well); one turns "
        "read-ahead into one chunk at a time.",
    ),
    Setting(
        "scan_prefetch_bytes",
        64 * _MIB,
        1,
        "Object-store bytes a scan requests ahead of its decoding, per fragment: four 16 MiB GETs "
        "stream at once (one connection does ~100-200 MB/s) and the next chunks' pages arrive while "
        "one decodes; bounds the raw bytes a scan holds.",
    ),
    Setting(
        "decode_threads",
        min(4, os.cpu_count() or 1),
        1,
        "Threads decoding the columns of one large read: bulk kernels release the GIL; a read "
        "rarely has more than four wide columns.",
        ("LANCE_DECODE_THREADS",),
    ),
    Setting(
        "encode_threads",
        min(4, os.cpu_count() or 1),
        1,
        "Threads encoding the pages of a file's columns side by side (2.1+ files): the encode "
        "kernels release the GIL; four at most because the pages in flight, and their memory, grow "
        "with it.",
    ),
    Setting(
        "max_open_files",
        256,
        1,
        "Local-file descriptors kept open across every store of a process (lance_format.io."
        "descriptors): covers the files a few busy datasets read at once (re-opening costs "
        "microseconds) and stays far below common `ulimit -n` values.",
    ),
    Setting(
        "index_merge_gap_rows",
        1024,
        0,
        "BTREE/BITMAP matches this close (physical rows) are read as one range: about one decoded "
        "block of a small column; a point lookup still reads only its own neighbourhood.",
    ),
    Setting(
        "dataset_threads",
        8,
        1,
        "Scan read-ahead and per-fragment takes; they wait on I/O, not on a core.",
    ),
    Setting(
        "dict_encoding_threshold",
        100,
        0,
        "File format 2.0: a string page is dictionary-encoded when it has fewer distinct values "
        "than this; pylance's default, so both write the same files.",
        ("LANCE_DICT_ENCODING_THRESHOLD",),
    ),
    Setting(
        "file_writer_max_page_bytes",
        32 * _MIB,
        1,
        "Largest page a writer emits (pylance's MAX_PAGE_BYTES): bounds any one read and decode.",
        ("LANCE_FILE_WRITER_MAX_PAGE_BYTES",),
    ),
    Setting(
        "file_writer_data_cache_bytes",
        0,
        0,
        "Bytes a writer buffers before it writes to the store; 0 = the writer's own page buffer.",
        ("LANCE_FILE_WRITER_DATA_CACHE_BYTES",),
    ),
    Setting(
        "zonemap_rows_per_zone",
        8192,
        1,
        "Rows per zone of a ZONEMAP index (pylance's default): small enough to prune well, large "
        "enough that the index is a few KiB per million rows.",
        ("LANCE_ZONEMAP_DEFAULT_ROWS_PER_ZONE",),
    ),
    Setting(
        "cleanup_unverified_age_s",
        7 * 24 * 3600,
        1,
        "Age a file no version references must reach before cleanup removes it without "
        "delete_unverified: younger ones may belong to a commit in flight (pylance's 7 days).",
    ),
    Setting(
        "put_back_wait_ms",
        2000,
        0,
        "How long a reader waits for a version a tag or pin names while a cleanup that removed "
        "it puts it back: the window is cleanup's other manifest deletes and two listings, "
        "milliseconds unless its deletes are rate-limited; 0 = fail at once.",
    ),
)

_BY_NAME = {s.name: s for s in SETTINGS}


def _parse(raw: str, setting: Setting, source: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        value = setting.minimum - 1
    if value < setting.minimum:
        raise InvalidInputError(f"{source} must be an integer >= {setting.minimum}, got {raw!r}")
    return value


def _from_env(setting: Setting, environ: Mapping[str, str]) -> int | None:
    raw = environ.get(setting.env)
    if raw is not None and raw.strip():
        return _parse(raw, setting, setting.env)
    for old in setting.aliases:
        raw = environ.get(old)
        if raw is not None and raw.strip():
            warnings.warn(f"{old} is deprecated; set {setting.env} instead", DeprecationWarning, stacklevel=3)
            return _parse(raw, setting, old)
    return None


def env_setting(name: str, environ: Mapping[str, str] | None = None) -> int:
    """Setting ``name`` from the environment, else its default (no config layer: library calls).

    Raises
    ------
    InvalidInputError
        The variable is set but is not an integer of at least the setting's minimum.
    """
    setting = _BY_NAME[name]
    found = _from_env(setting, os.environ if environ is None else environ)
    return setting.default if found is None else found


def _defaults() -> dict[str, int]:
    return {s.name: s.default for s in SETTINGS}


@dataclass(frozen=True)
class EngineConfig:
    """Every engine tunable (see :data:`SETTINGS` for what each is and why its default)."""

    metadata_cache_bytes: int = _BY_NAME["metadata_cache_bytes"].default
    page_cache_bytes: int = _BY_NAME["page_cache_bytes"].default
    decoded_cache_bytes: int = _BY_NAME["decoded_cache_bytes"].default
    io_parallelism: int = _BY_NAME["io_parallelism"].default
    object_store_latency_us: int = _BY_NAME["object_store_latency_us"].default
    readahead_bytes: int = _BY_NAME["readahead_bytes"].default
    scan_chunk_rows: int = _BY_NAME["scan_chunk_rows"].default
    readahead_chunks: int = _BY_NAME["readahead_chunks"].default
    scan_prefetch_bytes: int = _BY_NAME["scan_prefetch_bytes"].default
    decode_threads: int = _BY_NAME["decode_threads"].default
    encode_threads: int = _BY_NAME["encode_threads"].default
    max_open_files: int = _BY_NAME["max_open_files"].default
    index_merge_gap_rows: int = _BY_NAME["index_merge_gap_rows"].default
    dataset_threads: int = _BY_NAME["dataset_threads"].default
    dict_encoding_threshold: int = _BY_NAME["dict_encoding_threshold"].default
    file_writer_max_page_bytes: int = _BY_NAME["file_writer_max_page_bytes"].default
    file_writer_data_cache_bytes: int = _BY_NAME["file_writer_data_cache_bytes"].default
    zonemap_rows_per_zone: int = _BY_NAME["zonemap_rows_per_zone"].default
    cleanup_unverified_age_s: int = _BY_NAME["cleanup_unverified_age_s"].default
    put_back_wait_ms: int = _BY_NAME["put_back_wait_ms"].default

    def __post_init__(self) -> None:
        for setting in SETTINGS:
            value = getattr(self, setting.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < setting.minimum:
                raise InvalidInputError(
                    f"{setting.name} must be an integer >= {setting.minimum}, got {value!r}"
                )


def resolve_config(
    arguments: Mapping[str, Any] | None = None,
    config: EngineConfig | Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> EngineConfig:
    """The engine config: each setting from ``arguments``, else the environment, else ``config``,
    else its default (``None`` values count as not given).

    Raises
    ------
    InvalidInputError
        An unknown setting name, or a value that is not an integer of at least its minimum.
    """
    environ = os.environ if environ is None else environ
    if isinstance(config, EngineConfig):
        config = dataclasses.asdict(config)
    given_config = {k: v for k, v in (config or {}).items() if v is not None}
    given_args = {k: v for k, v in (arguments or {}).items() if v is not None}
    unknown = (set(given_config) | set(given_args)) - set(_BY_NAME)
    if unknown:
        raise InvalidInputError(f"unknown engine settings: {sorted(unknown)}; known: {sorted(_BY_NAME)}")
    values = _defaults()
    for setting in SETTINGS:
        if setting.name in given_args:
            values[setting.name] = given_args[setting.name]
            continue
        found = _from_env(setting, environ)
        if found is not None:
            values[setting.name] = found
        elif setting.name in given_config:
            values[setting.name] = given_config[setting.name]
    return EngineConfig(**values)


#: Where compiled kernels are cached (a path, so not an :class:`EngineConfig` field: it must be
#: known before the first kernel is compiled, at import; :mod:`lance_format.core.jit`).
KERNEL_CACHE_ENV = ENV_PREFIX + "KERNEL_CACHE_DIR"


def kernel_cache_dir_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The kernel cache directory the environment names: ``LANCE_FORMAT_KERNEL_CACHE_DIR``, else
    numba's own ``NUMBA_CACHE_DIR``, else None (the caller's default)."""
    environ = os.environ if environ is None else environ
    for name in (KERNEL_CACHE_ENV, "NUMBA_CACHE_DIR"):
        value = environ.get(name, "").strip()
        if value:
            return os.path.expanduser(value)
    return None


#: A directory of kernels compiled ahead (an image bakes one in at build time): copied into an
#: empty kernel cache at start, so a fresh container loads its kernels instead of compiling them.
KERNEL_SEED_ENV = ENV_PREFIX + "KERNEL_SEED_DIR"


def kernel_seed_dir_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The seed directory of compiled kernels the environment names (``LANCE_FORMAT_KERNEL_SEED_DIR``),
    or None."""
    environ = os.environ if environ is None else environ
    value = environ.get(KERNEL_SEED_ENV, "").strip()
    return os.path.expanduser(value) if value else None
