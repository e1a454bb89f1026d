"""Benchmarks and load generation; each prints JSON and puts its figures next to a limit or a peer
measured in the same run.

- ``load`` (with ``live``, its per-second table): N producer and M consumer processes against a
  broker, ``mqstore bench load``;
- ``limits``: this machine's copy, write, fdatasync and ipc limits, the probes every other figure
  is compared with;
- peers: ``redis_peer`` (Redis Streams doing the same load) and ``rocketmq_peer`` (the stock
  RocketMQ client, driven from the command line);
- ``suite`` (everything against the targets, JSON and PNG) and ``sweep`` (1..k producers and readers);
- single paths: ``e2e`` (send -> consumable), ``ack`` (ack mode), ``put_batch`` (embedded appends),
  ``prefault``, ``roll`` (commitlog rolls), ``remoting`` (the stock client against mqstore's),
  ``rebuild`` and ``spark_read`` (the Spark pipeline).

Brokers come from ``mqstore.scripts.harness``.
"""
