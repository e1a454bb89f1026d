"""The client library applications import: ``Producer``, ``Admin``, ``Consumer``, ``AckConsumer``."""

from mqstore.ipc.client.api import AckConsumer, Admin, Consumer, Producer

__all__ = ["AckConsumer", "Admin", "Consumer", "Producer"]
