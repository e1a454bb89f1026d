"""The integration tests' broker, under the names the tests import: the broker-run harness
(``mqstore.scripts.harness``: a real broker on a tiny-geometry store, polling with deadlines, free loopback
ports), the check of acknowledged sends against a stopped store (``mqstore.scripts.survival.ack_check``) and
the supervisor's control client."""

from __future__ import annotations

from mqstore.ipc.transport.control import control_request
from mqstore.scripts.harness import Broker, free_port_range, wait_for
from mqstore.scripts.survival.ack_check import AckCheck, check_acked

__all__ = ["AckCheck", "Broker", "check_acked", "control_request", "free_port_range", "wait_for"]
