"""What people run by hand, grouped by purpose (the layer that may import anything):

- ``cli/``: the ``mqstore`` command and its subcommands (installed by ``pip install -e .``);
- ``bench/``: the load generator, this machine's limits, the peers (Redis Streams, the stock RocketMQ
  client), the suite and the sweep, and the benchmarks of single paths;
- ``survival/``: the harnesses that try to break a broker or a store: chaos, crash cuts, fuzzing,
  a full disk, hostile clients;
- ``harness.py``: the broker-run harness, a real broker in a subprocess, that the benchmarks, the
  survival harnesses and the integration tests all start their brokers with. It sits here, beside
  the rooms that use it, rather than in one of them.
"""
