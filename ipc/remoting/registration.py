"""A broker's registration with a NameServer: REGISTER_BROKER's header and body, UNREGISTER_BROKER's header.

REGISTER_BROKER (103) carries in its header ``brokerName``, ``brokerAddr``, ``clusterName``,
``haServerAddr``, ``brokerId`` (all required), ``heartbeatTimeoutMillis`` and ``enableActingMaster``
(optional), ``compressed`` and ``bodyCrc32`` (CRC32 of the body masked to 31 bits, 0: unchecked).
Its body is RocketMQ's ``RegisterBrokerBody``, as JSON::

    {"topicConfigSerializeWrapper": {"topicConfigTable": {"Orders": {"topicName": "Orders",
        "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0, "order": false}}, "dataVersion": {"stateVersion": 0, "timestamp": ms, "counter": n}},
     "filterServerList": []}

or (a broker older than 3.0.11) the bare ``topicConfigSerializeWrapper``. With ``compressed=true`` the
body is a zlib (Deflate) stream: ``int len, DataVersion JSON, int count``, then per topic ``int len,
TopicConfig.encode()`` (``name read write perm filterType [attributes JSON]``, space separated), then
``int len, filterServerList JSON`` and, from RocketMQ 5, ``int count`` and as many ``int len,
TopicQueueMappingInfo JSON`` (ints big-endian). RocketMQ 4 brokers with ``compressedRegister`` send
that; RocketMQ 5 brokers always say ``compressed=false``.

UNREGISTER_BROKER (104) has only a header: ``brokerName``, ``brokerAddr``, ``clusterName``, ``brokerId``.
Everything here is pure: bytes and header fields in, values out, ``RegistrationError`` naming the field.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from mqstore.engine.errors import MqstoreError

# PermName.java
PERM_INHERIT = 1
PERM_WRITE = 2
PERM_READ = 4
MASTER_ID = 0
_INT = struct.Struct(">i")


class RegistrationError(MqstoreError, ValueError):
    """A registration whose header or body cannot be read; the message names what is wrong."""


@dataclass(frozen=True, slots=True)
class TopicQueues:
    """A topic as a broker registers it (RocketMQ's TopicConfig, the fields routes need)."""

    name: str
    read_queues: int
    write_queues: int
    perm: int = PERM_READ | PERM_WRITE
    sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class BrokerKey:
    """Who a registration or an unregistration is about."""

    cluster: str
    broker_name: str
    broker_addr: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    key: BrokerKey
    ha_addr: str = ""
    topics: dict[str, TopicQueues] = field(default_factory=dict)
    data_version: dict[str, int] = field(default_factory=dict)
    heartbeat_timeout_ms: int | None = None


def body_crc32(body: bytes) -> int:
    """UtilAll.crc32: CRC32 masked to a non-negative Java int."""
    return zlib.crc32(body) & 0x7FFFFFFF


def encode_register(registration: BrokerRegistration) -> tuple[dict[str, str], bytes]:
    """The header fields and the JSON body of a REGISTER_BROKER request."""
    key = registration.key
    table = {t.name: {"topicName": t.name, "readQueueNums": t.read_queues, "writeQueueNums": t.write_queues,
                      "perm": t.perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": t.sys_flag, "order": False,
                      "attributes": {}}
             for t in registration.topics.values()}
    version = registration.data_version or {"stateVersion": 0, "timestamp": 0, "counter": 0}
    body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": table, "dataVersion": version},
                       "filterServerList": []}, separators=(",", ":")).encode()
    ext = {"brokerName": key.broker_name, "brokerAddr": key.broker_addr, "clusterName": key.cluster,
           "haServerAddr": registration.ha_addr, "brokerId": str(key.broker_id), "enableActingMaster": "false",
           "compressed": "false", "bodyCrc32": str(body_crc32(body))}
    if registration.heartbeat_timeout_ms is not None:
        ext["heartbeatTimeoutMillis"] = str(registration.heartbeat_timeout_ms)
    return ext, body


