"""What a broker's front tells a slave about its metadata: RocketMQ's admin requests a slave's
SlaveSynchronize sends its master (``AdminBrokerProcessor``), and mqstore's one more.

    21   GET_ALL_TOPIC_CONFIG    ``{topicConfigTable: {name: TopicConfig}, dataVersion, mappingDataVersion,
                                 topicQueueMappingDetailMap}``; RocketMQ 5's pages when the header has
                                 ``topicSeq`` / ``maxTopicNum`` / ``dataVersion`` (topics in name order
                                 from ``topicSeq``, from the first when ``dataVersion`` is not the
                                 table's), with ``totalTopicNum`` in the answer's header
    43   GET_ALL_CONSUMER_OFFSET ``{offsetTable: {"topic@group": {queueId: offset}}, dataVersion}``, and
                                 mqstore's ``deletedGroups: {group: deletion number}`` (groups deleted with
                                 their offsets, ``mqstore.engine.meta.deleted_groups``; a RocketMQ slave
                                 ignores the field, an mqstore slave deletes them too)
    45   GET_ALL_DELAY_OFFSET    ``config/delayOffset.json``'s text: ``{dataVersion, offsetTable: {level: offset}}``
    60   GET_TIMER_CHECK_POINT   the first 56 bytes of ``config/timercheck``: seven big-endian longs,
                                 lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset,
                                 masterTimerQueueOffset, dataVersion's stateVersion, timestamp, counter
                                 (RocketMQ's TimerCheckpoint.encode); SYSTEM_ERROR "The checkpoint is
                                 null" where no timer ever ran, as a broker without a timer answers
    9001 GET_ALL_ACK_MARK        mqstore's, outside RocketMQ's codes (its highest under 2^15 is 3010):
                                 ``{ackMarkTable: {"topic@group": {queueId: ackedBelow}}}``, every
                                 ack-mode group's queue with the offset below which every message is acked

The topics, delay offsets and timer checkpoint are read from the files their owners replace whole
(``write_atomic``) or keep in place (the timer's mapping); the consumer offsets and the ack marks
are asked of the readers that hold them, so an answer is as fresh as the broker's memory. Every
one of them is an admin request under an ACL (``mqstore.actors.remoting.acl_resources``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from mqstore.actors.config import BrokerConfig
from mqstore.actors.remoting.headers import Peer, RequestError, header_int
from mqstore.engine.delay.offsets import DELAY_OFFSET_FILE, decode_delay_offsets, encode_delay_offsets
from mqstore.engine.meta.data_version import DataVersion
from mqstore.engine.meta.metafile import MetafileError, read_with_backup
from mqstore.engine.meta.offsets import topic_group_key
from mqstore.engine.meta.topics import read_topic_file, topic_config_json
from mqstore.engine.timer.checkpoint import CHECKPOINT_FILE
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.wire import replies, requests

GET_ALL_TOPIC_CONFIG = 21
GET_ALL_CONSUMER_OFFSET = 43
GET_ALL_DELAY_OFFSET = 45
GET_TIMER_CHECK_POINT = 60
GET_ALL_ACK_MARK = 9001
METADATA_CODES = (GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET, GET_TIMER_CHECK_POINT,
                  GET_ALL_ACK_MARK)
SPLIT_METADATA_SIZE = 2000  # BrokerConfig.splitMetadataSize: the most topics one page holds
TIMER_CHECKPOINT_BYTES = 56

T = TypeVar("T")
Call = Callable[[str, requests.Request], Awaitable[dict[str, Any]]]
Handler = Callable[[rm.RemotingCommand, Peer], Awaitable[rm.RemotingCommand]]


def _json(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


class MetadataFront:
    """The five handlers, for the front's table (``handlers``)."""

    def __init__(self, config: BrokerConfig, call: Call) -> None:
        self.store_dir = Path(config.store_dir)
        self.readers = config.broker.readers
        self._call = call

    def handlers(self) -> dict[int, Handler]:
        return {GET_ALL_TOPIC_CONFIG: self.topics, GET_ALL_CONSUMER_OFFSET: self.consumer_offsets,
                GET_ALL_DELAY_OFFSET: self.delay_offsets, GET_TIMER_CHECK_POINT: self.timer_checkpoint,
                GET_ALL_ACK_MARK: self.ack_marks}

    async def topics(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        loaded = _read(read_topic_file, self.store_dir)
        topics, version = loaded if loaded is not None else ({}, DataVersion())
        names = sorted(topics)
        ext = request.ext
        if any(ext.get(key) not in (None, "") for key in ("topicSeq", "maxTopicNum", "dataVersion")):
            begin = header_int(ext, "topicSeq", 0, lo=0)
            if _version_of(ext.get("dataVersion", "")) != version:
                begin = 0  # the table changed since the pages before: from the first again
            names = names[begin:begin + min(header_int(ext, "maxTopicNum", SPLIT_METADATA_SIZE, lo=1),
                                            SPLIT_METADATA_SIZE)]
        body = {"topicConfigTable": {name: topic_config_json(topics[name]) for name in names},
                "dataVersion": version.to_json(), "mappingDataVersion": DataVersion().to_json(),
                "topicQueueMappingDetailMap": {}}
        return request.reply(rm.SUCCESS, ext={"totalTopicNum": len(topics)}, body=_json(body))

    async def consumer_offsets(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        table = replies.OffsetTableReply.decode(await self._call("reader0", requests.OffsetTable()))
        offsets: dict[str, dict[str, int]] = {}
        for topic, group, queue_id, next_offset in table.entries:
            offsets.setdefault(topic_group_key(topic, group), {})[str(queue_id)] = next_offset
        body = {"offsetTable": offsets, "dataVersion": DataVersion(counter=table.counter).to_json(),
                "deletedGroups": dict(table.deleted)}
        return request.reply(rm.SUCCESS, body=_json(body))

    async def delay_offsets(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        text = _read(lambda d: read_with_backup(d / DELAY_OFFSET_FILE, _checked_delay_text), self.store_dir)
        return request.reply(rm.SUCCESS, body=text if text is not None else encode_delay_offsets({}, 0, 0))

    async def timer_checkpoint(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        try:
            with open(self.store_dir / CHECKPOINT_FILE, "rb") as f:
                head = f.read(TIMER_CHECKPOINT_BYTES)
        except FileNotFoundError:
            head = b""
        except OSError as exc:
            raise RequestError(rm.SYSTEM_ERROR, f"cannot read the timer checkpoint: {exc}") from None
        if len(head) < TIMER_CHECKPOINT_BYTES:
            return request.reply(rm.SYSTEM_ERROR, "The checkpoint is null")
        return request.reply(rm.SUCCESS, body=head)

    async def ack_marks(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        table: dict[str, dict[str, int]] = {}
        for i in range(self.readers):
            reply = replies.AckMarksReply.decode(await self._call(f"reader{i}", requests.AckMarks()))
            for group, topic, queue_id, acked_below in reply.marks:
                queues = table.setdefault(topic_group_key(topic, group), {})
                # a queue two readers name (its owner changed with the reader count): the lower mark
                queues[str(queue_id)] = min(acked_below, queues.get(str(queue_id), acked_below))
        return request.reply(rm.SUCCESS, body=_json({"ackMarkTable": table}))


def _read(read: Callable[[Path], T], store_dir: Path) -> T:
    try:
        return read(store_dir)
    except (MetafileError, OSError) as exc:
        raise RequestError(rm.SYSTEM_ERROR, str(exc)) from None


def _checked_delay_text(data: bytes) -> bytes:
    decode_delay_offsets(data)  # a torn or foreign file falls back to the backup (read_with_backup)
    return data


def _version_of(text: str) -> DataVersion | None:
    try:
        return DataVersion.from_json(json.loads(text)) if text else None
    except ValueError:
        return None
