"""Who can answer a check: the ipc connections that registered a producer group with the actor.

An ipc ``Producer`` registers the groups it sends transactions for (and again every heartbeat); the
remoting front registers the groups its RocketMQ clients name in HEART_BEAT's ``producerDataSet``
and passes the checks on to one of their connections. A check goes to the newest registration of
the half's group (RocketMQ's ``getAvailableChannel``); a connection that is gone (the ROUTER cannot
route to it) is forgotten and the next is tried. With none, the check is only counted (#386).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import zmq

from mqstore.ipc.wire import schema

log = logging.getLogger("mqstore")

MAX_GROUPS = 4096
MAX_PER_GROUP = 256


@dataclass(slots=True)
class ProducerTable:
    groups: dict[str, dict[bytes, int]] = field(default_factory=dict)  # group -> identity -> registered ms

    def register(self, identity: bytes, groups: list[str], now_ms: int) -> None:
        for group in groups:
            members = self.groups.get(group)
            if members is None:
                if len(self.groups) >= MAX_GROUPS:
                    continue
                members = self.groups[group] = {}
            members.pop(identity, None)
            if len(members) < MAX_PER_GROUP:
                members[identity] = now_ms

    def push(self, router: zmq.Socket[Any], group: str, message: dict[str, Any]) -> bool:
        """Send ``message`` to the newest live registration of ``group``; whether one took it."""
        members = self.groups.get(group, {})
        frame = schema.pack(message)
        for identity in reversed(list(members)):
            try:
                router.send_multipart([identity, frame], zmq.NOBLOCK)
                return True
            except zmq.Again:
                log.warning("transaction check for %s dropped: its producer's queue is full", group)
                return False
            except zmq.ZMQError:  # EHOSTUNREACH with ROUTER_MANDATORY: that connection is gone
                del members[identity]
        if not members:
            self.groups.pop(group, None)
        return False
