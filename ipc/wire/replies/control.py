"""The supervisor's replies on its control socket, and the transactions actor's.

    ping               -> pid                     (the supervisor, the transactions actor)
    status             -> store, pid, flush_mode, written, flushed, recovery, actors {name: stats},
                          ready, waiting_for, metrics_url (when the metrics serve)
    stop               -> stopping, pid, store    (``mqstore stop`` waits for that pid to exit)
    promote            -> accepted, reason        (the supervisor then restarts the broker as a master)
    end_transaction    -> msg_id, phys_offset     (of the committed message; "" and -1 for a rollback)
    register_producer  -> nothing more
    resume_check       -> queue_offset, phys_offset
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from mqstore.ipc.wire.replies.base import Reply, field, mapping_of, strings


@dataclass(frozen=True, slots=True)
class PingReply(Reply):
    pid: int

    @classmethod
    def decode(cls, message: dict[str, Any]) -> PingReply:
        return cls(field(message, "pid", int))


@dataclass(frozen=True, slots=True)
class StatusReply(Reply):
    """What ``mqstore status`` shows. Each actor's stats are what it last reported (``pid``, ``state``,
    ``restarts``, ... and what the actor adds: the writer's ``files`` say what holds each commitlog file)."""

    OMITTED: ClassVar[frozenset[str]] = frozenset({"metrics_url"})
    store: str
    pid: int
    flush_mode: str
    written: int
    flushed: int
    recovery: dict[str, Any]
    actors: dict[str, dict[str, Any]]
    ready: bool
    waiting_for: list[str]
    metrics_url: str | None = None
    role: str = ""  # the broker's role (ASYNC_MASTER, SYNC_MASTER, SLAVE); "" from a broker before roles

    @classmethod
    def decode(cls, message: dict[str, Any]) -> StatusReply:
        return cls(field(message, "store", str), field(message, "pid", int), field(message, "flush_mode", str),
                   field(message, "written", int), field(message, "flushed", int), field(message, "recovery", dict),
                   mapping_of(message, "actors", dict), field(message, "ready", bool), strings(message, "waiting_for"),
                   field(message, "metrics_url", str, default=None), field(message, "role", str, default=""))


@dataclass(frozen=True, slots=True)
class PromoteReply(Reply):
    accepted: bool
    reason: str  # why not, or what happens now

    @classmethod
    def decode(cls, message: dict[str, Any]) -> PromoteReply:
        return cls(field(message, "accepted", bool), field(message, "reason", str))


@dataclass(frozen=True, slots=True)
class StopReply(Reply):
    stopping: bool
    pid: int
    store: str  # resolved: where ``mqstore stop`` looks for the abort marker

    @classmethod
    def decode(cls, message: dict[str, Any]) -> StopReply:
        return cls(field(message, "stopping", bool), field(message, "pid", int), field(message, "store", str))


@dataclass(frozen=True, slots=True)
class EndTransactionReply(Reply):
    msg_id: str
    phys_offset: int

    @classmethod
    def decode(cls, message: dict[str, Any]) -> EndTransactionReply:
        return cls(field(message, "msg_id", str), field(message, "phys_offset", int))


@dataclass(frozen=True, slots=True)
class RegisterProducerReply(Reply):
    pass


@dataclass(frozen=True, slots=True)
class ResumeCheckReply(Reply):
    queue_offset: int
    phys_offset: int

    @classmethod
    def decode(cls, message: dict[str, Any]) -> ResumeCheckReply:
        return cls(field(message, "queue_offset", int), field(message, "phys_offset", int))
