"""Fixtures shared by the server tests (the service fixtures live in service_fixtures.py)."""

from tests.server.service_fixtures import recorder, served

__all__ = ["recorder", "served"]
