"""The remoting front's side of transactional messages: END_TRANSACTION (37) and the admin's
RESUME_CHECK_HALF_MESSAGE (323) in, CHECK_TRANSACTION_STATE (39) out.

END_TRANSACTION (oneway from every client) becomes the transaction actor's ``end_transaction``
(``mqstore.actors.transactions``), the one implementation of commit and rollback. The producer groups a
client names in HEART_BEAT's ``producerDataSet`` are registered with that actor on each heartbeat,
and this front keeps which of its connections serves each group; a ``check_transaction`` push from
the actor goes down the newest live connection of the half's group as a oneway
CHECK_TRANSACTION_STATE with RocketMQ's fields (``topic``, ``tranStateTableOffset``,
``commitLogOffset``, ``msgId``, ``transactionId``, ``offsetMsgId``, ``bname``) and the message as
its body, in the v1 record layout. The client answers with END_TRANSACTION ``fromTransactionCheck``.
An end the actor refuses as too late (past the half's check immunity) is answered ILLEGAL_OPERATION
(604), any other refusal SYSTEM_ERROR. RESUME_CHECK_HALF_MESSAGE names a discarded half by its
offsetMsgId (header ``msgId``) and becomes the actor's ``resume_check``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mqstore.engine.log.msgid import decode_offset_msg_id
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError
from mqstore.ipc.wire import requests

log = logging.getLogger("mqstore.remoting")

INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"  # every Java client announces it; it sends no transactions
REGISTER_TIMEOUT_MS = 1_000
END_STATES = (0, 8, 12)  # unknown, commit, rollback (MessageSysFlag's transaction types)

Call = Callable[..., Awaitable[dict[str, Any]]]  # (route, request, timeout_ms?)
Push = Callable[[int, rm.RemotingCommand], None]


@dataclass(slots=True)
class TransactionFront:
    call: Call                      # the front's request to an actor: (route, request, timeout_ms?)
    broker_name: str
    push: Push = lambda connection, command: None   # the listener's: write a command on a connection
    groups: dict[str, dict[int, int]] = field(default_factory=dict)  # group -> connection -> heartbeat ms

    async def end(self, request: rm.RemotingCommand, connection: int) -> rm.RemotingCommand:
        ext = request.ext
        try:
            state = int(ext.get("commitOrRollback", ""))
            queue_offset, phys_offset = int(ext["tranStateTableOffset"]), int(ext["commitLogOffset"])
        except (KeyError, ValueError):
            return request.reply(rm.SYSTEM_ERROR, "END_TRANSACTION needs commitOrRollback, tranStateTableOffset "
                                                  "and commitLogOffset")
        if state not in END_STATES or queue_offset < 0 or phys_offset < 0:
            return request.reply(rm.SYSTEM_ERROR, f"commitOrRollback {state} is not 0, 8 or 12")
        if state == 0:
            return request.reply(rm.SUCCESS)  # logged by the client, nothing to do here
        try:
            await self.call("transactions", requests.EndTransaction(
                str(ext.get("producerGroup", "")), queue_offset, phys_offset, state,
                ext.get("fromTransactionCheck") in ("true", "1")))
        except BrokerError as exc:
            code = rm.ILLEGAL_OPERATION if exc.status == "ILLEGAL_OPERATION" else rm.SYSTEM_ERROR
            return request.reply(code, exc.reason)
        return request.reply(rm.SUCCESS)

    async def resume(self, request: rm.RemotingCommand) -> rm.RemotingCommand:
        """RESUME_CHECK_HALF_MESSAGE: a half the check service discarded goes back on the half queue."""
        try:
            _, phys_offset = decode_offset_msg_id(str(request.ext.get("msgId", "")))
        except ValueError as exc:
            return request.reply(rm.SYSTEM_ERROR, f"msgId: {exc}")
        try:
            await self.call("transactions", requests.ResumeCheck(phys_offset))
        except BrokerError as exc:
            return request.reply(rm.SYSTEM_ERROR, exc.reason)
        return request.reply(rm.SUCCESS)

    async def heartbeat(self, body: bytes, connection: int, now_ms: int) -> None:
        """Note the producer groups of a HEART_BEAT (a body the consumer table already accepted)."""
        try:
            producers = json.loads(body or b"{}").get("producerDataSet") or []
        except (ValueError, AttributeError):
            return
        names = [p.get("groupName") for p in producers if isinstance(p, dict)] if isinstance(producers, list) else []
        groups = [g for g in names if isinstance(g, str) and g and g != INNER_PRODUCER_GROUP]
        if not groups:
            return
        for group in groups:
            self.groups.setdefault(group, {})[connection] = now_ms
        try:
            await self.call("transactions", requests.RegisterProducer(tuple(groups)), REGISTER_TIMEOUT_MS)
        except (BrokerError, BrokerTimeoutError) as exc:  # the actor restarting: the next heartbeat registers
            log.warning("producer groups %s not registered for checks: %s", groups, exc)

    def drop(self, connection: int) -> None:
        for group in list(self.groups):
            self.groups[group].pop(connection, None)
            if not self.groups[group]:
                del self.groups[group]

    def check(self, push: dict[str, Any]) -> None:
        """A ``check_transaction`` push: CHECK_TRANSACTION_STATE down a connection of the group."""
        connections = self.groups.get(str(push.get("group", "")))
        if not connections:
            return  # its clients left this front; the actor counts the check anyway, as RocketMQ does
        connection = max(connections, key=connections.__getitem__)
        ext = {"topic": push.get("topic", ""), "tranStateTableOffset": push.get("queue_offset", -1),
               "commitLogOffset": push.get("phys_offset", -1), "msgId": push.get("msg_id", ""),
               "transactionId": push.get("transaction_id", ""), "offsetMsgId": push.get("offset_msg_id", ""),
               "bname": self.broker_name}
        command = rm.RemotingCommand(rm.CHECK_TRANSACTION_STATE, 0, rm.FLAG_ONEWAY, None,
                                     {k: str(v) for k, v in ext.items()}, bytes(push.get("record") or b""), "JAVA")
        self.push(connection, command)
