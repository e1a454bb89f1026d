"""The clients for asyncio, ``mqstore.aio``: each wraps the blocking client of its name and awaits
that client's futures (``asyncio.wrap_future``), so both share one implementation."""

from mqstore.ipc.client.aio.ack_consumer import AckConsumer
from mqstore.ipc.client.aio.admin import Admin
from mqstore.ipc.client.aio.consumer import Consumer
from mqstore.ipc.client.aio.producer import Producer

__all__ = ["AckConsumer", "Admin", "Consumer", "Producer"]
