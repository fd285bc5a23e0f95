"""``LanceDataSource``: the PySpark (4.x) Python data source registered as ``lance_flight``.

Spark creates the data source from the options on the driver, calls :meth:`LanceDataSource.schema`
once and pickles the instance; the reader and writer are created from that pickled instance in
later Python workers. The schema call therefore also pins the dataset version, so every partition of
one DataFrame reads the snapshot its schema came from.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceReader
from pyspark.sql.types import StructType

from flight_server.spark.connection import dataset_info, projected_schema
from flight_server.spark.options import parse_read_options, parse_write_options
from flight_server.spark.reader import LanceReader, LanceReaderNoPushdown
from flight_server.spark.types import (
    arrow_to_spark_schema,
    check_writable,
    spark_to_arrow_schema,
)
from flight_server.spark.writer import SAVE_MODES, LanceWriter, WritePlan
from lance_format.core.errors import DatasetAlreadyExistsError, InvalidInputError

__all__ = ["PUSHDOWN_SCOPED_PER_SCAN", "LanceDataSource"]

# Spark up to 4.3 keeps the read plan of a DataFrame's last filter-pushdown query on the data source
# object it shares with every query built from that DataFrame; a later query without pushable
# filters then silently reuses it and returns the earlier query's rows. Spark scoped the plan to
# each scan in the same change that gave Python readers ``pushLimit``, so its presence tells the two
# apart. Before it, pushdown is only used when asked for (option ``pushdown=true``).
PUSHDOWN_SCOPED_PER_SCAN = hasattr(DataSourceReader, "pushLimit")


def _pushdown(option: object) -> bool:
    if option is None or option == "":
        return PUSHDOWN_SCOPED_PER_SCAN
    text = str(option).lower()
    if text not in ("true", "false", "1", "0", "yes", "no"):
        raise InvalidInputError(f"option 'pushdown' must be true or false, got {option!r}")
    return text in ("true", "1", "yes")


#: The source's name in ``spark.read.format(...)``; ``lance`` belongs to the official connector.
SHORT_NAME = "lance_flight"
#: The name it also answers to when no other ``lance`` source is installed (the name of old releases).
LEGACY_NAME = "lance"


class LanceDataSource(DataSource):
    """Reads and writes Lance datasets through the Flight server (short name ``lance_flight``).

    ``lance`` is the official lance-spark connector's name; :func:`~flight_server.spark.configure`
    registers this source under ``lance`` too only when the JVM has no ``lance`` source.

    Examples
    --------
    >>> from flight_server.spark import LanceDataSource, configure  # doctest: +SKIP
    >>> configure(spark)  # registers the source, enables filter pushdown  # doctest: +SKIP
    >>> df = (spark.read.format("lance_flight").option("uri", "grpc://127.0.0.1:8815")
    ...       .option("dataset", "events").load())  # doctest: +SKIP
    >>> df.write.format("lance_flight").option("dataset", "copy").mode("append").save()  # doctest: +SKIP

    See :mod:`flight_server.spark.options` for every option.
    """

    @classmethod
    def name(cls) -> str:
        """The short name used in ``spark.read.format(...)``."""
        return SHORT_NAME

    def schema(self) -> StructType:
        """The Spark schema of the (projected) dataset; pins the version read."""
        opts = parse_read_options(self.options)
        info = dataset_info(opts.source, opts.version)
        if info is None:
            raise InvalidInputError(f"dataset {opts.source.dataset!r} does not exist on {opts.source.uri}")
        # Pickled with the instance: the reader reads exactly this snapshot.
        self._dataset_schema = info.schema
        self._version = info.version
        return arrow_to_spark_schema(projected_schema(info.schema, opts.columns, opts.with_row_id))

    def reader(self, schema: StructType) -> DataSourceReader:
        """A reader over the snapshot pinned by :meth:`schema`; takes filters if ``pushdown`` is on."""
        opts = parse_read_options(self.options)
        dataset_schema = getattr(self, "_dataset_schema", None)
        version = getattr(self, "_version", None)
        if dataset_schema is None:  # a user-specified schema skips schema(): ask now
            info = dataset_info(opts.source, opts.version)
            if info is None:
                raise InvalidInputError(
                    f"dataset {opts.source.dataset!r} does not exist on {opts.source.uri}"
                )
            dataset_schema, version = info.schema, info.version
        opts = opts.pinned(version)
        cls = LanceReader if _pushdown(self.options.get("pushdown")) else LanceReaderNoPushdown
        return cls(opts, dataset_schema, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """Plan the write on the driver: the mode, and the schema batches are cast to."""
        opts = parse_write_options(self.options)
        check_writable(schema)
        save_mode = str(self.options.get("save_mode") or ("overwrite" if overwrite else "append")).lower()
        if save_mode not in SAVE_MODES:
            raise InvalidInputError(f"option 'save_mode' must be one of {SAVE_MODES}, got {save_mode!r}")
        info = dataset_info(opts.source, None)
        if info is not None and save_mode == "errorifexists":
            raise DatasetAlreadyExistsError(f"dataset {opts.source.dataset!r} already exists")
        # A missing dataset is created by every mode ("create" fails if a concurrent job won).
        mode = "create" if info is None else {"ignore": "skip"}.get(save_mode, save_mode)
        empty_schema = spark_to_arrow_schema(schema)
        target = info.schema if (info is not None and mode == "append") else None
        read_version = info.version if info is not None else None
        return LanceWriter(opts, WritePlan(mode, target, empty_schema, read_version))


class LanceLegacyNameDataSource(LanceDataSource):
    """:class:`LanceDataSource` under its old short name ``lance`` (registered only when the JVM
    has no ``lance`` source, so it never shadows the official lance-spark connector)."""

    @classmethod
    def name(cls) -> str:
        return LEGACY_NAME
