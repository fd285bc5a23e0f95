"""File reader benchmark: our ``LanceFileReader`` against pylance's, on the same files, in one run.

One table (``--rows``, default 1M): ``id`` int64, ``x`` float64, ``name`` string (high cardinality,
~15 B), ``vec`` fixed_size_list<float32, 16> (a 16-d embedding), ``opt`` int32 with 10% nulls. It is
written four times (``--files`` picks a subset):

* ``pylance-2.0``, ``pylance-2.1``, ``pylance-2.2``: pylance's writer at each file format version
  (2.2 is pylance 14's default);
* ``ours-2.0``: our writer, 2.0 (skipped with a note if our writer fails).

For every file, both readers measure (warm: one untimed call first):

* ``open``: opening a reader (footer, offset tables, schema, column metadata), median and p99;
* ``read_all``: the whole file to a table (median of ``--scan-reps``), shown as seconds and Mrows/s;
* ``take 1`` and ``take 100``: random rows (sorted unique, the form pylance's file API takes; both
  readers get the same sorted indices), ``--take-reps`` repetitions interleaved between the two
  readers, median and p99.

The last column is ours / pylance at p50: above 1 we are slower. The targets (file-format issue):
take within 2x of pylance, read-all within 2x; a closing summary marks each file's targets. Each
reader's result is checked once against the other's, so a fast wrong answer is reported instead of
timed. ``--json PATH`` also writes the numbers.

Run: ``python -m loadtest file [--rows N]`` (``./dev bench file``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Measurement", "build_table", "main"]

DIM = 16
# Share of nulls in the nullable column: enough that validity decoding is on the measured path.
NULL_FRACTION = 0.1
# The file-format issue's targets: ours / pylance at p50 for these measures.
TARGETS = {"read_all": 2.0, "take 1": 2.0, "take 100": 2.0}
FILES = "pylance-2.0,pylance-2.1,pylance-2.2,ours-2.0"


@dataclass
class Measurement:
    """One row of the report: a measure of one file by both readers (seconds)."""

    file: str
    measure: str
    pylance: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)
    error: str = ""
    rows: int = 0

    def stat(self, which: str, q: float) -> float | None:
        xs = getattr(self, which)
        if not xs:
            return None
        return float(np.quantile(np.asarray(xs), q)) if q != 0.5 else statistics.median(xs)

    def ratio(self, q: float = 0.5) -> float | None:
        a, b = self.stat("ours", q), self.stat("pylance", q)
        return None if a is None or not b else a / b


def build_table(rows: int, seed: int = 0) -> pa.Table:
    """The benchmark table (deterministic)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    rng.shuffle(ids)
    suffix = pc.cast(pa.array(rng.integers(0, 10**9, rows)), pa.string())
    names = pc.binary_join_element_wise(pa.scalar("name-"), suffix, pa.scalar(""))
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(rows * DIM).astype(np.float32)), DIM)
    opt = pa.array(rng.integers(-(2**31), 2**31, rows, dtype=np.int32), mask=rng.random(rows) < NULL_FRACTION)
    return pa.table({"id": ids, "x": rng.random(rows), "name": names, "vec": vec, "opt": opt})


def _write_pylance(path: str, table: pa.Table, version: str) -> None:
    from lance.file import LanceFileWriter

    with LanceFileWriter(path, table.schema, version=version) as w:
        for batch in table.to_batches(max_chunksize=64 * 1024):
            w.write_batch(batch)


def _write_ours(path: str, table: pa.Table, version: str) -> None:
    from lance_format.file import LanceFileWriter

    with LanceFileWriter(path, table.schema, version=version) as w:
        for batch in table.to_batches(max_chunksize=64 * 1024):
            w.write_batch(batch)


def _pylance_reader(path: str) -> Any:
    from lance.file import LanceFileReader

    return LanceFileReader(path)


def _our_reader(path: str) -> Any:
    from lance_format.file import LanceFileReader

    return LanceFileReader(path)


def _describe(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text.splitlines()[0][:120] if text else ''}"


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _same(ours: pa.Table, theirs: pa.Table) -> bool:
    return ours.schema.equals(theirs.schema) and ours.equals(theirs)


def bench_file(
    label: str, path: str, args: argparse.Namespace, log: Callable[[str], None]
) -> list[Measurement]:
    """All measures of one file."""
    out: list[Measurement] = []
    budget = args.budget_s

    def interleaved(
        measure: str, reps: int, op: Callable[[Any, np.ndarray | None], object], rows: int
    ) -> None:
        m = Measurement(label, measure, rows=rows)
        out.append(m)
        try:
            theirs, ours = _pylance_reader(path), _our_reader(path)
            rng = np.random.default_rng(zlib.crc32(f"{label}/{measure}".encode()))
            n = theirs.num_rows()

            def pick() -> np.ndarray | None:
                if rows <= 0:
                    return None
                return np.unique(rng.integers(0, n, rows))

            first = pick()
            a, b = op(theirs, first), op(ours, first)
            if isinstance(a, pa.Table) and isinstance(b, pa.Table) and not _same(b, a):
                m.error = "ours returned different data from pylance"
                return
            start = time.perf_counter()
            for _ in range(reps):
                idx = pick()
                m.pylance.append(_timed(partial(op, theirs, idx)))
                m.ours.append(_timed(partial(op, ours, idx)))
                if time.perf_counter() - start > budget:
                    break
        except Exception as e:  # report and go on: one broken reader must not hide the rest
            m.error = _describe(e)
        log(f"  {label:12s} {measure:9s} done ({len(m.ours)} reps){'  ' + m.error if m.error else ''}")

    def take(reader: Any, idx: np.ndarray | None) -> pa.Table:
        assert idx is not None
        return reader.take_rows(idx.tolist()).to_table()

    # Open: the constructor does the footer and metadata reads.
    m = Measurement(label, "open")
    out.append(m)
    try:
        _pylance_reader(path), _our_reader(path)
        start = time.perf_counter()
        for _ in range(args.open_reps):
            m.pylance.append(_timed(partial(_pylance_reader, path)))
            m.ours.append(_timed(partial(_our_reader, path)))
            if time.perf_counter() - start > budget:
                break
    except Exception as e:
        m.error = _describe(e)
    log(f"  {label:12s} open      done{'  ' + m.error if m.error else ''}")

    interleaved("read_all", args.scan_reps, lambda r, _i: r.read_all().to_table(), 0)
    interleaved("take 1", args.take_reps, take, 1)
    interleaved("take 100", args.take_reps, take, 100)
    return out


