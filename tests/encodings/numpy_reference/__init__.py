"""The numpy implementations the compiled kernels replaced, kept as test oracles: each kernel must
give byte-identical results (tests/encodings/test_kernels.py)."""
