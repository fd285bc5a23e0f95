"""Benchmarks and load tests. Run ``python -m loadtest <name> [options]`` (``./dev bench <name>``)."""
