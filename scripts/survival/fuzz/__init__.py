"""Fuzzing the decoders that take bytes from outside: no crash, no hang, a clear error.

    python -m scripts.survival.fuzz [--inputs 1000000] [--seconds 3600] [--targets record wire ...] [--hang-s 10]

See ``command`` for the targets and the verdict.
"""
