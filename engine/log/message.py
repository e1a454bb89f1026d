"""A message as a producer hands it over, its validation, and its encoding into a commitlog record."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mqstore.engine.log.host import Host
from mqstore.engine.log.record import (
    MAX_PROPERTIES_SIZE,
    PROP_CRC_KEY,
    PROP_CRC_SIZE,
    PROP_KEYS,
    PROP_TAGS,
    PROP_UNIQ_KEY,
    encode_properties,
    encode_record,
    is_valid_property_text,
)
from mqstore.engine.names import check_topic


class PutStatus(enum.StrEnum):
    """A put's outcome, RocketMQ's names; a ``str``, so ``status == "PUT_OK"`` holds as well."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    # SYNC_MASTER: stored on the master, but not known to be held by enough copies (mqstore.actors.writer.sync)
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"    # not within [ha] slave_timeout_ms
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"    # too few slaves in sync at the send: not waited for
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    WHEEL_TIMER_NOT_ENABLE = "WHEEL_TIMER_NOT_ENABLE"  # a timer message where timers are off (SYSTEM_ERROR on the wire)
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(frozen=True, slots=True)
class Message:
    topic: str
    body: bytes
    tags: str | None = None
    keys: tuple[str, ...] | list[str] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_ms: int | None = None
    born_host: Host | None = None
    reconsume_times: int = 0
    prepared_tx_offset: int = 0  # a committed transaction's half message, by commitlog offset


@dataclass(frozen=True, slots=True)
class PutResult:
    status: PutStatus
    msg_id: str = ""
    phys_offset: int = -1
    queue_id: int = -1
    queue_offset: int = -1
    uniq_key: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK


@dataclass(frozen=True, slots=True)
class Refusal:
    status: PutStatus
    reason: str


class Labelled(Protocol):
    """What ``record_properties`` reads: a ``Message``, or a client's message before it is one."""

    @property
    def tags(self) -> str | None: ...
    @property
    def keys(self) -> Sequence[str]: ...
    @property
    def properties(self) -> Mapping[str, str]: ...


def record_properties(message: Labelled, uniq_key: str | None) -> dict[str, str] | Refusal:
    """The properties a record stores: the message's own plus TAGS, KEYS and UNIQ_KEY."""
    props: dict[str, str] = {}
    for name, value in message.properties.items():
        if not (is_valid_property_text(name) and is_valid_property_text(value)):
            return Refusal(PutStatus.MESSAGE_ILLEGAL,
                           f"property {name!r} must have a non-empty name and value without \\x01 or \\x02")
        if name == PROP_CRC_KEY:
            return Refusal(PutStatus.MESSAGE_ILLEGAL, f"property name {PROP_CRC_KEY} is reserved")
        props[name] = value
    if message.tags:
        if not is_valid_property_text(message.tags):
            return Refusal(PutStatus.MESSAGE_ILLEGAL, "tags contain a separator character")
        props[PROP_TAGS] = message.tags
    keys = [k for k in message.keys if k]
    if keys:
        if any(" " in k or not is_valid_property_text(k) for k in keys):
            return Refusal(PutStatus.MESSAGE_ILLEGAL, "a key contains a space or a separator character")
        props[PROP_KEYS] = " ".join(keys)
    if uniq_key and PROP_UNIQ_KEY not in props:
        props[PROP_UNIQ_KEY] = uniq_key
    return props


def encode_message(message: Message, *, queue_id: int, born_ms: int, store_host: Host, uniq_key: str | None,
                   prop_crc: bool, max_body_bytes: int) -> bytearray | Refusal:
    """Validate and encode ``message``; queue offset, phys offset and store time are stamped later."""
    reason = check_topic(message.topic)
    if reason is not None:
        return Refusal(PutStatus.MESSAGE_ILLEGAL, reason)
    if len(message.body) > max_body_bytes:
        return Refusal(PutStatus.MESSAGE_ILLEGAL,
                       f"body of {len(message.body)} bytes exceeds the {max_body_bytes}-byte limit")
    props = record_properties(message, uniq_key)
    if isinstance(props, Refusal):
        return props
    props_size = len(encode_properties(props)) + (PROP_CRC_SIZE if prop_crc else 0)
    if props_size > MAX_PROPERTIES_SIZE:
        return Refusal(PutStatus.PROPERTIES_SIZE_EXCEEDED,
                       f"properties of {props_size} bytes exceed {MAX_PROPERTIES_SIZE}")
    return encode_record(topic=message.topic, body=message.body, properties=props, queue_id=queue_id,
                         flag=message.flag, sys_flag=message.sys_flag, born_ms=message.born_ms or born_ms,
                         born_host=message.born_host or store_host, store_host=store_host,
                         reconsume_times=message.reconsume_times, prepared_tx_offset=message.prepared_tx_offset,
                         prop_crc=prop_crc)
