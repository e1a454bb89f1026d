"""The reply contract (mqstore.ipc.wire.replies): every class encodes to the bytes the actors sent before
the classes (``schema.pack(schema.ok_reply(id, **fields))``, the fields in the order each actor
wrote them), decodes back from them, and refuses a bad map with a ReplyError that names the field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.log.host import Host
from mqstore.engine.read.group_lag import QueueLag
from mqstore.ipc.wire import replies, schema
from mqstore.ipc.wire.replies import Reply, ReplyError

NAMES = st.text(max_size=20)
INTS = st.integers(-(1 << 63), (1 << 63) - 1)
COUNTS = st.integers(0, (1 << 31) - 1)
IDS = st.one_of(st.integers(0, 1 << 40), st.text(max_size=8))
STATUSES = st.sampled_from(["PUT_OK", "FLUSH_DISK_TIMEOUT", "SERVICE_NOT_AVAILABLE", "MESSAGE_ILLEGAL"])
RESULT_MAPS = st.one_of(  # ``actors.writer.sends.result_fields``: a refusal, or where the message went
    st.fixed_dictionaries({"status": STATUSES, "reason": NAMES}),
    st.fixed_dictionaries({"status": STATUSES, "msg_id": NAMES, "queue": COUNTS, "queue_offset": INTS,
                           "phys_offset": INTS, "uniq_key": st.one_of(st.none(), NAMES)}))
STATS = st.dictionaries(NAMES, st.one_of(INTS, NAMES, st.booleans()), max_size=4)
QUEUE_STATS = st.builds(replies.AckQueueStats, NAMES, NAMES, COUNTS, COUNTS, COUNTS, COUNTS, COUNTS)
GET_STATUSES = st.sampled_from(["FOUND", "NO_NEW_MESSAGE", "NO_MATCHED_MESSAGE", "OFFSET_OVERFLOW_ONE"])
OPTIONAL_INTS = st.one_of(st.none(), INTS)
PACKED = st.integers(0, 4).flatmap(  # count, a column block of three int64s per record, the records
    lambda n: st.tuples(st.just(n), st.binary(min_size=24 * n, max_size=24 * n), st.binary(max_size=64)))
OFFSET_ENTRIES = st.tuples(NAMES, NAMES, COUNTS, st.integers(0, (1 << 63) - 1))
LAGS = st.builds(QueueLag, NAMES, COUNTS, INTS, INTS, INTS, INTS, INTS)
PULLED = st.builds(replies.PulledQueue, COUNTS, GET_STATUSES, INTS, INTS, INTS, st.just(0))  # the last takes the count

STRATEGIES: dict[type[Reply], st.SearchStrategy[Any]] = {
    replies.SendReply: st.builds(replies.SendReply, st.lists(RESULT_MAPS, max_size=4)),
    replies.SendEncodedReply: st.builds(replies.SendEncodedReply, st.binary(max_size=48), STATUSES, NAMES, STATUSES),
    replies.EncodingReply: st.builds(replies.EncodingReply, st.builds(Host, st.sampled_from(["127.0.0.1", "::1"]),
                                                                      st.integers(0, 65535)),
                                     st.booleans(), COUNTS),
    replies.WriterPingReply: st.builds(replies.WriterPingReply, COUNTS, INTS),
    replies.TopicsReply: st.builds(replies.TopicsReply, st.dictionaries(NAMES, COUNTS, max_size=4)),
    replies.CreateTopicReply: st.builds(replies.CreateTopicReply, NAMES, COUNTS),
    replies.DeleteTopicReply: st.builds(replies.DeleteTopicReply, NAMES, st.booleans(), INTS),
    replies.PingReply: st.builds(replies.PingReply, COUNTS),
    replies.StatusReply: st.builds(replies.StatusReply, NAMES, COUNTS, NAMES, INTS, INTS,
                                   st.dictionaries(NAMES, st.one_of(INTS, st.booleans()), max_size=3),
                                   st.dictionaries(NAMES, STATS, max_size=3), st.booleans(),
                                   st.lists(NAMES, max_size=3), st.one_of(st.none(), NAMES), NAMES),
    replies.PromoteReply: st.builds(replies.PromoteReply, st.booleans(), NAMES),
    replies.StopReply: st.builds(replies.StopReply, st.booleans(), COUNTS, NAMES),
    replies.EndTransactionReply: st.builds(replies.EndTransactionReply, NAMES, INTS),
    replies.RegisterProducerReply: st.just(replies.RegisterProducerReply()),
    replies.ResumeCheckReply: st.builds(replies.ResumeCheckReply, INTS, INTS),
    replies.AckPullReply: st.builds(replies.AckPullReply, st.lists(STATS, max_size=3)),
    replies.SettleReply: st.builds(replies.SettleReply, st.lists(NAMES, max_size=4)),
    replies.ReleaseReply: st.builds(replies.ReleaseReply, COUNTS),
    replies.AckStatsReply: st.builds(replies.AckStatsReply, st.lists(QUEUE_STATS, max_size=3).map(tuple)),
    replies.PullReply: st.builds(replies.PullReply, GET_STATUSES, INTS, INTS, INTS, st.lists(STATS, max_size=3),
                                 OPTIONAL_INTS),
    replies.PackedPullReply: st.builds(lambda status, lo, hi, nxt, packed, replied: replies.PackedPullReply(
        status, nxt, lo, hi, *packed, replied), GET_STATUSES, INTS, INTS, INTS, PACKED, OPTIONAL_INTS),
    replies.MessagesReply: st.builds(replies.MessagesReply, st.lists(STATS, max_size=3), OPTIONAL_INTS, OPTIONAL_INTS),
    replies.PackedRecordsReply: st.builds(lambda packed, counts, marks: replies.PackedRecordsReply(
        *packed, counts, *marks), PACKED, st.one_of(st.none(), st.lists(COUNTS, max_size=4)),
        st.one_of(st.just((None, None)), st.tuples(INTS, INTS))),
    replies.OffsetReply: st.builds(replies.OffsetReply, INTS),
    replies.QueueInfoReply: st.builds(replies.QueueInfoReply, st.dictionaries(st.integers(0, 1023),
                                                                              st.tuples(INTS, INTS), max_size=4)),
    replies.GroupsReply: st.builds(replies.GroupsReply, st.dictionaries(NAMES, st.lists(NAMES, max_size=3),
                                                                        max_size=3)),
    replies.GroupDescribeReply: st.builds(replies.GroupDescribeReply, NAMES, st.lists(LAGS, max_size=3).map(tuple)),
    replies.DeleteTopicOffsetsReply: st.builds(replies.DeleteTopicOffsetsReply, st.booleans()),
    replies.GroupActivityReply: st.builds(replies.GroupActivityReply, st.dictionaries(NAMES, INTS, max_size=3), INTS),
    replies.ReaderPingReply: st.builds(replies.ReaderPingReply, COUNTS, COUNTS, COUNTS, INTS, COUNTS),
    replies.OffsetTableReply: st.builds(replies.OffsetTableReply, st.lists(OFFSET_ENTRIES, max_size=3).map(tuple),
                                        INTS, st.lists(st.tuples(NAMES.filter(bool), st.integers(1, 2**63 - 1)),
                                                       max_size=3).map(tuple)),
    replies.MergeOffsetsReply: st.builds(replies.MergeOffsetsReply, INTS, st.lists(OFFSET_ENTRIES, max_size=3)
                                         .map(tuple), INTS),
    replies.AckMarksReply: st.builds(replies.AckMarksReply, st.lists(OFFSET_ENTRIES, max_size=3).map(tuple)),
    replies.MergeAckMarksReply: st.builds(replies.MergeAckMarksReply, INTS, INTS,
                                          st.lists(OFFSET_ENTRIES, max_size=3).map(tuple)),
    replies.PurgeQueuesReply: st.builds(replies.PurgeQueuesReply, st.lists(st.tuples(COUNTS, COUNTS), max_size=3)
                                        .map(tuple), st.lists(st.builds(replies.PurgedQueue, NAMES, COUNTS,
                                                                        st.sampled_from(["offset", "ack"]), INTS,
                                                                        INTS), max_size=3).map(tuple)),
    replies.PersistOffsetsReply: st.builds(replies.PersistOffsetsReply, st.booleans()),
    replies.TopicStatsReply: st.builds(replies.TopicStatsReply, st.dictionaries(
        st.integers(0, 1023), st.tuples(INTS, INTS, INTS), max_size=4)),
    replies.DeleteGroupReply: st.builds(replies.DeleteGroupReply, st.lists(NAMES, max_size=3).map(tuple),
                                        st.lists(st.tuples(NAMES, COUNTS), max_size=3).map(tuple)),
    replies.PullQueuesReply: st.tuples(PACKED, st.lists(PULLED, min_size=1, max_size=3), OPTIONAL_INTS).map(
        lambda t: replies.PullQueuesReply([*t[1][:-1], t[1][-1]._replace(record_count=t[0][0])], *t[0], t[2])),
}
EVERY_REPLY = st.sampled_from(sorted(STRATEGIES, key=lambda c: c.__name__)).flatmap(lambda c: STRATEGIES[c])


def todays_fields(reply: Reply) -> dict[str, Any]:
    """The fields each actor handed ``schema.ok_reply`` before the classes, in its order."""
    match reply:
        case replies.SendReply(results):
            return {"results": results}
        case replies.SendEncodedReply(rows, status, reason, written_status):  # ``encoded.reply_fields``
            return {"results": rows, "status": status, "reason": reason, "written_status": written_status}
        case replies.EncodingReply(host, prop_crc, max_body_bytes):  # ``encoded.encoding_fields``
            return {"store_host": [host.ip, host.port], "prop_crc": prop_crc, "max_body_bytes": max_body_bytes}
        case replies.WriterPingReply(pid, written):
            return {"pid": pid, "written": written}
        case replies.TopicsReply(topics):
            return {"topics": topics}
        case replies.CreateTopicReply(topic, queues):
            return {"topic": topic, "queues": queues}
        case replies.DeleteTopicReply(topic, existed, phys_offset):
            return {"topic": topic, "existed": existed, "phys_offset": phys_offset}
        case replies.PingReply(pid):
            return {"pid": pid}
        case replies.StatusReply():  # ``Supervisor.status``
            r = reply
            return {"store": r.store, "pid": r.pid, "flush_mode": r.flush_mode, "written": r.written,
                    "flushed": r.flushed, "recovery": r.recovery, "actors": r.actors, "ready": r.ready,
                    "waiting_for": r.waiting_for, **({"metrics_url": r.metrics_url} if r.metrics_url is not None
                                                     else {}), "role": r.role}
        case replies.PromoteReply(accepted, reason):
            return {"accepted": accepted, "reason": reason}
        case replies.StopReply(stopping, pid, store):
            return {"stopping": stopping, "pid": pid, "store": store}
        case replies.EndTransactionReply(msg_id, phys_offset):
            return {"msg_id": msg_id, "phys_offset": phys_offset}
        case replies.RegisterProducerReply():
            return {}
        case replies.ResumeCheckReply(queue_offset, phys_offset):
            return {"queue_offset": queue_offset, "phys_offset": phys_offset}
        case replies.AckPullReply(msgs):
            return {"msgs": msgs}
        case replies.SettleReply(results):
            return {"results": results}
        case replies.ReleaseReply(released):
            return {"released": released}
        case replies.AckStatsReply(queues):  # ``AckGroups.op_ack_stats``: the queue's counts after its name
            return {"queues": [{"group": q.group, "topic": q.topic, "queue": q.queue_id, "ready": q.ready,
                                "unacked": q.unacked, "redelivered": q.redelivered, "dead": q.dead} for q in queues]}
        case replies.PullReply(status, next_offset, lo, hi, msgs, replied_us):  # ``ReaderActor._pull_reply``
            return {"status": status, "next": next_offset, "min": lo, "max": hi, "msgs": msgs,
                    **({"replied_us": replied_us} if replied_us is not None else {})}
        case replies.PackedPullReply(status, next_offset, lo, hi, count, cols, records, replied_us):
            return {"status": status, "next": next_offset, "min": lo, "max": hi, "count": count, "cols": cols,
                    "parts": [records], **({"replied_us": replied_us} if replied_us is not None else {})}
        case replies.MessagesReply(msgs, index_ms, index_phys):  # ``ReaderActor._query``, ``_op_view_id``
            return {"msgs": msgs, **marks(index_ms, index_phys)}
        case replies.PackedRecordsReply(count, cols, records, counts, index_ms, index_phys):
            return {"count": count, "cols": cols, "parts": [records],
                    **({"counts": counts} if counts is not None else {}), **marks(index_ms, index_phys)}
        case replies.OffsetReply(offset):
            return {"offset": offset}
        case replies.QueueInfoReply(queues):
            return {"queues": {str(q): [lo, hi] for q, (lo, hi) in queues.items()}}
        case replies.GroupsReply(groups):
            return {"groups": groups}
        case replies.GroupDescribeReply(group, lags):  # ``lag_to_wire``: the names the wire always had
            return {"group": group, "queues": [{"topic": q.topic, "queue": q.queue_id,
                                                "committed_offset": q.committed_offset,
                                                "min_offset": q.min_queue_offset, "max_offset": q.max_queue_offset,
                                                "lag": q.lag, "last_consume_ms": q.last_consume_ms} for q in lags]}
        case replies.DeleteTopicOffsetsReply(deleted):
            return {"deleted": deleted}
        case replies.GroupActivityReply(groups, now_ms):
            return {"groups": groups, "now_ms": now_ms}
        case replies.OffsetTableReply(entries, counter, deleted):  # ``CommittedOffsets.op_offset_table``
            return {"entries": [list(e) for e in entries], "counter": counter, "deleted": [list(d) for d in deleted]}
        case replies.MergeOffsetsReply(moved, clamped, groups_deleted):
            return {"moved": moved, "clamped": [list(e) for e in clamped], "groups_deleted": groups_deleted}
        case replies.AckMarksReply(ack_marks):  # ``AckGroups.op_ack_marks``: group, topic, queue, acked_below
            return {"marks": [list(m) for m in ack_marks]}
        case replies.MergeAckMarksReply(moved, acked, clamped):  # ``AckGroups.op_merge_ack_marks``
            return {"moved": moved, "acked": acked, "clamped": [list(m) for m in clamped]}
        case replies.PurgeQueuesReply(floors, purged):  # ``QueuePurges.op_purge_queues``
            return {"floors": [list(f) for f in floors],
                    "purged": [[p.group, p.queue_id, p.mode, p.purged, p.kept] for p in purged]}
        case replies.PersistOffsetsReply(persisted):
            return {"persisted": persisted}
        case replies.ReaderPingReply(pid, index, readers, readable_end, parked):
            return {"pid": pid, "index": index, "readers": readers, "readable_end": readable_end, "parked": parked}
        case replies.TopicStatsReply(queues):  # ``Administration.op_topic_stats``: [min, max, bytes]
            return {"queues": {str(q): list(span) for q, span in queues.items()}}
        case replies.DeleteGroupReply(offsets, ack_queues):  # ``Administration.op_delete_group``
            return {"offsets": list(offsets), "ack_queues": [list(q) for q in ack_queues]}
        case replies.PullQueuesReply(queues, count, cols, records, replied_us):  # ``SpanPulls._reply``
            return {"queues": [list(q) for q in queues], "count": count, "cols": cols, "parts": [records],
                    **({"replied_us": replied_us} if replied_us is not None else {})}
    raise AssertionError(f"no map of today for {reply!r}")


def marks(index_ms: int | None, index_phys: int | None) -> dict[str, int]:
    """The index's marks as the reader added them: both, after the rest, when the store has an index."""
    return {k: v for k, v in (("index_ms", index_ms), ("index_phys", index_phys)) if v is not None}


