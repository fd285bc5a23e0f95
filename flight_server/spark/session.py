"""Spark session set-up for the ``lance_flight`` data source.

:func:`configure` registers :class:`~flight_server.spark.LanceDataSource` on an existing session and
turns on the Spark setting that lets Python data sources receive filters
(``spark.sql.python.filterPushdown.enabled``; without it Spark refuses a reader that implements
``pushFilters``). :func:`local_session` builds a small local session for tests, examples and
benchmarks, with Python workers running this interpreter.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

__all__ = ["FILTER_PUSHDOWN_CONF", "configure", "jvm_has_source", "local_session"]

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

# Settings for a local session, each with the reason for its value.
LOCAL_CONF: dict[str, str] = {
    FILTER_PUSHDOWN_CONF: "true",
    # The UI thread and its port are of no use to tests and one-shot jobs.
    "spark.ui.enabled": "false",
    # The default of 200 shuffle partitions makes every small aggregate run 200 tiny tasks.
    "spark.sql.shuffle.partitions": "4",
    # Arrow batches handed to Python writers: larger batches amortise per-batch costs
    # (the default is 10,000 rows).
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
    # Console progress bars interleave with test and benchmark output.
    "spark.ui.showConsoleProgress": "false",
    # A local session talks to itself: bind and advertise loopback, not the host's interface.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    # Keep timestamps unambiguous between driver, workers and tests.
    "spark.sql.session.timeZone": "UTC",
}


def jvm_has_source(spark: SparkSession, name: str) -> bool | None:
    """Whether the session's JVM has a data source ``name`` of its own (a jar, not a Python data
    source registered on the session); ``None`` when it cannot tell (Spark Connect has no JVM)."""
    try:
        jvm: Any = spark._jvm
        conf = spark._jsparkSession.sessionState().conf()
        lookup = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource
    except Exception:
        return None
    try:
        provider = lookup(name, conf)
    except Exception:
        return False
    # Spark 4 resolves registered Python data sources here too, through a Python provider class.
    return "python" not in str(provider.getName()).lower()


def configure(spark: SparkSession) -> SparkSession:
    """Register the ``lance_flight`` data source and enable filter pushdown on ``spark``.

    The source also answers to ``lance`` (its old name) when the JVM has no ``lance`` source of
    its own; with the official lance-spark connector installed, ``lance`` stays that connector's.

    Parameters
    ----------
    spark : SparkSession
        A running session (any master).

    Returns
    -------
    SparkSession
        The same session, for chaining.
    """
    from flight_server.spark.datasource import LEGACY_NAME, LanceDataSource, LanceLegacyNameDataSource

    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    spark.dataSource.register(LanceDataSource)
    if jvm_has_source(spark, LEGACY_NAME) is False:
        spark.dataSource.register(LanceLegacyNameDataSource)
    return spark


def local_session(
    master: str = "local[2]",
    app_name: str = "lance-flight",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A local :class:`SparkSession` with the ``lance_flight`` source registered (see :data:`LOCAL_CONF`).

    ``PYSPARK_PYTHON`` is set to the running interpreter, since Spark otherwise starts workers with
    whatever ``python3`` is first on ``PATH`` (which may lack pyarrow or this package).
    ``SPARK_LOCAL_IP`` is set to loopback for ``local`` masters: the JVM reads it at start-up, before
    ``spark.driver.host`` applies, and without it warns that the hostname resolves to loopback.

    Parameters
    ----------
    master : str
        Spark master URL; ``local[N]`` runs N task threads in this machine's JVM.
    app_name : str
        Application name shown in logs.
    conf : Mapping[str, str], optional
        Extra settings, applied after (and overriding) :data:`LOCAL_CONF`.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**LOCAL_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return configure(spark)
