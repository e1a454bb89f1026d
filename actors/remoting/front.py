"""The broker front: what the remoting front answers, RocketMQ requests turned into the broker's own.

Every request becomes the same ZeroMQ request an ipc client sends (``send`` to the writer; ``pull``,
queries and offsets to the readers), made on the front's event loop's own sockets and awaited there
(``Channel.request_on_loop``: the reply wakes the loop, no thread between); nothing here touches the
store's files. Replies follow the Java broker's codes and header fields (every ext value a string),
and the records a pull or query returns are the stored bytes back to back, which RocketMQ clients
decode themselves.

Departures from the Java broker, each deliberate: every topic is routed (new ones are created on
their first send, as with autoCreateTopicEnable); a message sent back goes straight into
``%RETRY%{group}`` (there is no delay-level scheduler here), or ``%DLQ%{group}`` past
``max_reconsume_times``; END_TRANSACTION and the producers' CHECK_TRANSACTION_STATE are
``mqstore.actors.remoting.transactions``'; a batch whose messages the writer refuses in part answers with the first
refusal, although the others were stored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.config import BrokerConfig
from mqstore.actors.config_ha import SYNC_MASTER
from mqstore.actors.remoting.acl import AccessControl, StoredMessages
from mqstore.actors.remoting.clients import ClientBodyError, ConsumerTable, QueueLocks
from mqstore.actors.remoting.headers import LONG_MAX, Peer, RequestError, header_flag, header_int, header_topic
from mqstore.actors.remoting.metadata import MetadataFront
from mqstore.actors.remoting.namesrv import NameServer
from mqstore.actors.remoting.roles import PullAdvice, slave_refusals
from mqstore.actors.remoting.transactions import TransactionFront
from mqstore.engine.delay.table import parse_level
from mqstore.engine.log.host import Host
from mqstore.engine.log.msgid import offset_msg_id
from mqstore.engine.log.record import PROP_DELAY, decode_properties
from mqstore.engine.meta.topics import BROKER_MADE_PREFIXES
from mqstore.engine.names import check_topic
from mqstore.engine.put.system_topics import NOT_ALLOWED_SEND_TOPICS
from mqstore.engine.put.transactions import PROP_TRAN_MSG
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError, Channel
from mqstore.ipc.wire import replies, requests
from mqstore.ipc.wire.messages import Outgoing, ReceivedMessage, SendResult
from mqstore.ipc.wire.receipts import ack_owner

log = logging.getLogger("mqstore.remoting")

CALL_TIMEOUT_MS = 5_000
MAX_PULL_MESSAGES = 1024
DEFAULT_TOPIC = "TBW102"  # RocketMQ's template topic: its route is always there (readiness asks for it)
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
TOPICS_CACHE_MS = 1_000
# SendMessageRequestHeaderV2's one-letter fields (Java clients' code 310 and 320)
V2_FIELDS = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
             "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
             "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName"}
# stored, in doubt: RocketMQ's clients read 10, 11 and 12 as sent, with that SendStatus
PUT_CODES = {"PUT_OK": rm.SUCCESS, "FLUSH_DISK_TIMEOUT": rm.FLUSH_DISK_TIMEOUT,
             "SLAVE_NOT_AVAILABLE": rm.SLAVE_NOT_AVAILABLE, "FLUSH_SLAVE_TIMEOUT": rm.FLUSH_SLAVE_TIMEOUT,
             "SERVICE_NOT_AVAILABLE": rm.SERVICE_NOT_AVAILABLE, "MESSAGE_ILLEGAL": rm.MESSAGE_ILLEGAL,
             "PROPERTIES_SIZE_EXCEEDED": rm.MESSAGE_ILLEGAL, "BAD_REQUEST": rm.MESSAGE_ILLEGAL}
# PullMessageProcessor: what a GetMessageStatus becomes on the wire
PULL_CODES = {"FOUND": rm.SUCCESS, "OFFSET_OVERFLOW_ONE": rm.PULL_NOT_FOUND, "OFFSET_FOUND_NULL": rm.PULL_NOT_FOUND,
              "OFFSET_OVERFLOW_BADLY": rm.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL": rm.PULL_OFFSET_MOVED,
              "NO_MATCHED_MESSAGE": rm.PULL_RETRY_IMMEDIATELY, "MESSAGE_WAS_REMOVING": rm.PULL_RETRY_IMMEDIATELY,
              "OFFSET_RESET": rm.PULL_OFFSET_MOVED}


class BrokerFront:
    """One per front process; ``handle`` serves a request and returns its reply."""

    def __init__(self, config: BrokerConfig, channel: Channel) -> None:
        self.config = config
        self.remoting = config.remoting
        self.channel = channel
        self.readers = config.broker.readers
        self.clients = ConsumerTable(self.remoting.max_consumer_groups, self.remoting.client_expire_ms)
        self.locks = QueueLocks(self.remoting.max_queue_locks)
        self.store_host = Host(config.store.store_host.ip, config.store.store_host.port)
        self._topics: dict[str, int] = {}
        self._topics_at_ms = -TOPICS_CACHE_MS
        self.transactions = TransactionFront(self._call, self.remoting.broker_name)
        self.acl = (AccessControl(self.remoting.acl_file, StoredMessages(self._call, self.store_host))
                    if self.remoting.acl_file else None)
        self.namesrv = NameServer(config)
        advice = PullAdvice.for_broker(config, master_live=self.namesrv.master_live, slave_live=self.namesrv.has_slave)
        self._handlers: dict[int, Callable[[rm.RemotingCommand, Peer], Awaitable[rm.RemotingCommand]]] = {
            rm.GET_ROUTEINFO_BY_TOPIC: self._route, rm.SEND_MESSAGE: self._send, rm.SEND_MESSAGE_V2: self._send,
            rm.SEND_BATCH_MESSAGE: self._send, rm.PULL_MESSAGE: advice.wrap(self._pull), rm.HEART_BEAT: self._heartbeat,
            rm.GET_CONSUMER_LIST_BY_GROUP: self._consumer_list, rm.UNREGISTER_CLIENT: self._unregister,
            rm.QUERY_CONSUMER_OFFSET: self._query_offset, rm.UPDATE_CONSUMER_OFFSET: self._update_offset,
            rm.GET_MAX_OFFSET: self._max_offset, rm.GET_MIN_OFFSET: self._min_offset,
            rm.SEARCH_OFFSET_BY_TIMESTAMP: self._offset_by_time, rm.QUERY_MESSAGE: self._query,
            rm.VIEW_MESSAGE_BY_ID: self._view, rm.CONSUMER_SEND_MSG_BACK: self._send_back,
            rm.LOCK_BATCH_MQ: self._lock, rm.UNLOCK_BATCH_MQ: self._unlock,
            rm.END_TRANSACTION: lambda request, peer: self.transactions.end(request, peer.connection),
            rm.RESUME_CHECK_HALF_MESSAGE: lambda request, peer: self.transactions.resume(request),
            rm.REGISTER_BROKER: self.namesrv.register, rm.UNREGISTER_BROKER: self.namesrv.unregister,
            rm.GET_BROKER_CLUSTER_INFO: self.namesrv.cluster_info, **MetadataFront(config, self._call).handlers(),
        }
        self._handlers.update(slave_refusals() if config.is_slave else {})

    async def handle(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        try:
            refusal = None if self.acl is None else await self.acl.check(request, peer)
            if refusal is not None:
                return request.reply(rm.NO_PERMISSION, refusal)
            handler = self._handlers.get(request.code)
            if handler is None:
                return request.reply(rm.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported")
            return await handler(request, peer)
        except RequestError as exc:
            return request.reply(exc.code, exc.remark)
        except BrokerTimeoutError:
            return request.reply(rm.SYSTEM_BUSY, "the broker did not answer in time")
        except BrokerError as exc:
            return request.reply(rm.SYSTEM_ERROR, str(exc))
        except rm.FrameError as exc:
            return request.reply(rm.SYSTEM_ERROR, str(exc))

    def request_codes(self) -> frozenset[int]:
        """The request codes this front answers; any other gets REQUEST_CODE_NOT_SUPPORTED."""
        return frozenset(self._handlers)

    def acl_denied(self) -> dict[str, int]:
        """Requests the ACL refused, by reason (none without an ACL file)."""
        return {} if self.acl is None else dict(self.acl.denied)

    def connection_closed(self, peer: Peer) -> None:
        """A closed connection takes its clients with it (the Java broker's channel close)."""
        self.clients.drop_connection(peer.connection)
        self.locks.drop_connection(peer.connection)
        self.transactions.drop(peer.connection)

    async def _call(self, route: str, request: requests.Request, timeout_ms: int = CALL_TIMEOUT_MS) -> dict[str, Any]:
        return await self.channel.request_on_loop(route, request, timeout_ms=timeout_ms)

    async def queue_count(self, topic: str) -> int:
        """The topic's queues as the writer has them; a new topic gets what the writer will give it."""
        now = monotonic_ms()
        if now - self._topics_at_ms >= TOPICS_CACHE_MS or topic not in self._topics:
            try:
                reply = await self._call("ingress", requests.Topics())
                self._topics = {str(k): int(v) for k, v in reply["topics"].items()}
                self._topics_at_ms = now
            except (BrokerError, BrokerTimeoutError):
                if not self._topics:
                    raise
        if topic in self._topics:
            return self._topics[topic]
        return 1 if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) else self.config.broker.default_queues

    # -- NameServer ----------------------------------------------------------------------------------

    async def _route(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        topic = request.ext.get("topic", "")
        if check_topic(topic) is not None:
            return request.reply(rm.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}")
        queues: int | None = await self.queue_count(topic)
        if not (self.config.broker.auto_create_topics or topic in self._topics or topic == DEFAULT_TOPIC
                or topic.startswith(BROKER_MADE_PREFIXES)):  # the Java broker's answer with autoCreateTopicEnable off
            queues = None
        route = self.namesrv.route(topic, queues)  # this broker's queues, and the registered brokers'
        if route is None:
            return request.reply(rm.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}")
        return request.reply(rm.SUCCESS, body=json.dumps(route, separators=(",", ":")).encode())

    # -- sending -------------------------------------------------------------------------------------

    async def _send(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        ext = request.ext
        if request.code != rm.SEND_MESSAGE:
            ext = {V2_FIELDS.get(k, k): v for k, v in ext.items()}
        topic = header_topic(ext)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise RequestError(rm.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        born_host = (peer.ip, peer.port) if peer.ip.count(".") == 3 else None  # V1 records hold IPv4 only
        queue_id = header_int(ext, "queueId", lo=0, hi=(1 << 31) - 1)
        sys_flag = header_int(ext, "sysFlag", 0, lo=0)
        born_ms = header_int(ext, "bornTimestamp", wall_ms(), lo=0)
        reconsume_times = header_int(ext, "reconsumeTimes", 0, lo=0)
        if request.code == rm.SEND_BATCH_MESSAGE or header_flag(ext.get("batch")):
            items = rm.decode_batch(request.body)
            if not items or any(PROP_TRAN_MSG in i.properties for i in items):
                raise RequestError(rm.MESSAGE_ILLEGAL, "a batch without messages, or of transaction messages")
            delay = decode_properties(ext.get("properties", "").encode()).get(PROP_DELAY, "0")
            if (parse_level(delay) or 0) > 0:  # RocketMQ's asyncPutMessages refuses a delayed batch
                raise RequestError(rm.MESSAGE_ILLEGAL, "a batch cannot carry a delay level")
            outgoing = [Outgoing(topic, i.body, properties=i.properties, queue_id=queue_id, flag=i.flag,
                                 born_ms=born_ms, born_host=born_host, reconsume_times=reconsume_times,
                                 sys_flag=sys_flag) for i in items]
        else:
            props = decode_properties(ext.get("properties", "").encode())
            outgoing = [Outgoing(topic, request.body, properties=props, queue_id=queue_id,
                                 flag=header_int(ext, "flag", 0), born_ms=born_ms, born_host=born_host,
                                 reconsume_times=reconsume_times, sys_flag=sys_flag)]
        code, remark, head = await self._put(outgoing)
        if PROP_TRAN_MSG in outgoing[0].properties and "UNIQ_KEY" in outgoing[0].properties:
            head["transactionId"] = outgoing[0].properties["UNIQ_KEY"]  # a half message's answer names it
        return request.reply(code, remark, head)

    async def _put(self, outgoing: list[Outgoing]) -> tuple[int, str | None, dict[str, str]]:
        waits = (self.config.flush.sync_timeout_ms if self.config.sync_flush else 0,  # as RocketMQ: the longer wait
                 self.config.ha.slave_timeout_ms if self.config.broker.role == SYNC_MASTER else 0)
        timeout = max(waits) + CALL_TIMEOUT_MS
        try:
            reply = await self._call("ingress", requests.Send(tuple(map(requests.SendMessage.of, outgoing))), timeout)
        except BrokerError as exc:
            return PUT_CODES.get(exc.status, rm.SYSTEM_ERROR), exc.reason, {}
        results = [SendResult.from_wire(r) for r in reply["results"]]
        failed = next((r for r in results if r.status != "PUT_OK"), None)
        first = results[0]
        ext = {"msgId": ",".join(r.msg_id for r in results), "queueId": str(first.queue_id),
               "queueOffset": str(first.queue_offset), "MSG_REGION": "DefaultRegion", "TRACE_ON": "false"}
        if failed is None:
            return rm.SUCCESS, None, ext
        return PUT_CODES.get(failed.status, rm.SYSTEM_ERROR), f"{failed.status}: {failed.reason}", ext

    async def _send_back(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        """CONSUMER_SEND_MSG_BACK: the message at ``offset`` again, into the group's retry topic after the
        delay of level ``delayLevel`` (when the client gives one above 0) or 3 + its reconsume times,
        through the schedule topic (``mqstore.engine.delay.levels``); to ``%DLQ%{group}`` at once past the max
        reconsume times or for a ``delayLevel`` below 0 (RocketMQ's consumerSendMsgBack)."""
        ext = request.ext
        group = ext.get("group", "")
        retry_topic = RETRY_PREFIX + group
        if check_topic(retry_topic) is not None:
            raise RequestError(rm.SYSTEM_ERROR, f"group {group!r} makes no valid retry topic")
        msg_id = offset_msg_id(self.store_host, header_int(ext, "offset", lo=0))
        msgs = replies.MessagesReply.decode(await self._call("reader0", requests.ViewId(msg_id))).msgs
        if not msgs:
            raise RequestError(rm.SYSTEM_ERROR, f"look message by offset failed, {ext.get('offset')}")
        original = ReceivedMessage.from_wire(msgs[0])
        times = original.reconsume_times + 1
        limit = header_int(ext, "maxReconsumeTimes", self.remoting.max_reconsume_times, lo=0)
        delay_level = header_int(ext, "delayLevel", 0)
        dead = times > limit or delay_level < 0
        target = DLQ_PREFIX + group if dead else retry_topic
        props = dict(original.properties)
        props[PROP_DELAY] = "0" if dead else str(delay_level if delay_level > 0 else 3 + original.reconsume_times)
        props.setdefault("RETRY_TOPIC", original.topic)
        props.setdefault("ORIGIN_MESSAGE_ID", ext.get("originMsgId") or original.uniq_key or original.msg_id)
        props["RECONSUME_TIME"] = str(times)
        await self._call("ingress", requests.CreateTopic(target, await self.queue_count(target)))
        outgoing = Outgoing(topic=target, body=original.body, properties=props, queue_id=0, flag=original.flag,
                            born_ms=original.born_ms, born_host=original.born_host, reconsume_times=times,
                            sys_flag=original.sys_flag & 0x3)
        code, remark, _ = await self._put([outgoing])
        return request.reply(code, remark)

    # -- pulling -------------------------------------------------------------------------------------

    def _reader_for(self, topic: str, queue_id: int) -> str:
        # the same reader an ipc Consumer pulls this queue from, so parked pulls wake in one place
        return f"reader{ack_owner('', topic, queue_id, self.readers)}"

    async def _pull(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        ext = request.ext
        group, topic = ext.get("consumerGroup", ""), header_topic(ext)
        queue_id = header_int(ext, "queueId", lo=0, hi=(1 << 31) - 1)
        offset = header_int(ext, "queueOffset", lo=0)
        sys_flag = header_int(ext, "sysFlag", 0)
        if sys_flag & rm.PULL_COMMIT_OFFSET and header_int(ext, "commitOffset", 0) > 0:
            try:
                await self._commit(group, topic, queue_id, header_int(ext, "commitOffset", lo=0))
            except BrokerError as exc:  # a refused commit (past the queue's end) must not fail the pull
                log.info("pull of %s/%d by %s: commit refused: %s", topic, queue_id, group, exc)
        wait_ms = 0
        if sys_flag & rm.PULL_SUSPEND:
            wait_ms = min(header_int(ext, "suspendTimeoutMillis", 15_000, lo=0), self.config.broker.long_poll_max_ms)
        tags = (ext.get("subscription") or "*") if sys_flag & rm.PULL_SUBSCRIPTION else "*"
        most = max(1, min(header_int(ext, "maxMsgNums", 32), MAX_PULL_MESSAGES))
        pull = requests.Pull(group, topic, queue_id, offset, most, tags=tags, wait_ms=wait_ms, raw=True)
        reply = replies.PackedPullReply.decode(await self._call(self._reader_for(topic, queue_id), pull,
                                                                wait_ms + CALL_TIMEOUT_MS))
        status = reply.status
        code = PULL_CODES.get(status)
        if code is None:  # the queue is empty or unknown: Java's NO_MESSAGE_IN_QUEUE rule
            code = rm.PULL_NOT_FOUND if offset == 0 else rm.PULL_OFFSET_MOVED
        body = bytes(reply.records)
        if code == rm.SUCCESS and not body:
            code = rm.PULL_RETRY_IMMEDIATELY  # never FOUND without records: the client throws on that
        head = {"suggestWhichBrokerId": "0", "nextBeginOffset": reply.next_queue_offset,
                "minOffset": reply.min_queue_offset, "maxOffset": reply.max_queue_offset}
        return request.reply(code, None if code == rm.SUCCESS else status, head, body if code == rm.SUCCESS else b"")

    # -- consumers -----------------------------------------------------------------------------------

    async def _heartbeat(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        try:
            self.clients.heartbeat(request.body, peer.connection, wall_ms())
        except ClientBodyError as exc:
            return request.reply(rm.SYSTEM_ERROR, str(exc))
        await self.transactions.heartbeat(request.body, peer.connection, wall_ms())
        return request.reply(rm.SUCCESS)

    async def _consumer_list(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        group = request.ext.get("consumerGroup", "")
        ids = self.clients.consumers(group, wall_ms())
        if not ids:
            return request.reply(rm.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return request.reply(rm.SUCCESS, body=json.dumps({"consumerIdList": ids}).encode())

    async def _unregister(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        self.clients.unregister(request.ext.get("clientID", ""), request.ext.get("consumerGroup", ""))
        return request.reply(rm.SUCCESS)

    async def _lock(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        try:
            return request.reply(rm.SUCCESS, body=self.locks.lock(request.body, wall_ms(), peer.connection))
        except ClientBodyError as exc:
            return request.reply(rm.SYSTEM_ERROR, str(exc))

    async def _unlock(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        try:
            self.locks.unlock(request.body)
        except ClientBodyError as exc:
            return request.reply(rm.SYSTEM_ERROR, str(exc))
        return request.reply(rm.SUCCESS)

    # -- offsets -------------------------------------------------------------------------------------

    async def _commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        await self._call("reader0", requests.CommitOffset(group, topic, queue_id, offset))

    async def _span(self, topic: str, queue_id: int) -> tuple[int, int]:
        queues = replies.QueueInfoReply.decode(await self._call("reader0", requests.QueueInfo(topic))).queues
        return queues.get(queue_id, (0, 0))

    async def _query_offset(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        ext = request.ext
        topic, queue_id = header_topic(ext), header_int(ext, "queueId", lo=0)
        fetch = requests.FetchOffset(str(ext.get("consumerGroup", "")), topic, queue_id)
        offset = replies.OffsetReply.decode(await self._call("reader0", fetch)).offset
        if offset < 0:
            # a new group: from the start while the queue still holds it (ConsumerManageProcessor)
            if (await self._span(topic, queue_id))[0] != 0:
                return request.reply(rm.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer "
                                     "boot first")
            offset = 0
        return request.reply(rm.SUCCESS, ext={"offset": offset})

    async def _update_offset(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        ext = request.ext
        await self._commit(ext.get("consumerGroup", ""), header_topic(ext), header_int(ext, "queueId", lo=0),
                           header_int(ext, "commitOffset", lo=0))
        return request.reply(rm.SUCCESS)

    async def _max_offset(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        span = await self._span(header_topic(request.ext), header_int(request.ext, "queueId", lo=0))
        return request.reply(rm.SUCCESS, ext={"offset": span[1]})

    async def _min_offset(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        span = await self._span(header_topic(request.ext), header_int(request.ext, "queueId", lo=0))
        return request.reply(rm.SUCCESS, ext={"offset": span[0]})

    async def _offset_by_time(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        ext = request.ext
        reply = await self._call("reader0", requests.OffsetByTime(header_topic(ext), header_int(ext, "queueId", lo=0),
                                                                  header_int(ext, "timestamp", lo=0)))
        return request.reply(rm.SUCCESS, ext={"offset": replies.OffsetReply.decode(reply).offset})

    # -- queries -------------------------------------------------------------------------------------

    async def _query(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        ext = request.ext
        topic, key = header_topic(ext), ext.get("key", "")
        if not key:
            raise RequestError(rm.SYSTEM_ERROR, "the request header lacks key")
        query: requests.QueryUniq | requests.QueryKey
        if header_flag(ext.get("_UNIQUE_KEY_QUERY")):
            query = requests.QueryUniq(topic, key, raw=True)
        else:
            query = requests.QueryKey(
                topic, key, max(1, min(header_int(ext, "maxNum", 32), MAX_PULL_MESSAGES)), True,
                header_int(ext, "beginTimestamp", 0, lo=0), header_int(ext, "endTimestamp", LONG_MAX, lo=0))
        reply = replies.PackedRecordsReply.decode(await self._call("reader0", query))
        head = {"indexLastUpdateTimestamp": reply.index_ms or 0, "indexLastUpdatePhyoffset": reply.index_phys or 0}
        if not reply.record_count:
            return request.reply(rm.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", head)
        return request.reply(rm.SUCCESS, None, head, bytes(reply.records))

    async def _view(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        offset = header_int(request.ext, "offset", lo=0)
        reply = replies.PackedRecordsReply.decode(
            await self._call("reader0", requests.ViewId(offset_msg_id(self.store_host, offset), raw=True)))
        if not reply.record_count:
            return request.reply(rm.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        msg_topic = request.ext.get("topic")
        body = bytes(reply.records)
        if msg_topic and rm.decode_records(body)[0].topic != msg_topic:
            return request.reply(rm.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return request.reply(rm.SUCCESS, body=body)

