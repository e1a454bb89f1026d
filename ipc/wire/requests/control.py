"""``ping`` (every actor), the supervisor's control socket (``status``, ``stop``) and the
transactions actor's ops.

    ping               -> pid, and what each actor adds
    status, stop       the supervisor's REP socket (``mqstore.ipc.transport.control``)
    promote            master_role ("ASYNC_MASTER" or "SYNC_MASTER"): a slave becomes a master (``mqstore promote``)
    end_transaction    group, queue_offset, phys_offset, state (0, 8 or 12), from_check?
    register_producer  groups (non-empty strings): this producer answers their check-backs
    resume_check       phys_offset: a half message back on the half queue
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from mqstore.ipc.wire import schema
from mqstore.ipc.wire.requests.base import LONG_MAX, Op, Request, optional

PROMOTED_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")  # what a slave may become
END_STATES = (0, 8, 12)  # RocketMQ's TRANSACTION_NOT_TYPE, COMMIT_TYPE, ROLLBACK_TYPE


@dataclass(frozen=True, slots=True)
class Ping(Request):
    OP: ClassVar[Op] = Op.PING


@dataclass(frozen=True, slots=True)
class Status(Request):
    OP: ClassVar[Op] = Op.STATUS


@dataclass(frozen=True, slots=True)
class Stop(Request):
    OP: ClassVar[Op] = Op.STOP


@dataclass(frozen=True, slots=True)
class Promote(Request):
    OP: ClassVar[Op] = Op.PROMOTE
    master_role: str

    @classmethod
    def decode(cls, message: dict[str, Any]) -> Promote:
        role: str = schema.field(message, "master_role", str)
        if role not in PROMOTED_ROLES:
            raise schema.SchemaError(f"field 'master_role' must be one of {', '.join(PROMOTED_ROLES)}, got {role!r}")
        return cls(role)


@dataclass(frozen=True, slots=True)
class EndTransaction(Request):
    OP: ClassVar[Op] = Op.END_TRANSACTION
    group: str
    queue_offset: int
    phys_offset: int
    state: int
    from_check: bool | None = None

    @classmethod
    def decode(cls, message: dict[str, Any]) -> EndTransaction:
        state = schema.field(message, "state", int)
        if state not in END_STATES:
            raise schema.SchemaError("state must be 0 (unknown), 8 (commit) or 12 (rollback)")
        return cls(schema.field(message, "group", str), schema.field(message, "queue_offset", int, lo=0, hi=LONG_MAX),
                   schema.field(message, "phys_offset", int, lo=0, hi=LONG_MAX), state,
                   optional(message, "from_check", bool))


@dataclass(frozen=True, slots=True)
class RegisterProducer(Request):
    OP: ClassVar[Op] = Op.REGISTER_PRODUCER
    groups: tuple[str, ...]

    @classmethod
    def decode(cls, message: dict[str, Any]) -> RegisterProducer:
        groups = schema.field(message, "groups", list)
        if not all(isinstance(g, str) and g for g in groups):
            raise schema.SchemaError("groups must be non-empty strings")
        return cls(tuple(groups))


@dataclass(frozen=True, slots=True)
class ResumeCheck(Request):
    OP: ClassVar[Op] = Op.RESUME_CHECK
    phys_offset: int

    @classmethod
    def decode(cls, message: dict[str, Any]) -> ResumeCheck:
        return cls(schema.field(message, "phys_offset", int, lo=0, hi=LONG_MAX))
