"""Producer-side record encoding: the ``send_encoded`` request and its packed reply.

The producer asks the writer once for how it encodes (``encoding``: store host, whole-record CRC,
body limit), then encodes every batch into one ``EncodedBatch`` (``engine.record_batch``): the
writer checks it with numpy and copies it into the commitlog in one slice per file. The reply is
packed too: one ``REPLY_COLUMNS`` row per record written, and a status and reason for the rest.

    request  {op: "send_encoded", records: bin, columns: bin, topics: [str], tags: [str],
              keys: [str], uniq: [str]}
    reply    {ok: true, results: bin (REPLY_COLUMNS rows), status: str, reason: str}
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
from engine.record_batch import QUEUE_BY_SHARD, QUEUE_ROUND_ROBIN, EncodedBatch, encode_one
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
        topics: dict[str, int] = {}
        tags: dict[str, int] = {}
        records: list[bytes] = []
        keys: list[str] = []
        uniq_keys: list[str] = []
        cols: list[bytes] = []
        now_ms = time.time_ns() // 1_000_000
        for m in messages:
            if m.topic == SCHEDULE_TOPIC or PROP_DELAY in m.properties:
                raise EncodingError("delayed messages go through send_batch")
            if len(m.body) > enc.max_body_bytes:
                raise EncodingError(f"body of {len(m.body)} bytes exceeds the {enc.max_body_bytes}-byte limit")
            uniq = m.properties.get(PROP_UNIQ_KEY) or self._uniq.next()
            if isinstance(m.keys, str):
                raise TypeError("keys must be a sequence of strings, not one string")
            props = record_properties(m, uniq)
            if isinstance(props, Refusal):
                raise EncodingError(props.reason)
            born_host = Host(*m.born_host) if m.born_host else enc.store_host
            body = m.body.encode() if isinstance(m.body, str) else bytes(m.body)
            record = encode_one(topic=m.topic, body=body, properties=props,
                                queue_id=m.queue if m.queue is not None else 0, flag=m.flag, sys_flag=m.sys_flag,
                                born_ms=m.born_ms if m.born_ms is not None else now_ms, born_host=born_host,
                                store_host=enc.store_host, reconsume_times=m.reconsume_times, prop_crc=enc.prop_crc)
            records.append(record)
            queue, shard = QUEUE_ROUND_ROBIN, 0
            if m.queue is not None:
                queue = m.queue
            elif m.shard is not None:
                queue, shard = QUEUE_BY_SHARD, abs(java_hash(m.shard)) & 0x7FFFFFFF
            cols.append(_COLUMN_ROW.pack(len(record), topics.setdefault(m.topic, len(topics)), queue, shard,
                                         tags.setdefault(m.tags, len(tags)) if m.tags else -1))
            keys.append(" ".join(k for k in m.keys if k))
            uniq_keys.append(uniq)
        return EncodedBatch(b"".join(records), b"".join(cols), list(topics), list(tags), keys, uniq_keys)


def request_fields(batch: EncodedBatch) -> dict[str, Any]:
    return {"records": batch.records, "columns": batch.columns, "topics": batch.topics, "tags": batch.tags,
            "keys": batch.keys, "uniq": batch.uniq_keys}


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
