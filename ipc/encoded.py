"""Producer-side record encoding: the ``send_encoded`` request and its packed reply.

The producer asks the writer once for how it encodes (``encoding``: store host, whole-record CRC,
body limit), then encodes every batch into one ``EncodedBatch`` (``engine.record_batch``): the
writer checks it with numpy and copies it into the commitlog in one slice per file. The reply is
packed too: one ``REPLY_COLUMNS`` row per record written, and a status and reason for the rest.

    request  {op: "send_encoded", parts: 1, columns: bin, topics: [str], tags: [str], keys: [str],
              uniq: [str]}, then the records as one frame of their own
    reply    {ok: true, results: bin (REPLY_COLUMNS rows), status: str, reason: str}

The records never pass through msgpack: each body is copied once, when the batch is joined, and
the batch goes out from that buffer (``ipc.schema``'s parts); the writer checks it in ZeroMQ's
receive buffer and copies it into the mapped file.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.host import Host
from engine.jhash import java_hash
from engine.message import Refusal, record_properties
from engine.msgid import UniqKeyGenerator, offset_msg_id
from engine.record import PROP_DELAY, PROP_UNIQ_KEY, SCHEDULE_TOPIC
from engine.record_batch import QUEUE_BY_SHARD, QUEUE_ROUND_ROBIN, EncodedBatch, encode_pieces
from ipc.messages import PUT_OK, Outgoing, SendResult

OP_ENCODING = "encoding"
OP_SEND_ENCODED = "send_encoded"
REPLY_COLUMNS = "<qiq"  # phys offset, queue id, queue offset (struct format, per record written)
_REPLY_ROW = struct.calcsize(REPLY_COLUMNS)
_COLUMN_ROW = struct.Struct("<iHiii")  # engine.record_batch.COLUMNS, packed without numpy


class EncodingError(ValueError):
    """A message the fast path cannot carry (invalid, or delayed): send it with ``send_batch``."""


@dataclass(frozen=True, slots=True)
class Encoding:
    """How the writer wants records encoded (its ``encoding`` reply)."""

    store_host: Host
    prop_crc: bool
    max_body_bytes: int

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> Encoding:
        ip, port = reply["store_host"]
        return cls(Host(str(ip), int(port)), bool(reply["prop_crc"]), int(reply["max_body_bytes"]))


class BatchEncoder:
    def __init__(self, encoding: Encoding) -> None:
        self.encoding = encoding
        self._uniq = UniqKeyGenerator.for_this_process(lambda: time.time_ns() // 1_000_000)

    def encode(self, messages: Sequence[Outgoing]) -> EncodedBatch:
        enc = self.encoding
        store_host, prop_crc, max_body = enc.store_host, enc.prop_crc, enc.max_body_bytes
        topics: dict[str, int] = {}
        tags: dict[str, int] = {}
        pieces: list[bytes] = []
        keys: list[str] = []
        uniq_keys: list[str] = []
        cols: list[bytes] = []
        now_ms = time.time_ns() // 1_000_000
        next_uniq = self._uniq.next
        pack_row = _COLUMN_ROW.pack
        for m in messages:
            properties = m.properties
            if properties:
                if PROP_DELAY in properties:
                    raise EncodingError("delayed messages go through send_batch")
                uniq = properties.get(PROP_UNIQ_KEY) or next_uniq()
            else:
                uniq = next_uniq()
            if isinstance(m.keys, str):
                raise TypeError("keys must be a sequence of strings, not one string")
            body = m.body.encode() if isinstance(m.body, str) else bytes(m.body)
            if len(body) > max_body or m.topic == SCHEDULE_TOPIC:
                raise EncodingError(f"body of {len(body)} bytes over the {max_body}-byte limit, or a delayed topic")
            props = record_properties(m, uniq)
            if isinstance(props, Refusal):
                raise EncodingError(props.reason)
            size = encode_pieces(pieces, m.topic, body, props, m.queue or 0, m.flag, m.sys_flag,
                                 now_ms if m.born_ms is None else m.born_ms,
                                 Host(*m.born_host) if m.born_host else store_host, store_host, m.reconsume_times,
                                 prop_crc)
            queue, shard = QUEUE_ROUND_ROBIN, 0
            if m.queue is not None:
                queue = m.queue
            elif m.shard is not None:
                queue, shard = QUEUE_BY_SHARD, abs(java_hash(m.shard)) & 0x7FFFFFFF
            topic = topics.get(m.topic)
            if topic is None:
                topic = topics[m.topic] = len(topics)
            tag = -1
            if m.tags:
                tag = tags.get(m.tags, -1)
                if tag < 0:
                    tag = tags[m.tags] = len(tags)
            cols.append(pack_row(size, topic, queue, shard, tag))
            keys.append(" ".join(k for k in m.keys if k) if m.keys else "")
            uniq_keys.append(uniq)
        return EncodedBatch(b"".join(pieces), b"".join(cols), list(topics), list(tags), keys, uniq_keys)


def request_fields(batch: EncodedBatch) -> dict[str, Any]:
    """The request's map; its one part is ``batch.records``."""
    return {"columns": batch.columns, "topics": batch.topics, "tags": batch.tags, "keys": batch.keys,
            "uniq": batch.uniq_keys}


def results_from_reply(reply: dict[str, Any], batch: EncodedBatch, store_host: Host) -> list[SendResult]:
    """One SendResult per record: PUT_OK with its offsets for those written, the reply's status after."""
    packed = reply.get("results")
    if not isinstance(packed, bytes) or len(packed) % _REPLY_ROW or len(packed) // _REPLY_ROW > batch.count:
        raise ValueError(f"malformed send_encoded reply: {reply!r}"[:200])
    written = str(reply.get("written_status", PUT_OK))
    out = [SendResult(written, offset_msg_id(store_host, phys), queue, queue_offset, phys, uniq)
           for (phys, queue, queue_offset), uniq in zip(struct.iter_unpack(REPLY_COLUMNS, packed), batch.uniq_keys,
                                                         strict=False)]
    status, reason = str(reply.get("status", "UNKNOWN_ERROR")), str(reply.get("reason", ""))
    out.extend(SendResult(status, reason=reason) for _ in range(batch.count - len(out)))
    return out
