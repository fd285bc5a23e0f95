"""Differential tests: random operation sequences through lance_format and pylance on one dataset."""
