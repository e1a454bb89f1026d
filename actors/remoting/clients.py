"""The remoting front's client table: who is consuming (the heartbeat table) and which orderly
consumer holds which queue (the queue locks).

RocketMQ clients announce their consumer groups in HEART_BEAT (every 30 s) and leave with
UNREGISTER_CLIENT or by closing their connection; GET_CONSUMER_LIST_BY_GROUP answers from this table,
and a clustering consumer shares a topic's queues among exactly the ids it gets back. Like the Java
broker, both live in memory: after a restart of the front, clients re-announce themselves with their
next heartbeat and re-lock their queues within 20 s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mqstore.engine.errors import MqstoreError
from mqstore.engine.names import check_topic

MAX_GROUPS_PER_HEARTBEAT = 256
MAX_CLIENTS_PER_GROUP = 4096


class ClientBodyError(MqstoreError, ValueError):
    """A heartbeat or lock body that is not what RocketMQ clients send."""


@dataclass(slots=True)
class ClientEntry:
    connection: int
    seen_ms: int
    topics: tuple[str, ...] = ()


@dataclass(slots=True)
class ConsumerTable:
    max_groups: int
    expire_ms: int
    groups: dict[str, dict[str, ClientEntry]] = field(default_factory=dict)

    def heartbeat(self, body: bytes, connection: int, now_ms: int) -> int:
        """Record a HEART_BEAT body; returns how many consumer groups it named."""
        try:
            data = json.loads(body or b"{}")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ClientBodyError(f"heartbeat body is not JSON: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("clientID", ""), str):
            raise ClientBodyError("heartbeat body must be an object with a string clientID")
        client_id = str(data.get("clientID", ""))
        consumers = data.get("consumerDataSet") or []
        if not isinstance(consumers, list) or len(consumers) > MAX_GROUPS_PER_HEARTBEAT:
            raise ClientBodyError(f"consumerDataSet must be a list of at most {MAX_GROUPS_PER_HEARTBEAT} groups")
        for consumer in consumers:
            group = consumer.get("groupName") if isinstance(consumer, dict) else None
            if not isinstance(group, str) or not group or not client_id:
                raise ClientBodyError("each consumer needs a groupName, and the heartbeat a clientID")
            members = self.groups.get(group)
            if members is None:
                if len(self.groups) >= self.max_groups:
                    raise ClientBodyError(f"more than {self.max_groups} consumer groups")
                members = self.groups[group] = {}
            if client_id not in members and len(members) >= MAX_CLIENTS_PER_GROUP:
                raise ClientBodyError(f"group {group!r} has {MAX_CLIENTS_PER_GROUP} clients already")
            members[client_id] = ClientEntry(connection, now_ms, _topics(consumer))
        return len(consumers)

    def consumers(self, group: str, now_ms: int) -> list[str]:
        """The live client ids of ``group``, sorted (clients sort them anyway)."""
        self.expire(now_ms)
        return sorted(self.groups.get(group, {}))

    def unregister(self, client_id: str, group: str) -> None:
        names = [group] if group else list(self.groups)
        for name in names:
            members = self.groups.get(name)
            if members is not None:
                members.pop(client_id, None)
                if not members:
                    del self.groups[name]

    def drop_connection(self, connection: int) -> None:
        """A closed connection takes its clients with it (the Java broker's channel close)."""
        for name in list(self.groups):
            members = self.groups[name]
            for client_id in [c for c, e in members.items() if e.connection == connection]:
                del members[client_id]
            if not members:
                del self.groups[name]

    def expire(self, now_ms: int) -> None:
        for name in list(self.groups):
            members = self.groups[name]
            for client_id in [c for c, e in members.items() if now_ms - e.seen_ms > self.expire_ms]:
                del members[client_id]
            if not members:
                del self.groups[name]


def _topics(consumer: dict[str, Any]) -> tuple[str, ...]:
    subscriptions = consumer.get("subscriptionDataSet") or []
    if not isinstance(subscriptions, list):
        return ()
    return tuple(str(s["topic"]) for s in subscriptions if isinstance(s, dict) and isinstance(s.get("topic"), str))


LOCK_MAX_LIVE_MS = 60_000  # rocketmq.broker.rebalance.lockMaxLiveTime
MAX_LOCK_QUEUES = 4096
MAX_NAME_CHARS = 255  # a group's, a client id's, a broker's name: RocketMQ's own are far shorter


@dataclass(slots=True)
class QueueLocks:
    """Orderly consumers lock the queues they consume (LOCK_BATCH_MQ), so one client at a time
    takes a queue in order; a lock lapses after a minute without renewal (clients renew every 20 s),
    and goes with the connection it was taken or last renewed on. At most ``max_locks`` are held:
    past that, lapsed ones are swept, and a queue that still finds no room is not locked (the client
    asks again at its next rebalance)."""

    max_locks: int = 100_000
    held: dict[tuple[str, str, str, int], tuple[str, int, int]] = field(default_factory=dict)

    def lock(self, body: bytes, now_ms: int, connection: int = 0) -> bytes:
        group, client_id, queues = _lock_request(body)
        locked = []
        for mq in queues:
            key = (group, str(mq["topic"]), str(mq.get("brokerName", "")), int(mq["queueId"]))
            owner = self.held.get(key)
            if owner is None and len(self.held) >= self.max_locks:
                self.expire(now_ms)
                if len(self.held) >= self.max_locks:
                    continue
            if owner is None or owner[0] == client_id or now_ms - owner[1] > LOCK_MAX_LIVE_MS:
                self.held[key] = (client_id, now_ms, connection)
                locked.append(mq)
        return json.dumps({"lockOKMQSet": locked}).encode()

    def unlock(self, body: bytes) -> None:
        group, client_id, queues = _lock_request(body)
        for mq in queues:
            key = (group, str(mq["topic"]), str(mq.get("brokerName", "")), int(mq["queueId"]))
            if self.held.get(key, ("",))[0] == client_id:
                del self.held[key]

    def drop_connection(self, connection: int) -> None:
        """A closed connection's locks are free at once (its client re-locks on a new one)."""
        for key in [k for k, owner in self.held.items() if owner[2] == connection]:
            del self.held[key]

    def expire(self, now_ms: int) -> None:
        for key in [k for k, owner in self.held.items() if now_ms - owner[1] > LOCK_MAX_LIVE_MS]:
            del self.held[key]


def _lock_request(body: bytes) -> tuple[str, str, list[dict[str, Any]]]:
    try:
        data = json.loads(body or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ClientBodyError(f"lock body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ClientBodyError("lock body must be an object")
    group, client_id, queues = data.get("consumerGroup"), data.get("clientId"), data.get("mqSet")
    if not (isinstance(group, str) and isinstance(client_id, str) and isinstance(queues, list)
            and len(queues) <= MAX_LOCK_QUEUES):
        raise ClientBodyError(f"a lock names consumerGroup, clientId and at most {MAX_LOCK_QUEUES} queues")
    if not all(isinstance(q, dict) and isinstance(q.get("topic"), str) and isinstance(q.get("queueId"), int)
               and check_topic(q["topic"]) is None and len(str(q.get("brokerName", ""))) <= MAX_NAME_CHARS
               for q in queues):
        raise ClientBodyError("each queue of a lock needs a valid topic, a queueId and a short brokerName")
    if len(group) > MAX_NAME_CHARS or len(client_id) > MAX_NAME_CHARS:
        raise ClientBodyError(f"a lock's consumerGroup and clientId have at most {MAX_NAME_CHARS} characters")
    return group, client_id, queues
