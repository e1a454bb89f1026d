"""mqstore: a RocketMQ-compatible message store with RabbitMQ-style acknowledged queues, run as actors
over ZeroMQ.

The public API, frozen: what an application imports from ``mqstore`` itself.

    from mqstore import MessageStore, Producer, Consumer

    with Producer("mqstore-data") as producer:       # a running broker's store directory
        producer.send("Orders", b"...", tags="paid", keys=["order-17"])

Fields have one name wherever they appear (``queue_id``, ``queue_offset``, ``phys_offset``, ``born_ms``,
``store_ms``: on results, messages, receipts, keywords and the CLI's JSON), and every result's status is
one enum that is also a ``str`` (``PutStatus``, ``GetStatus``, ``AckStatus``).

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
    from mqstore.engine.config import GeometryError, StoreConfig
    from mqstore.engine.errors import MqstoreError
    from mqstore.engine.log.message import Message, PutResult, PutStatus
    from mqstore.engine.meta.store_lock import StoreLockedError
    from mqstore.engine.put.transactions import TransactionState
    from mqstore.engine.read.group_lag import QueueLag
    from mqstore.engine.read.lookup import GetResult, GetStatus
    from mqstore.engine.store import MessageStore
    from mqstore.ipc.client.ack_consumer import AckConsumer
    from mqstore.ipc.client.admin import Admin
    from mqstore.ipc.client.api import Producer
    from mqstore.ipc.client.consumer import Consumer
    from mqstore.ipc.client.transactions import TransactionResult
    from mqstore.ipc.transport.endpoints import Endpoints
    from mqstore.ipc.transport.exchange import BrokerError, BrokerTimeoutError
    from mqstore.ipc.wire.encoded import EncodingError, SendResults
    from mqstore.ipc.wire.messages import MessageBatch, Outgoing, ReceivedMessage, ReplyError, SendResult
    from mqstore.ipc.wire.receipts import AckStatus, Delivery, Receipt

# public name -> the module that defines it
_HOMES: dict[str, str] = {
    # the embedded store
    "MessageStore": "mqstore.engine.store",
    "StoreConfig": "mqstore.engine.config",
    "Message": "mqstore.engine.log.message",
    # the client library
    "Producer": "mqstore.ipc.client.api",
    "Consumer": "mqstore.ipc.client.consumer",
    "AckConsumer": "mqstore.ipc.client.ack_consumer",
    "Admin": "mqstore.ipc.client.admin",
    "Endpoints": "mqstore.ipc.transport.endpoints",
    "Outgoing": "mqstore.ipc.wire.messages",
    # results
    "PutResult": "mqstore.engine.log.message",
    "GetResult": "mqstore.engine.read.lookup",
    "SendResult": "mqstore.ipc.wire.messages",
    "SendResults": "mqstore.ipc.wire.encoded",
    "ReceivedMessage": "mqstore.ipc.wire.messages",
    "MessageBatch": "mqstore.ipc.wire.messages",
    "Delivery": "mqstore.ipc.wire.receipts",
    "Receipt": "mqstore.ipc.wire.receipts",
    "TransactionResult": "mqstore.ipc.client.transactions",
    "QueueLag": "mqstore.engine.read.group_lag",
    # statuses and states
    "PutStatus": "mqstore.engine.log.message",
    "GetStatus": "mqstore.engine.read.lookup",
    "AckStatus": "mqstore.ipc.wire.receipts",
    "TransactionState": "mqstore.engine.put.transactions",
    # errors
    "BrokerError": "mqstore.ipc.transport.exchange",
    "BrokerTimeoutError": "mqstore.ipc.transport.exchange",
    "StoreLockedError": "mqstore.engine.meta.store_lock",
    "MqstoreError": "mqstore.engine.errors",
    "GeometryError": "mqstore.engine.config",
    "EncodingError": "mqstore.ipc.wire.encoded",
    "ReplyError": "mqstore.ipc.wire.messages",
}

try:
    __version__ = version("mqstore")
except PackageNotFoundError:  # a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AckConsumer",
    "AckStatus",
    "Admin",
    "BrokerError",
    "BrokerTimeoutError",
    "Consumer",
    "Delivery",
    "EncodingError",
    "Endpoints",
    "GeometryError",
    "GetResult",
    "GetStatus",
    "Message",
    "MessageBatch",
    "MessageStore",
    "MqstoreError",
    "Outgoing",
    "Producer",
    "PutResult",
    "PutStatus",
    "QueueLag",
    "Receipt",
    "ReceivedMessage",
    "ReplyError",
    "SendResult",
    "SendResults",
    "StoreConfig",
    "StoreLockedError",
    "TransactionResult",
    "TransactionState",
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
    return list(__all__)
