"""A slave's requests for its master's metadata, over the master's remoting front, as RocketMQ's
SlaveSynchronize sends them (``mqstore.actors.remoting.metadata`` answers; ``BrokerOuterAPI`` in
RocketMQ), each answer decoded and checked here before anything of it is applied.

Topics come in RocketMQ 5's pages: ``topicSeq`` from 0, ``maxTopicNum``, and the data version of the
first page, until ``totalTopicNum`` topics came; a page under another data version starts again from
the first (the table changed meanwhile). A master without ``totalTopicNum`` sent the whole table.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from mqstore.engine.delay.offsets import DelayOffsets, decode_delay_offsets
from mqstore.engine.errors import MqstoreError
from mqstore.engine.meta.data_version import DataVersion
from mqstore.engine.meta.offsets import TOPIC_GROUP_SEPARATOR, decode_offset_file
from mqstore.engine.meta.topics import TopicConfig, decode_topic_table
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.signature import Credentials
from mqstore.ipc.wire.requests.metadata import GroupDeletion, OffsetEntry, group_deletion
from mqstore.ipc.wire.schema import SchemaError

T = TypeVar("T")
GET_ALL_TOPIC_CONFIG = 21
GET_ALL_CONSUMER_OFFSET = 43
GET_ALL_DELAY_OFFSET = 45
GET_TIMER_CHECK_POINT = 60
GET_ALL_ACK_MARK = 9001  # mqstore's (``mqstore.actors.remoting.metadata``)
TOPIC_PAGE = 2000        # RocketMQ's maxTopicNum per page
MAX_TOPIC_PAGES = 1000
TIMER_CHECKPOINT = struct.Struct(">7q")


class MasterAnswerError(MqstoreError):
    """The master answered with an error code, or with a body that is not what the request asks for."""


@dataclass(frozen=True, slots=True)
class TimerProgress:
    """The master's ``GET_TIMER_CHECK_POINT`` (RocketMQ's TimerCheckpoint, 7 longs)."""

    last_read_ms: int
    log_flushed_pos: int
    next_queue_offset: int
    master_queue_offset: int
    version: DataVersion


class MasterMetadata:
    """The five requests, on one connection (``rm.RemotingClient``), signed with ``credentials`` if given."""

    def __init__(self, host: str, port: int, *, timeout_s: float, credentials: Credentials | None) -> None:
        self.client = rm.RemotingClient(host, port, timeout_s=timeout_s, credentials=credentials)

    def close(self) -> None:
        self.client.close()

    def _body(self, code: int, ext: dict[str, Any] | None = None) -> tuple[rm.RemotingCommand, bytes]:
        reply = self.client.call(code, ext)
        if reply.code != rm.SUCCESS:
            raise MasterAnswerError(f"request {code}: the master answered {reply.code}: {reply.remark}")
        return reply, reply.body

    def topics(self) -> tuple[dict[str, TopicConfig], DataVersion]:
        table: dict[str, TopicConfig] = {}
        version: DataVersion | None = None
        seq = 0
        for _ in range(MAX_TOPIC_PAGES):
            reply, body = self._body(GET_ALL_TOPIC_CONFIG, {"topicSeq": seq, "maxTopicNum": TOPIC_PAGE,
                                                            "dataVersion": version.text() if version else ""})
            page, page_version = _decoded(body, decode_topic_table)
            total = reply.ext.get("totalTopicNum")
            if version is not None and page_version != version:
                table, seq, version = {}, 0, page_version  # the table changed meanwhile: from the first again
                continue
            version = page_version
            table.update(page)
            seq += len(page)
            if total is None or not total.isdigit() or seq >= int(total) or not page:
                return table, version
        raise MasterAnswerError(f"the master's topics did not settle in {MAX_TOPIC_PAGES} pages")

    def consumer_offsets(self) -> tuple[list[OffsetEntry], list[GroupDeletion]]:
        """The master's committed offsets, and the groups it deleted with their deletion numbers
        (mqstore's ``deletedGroups``; none from a RocketMQ master)."""
        _, body = self._body(GET_ALL_CONSUMER_OFFSET)
        try:
            table = decode_offset_file(body).table
            deleted = json.loads(body).get("deletedGroups", {})
            deletions = [group_deletion([group, number]) for group, number in deleted.items()]
        except (ValueError, UnicodeDecodeError, AttributeError, SchemaError) as exc:
            raise MasterAnswerError(f"consumer offsets: {exc}") from None
        return [(topic, group, queue_id, next_offset)
                for key, queues in table.items()
                for topic, _, group in [key.partition(TOPIC_GROUP_SEPARATOR)]
                for queue_id, next_offset in queues.items()], deletions

    def delay_offsets(self) -> DelayOffsets:
        _, body = self._body(GET_ALL_DELAY_OFFSET)
        return _decoded_bytes(body, decode_delay_offsets, "delay offsets")

    def timer_checkpoint(self) -> TimerProgress | None:
        """None where the master runs no timer (RocketMQ's "The checkpoint is null")."""
        reply = self.client.call(GET_TIMER_CHECK_POINT)
        if reply.code != rm.SUCCESS:
            return None
        if len(reply.body) < TIMER_CHECKPOINT.size:
            raise MasterAnswerError(f"timer checkpoint: {len(reply.body)} bytes, not {TIMER_CHECKPOINT.size}")
        last_read, flushed, next_offset, master_offset, state, stamp, counter = TIMER_CHECKPOINT.unpack_from(
            reply.body)
        return TimerProgress(last_read, flushed, next_offset, master_offset, DataVersion(state, stamp, counter))

    def ack_marks(self) -> dict[tuple[str, str, int], int]:
        """(group, topic, queue) -> acked_below."""
        _, body = self._body(GET_ALL_ACK_MARK)

        def marks(doc: Any) -> dict[tuple[str, str, int], int]:
            out = {}
            for key, queues in doc["ackMarkTable"].items():
                topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
                for queue_id, acked_below in queues.items():
                    if not isinstance(acked_below, int) or isinstance(acked_below, bool) or acked_below < 0:
                        raise ValueError(f"ack mark of {key}/{queue_id} is {acked_below!r}")
                    out[(group, topic, int(queue_id))] = acked_below
            return out
        return _decoded(body, marks)


def _decoded(body: bytes, decode: Callable[[Any], T]) -> T:
    try:
        return decode(json.loads(body))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MasterAnswerError(f"an answer that is not the table asked for: {exc}") from None


def _decoded_bytes(body: bytes, decode: Callable[[bytes], T], what: str) -> T:
    try:
        return decode(body)
    except (ValueError, KeyError, TypeError) as exc:
        raise MasterAnswerError(f"{what}: {exc}") from None