def frames(message: dict[str, Any]) -> list[bytes | memoryview]:
    """What the reader sends of a map: its ``parts`` (the records) as frames after it (``ReaderActor._send``)."""
    parts = message.pop("parts", ())
    return schema.pack_message(message, parts)


def test_every_reply_class_has_a_strategy() -> None:
    exported = {getattr(replies, name) for name in replies.__all__}
    assert {c for c in exported if isinstance(c, type) and issubclass(c, Reply) and c is not Reply} == set(STRATEGIES)


@given(EVERY_REPLY, IDS)
def test_every_reply_encodes_to_todays_bytes_and_decodes_back(reply: Reply, request_id: Any) -> None:
    sent = frames(reply.encode(request_id))
    assert sent == frames(schema.ok_reply(request_id, **todays_fields(reply)))
    message = schema.unpack_message(sent[0], sent[1:])
    assert message["id"] == request_id and message["ok"] is True
    assert type(reply).decode(message) == reply


@pytest.mark.parametrize("status", ["FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"])
def test_a_send_stored_with_a_failed_wait_says_so_only_where_it_was_ok(status: str) -> None:
    sent = replies.SendReply([{"status": "PUT_OK", "queue": 1}, {"status": "MESSAGE_ILLEGAL", "reason": "r"}])
    assert sent.stored_as(status).results == [{"status": status, "queue": 1},
                                              {"status": "MESSAGE_ILLEGAL", "reason": "r"}]
    assert sent.results[0]["status"] == "PUT_OK"  # the reply held is not changed under its holder
    encoded = replies.SendEncodedReply(b"", "SERVICE_NOT_AVAILABLE", "full")
    assert encoded.stored_as(status) == replies.SendEncodedReply(b"", "SERVICE_NOT_AVAILABLE", "full", status)


