"""The Arrow Flight service hosting lance_format, its client and the PySpark data source."""
