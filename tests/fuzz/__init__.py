"""Structure-aware fuzzing of the lance-flight protocol against a real server subprocess.

``python -m tests.fuzz --calls 100000`` is the long run (docs/testing.md); ``test_fuzz.py`` is the
bounded run CI makes with a fixed seed.
"""
