"""Flight SQL on the service's port: metadata, statements, prepared statements and bulk ingest.

Statements run in DataFusion over our datasets as ``pyarrow.dataset.Dataset`` objects, so
projections and filters reach our scanner; see ``docs/flight-sql.md``.
"""

from flight_server.flightsql.engine import DataFusionBatches
from flight_server.flightsql.interrupt import QuerySlots
from flight_server.flightsql.server import SQL_ACTIONS, FlightSql, sql_text

__all__ = ["SQL_ACTIONS", "DataFusionBatches", "FlightSql", "QuerySlots", "sql_text"]
