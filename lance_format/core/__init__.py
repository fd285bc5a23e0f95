"""Errors, types and helpers shared by every layer."""
