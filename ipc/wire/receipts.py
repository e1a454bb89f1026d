"""Ack mode's shared vocabulary: which reader owns a (group, topic, queue), receipts, deliveries.

Each (group, topic, queue) queue index has exactly one owner among the N readers, chosen by a hash
that the client and every reader compute alike (``ack_owner``); a reader refuses ack-mode requests
for queues it does not own with ``NOT_OWNER``. One owner means one process holds the index's files
and its in-flight table, so no two processes can hand out the same message at once.

Wire (msgpack maps, ``mqstore.ipc.wire.schema``), served by the owning reader::

    ack_pull  group, topic, queue, consumer, max, wait_ms, tags?, prefetch?, visibility_ms?
              -> msgs: [message map + seq, redelivered, delivery_count]
    ack       receipts: [[group, topic, queue, seq], ...]            -> results: [status, ...]
    nack      receipts: [[group, topic, queue, seq], ...], requeue   -> results: [status, ...]
    ack_release  group, topic, queues, consumer, read: [[queue, seq], ...]         -> released

A result is ``OK``, ``NOT_OWNER`` (another reader owns that queue), ``UNKNOWN_RECEIPT`` (not
delivered and unacked there: acked already, dead-lettered, never delivered) or ``BAD_REQUEST`` (a
malformed receipt). A seq is the message's consume-queue offset.

``ack_release`` is a consumer closing: its parked pulls are answered empty and every delivery it
holds in those queues is due again at once (redelivered). Only those it lists as ``read`` (handed to
its application, not settled) count as a delivery; the others were in its buffer or on the wire.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass
from typing import Any

from mqstore.ipc.wire.messages import ReceivedMessage, ReplyError


class AckStatus(enum.StrEnum):
    """One receipt's outcome of an ``ack`` or ``nack`` (see the module's docstring); a ``str``, so
    ``status == "OK"`` holds as well."""

    OK = "OK"
    NOT_OWNER = "NOT_OWNER"
    UNKNOWN_RECEIPT = "UNKNOWN_RECEIPT"
    BAD_REQUEST = "BAD_REQUEST"

    @classmethod
    def from_wire(cls, raw: Any) -> AckStatus:
        """ReplyError for a status this client does not know: whether the receipt was settled is then
        unknowable, and the set is this broker's own, not one that grows with RocketMQ's."""
        try:
            return cls(raw)
        except ValueError:
            raise ReplyError(f"unknown ack status {raw!r}") from None


OK = AckStatus.OK
NOT_OWNER = AckStatus.NOT_OWNER
UNKNOWN_RECEIPT = AckStatus.UNKNOWN_RECEIPT
BAD_REQUEST = AckStatus.BAD_REQUEST

DLQ_PREFIX = "%DLQ%"
MAX_RECEIPTS = 10_000  # per ack / nack request


def ack_owner(group: str, topic: str, queue: int, reader_count: int) -> int:
    """The index of the reader that owns the (group, topic, queue) queue index: a group's queues of
    one topic go round the readers from a hashed start, so they spread evenly over them.

    Not ``crc32(group, topic, queue) % n``: CRC is linear, names that differ only in the queue
    digit differ in a fixed bit pattern, and with two readers every queue 0-3 of a group would land
    on one of them. blake2b is stable across processes and Python versions (``hash`` is not)."""
    if reader_count < 1:
        raise ValueError(f"reader_count must be at least 1, got {reader_count}")
    digest = hashlib.blake2b(f"{group}\x00{topic}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + queue) % reader_count


def dlq_topic(group: str) -> str:
    """RocketMQ's dead-letter topic of a consumer group."""
    return DLQ_PREFIX + group


@dataclass(frozen=True, slots=True)
class Receipt:
    """Names one delivered message of an ack-mode group; what ``ack`` and ``nack`` take."""

    group: str
    topic: str
    queue_id: int
    seq: int

    def to_wire(self) -> list[Any]:
        return [self.group, self.topic, self.queue_id, self.seq]


@dataclass(frozen=True, slots=True)
class Delivery(ReceivedMessage):
    """A message delivered in ack mode: the stored message plus its receipt, whether it was handed
    out before (``redelivered``) and how many times it has been, this time included."""

    receipt: Receipt
    redelivered: bool
    delivery_count: int

    @classmethod
    def from_ack_wire(cls, group: str, raw: Any) -> Delivery:
        message = ReceivedMessage.from_wire(raw)
        try:
            seq, redelivered, count = int(raw["seq"]), bool(raw["redelivered"]), int(raw["delivery_count"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ReplyError(f"malformed delivery: {exc!r}") from None
        fields = {name: getattr(message, name) for name in ReceivedMessage.__dataclass_fields__}
        return cls(**fields, receipt=Receipt(group, message.topic, message.queue_id, seq), redelivered=redelivered,
                   delivery_count=count)
