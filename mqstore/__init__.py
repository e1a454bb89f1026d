"""mqstore: a RocketMQ-compatible message store with RabbitMQ-style acknowledged queues, run as actors
over ZeroMQ.

The public API, frozen: what an application imports from ``mqstore`` itself.

    from mqstore import MessageStore, Producer, Consumer

    with Producer("mqstore-data") as producer:       # a running broker's store directory
        producer.send("Orders", b"...", tags="paid", keys=["order-17"])

The packages below it are the card's rooms: ``mqstore.engine`` (the passive store), ``mqstore.ipc``
(the wire contract, the transport, the client library, RocketMQ's remoting codec), ``mqstore.actors``
(the broker's processes), ``mqstore.pipeline`` (Spark) and ``mqstore.scripts`` (the ``mqstore`` command,
benchmarks, survival harnesses). Their names may change between releases; these may not.

The names load on first use, so an actor process that imports ``mqstore.actors...`` pays for none of
them.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mqstore.engine import GetResult, GetStatus, Message, MessageStore, PutResult, PutStatus, StoreConfig
    from mqstore.engine.errors import MqstoreError
    from mqstore.engine.meta.store_lock import StoreLockedError
    from mqstore.ipc.client.api import AckConsumer, Admin, Consumer, Producer
    from mqstore.ipc.transport.exchange import BrokerError, BrokerTimeoutError
    from mqstore.ipc.wire.messages import MessageBatch, ReceivedMessage, SendResult
    from mqstore.ipc.wire.receipts import Delivery, Receipt

# public name -> the module that defines it
_HOMES: dict[str, str] = {
    "MessageStore": "mqstore.engine",
    "StoreConfig": "mqstore.engine",
    "Message": "mqstore.engine",
    "PutResult": "mqstore.engine",
    "PutStatus": "mqstore.engine",
    "GetResult": "mqstore.engine",
    "GetStatus": "mqstore.engine",
    "StoreLockedError": "mqstore.engine.meta.store_lock",
    "MqstoreError": "mqstore.engine.errors",
    "Producer": "mqstore.ipc.client.api",
    "Consumer": "mqstore.ipc.client.api",
    "AckConsumer": "mqstore.ipc.client.api",
    "Admin": "mqstore.ipc.client.api",
    "SendResult": "mqstore.ipc.wire.messages",
    "ReceivedMessage": "mqstore.ipc.wire.messages",
    "MessageBatch": "mqstore.ipc.wire.messages",
    "Delivery": "mqstore.ipc.wire.receipts",
    "Receipt": "mqstore.ipc.wire.receipts",
    "BrokerError": "mqstore.ipc.transport.exchange",
    "BrokerTimeoutError": "mqstore.ipc.transport.exchange",
}

try:
    __version__ = version("mqstore")
except PackageNotFoundError:  # a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AckConsumer",
    "Admin",
    "BrokerError",
    "BrokerTimeoutError",
    "Consumer",
    "Delivery",
    "GetResult",
    "GetStatus",
    "Message",
    "MessageBatch",
    "MessageStore",
    "MqstoreError",
    "Producer",
    "PutResult",
    "PutStatus",
    "Receipt",
    "ReceivedMessage",
    "SendResult",
    "StoreConfig",
    "StoreLockedError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mqstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
