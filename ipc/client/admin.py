"""Admin: topics (the writer), queries and consumer offsets (reader 0), group activity and ack-mode
queues (every reader the endpoints name). Its calls wait on the calling thread's own socket
(``Channel.request``); the ``*_async`` ones go through the client's I/O thread and return futures."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from mqstore.ipc.client.futures import every, guarded, then
from mqstore.ipc.client.key_queries import key_query, keys_query, per_key
from mqstore.ipc.transport.channel import Channel, resolve_endpoints
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire import replies, requests
from mqstore.ipc.wire.group_lag import QueueLag
from mqstore.ipc.wire.messages import MessageBatch, ReceivedMessage

StorePath = str | os.PathLike[str]
DEFAULT_TIMEOUT_MS = 3000  # every client's default wait for a reply


class Admin:
    """Topics (the writer), queries and consumer offsets (reader 0); group activity (every reader the
    endpoints name)."""

    def __init__(self, store_dir: StorePath | None = None, *, endpoints: Endpoints | None = None,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        ep = resolve_endpoints(store_dir, endpoints)
        self._timeout_ms = timeout_ms
        self._readers = [f"reader-{i}" for i in range(len(ep.readers))]
        self._channel = Channel({"ingress": [ep.ingress], "reader": [ep.reader(0)],
                                 **{route: [ep.reader(i)] for i, route in enumerate(self._readers)}},
                                name="mqstore-admin", curve=ep.curve)

    def _call(self, route: str, request: requests.Request | str, **fields: Any) -> dict[str, Any]:
        """A request made on the calling thread (``Channel.request``): Admin's callers wait at once. An
        op and its fields, a map of no class, go through as ``Channel.request`` sends them."""
        return self._channel.request(route, request, timeout_ms=self._timeout_ms, **fields)

    def topics(self) -> dict[str, int]:
        """Topic name -> queue count."""
        return replies.TopicsReply.decode(self._call("ingress", requests.Topics())).topics

    def create_topic(self, topic: str, queues: int) -> int:
        """Create a topic (or add queues to it); returns its queue count."""
        return replies.CreateTopicReply.decode(self._call("ingress", requests.CreateTopic(topic, queues))).queues

    def delete_topic(self, topic: str) -> bool:
        """Delete a topic: its config entry at once, its consume queues by the builder soon after (its
        records stay in the commitlog until retention); whether it existed. Asking again is harmless."""
        return replies.DeleteTopicReply.decode(self._call("ingress", requests.DeleteTopic(topic))).existed

    def groups(self) -> dict[str, list[str]]:
        """Group -> the topics it committed offsets on."""
        return replies.GroupsReply.decode(self._call("reader", requests.Groups())).groups

    def group_describe(self, group: str) -> list[QueueLag]:
        """Per queue: topic, queue_id, committed_offset, min_queue_offset, max_queue_offset, lag,
        last_consume_ms (``mqstore.engine.read.group_lag``)."""
        return list(replies.GroupDescribeReply.decode(self._call("reader", requests.GroupDescribe(group))).queues)

    def group_last_seen_ms(self) -> dict[str, int]:
        """Group -> the last time (wall ms) any reader served one of its consumers."""
        return _last_seen([self._call(route, requests.GroupActivity()) for route in self._readers])

    def ack_stats(self) -> list[replies.AckQueueStats]:
        """Every reader's open ack-mode queues: group, topic, queue_id, ready, unacked, redelivered, dead."""
        return _ack_queues([self._call(route, requests.AckStats()) for route in self._readers])

    def reset_offset(self, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
        """``commit_offset`` as an administrator: it may move the offset back, and does not count as
        the group's consumer being alive."""
        self._call("reader", requests.CommitOffset(group, topic, queue_id, queue_offset, admin=True))

    def delete_topic_offsets(self, topic: str) -> bool:
        """Forget every group's committed offsets on ``topic``; whether there were any."""
        return replies.DeleteTopicOffsetsReply.decode(self._call("reader", requests.DeleteTopicOffsets(topic))).deleted

    def queue_info(self, topic: str) -> dict[int, tuple[int, int]]:
        """Queue id -> (min offset, max offset) as published."""
        return replies.QueueInfoReply.decode(self._call("reader", requests.QueueInfo(topic))).queues

    def query_by_key(self, topic: str, key: str, max_count: int = 64, begin_ms: int = 0,
                     end_ms: int | None = None) -> MessageBatch:
        """The newest ``max_count`` messages of ``topic`` with ``key`` among their keys, oldest first:
        every one of them, whatever other keys share its hash, but never more than the broker's
        ``[store] max_query_count`` (64 by default) however many ``max_count`` asks for. They come
        packed and are decoded when touched (``query_by_key_async``'s answer); the batch equals the
        list of the same messages."""
        return _records(self._call("reader", key_query(topic, key, max_count, begin_ms, end_ms))).batch()

    def query_by_key_async(self, topic: str, key: str, max_count: int = 64, begin_ms: int = 0,
                           end_ms: int | None = None) -> Future[MessageBatch]:
        """``query_by_key`` without waiting (several may be in flight); the messages come packed,
        decoded when touched."""
        return _packed(self._channel.call("reader", key_query(topic, key, max_count, begin_ms, end_ms),
                                          timeout_ms=self._timeout_ms),
                       lambda reply: reply.batch())

    def query_keys(self, topic: str, keys: Sequence[str], max_count: int = 64, begin_ms: int = 0,
                   end_ms: int | None = None) -> list[MessageBatch]:
        """``query_by_key`` for many keys in one request (at most 1,024): one batch of messages per key,
        in the keys' order, each of up to ``max_count`` (and ``max_query_count``) messages."""
        return per_key(len(keys), _records(self._call("reader", keys_query(topic, keys, max_count, begin_ms, end_ms))))

    def query_keys_async(self, topic: str, keys: Sequence[str], max_count: int = 64, begin_ms: int = 0,
                         end_ms: int | None = None) -> Future[list[MessageBatch]]:
        return _packed(self._channel.call("reader", keys_query(topic, keys, max_count, begin_ms, end_ms),
                                          timeout_ms=self._timeout_ms),
                       lambda reply: per_key(len(keys), reply))

    def query_by_uniq_key(self, topic: str, uniq_key: str) -> list[ReceivedMessage]:
        return list(_records(self._call("reader", requests.QueryUniq(topic, uniq_key, raw=True))).batch())

    def view_by_id(self, msg_id: str) -> ReceivedMessage | None:
        msgs = replies.MessagesReply.decode(self._call("reader", requests.ViewId(msg_id))).msgs
        return ReceivedMessage.from_wire(msgs[0]) if msgs else None

    def offset_by_time(self, topic: str, queue_id: int, ts_ms: int, *, upper: bool = False) -> int:
        """The first queue offset stored at or after ``ts_ms`` (``upper``: the last at or before)."""
        return replies.OffsetReply.decode(self._call("reader", requests.OffsetByTime(topic, queue_id, ts_ms, upper))
                                          ).offset

    def fetch_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The group's committed next queue offset, -1 when it never committed."""
        return replies.OffsetReply.decode(self._call("reader", requests.FetchOffset(group, topic, queue_id))).offset

    def commit_offset(self, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
        self._call("reader", requests.CommitOffset(group, topic, queue_id, queue_offset))

    def ping(self) -> dict[str, Any]:
        """Reader 0's answer: pid, readable_end, parked pulls."""
        return self._call("reader", requests.Ping())

    def ping_writer(self) -> dict[str, Any]:
        return self._call("ingress", requests.Ping())

    # -- the same calls as futures, completed on the client's I/O thread (``mqstore.aio.Admin`` awaits them)

    def topics_async(self) -> Future[dict[str, int]]:
        return self._ask("ingress", requests.Topics(), lambda r: replies.TopicsReply.decode(r).topics)

    def create_topic_async(self, topic: str, queues: int) -> Future[int]:
        return self._ask("ingress", requests.CreateTopic(topic, queues),
                         lambda r: replies.CreateTopicReply.decode(r).queues)

    def delete_topic_async(self, topic: str) -> Future[bool]:
        return self._ask("ingress", requests.DeleteTopic(topic), lambda r: replies.DeleteTopicReply.decode(r).existed)

    def groups_async(self) -> Future[dict[str, list[str]]]:
        return self._ask("reader", requests.Groups(), lambda r: replies.GroupsReply.decode(r).groups)

    def group_describe_async(self, group: str) -> Future[list[QueueLag]]:
        return self._ask("reader", requests.GroupDescribe(group),
                         lambda r: list(replies.GroupDescribeReply.decode(r).queues))

    def group_last_seen_ms_async(self) -> Future[dict[str, int]]:
        return then(self._ask_readers(requests.GroupActivity()), _last_seen)

    def ack_stats_async(self) -> Future[list[replies.AckQueueStats]]:
        return then(self._ask_readers(requests.AckStats()), _ack_queues)

    def reset_offset_async(self, group: str, topic: str, queue_id: int, queue_offset: int) -> Future[None]:
        return self._ask("reader", requests.CommitOffset(group, topic, queue_id, queue_offset, admin=True), _nothing)

    def delete_topic_offsets_async(self, topic: str) -> Future[bool]:
        return self._ask("reader", requests.DeleteTopicOffsets(topic),
                         lambda r: replies.DeleteTopicOffsetsReply.decode(r).deleted)

    def queue_info_async(self, topic: str) -> Future[dict[int, tuple[int, int]]]:
        return self._ask("reader", requests.QueueInfo(topic), lambda r: replies.QueueInfoReply.decode(r).queues)

    def query_by_uniq_key_async(self, topic: str, uniq_key: str) -> Future[list[ReceivedMessage]]:
        return self._ask("reader", requests.QueryUniq(topic, uniq_key, raw=True), lambda r: list(_records(r).batch()))

    def view_by_id_async(self, msg_id: str) -> Future[ReceivedMessage | None]:
        def first(reply: dict[str, Any]) -> ReceivedMessage | None:
            msgs = replies.MessagesReply.decode(reply).msgs
            return ReceivedMessage.from_wire(msgs[0]) if msgs else None
        return self._ask("reader", requests.ViewId(msg_id), first)

    def offset_by_time_async(self, topic: str, queue_id: int, ts_ms: int, *, upper: bool = False) -> Future[int]:
        return self._ask("reader", requests.OffsetByTime(topic, queue_id, ts_ms, upper),
                         lambda r: replies.OffsetReply.decode(r).offset)

    def fetch_offset_async(self, group: str, topic: str, queue_id: int) -> Future[int]:
        return self._ask("reader", requests.FetchOffset(group, topic, queue_id),
                         lambda r: replies.OffsetReply.decode(r).offset)

    def commit_offset_async(self, group: str, topic: str, queue_id: int, queue_offset: int) -> Future[None]:
        return self._ask("reader", requests.CommitOffset(group, topic, queue_id, queue_offset), _nothing)

    def ping_async(self) -> Future[dict[str, Any]]:
        return self._ask("reader", requests.Ping(), _itself)

    def ping_writer_async(self) -> Future[dict[str, Any]]:
        return self._ask("ingress", requests.Ping(), _itself)

    def _ask(self, route: str, request: requests.Request, decode: Callable[[dict[str, Any]], T]) -> Future[T]:
        """``request`` through the I/O thread: a future of ``decode(the reply)``."""
        return then(self._channel.call(route, request, timeout_ms=self._timeout_ms), decode)

    def _ask_readers(self, request: requests.Request) -> Future[list[dict[str, Any]]]:
        """``request`` of every reader at once: their replies, in the readers' order."""
        return every([self._channel.call(route, request, timeout_ms=self._timeout_ms) for route in self._readers])

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def purge_queues(self, topic: str, queue_ids: Sequence[int] | None = None) -> replies.PurgeQueuesReply:
        """Empty ``topic``'s queues (every one, or ``queue_ids``) for every group, as RabbitMQ's purge:
        reader 0 takes each queue's end as its floor and moves the committed offsets there, durably;
        then every reader purges its ack-mode queues' ready messages (those in consumers' hands stay)
        and starts pulls at the floors. The floors and, per group and queue, what was purged."""
        return self.purge_queues_async(topic, queue_ids).result()

    def persist_offsets(self) -> bool:
        """Have reader 0 write the consumer offsets to disk now (fsynced); whether any had changed."""
        return self.persist_offsets_async().result()

    def read_queue(self, topic: str, queue_id: int, queue_offset: int, max_count: int = 32
                   ) -> tuple[MessageBatch, int, int]:
        """The messages of one queue from ``queue_offset`` (at most ``max_count``, as one pull without
        a group or a wait): the batch, the next offset to read and the queue's max offset."""
        return self.read_queue_async(topic, queue_id, queue_offset, max_count).result()

    def purge_queues_async(self, topic: str, queue_ids: Sequence[int] | None = None
                           ) -> Future[replies.PurgeQueuesReply]:
        queues = None if queue_ids is None else tuple(queue_ids)
        outer: Future[replies.PurgeQueuesReply] = Future()
        outer.set_running_or_notify_cancel()

        @guarded(outer)
        def floors_known(answered: Future[dict[str, Any]]) -> None:
            first = replies.PurgeQueuesReply.decode(answered.result())

            @guarded(outer)
            def every_reader(rest: Future[list[dict[str, Any]]]) -> None:
                purged = [*first.purged, *(p for r in rest.result() for p in replies.PurgeQueuesReply.decode(r).purged)]
                outer.set_result(replies.PurgeQueuesReply(first.floors, tuple(purged)))

            every([self._channel.call(route, requests.PurgeQueues(topic, queues, first.floors),
                                      timeout_ms=self._timeout_ms)
                   for route in self._readers[1:]]).add_done_callback(every_reader)

        self._channel.call("reader-0", requests.PurgeQueues(topic, queues),
                           timeout_ms=self._timeout_ms).add_done_callback(floors_known)
        return outer

    def persist_offsets_async(self) -> Future[bool]:
        return self._ask("reader", requests.PersistOffsets(), lambda r: replies.PersistOffsetsReply.decode(r).persisted)

    def read_queue_async(self, topic: str, queue_id: int, queue_offset: int, max_count: int = 32
                         ) -> Future[tuple[MessageBatch, int, int]]:
        def decoded(message: dict[str, Any]) -> tuple[MessageBatch, int, int]:
            reply = replies.PackedPullReply.decode(message)
            return reply.batch(), reply.next_queue_offset, reply.max_queue_offset
        return self._ask("reader", requests.Pull(None, topic, queue_id, queue_offset, max_count, raw=True), decoded)

    def topic_stats(self, topic: str) -> dict[int, tuple[int, int, int]]:
        """Queue id -> (min offset, max offset, bytes): the bytes of its messages' records as stored,
        summed from the consume-queue entries' sizes."""
        return self.topic_stats_async(topic).result()

    def delete_group(self, group: str, live_ms: int) -> tuple[list[str], list[tuple[str, int]]]:
        """Delete ``group``: its committed offsets and its ack-mode queue indexes, each reader's part
        durably gone when it answers (one reader after the other). A reader that served one of its
        consumers within ``live_ms`` refuses (``BrokerError``, status ``NON_EMPTY_GROUP``). Returns the
        topics it had offsets on and the (topic, queue) of each ack-mode queue removed."""
        return self.delete_group_async(group, live_ms).result()

    def ack_group_stats(self, group: str) -> list[replies.AckQueueStats]:
        """Every ack-mode queue of ``group`` (open or not), with its counts: ready, unacked, redelivered, dead."""
        return self.ack_group_stats_async(group).result()

    def topic_stats_async(self, topic: str) -> Future[dict[int, tuple[int, int, int]]]:
        return self._ask("reader", requests.TopicStats(topic), lambda r: replies.TopicStatsReply.decode(r).queues)

    def delete_group_async(self, group: str, live_ms: int) -> Future[tuple[list[str], list[tuple[str, int]]]]:
        outer: Future[tuple[list[str], list[tuple[str, int]]]] = Future()
        outer.set_running_or_notify_cancel()
        topics: list[str] = []
        queues: list[tuple[str, int]] = []

        def ask(index: int) -> None:
            if index == len(self._readers):
                outer.set_result((topics, sorted(queues)))
                return

            @guarded(outer)
            def answered(reply: Future[dict[str, Any]]) -> None:
                done = replies.DeleteGroupReply.decode(reply.result())
                topics.extend(done.offsets)
                queues.extend(done.ack_queues)
                ask(index + 1)

            self._channel.call(self._readers[index], requests.DeleteGroup(group, live_ms),
                               timeout_ms=self._timeout_ms).add_done_callback(answered)

        ask(0)
        return outer

    def ack_group_stats_async(self, group: str) -> Future[list[replies.AckQueueStats]]:
        return then(self._ask_readers(requests.AckGroupStats(group)),
                    lambda stats: sorted(_ack_queues(stats), key=lambda q: (q.topic, q.queue_id)))

T = TypeVar("T")


def _records(message: dict[str, Any]) -> replies.PackedRecordsReply:
    return replies.PackedRecordsReply.decode(message)


def _packed(call: Future[dict[str, Any]], step: Callable[[replies.PackedRecordsReply], T]) -> Future[T]:
    """A future of ``step(the packed reply)``, completed on the client's I/O thread."""
    return then(call, lambda reply: step(_records(reply)))


def _last_seen(activity: list[dict[str, Any]]) -> dict[str, int]:
    """Group -> its latest time over the readers' ``GroupActivity`` replies."""
    seen: dict[str, int] = {}
    for reply in activity:
        for group, ms in replies.GroupActivityReply.decode(reply).groups.items():
            seen[group] = max(seen.get(group, 0), ms)
    return seen


def _ack_queues(stats: list[dict[str, Any]]) -> list[replies.AckQueueStats]:
    return [q for reply in stats for q in replies.AckStatsReply.decode(reply).queues]


def _nothing(reply: dict[str, Any]) -> None:
    return None


def _itself(reply: dict[str, Any]) -> dict[str, Any]:
    return reply
