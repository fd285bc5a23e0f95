"""End-to-end Spark pipeline over the Flight server, runnable with one command.

    python examples/pipeline.py                      # embedded: in-process server on ./lance-data
    python examples/pipeline.py --uri grpc://h:8815  # against a running ``lance-flight serve``

1. Ingest: generate raw "click events" as CSV files (``--rows``), read them with Spark.
2. Transform: parse timestamps, derive columns, build an 8-d feature vector per event.
3. Write: ``df.write.format("lance_flight")`` in stage mode; the driver commits once (dataset ``events``).
4. Read back with filters: the pushed filters run on the server (see ``explain``).
5. Take rows by id: sample ``_rowid`` values, fetch those rows on the executors, in order.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO_ROOT))

COUNTRIES = ["de", "fr", "us", "jp", "br", "in"]


def generate_csv(directory: Path, rows: int, files: int = 4, seed: int = 7) -> None:
    """Raw input: ``event_id,user,country,ts,amount`` rows spread over ``files`` CSV files."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    per_file = -(-rows // files)
    for k in range(files):
        with (directory / f"events-{k}.csv").open("w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["event_id", "user", "country", "ts", "amount"])
            for i in range(k * per_file, min(rows, (k + 1) * per_file)):
                ts = f"2024-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:00"
                out.writerow(
                    [i, f"u{rng.randrange(1000)}", rng.choice(COUNTRIES), ts, round(rng.random() * 100, 2)]
                )


def start_embedded(root: str) -> Any:
    """An in-process server on a free port over ``root`` (the embedded default)."""
    from flight_server.service import LanceFlightService
    from flight_server.settings import ServerSettings

    return LanceFlightService(ServerSettings(root=root), location="grpc://127.0.0.1:0")


def main(argv: list[str] | None = None) -> int:
    """Run the pipeline; prints what each step produced."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uri", help="server location (default: start one in-process)")
    ap.add_argument("--root", default="./lance-data", help="root of the in-process server")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dataset", default="events")
    args = ap.parse_args(argv)

    import os

    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import functions as F

    from flight_server.spark import local_session, save, take_rows

    server = None
    uri = args.uri
    if uri is None:
        Path(args.root).mkdir(parents=True, exist_ok=True)
        server = start_embedded(args.root)
        uri = f"grpc://127.0.0.1:{server.port}"
    spark = local_session(app_name="lance-pipeline")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            raw_dir = Path(tmp) / "raw"
            generate_csv(raw_dir, args.rows)
            raw = spark.read.option("header", True).option("inferSchema", True).csv(str(raw_dir))
            print(f"1. ingest: {raw.count():,} raw rows from {raw_dir}")

            events = (
                raw.withColumn("ts", F.to_timestamp("ts"))
                .withColumn("day", F.to_date("ts"))
                .withColumn("big", F.col("amount") > 50)
                .withColumn(
                    "features",
                    F.array(*[(F.col("amount") / (k + 1)).cast("float") for k in range(8)]),
                )
            )
            print(f"2. transform: schema {events.schema.simpleString()}")

            save(events, args.dataset, uri=uri, mode="overwrite", vector_columns="features:8")
            print(f"3. write: dataset {args.dataset!r} on {uri}")

            df = (
                spark.read.format("lance_flight")
                .option("uri", uri)
                .option("with_row_id", "true")
                .load(args.dataset)
            )
            recent = df.filter((F.col("country") == "de") & (F.col("amount") > 90.0))
            n = recent.count()
            print(f"4. read back: {df.count():,} rows; country='de' AND amount > 90: {n:,} rows")
            recent.select("event_id", "country", "amount", "day").show(5, truncate=False)

            sample = df.select("_rowid").sample(fraction=min(1.0, 20 / max(1, args.rows)), seed=1).limit(10)
            ids = [r[0] for r in sample.collect()][::-1]  # any order: the answer keeps it
            ids_df = spark.createDataFrame([(i,) for i in ids], "_rowid long").coalesce(1)
            rows = take_rows(ids_df, args.dataset, uri=uri, columns=["event_id", "user", "features"])
            got = rows.collect()
            assert [r["_rowid"] for r in got] == ids, "take_rows changed the order"
            print(f"5. take: {len(got)} rows by id, in the order asked")
            rows.show(5, truncate=60)
            print(f"done in {time.perf_counter() - t0:.1f}s")
    finally:
        spark.stop()
        if server is not None:
            server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
