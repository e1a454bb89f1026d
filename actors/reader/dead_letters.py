"""Dead letters on their way from a reader to ``%DLQ%{group}``, through the writer's ingress.

The reader is a producer here like any other: a DEALER to the writer's ROUTER, one ``send`` per
batch, the copy going to the DLQ topic's queue 0 (RocketMQ's DLQ topics have one queue) with the
original body, tags, keys and properties plus where it came from (``ORIGIN_TOPIC``,
``ORIGIN_QUEUE``, ``ORIGIN_OFFSET``, ``ORIGIN_MESSAGE_ID``, ``RECONSUME_TIMES``). The caller acks a
message only once the writer answered PUT_OK for its copy; a refused send is retried after
``RETRY_MS``, an unanswered one after ``REPLY_TIMEOUT_MS`` (so the DLQ may get a copy twice, never
none).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import zmq

from mqstore.actors.reader.ack_queue import DeadLetter
from mqstore.actors.reader.ack_requests import AckKey
from mqstore.engine.log.record import PROP_CRC_KEY, PROP_KEYS, PROP_TAGS, Record
from mqstore.ipc.transport.sockets import connect, waiting_replies
from mqstore.ipc.wire import receipts, schema
from mqstore.ipc.wire.requests import Send, SendMessage

log = logging.getLogger("mqstore")

BATCH = 256                    # dead letters per send
REPLY_TIMEOUT_MS = 5_000
RETRY_MS = 1_000
PUT_OK = "PUT_OK"


@dataclass(frozen=True, slots=True)
class _Send:
    key: AckKey
    seqs: tuple[int, ...]
    sent_ms: int


class DeadLetterSender:
    def __init__(self, ctx: zmq.Context[Any], ingress: str, now_ms: Callable[[], int]) -> None:
        self.socket = connect(ctx, zmq.DEALER, ingress)
        self._now_ms = now_ms
        self._ids = itertools.count(1)
        self._sends: dict[int, _Send] = {}
        self._sending: dict[AckKey, set[int]] = {}
        self._retry_at: dict[AckKey, int] = {}

    @property
    def awaiting(self) -> bool:
        """Whether a send waits for the writer's reply: only then is the socket worth polling."""
        return bool(self._sends)

    def pending(self, key: AckKey, dead: dict[int, DeadLetter], now: int) -> list[DeadLetter]:
        """Of ``dead``, the next batch to send now: not already on its way, not backing off."""
        if self._retry_at.get(key, 0) > now:
            return []
        sending = self._sending.get(key, set())
        return list(itertools.islice((d for seq, d in dead.items() if seq not in sending), BATCH))

    def send(self, key: AckKey, letters: list[tuple[DeadLetter, Record]], now: int) -> None:
        if not letters:
            return
        request_id = next(self._ids)
        msgs = [dead_letter_wire(key, d, record) for d, record in letters]
        try:
            self.socket.send(schema.pack(Send(tuple(msgs)).encode(request_id)), zmq.NOBLOCK)
        except zmq.Again:
            self._retry_at[key] = now + RETRY_MS
            return
        seqs = tuple(d.seq for d, _ in letters)
        self._sends[request_id] = _Send(key, seqs, now)
        self._sending.setdefault(key, set()).update(seqs)

    def stored(self) -> Iterator[tuple[AckKey, list[int]]]:
        """Read the writer's replies: per answered send, the seqs whose copies are in the DLQ."""
        for reply in waiting_replies(self.socket, "ack mode"):
            request_id = reply.get("id")
            send = self._done(request_id) if isinstance(request_id, int) else None
            if send is None:
                continue  # answered after it was given up on: the copy was sent again
            results = reply.get("results") if reply.get("ok") is True else None
            if not isinstance(results, list) or len(results) != len(send.seqs):
                results = [None] * len(send.seqs)
            ok = [seq for seq, r in zip(send.seqs, results, strict=True)
                  if isinstance(r, dict) and r.get("status") == PUT_OK]
            if len(ok) < len(send.seqs):
                log.warning("ack mode: the writer did not store %d dead letter(s) of %s/%s/%d (%s); retrying",
                            len(send.seqs) - len(ok), *send.key, reply.get("reason") or results[:1])
                self._retry_at[send.key] = self._now_ms() + RETRY_MS
            yield send.key, ok

    def expire(self, now: int) -> None:
        """Sends the writer never answered (it was restarting): their letters go out again."""
        for request_id, send in list(self._sends.items()):
            if now - send.sent_ms >= REPLY_TIMEOUT_MS:
                log.warning("ack mode: the writer did not answer a dead-letter send; sending again")
                self._done(request_id)

    def _done(self, request_id: int) -> _Send | None:
        send = self._sends.pop(request_id, None)
        if send is not None:
            self._sending.get(send.key, set()).difference_update(send.seqs)
        return send


def dead_letter_wire(key: AckKey, d: DeadLetter, record: Record) -> SendMessage:
    """The original message as a send to ``%DLQ%{group}``, saying where it came from."""
    group, topic, queue_id = key
    props = {k: v for k, v in record.properties.items() if k not in (PROP_TAGS, PROP_KEYS, PROP_CRC_KEY)}
    props.update({"ORIGIN_TOPIC": topic, "ORIGIN_QUEUE": str(queue_id), "ORIGIN_OFFSET": str(d.seq),
                  "ORIGIN_MESSAGE_ID": record.msg_id, "RECONSUME_TIMES": str(d.delivery_count)})
    return SendMessage(topic=receipts.dlq_topic(group), body=record.body, keys=tuple(record.keys), props=props,
                       queue=0, flag=record.flag, born_ms=record.born_ms,
                       born_host=(record.born_host.ip, record.born_host.port), reconsume_times=d.delivery_count,
                       tags=record.tags or None)
