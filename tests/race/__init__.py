"""Two or three clients interleaved on one dataset: no client may lose another's committed data."""
