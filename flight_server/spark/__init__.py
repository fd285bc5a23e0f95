"""PySpark (4.1+) data source ``lance_flight``: Spark reads and writes Lance datasets through Flight.

>>> from flight_server.spark import LanceDataSource  # doctest: +SKIP
>>> spark.dataSource.register(LanceDataSource)  # doctest: +SKIP
>>> spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")  # doctest: +SKIP

(:func:`configure` does both.) No JVM jars: the source runs in Spark's Python workers. Needs the
``spark`` extra (``pip install 'lance-flight[spark]'``).
"""

from __future__ import annotations

from flight_server.spark.datasource import LanceDataSource
from flight_server.spark.session import FILTER_PUSHDOWN_CONF, configure, local_session
from flight_server.spark.take import take_rows
from flight_server.spark.writer import save

__all__ = ["FILTER_PUSHDOWN_CONF", "LanceDataSource", "configure", "local_session", "save", "take_rows"]