def _fmt_s(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 1:
        return f"{x:8.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:7.2f} ms"
    return f"{x * 1e6:7.1f} us"


def report(results: list[Measurement], rows: int, nbytes: int) -> str:
    cols = ["pylance p50", "ours p50", "pylance p99", "ours p99"]
    head = f"{'file':12s} {'measure':9s} " + " ".join(f"{c:>12s}" for c in cols) + f" {'ours/pylance':>13s}"
    lines = [head, "-" * len(head)]
    for m in results:
        if m.error and not m.ours:
            lines.append(f"{m.file:12s} {m.measure:9s} {'':>12s} {'':>12s} {'':>12s} {'':>12s}  {m.error}")
            continue
        ratio = m.ratio()
        extra = ""
        if m.measure == "read_all" and m.ours:
            p, o = m.stat("pylance", 0.5) or float("nan"), m.stat("ours", 0.5) or float("nan")
            extra = (
                f"   ({rows / p / 1e6:.1f} vs {rows / o / 1e6:.1f} Mrows/s,"
                f" {nbytes / p / 2**20:.0f} vs {nbytes / o / 2**20:.0f} MiB/s)"
            )
        stats = [m.stat(who, q) for q in (0.5, 0.99) for who in ("pylance", "ours")]
        shown = "-" if ratio is None else f"{ratio:.2f}x"
        lines.append(
            f"{m.file:12s} {m.measure:9s} "
            + " ".join(f"{_fmt_s(x):>12s}" for x in stats)
            + f" {shown:>13s}{extra}{'  ' + m.error if m.error else ''}"
        )
    return "\n".join(lines)


def summary(results: list[Measurement]) -> str:
    """One line per file: each target measure's ratio and whether it meets the target."""
    lines = ["targets (ours/pylance p50): " + ", ".join(f"{k} <= {v:g}x" for k, v in TARGETS.items())]
    for label in dict.fromkeys(m.file for m in results):
        parts = []
        for m in results:
            if m.file != label or m.measure not in TARGETS:
                continue
            r = m.ratio()
            verdict = "n/a" if r is None else ("ok" if r <= TARGETS[m.measure] else "MISSED")
            parts.append(f"{m.measure} {'-' if r is None else f'{r:.2f}x'} {verdict}")
        lines.append(f"  {label:12s} " + " | ".join(parts))
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loadtest file", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="rows in the table (default 1M)")
    p.add_argument("--take-reps", type=int, default=200, help="repetitions of each take (default 200)")
    p.add_argument("--scan-reps", type=int, default=5, help="repetitions of read_all (default 5)")
    p.add_argument("--open-reps", type=int, default=30, help="repetitions of open (default 30)")
    p.add_argument("--budget-s", type=float, default=8.0, help="time cap per measure and file (default 8)")
    p.add_argument(
        "--files",
        default=FILES,
        help="comma-separated subset of pylance-2.0, pylance-2.1, pylance-2.2, ours-2.0",
    )
    p.add_argument("--dir", default=None, help="where to write the files (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the files")
    p.add_argument("--json", default=None, help="also write the measurements to this JSON file")
    return p.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    t_start = time.perf_counter()
    workdir = args.dir or tempfile.mkdtemp(prefix="lance-bench-")
    os.makedirs(workdir, exist_ok=True)
    try:
        log(f"building {args.rows:,} rows ...")
        table = build_table(args.rows)
        files: list[tuple[str, str]] = []
        for label in [f.strip() for f in args.files.split(",") if f.strip()]:
            who, version = label.split("-")
            path = os.path.join(workdir, f"bench-{label}.lance")
            writer = _write_pylance if who == "pylance" else _write_ours
            try:
                took = _timed(partial(writer, path, table, version))
            except Exception as e:
                log(f"  {label}: writing failed ({_describe(e)})")
                continue
            log(f"  wrote {label} in {took:.2f}s ({os.path.getsize(path) / 2**20:.1f} MiB)")
            files.append((label, path))
        results: list[Measurement] = []
        for label, path in files:
            results.extend(bench_file(label, path, args, log))
        columns = (
            f"id int64, x float64, name string, vec fsl<float32,{DIM}>, opt int32 {NULL_FRACTION:.0%} null"
        )
        print(f"\nLance file reader, {args.rows:,} rows ({columns})")
        print(report(results, args.rows, table.nbytes))
        print()
        print(summary(results))
        print(f"\ntotal {time.perf_counter() - t_start:.0f}s")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": args.rows, "results": [asdict(m) for m in results]}, f, indent=1)
        return 0
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
