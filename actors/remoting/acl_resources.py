"""What each request the remoting front serves needs of an account: RocketMQ's
``PlainAccessValidator.parse`` (ACL 1.0) and ``DefaultAuthorizationContextBuilder`` (ACL 2.0), by
request code. A name under ``%RETRY%`` is the group's: SUB on the group.

    105 GET_ROUTEINFO_BY_TOPIC             open: the NameServer checks nothing
    10, 310, 320 send                      Topic PUB (a retry topic: its group SUB)
    11 PULL_MESSAGE                        Group SUB + Topic SUB
    14 / 15 query / update consumer offset Group SUB + Topic SUB
    29, 30, 31 offsets by time, max, min   Topic SUB
    12 QUERY_MESSAGE                       Topic SUB
    33 VIEW_MESSAGE_BY_ID                  Topic SUB of the stored message's topic (and of ``topic``, if given)
    34 HEART_BEAT                          each consumer group SUB + each subscribed topic SUB
    35 UNREGISTER_CLIENT                   Group SUB, when ``consumerGroup`` is not blank
    36 CONSUMER_SEND_MSG_BACK              Group SUB
    37 END_TRANSACTION                     Topic PUB of the half message's real topic (and of ``topic``)
    38 GET_CONSUMER_LIST_BY_GROUP          Group SUB
    41 / 42 LOCK / UNLOCK_BATCH_MQ         the body's group SUB + each queue's topic SUB
    ADMIN_CODES                            an admin account (``Permission.ADMIN_CODE``, with the
                                           offset reset, the transaction resume, and the metadata a
                                           slave fetches: ``mqstore.actors.remoting.metadata``)

Any other code needs a signed request from a known account and nothing more (ACL 1.0's rule).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mqstore.actors.remoting.acl_file import PUB, SUB
from mqstore.engine.errors import MqstoreError
from mqstore.ipc.remoting import codec as rm

RETRY_PREFIX = "%RETRY%"
TOPIC, GROUP = "Topic", "Group"
OPEN_CODES = frozenset({rm.GET_ROUTEINFO_BY_TOPIC})
# Permission.ADMIN_CODE: create/update topic (17), broker config (25), subscription groups (200, 207),
# delete topic (215), static topic (513), the ACL's own (50-52); and the offset reset (222) and a
# discarded half message's resume (323), which only an operator's tool sends; and what a slave fetches of its
# master's metadata, every topic, offset and progress (21, 43, 45, 60, and mqstore's ack marks, 9001)
ADMIN_CODES = frozenset({17, 25, 50, 51, 52, 200, 207, 215, 222, 513, rm.RESUME_CHECK_HALF_MESSAGE,
                         21, 43, 45, 60, 9001})
SEND_TOPIC_FIELD = {rm.SEND_MESSAGE: "topic", rm.SEND_MESSAGE_V2: "b", rm.SEND_BATCH_MESSAGE: "b"}


class NeedsError(MqstoreError, ValueError):
    """A request whose resources cannot be read (a body that is not what its code carries)."""


@dataclass(frozen=True, slots=True)
class Need:
    kind: str       # TOPIC or GROUP
    name: str
    perm: int       # PUB or SUB


@dataclass(frozen=True, slots=True)
class StoredNeed:
    """A need on the topic of the message stored at ``phys_offset``, known once it is read."""

    phys_offset: int
    perm: int
    real_topic: bool  # a half message: the topic it will be committed to (REAL_TOPIC)


@dataclass(frozen=True, slots=True)
class Needs:
    open: bool = False
    admin: bool = False
    resources: tuple[Need, ...] = ()
    stored: StoredNeed | None = None


def topic_need(topic: str, perm: int) -> Need:
    if topic.startswith(RETRY_PREFIX):
        return Need(GROUP, topic[len(RETRY_PREFIX):], SUB)
    return Need(TOPIC, topic, perm)


def group_need(group: str) -> Need:
    return Need(GROUP, group[len(RETRY_PREFIX):] if group.startswith(RETRY_PREFIX) else group, SUB)


def needs_of(request: rm.RemotingCommand) -> Needs:
    code, ext = request.code, request.ext
    if code in OPEN_CODES:
        return Needs(open=True)
    if code in ADMIN_CODES:
        return Needs(admin=True)
    if code in SEND_TOPIC_FIELD:
        return Needs(resources=(topic_need(ext.get(SEND_TOPIC_FIELD[code], ""), PUB),))
    if code in (rm.PULL_MESSAGE, rm.QUERY_CONSUMER_OFFSET, rm.UPDATE_CONSUMER_OFFSET):
        return Needs(resources=_unique(group_need(ext.get("consumerGroup", "")), topic_need(ext.get("topic", ""), SUB)))
    if code in (rm.SEARCH_OFFSET_BY_TIMESTAMP, rm.GET_MAX_OFFSET, rm.GET_MIN_OFFSET, rm.QUERY_MESSAGE):
        return Needs(resources=(topic_need(ext.get("topic", ""), SUB),))
    if code in (rm.GET_CONSUMER_LIST_BY_GROUP, rm.UNREGISTER_CLIENT):
        group = ext.get("consumerGroup", "")
        return Needs(resources=(group_need(group),) if group or code == rm.GET_CONSUMER_LIST_BY_GROUP else ())
    if code == rm.CONSUMER_SEND_MSG_BACK:
        return Needs(resources=(group_need(ext.get("group", "")),))
    if code == rm.HEART_BEAT:
        return Needs(resources=_heartbeat(request.body))
    if code in (rm.LOCK_BATCH_MQ, rm.UNLOCK_BATCH_MQ):
        return Needs(resources=_locks(request.body))
    if code == rm.VIEW_MESSAGE_BY_ID:
        return Needs(resources=_given_topic(ext, SUB), stored=StoredNeed(_offset(ext, "offset"), SUB, False))
    if code == rm.END_TRANSACTION:
        return Needs(resources=_given_topic(ext, PUB),
                     stored=StoredNeed(_offset(ext, "commitLogOffset"), PUB, True))
    return Needs()


def _unique(*needs: Need) -> tuple[Need, ...]:
    return tuple(dict.fromkeys(needs))


def _given_topic(ext: dict[str, str], perm: int) -> tuple[Need, ...]:
    topic = ext.get("topic", "")
    return (topic_need(topic, perm),) if topic else ()


def _offset(ext: dict[str, str], name: str) -> int:
    try:
        return int(ext.get(name, ""))
    except ValueError:
        raise NeedsError(f"{name} is not a commitlog offset") from None


def _json(body: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise NeedsError(f"the {what} body is not JSON") from None
    if not isinstance(data, dict):
        raise NeedsError(f"the {what} body is not an object")
    return data


def _heartbeat(body: bytes) -> tuple[Need, ...]:
    """Each consumer group SUB and each topic it subscribes SUB; producers are not checked (RocketMQ's rule)."""
    needs: list[Need] = []
    consumers = _json(body, "heartbeat").get("consumerDataSet") or []
    if not isinstance(consumers, list):
        raise NeedsError("the heartbeat's consumerDataSet is not a list")
    for consumer in consumers:
        if not isinstance(consumer, dict) or not isinstance(consumer.get("groupName"), str):
            raise NeedsError("a heartbeat consumer has no groupName")
        needs.append(group_need(consumer["groupName"]))
        subscriptions = consumer.get("subscriptionDataSet") or []
        if not isinstance(subscriptions, list):
            raise NeedsError("a heartbeat's subscriptionDataSet is not a list")
        for sub in subscriptions:
            if not isinstance(sub, dict) or not isinstance(sub.get("topic"), str):
                raise NeedsError("a heartbeat subscription has no topic")
            needs.append(topic_need(sub["topic"], SUB))
    return _unique(*needs)


def _locks(body: bytes) -> tuple[Need, ...]:
    data = _json(body, "lock")
    group, queues = data.get("consumerGroup"), data.get("mqSet") or []
    if not isinstance(group, str) or not isinstance(queues, list):
        raise NeedsError("a lock names a consumerGroup and a list of queues")
    topics = [q.get("topic") if isinstance(q, dict) else None for q in queues]
    if not all(isinstance(t, str) for t in topics):
        raise NeedsError("each queue of a lock needs a topic")
    return _unique(group_need(group), *(topic_need(str(t), SUB) for t in topics))
