"""mqstore's storage engine: RocketMQ's commitlog, consume queues and index files, passive and
single-threaded. See ``MessageStore`` for the embedded composition of its parts."""

from engine.config import Geometry, GeometryError, StoreConfig
from engine.log.host import Host
from engine.log.message import Message, PutResult, PutStatus
from engine.log.record import Record
from engine.lookup import GetResult, GetStatus
from engine.recovery import RecoveryResult
from engine.store import MessageStore
from engine.store_lock import StoreLockedError

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