def test_an_ack_queues_stats_name_its_queue_queue_id_here_and_queue_on_the_wire() -> None:
    stats = replies.AckQueueStats("g", "T", 3, 1, 2, 0, 0)
    assert stats.queue_id == 3 and stats.wire()["queue"] == 3 and "queue_id" not in stats.wire()


@pytest.mark.parametrize(("cls", "fields", "named"), [
    (replies.SendReply, {"results": {"status": "PUT_OK"}}, "field 'results' must be a list of send result maps"),
    (replies.SendReply, {"results": [1]}, "field 'results' must be a list"),
    (replies.SendEncodedReply, {"results": b"", "status": "PUT_OK", "reason": ""}, "missing field 'written_status'"),
    (replies.SendEncodedReply, {"results": "", "status": "PUT_OK", "reason": "", "written_status": "PUT_OK"},
     "field 'results' must be bytes, got str"),
    (replies.EncodingReply, {"store_host": ["h"], "prop_crc": True, "max_body_bytes": 1}, "field 'store_host'"),
    (replies.EncodingReply, {"store_host": ["h", 1], "prop_crc": 1, "max_body_bytes": 1}, "field 'prop_crc'"),
    (replies.TopicsReply, {"topics": {"T": True}}, "field 'topics' must map names to int"),
    (replies.CreateTopicReply, {"topic": "T", "queues": True}, "field 'queues' must be int, got a boolean"),
    (replies.DeleteTopicReply, {"topic": "T", "existed": True}, "missing field 'phys_offset'"),
    (replies.StatusReply, {"store": "s", "pid": 1, "flush_mode": "m", "written": 0, "flushed": 0, "recovery": {},
                           "actors": {"writer": 1}, "ready": True, "waiting_for": []}, "field 'actors' must map"),
    (replies.StopReply, {"stopping": True, "pid": "1", "store": "s"}, "field 'pid' must be int, got str"),
    (replies.SettleReply, {"results": ["OK", 1]}, "field 'results' must hold strings"),
    (replies.AckStatsReply, {"queues": [{"group": "g", "topic": "T", "queue": 0, "ready": 0, "unacked": 0,
                                         "redelivered": 0}]}, "missing field 'dead'"),
    (replies.AckPullReply, {}, "field 'msgs'"),
    (replies.PullReply, {"status": "FOUND", "next": "1", "min": 0, "max": 0, "msgs": []}, "field 'next' must be int"),
    (replies.PullReply, {"status": "FOUND", "next": 1, "min": 0, "max": 0}, "field 'msgs'"),
    (replies.PackedPullReply, {"status": "FOUND", "next": 1, "min": 0, "max": True, "count": 0, "cols": b""},
     "field 'max' must be int, got a boolean"),
    (replies.PackedPullReply, {"status": "FOUND", "next": 1, "min": 0, "max": 0, "count": 1, "cols": b""},
     "one part, its records"),
    (replies.MessagesReply, {"msgs": [], "index_ms": "0"}, "field 'index_ms' must be int"),
    (replies.PackedRecordsReply, {"count": 0, "cols": b"", "counts": [-1]}, "field 'counts'"),
    (replies.OffsetReply, {}, "missing field 'offset'"),
    (replies.QueueInfoReply, {"queues": {"0": [1]}}, "field 'queues' must map queue ids to \\[min, max\\]"),
    (replies.QueueInfoReply, {"queues": {"q": [0, 1]}}, "field 'queues' must map queue ids"),
    (replies.GroupsReply, {"groups": {"g": [1]}}, "field 'groups' must map groups to lists of topics"),
    (replies.GroupDescribeReply, {"group": "g", "queues": [{"topic": "T"}]}, "field 'queues'"),
    (replies.DeleteTopicOffsetsReply, {"deleted": 1}, "field 'deleted' must be bool"),
    (replies.GroupActivityReply, {"groups": {"g": 1}}, "missing field 'now_ms'"),
    (replies.ReaderPingReply, {"pid": 1, "index": 0, "readers": 1, "readable_end": 0}, "missing field 'parked'"),
])
def test_a_bad_field_is_refused_by_name(cls: type[Reply], fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ReplyError, match=named):
        cls.decode(schema.unpack(schema.pack(schema.ok_reply(1, **fields))))
