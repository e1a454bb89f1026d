"""ZeroMQ transport and the client library: message schemas (msgpack, never pickle), endpoints and
sockets, CURVE keys, the typed notices the actors publish to each other (``notices``), the
supervisor's control client (``control``), and what applications import: ``client`` (Producer,
Admin), ``consumer``, ``ack_consumer``."""
