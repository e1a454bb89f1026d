"""ZeroMQ between the broker's processes and its clients, in four rooms:

- ``wire``: the contract, what the bytes mean: msgpack maps (never pickle) with their limits
  (``schema``), the typed notices the actors publish to each other (``notices``), the values clients
  send and get (``messages``, ``receipts``, ``encoded``);
- ``transport``: how the bytes move: sockets with their limits stated, endpoints, CURVE keys, the
  client's channel and I/O thread, the supervisor's control client;
- ``client``: what applications import: ``Producer``, ``Admin``, ``Consumer``, ``AckConsumer``;
- ``remoting``: Apache RocketMQ's TCP remoting codec, for the remoting front, the transactions actor,
  readiness checks and the harnesses alike, so that no actor package imports another's.
"""
