"""The ``mqstore`` command (``mqstore.py``: the parser and the error boundary) and its subcommands,
one module per group: ``offline`` (inspect, query, verify on a store directory), ``demo`` (the
embedded quick start), ``broker`` (start, status, stop, keys; produce and consume against it),
``spark`` (the Spark jobs), ``bench`` (the load generator and the benchmarks), with ``output`` for
what they print."""