def decode_key(ext: dict[str, str]) -> BrokerKey:
    """The header fields every (un)registration carries."""
    for name in ("brokerName", "brokerAddr", "clusterName", "brokerId"):
        if not ext.get(name):
            raise RegistrationError(f"the request header lacks {name}")
    broker_id = _int(ext["brokerId"], "brokerId")
    if broker_id < 0:
        raise RegistrationError(f"brokerId {broker_id} is negative")
    return BrokerKey(ext["clusterName"], ext["brokerName"], ext["brokerAddr"], broker_id)


def decode_register(ext: dict[str, str], body: bytes) -> BrokerRegistration:
    """A REGISTER_BROKER request; the body's CRC is checked when the header gives one (not 0)."""
    key = decode_key(ext)
    crc = _int(ext.get("bodyCrc32") or "0", "bodyCrc32")
    if crc != 0 and crc != body_crc32(body):
        raise RegistrationError("crc32 not match")
    timeout = ext.get("heartbeatTimeoutMillis")
    timeout_ms = _int(timeout, "heartbeatTimeoutMillis") if timeout else None
    if timeout_ms is not None and timeout_ms <= 0:
        timeout_ms = None
    topics: dict[str, TopicQueues] = {}
    version: dict[str, int] = {}
    if body and ext.get("compressed") in ("true", "1"):
        topics, version = _decode_compressed(body)
    elif body:
        topics, version = _decode_json(body)
    return BrokerRegistration(key, ext.get("haServerAddr", ""), topics, version, timeout_ms)


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RegistrationError(f"header field {name}={text!r} is not an integer") from None


def _decode_json(body: bytes) -> tuple[dict[str, TopicQueues], dict[str, int]]:
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RegistrationError(f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RegistrationError("the body is not a JSON object")
    wrapper = doc.get("topicConfigSerializeWrapper", doc)  # a bare wrapper from brokers before 3.0.11
    if not isinstance(wrapper, dict):
        raise RegistrationError("topicConfigSerializeWrapper is not an object")
    table = wrapper.get("topicConfigTable")
    table = {} if table is None else table
    if not isinstance(table, dict):
        raise RegistrationError("topicConfigTable is not an object")
    topics = {}
    for name, entry in table.items():
        if not isinstance(entry, dict):
            raise RegistrationError(f"topicConfigTable[{name!r}] is not an object")
        topics[str(name)] = _topic(str(entry.get("topicName") or name), entry.get("readQueueNums", 16),
                                   entry.get("writeQueueNums", 16), entry.get("perm", PERM_READ | PERM_WRITE),
                                   entry.get("topicSysFlag", 0))
    return topics, _version(wrapper.get("dataVersion"))


def _topic(name: str, read: Any, write: Any, perm: Any, sys_flag: Any) -> TopicQueues:
    values = (read, write, perm, sys_flag)
    if not all(type(v) is int and v >= 0 for v in values):
        raise RegistrationError(f"topic {name!r}: queue counts, perm and sysFlag must be non-negative integers")
    return TopicQueues(name, read, write, perm, sys_flag)


def _version(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if k in ("stateVersion", "timestamp", "counter") and type(v) is int}


def _decode_compressed(body: bytes) -> tuple[dict[str, TopicQueues], dict[str, int]]:
    try:
        data = zlib.decompress(body)
    except zlib.error as exc:
        raise RegistrationError(f"the compressed body does not inflate: {exc}") from None
    pos = 0

    def read_int() -> int:
        nonlocal pos
        if pos + 4 > len(data):
            raise RegistrationError(f"the compressed body ends at byte {pos} inside a length or a count")
        (value,) = _INT.unpack_from(data, pos)
        pos += 4
        return int(value)

    def chunk() -> bytes:
        nonlocal pos
        length = read_int()
        if length < 0 or pos + length > len(data):
            raise RegistrationError(f"the compressed body's length {length} at byte {pos - 4} runs past its end")
        pos += length
        return data[pos - length:pos]

    try:
        version = _version(json.loads(chunk()))
        topics = {}
        for _ in range(read_int()):
            parts = chunk().decode().split(" ")
            if len(parts) < 5:
                raise RegistrationError(f"a compressed topic entry has {len(parts)} fields, not at least 5")
            try:
                topic = _topic(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), 0)
            except ValueError:
                raise RegistrationError(f"topic {parts[0]!r}: queue counts and perm must be integers") from None
            topics[topic.name] = topic
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RegistrationError(f"the compressed body holds bad text: {exc}") from None
    return topics, version
