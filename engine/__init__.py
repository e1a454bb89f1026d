"""mqstore's storage engine: RocketMQ's commitlog, consume queues and index files, passive and
single-threaded. See ``MessageStore`` for the embedded composition of its parts."""

from mqstore.engine.config import Geometry, GeometryError, StoreConfig
from mqstore.engine.log.host import Host
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.engine.log.record import Record
from mqstore.engine.meta.store_lock import StoreLockedError
from mqstore.engine.read.lookup import GetResult, GetStatus
from mqstore.engine.repair.recovery import RecoveryResult
from mqstore.engine.store import MessageStore

__all__ = [
    "Geometry",
    "GeometryError",
    "GetResult",
    "GetStatus",
    "Host",
    "Message",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "Record",
    "RecoveryResult",
    "StoreConfig",
    "StoreLockedError",
]
