"""MessageStore end to end on real files: RocketMQ's DefaultMessageStoreTest scenarios and more."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mqstore.engine import (
    Geometry,
    GeometryError,
    GetStatus,
    Host,
    Message,
    MessageStore,
    PutStatus,
    StoreConfig,
    StoreLockedError,
)
from mqstore.engine.java.jhash import java_hash
from mqstore.engine.meta.metafile import abort_exists
from tests.conftest import TINY, FakeClock

OpenStore = Callable[..., MessageStore]


def _msgs(n: int, topic: str = "Orders", **kw: object) -> list[Message]:
    return [
        Message(
            topic, f"body-{i}".encode() * 5, tags="TagA" if i % 2 == 0 else "TagB", keys=(f"key-{i}",), **kw
        )
        for i in range(n)
    ]  # type: ignore[arg-type]


def test_write_and_read_ipv4_and_ipv6_hosts(open_store: OpenStore) -> None:
    """DefaultMessageStoreTest.testWriteAndRead: every message readable at its queue offset."""
    store = open_store()
    v6 = Host("::1", 10911)
    results = store.put_batch(_msgs(10) + _msgs(10, born_host=v6))
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert [r.queue_offset for r in results] == list(range(20))
    for r in results:
        got = store.get("Orders", 0, r.queue_offset, max_count=1)
        assert got.status is GetStatus.FOUND
        assert got.messages[0].phys_offset == r.phys_offset
        assert got.messages[0].msg_id == r.msg_id
    assert store.get("Orders", 0, 15, max_count=1).messages[0].born_host == v6


def test_messages_carry_every_field(open_store: OpenStore, clock: FakeClock) -> None:
    store = open_store()
    r = store.put(
        Message(
            "Orders",
            b"payload",
            tags="TagA",
            keys=["a", "b"],
            properties={"k": "v"},
            flag=7,
            reconsume_times=2,
        ),
        queue_id=3,
    )
    m = store.get("Orders", 3, 0).messages[0]
    assert (m.topic, m.queue_id, m.queue_offset, m.phys_offset, m.flag) == ("Orders", 3, 0, r.phys_offset, 7)
    assert (m.tags, m.keys, m.properties["k"], m.body, m.reconsume_times) == (
        "TagA",
        ["a", "b"],
        "v",
        b"payload",
        2,
    )
    assert m.store_ms == m.born_ms == clock.now
    assert m.uniq_key == r.uniq_key and m.msg_id == r.msg_id
    assert "__CRC32#" not in m.properties  # the whole-record CRC is verified, not handed out


def test_look_message_by_offset_bounds(open_store: OpenStore) -> None:
    """testLookMessageByOffset_*: first and last found; past the end is None."""
    store = open_store()
    results = store.put_batch(_msgs(40))
    assert store.view_by_id(results[0].msg_id).body == b"body-0" * 5  # type: ignore[union-attr]
    assert store.view_by_id(results[-1].msg_id).queue_offset == 39  # type: ignore[union-attr]
    beyond = results[-1].msg_id[:16] + f"{store.commitlog.max_offset + 10:016X}"
    assert store.view_by_id(beyond) is None


def test_properties_too_long_refused(open_store: OpenStore) -> None:
    """testPutMessage_whenMessagePropertyIsTooLong: 32 KiB of properties refused, nothing queued."""
    store = open_store(config=StoreConfig(geometry=Geometry(commitlog_file_size=1 << 20)))
    r = store.put(Message("Orders", b"x", properties={"p": "v" * 32768}))
    assert r.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.max_queue_offset("Orders", 0) == 0
    assert store.put(Message("Orders", b"x", properties={"p": "v" * 100})).status is PutStatus.PUT_OK
    assert store.max_queue_offset("Orders", 0) == 1


@pytest.mark.parametrize(
    "message, reason",
    [
        (Message("bad topic", b"x"), "characters"),
        (Message("T" * 128, b"x"), "longer"),
        (Message("", b"x"), "empty"),
        (Message("Orders", b"x" * 4097), "limit"),
        (Message("Orders", b"x", properties={"a\x01": "b"}), "property"),
        (Message("Orders", b"x", keys=["has space"]), "space"),
    ],
)
def test_illegal_messages_refused_with_reason(open_store: OpenStore, message: Message, reason: str) -> None:
    """testPutMsgExceedsMaxLength and RocketMQ's topic rule: a status and a reason, nothing written."""
    store = open_store(config=StoreConfig(geometry=TINY, max_body_bytes=4096))
    before = store.commitlog.max_offset
    r = store.put(message)
    assert r.status is PutStatus.MESSAGE_ILLEGAL and reason in r.reason
    assert store.commitlog.max_offset == before
    assert store.put(Message("Orders", b"fine")).ok


def test_batch_with_one_bad_message_keeps_the_rest(open_store: OpenStore) -> None:
    store = open_store()
    results = store.put_batch([Message("Orders", b"a"), Message("bad topic", b"b"), Message("Orders", b"c")])
    assert [r.status for r in results] == [PutStatus.PUT_OK, PutStatus.MESSAGE_ILLEGAL, PutStatus.PUT_OK]
    assert [r.queue_offset for r in results if r.ok] == [0, 1]


def test_pull_size_limits(open_store: OpenStore) -> None:
    """testPullSize: 32 messages; max 32, 20, 10 give as many."""
    store = open_store()
    store.put_batch(_msgs(32))
    for n in (32, 20, 10):
        got = store.get("Orders", 0, 0, max_count=n)
        assert len(got.messages) == n and got.next_queue_offset == n


def test_get_status_rules(open_store: OpenStore) -> None:
    store = open_store()
    assert store.get("Nope", 0, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    store.put_batch(_msgs(5))
    assert store.get("Orders", 0, 5).status is GetStatus.OFFSET_OVERFLOW_ONE
    badly = store.get("Orders", 0, 9)
    assert badly.status is GetStatus.OFFSET_OVERFLOW_BADLY and badly.next_queue_offset == 5
    ok = store.get("Orders", 0, 2, max_count=10)
    assert ok.status is GetStatus.FOUND and [m.queue_offset for m in ok.messages] == [2, 3, 4]
    assert (ok.min_queue_offset, ok.max_queue_offset, ok.next_queue_offset) == (0, 5, 5)


def test_tag_filter_and_collision(open_store: OpenStore) -> None:
    """Tags filter on the consume queue's hash, then on the tag itself: 'Aa' and 'BB' collide."""
    assert java_hash("Aa") == java_hash("BB")
    store = open_store()
    store.put_batch(
        [
            Message("Orders", b"1", tags="Aa"),
            Message("Orders", b"2", tags="BB"),
            Message("Orders", b"3", tags="C"),
        ]
    )
    got = store.get("Orders", 0, 0, tags="BB")
    assert [m.body for m in got.messages] == [b"2"] and got.next_queue_offset == 3
    assert [m.body for m in store.get("Orders", 0, 0, tags="Aa || C").messages] == [b"1", b"3"]
    none = store.get("Orders", 0, 0, tags="Z")
    assert none.status is GetStatus.NO_MATCHED_MESSAGE and none.next_queue_offset == 3


def test_query_by_key_uniq_key_and_time(open_store: OpenStore, clock: FakeClock) -> None:
    store = open_store()
    first = store.put(Message("Orders", b"a", keys=["order-1"]))
    clock.advance(5000)
    store.put(Message("Orders", b"b", keys=["order-1", "order-2"]))
    store.put(Message("Other", b"c", keys=["order-1"]))
    assert [m.body for m in store.query_by_key("Orders", "order-1")] == [b"a", b"b"]
    assert [m.body for m in store.query_by_key("Orders", "order-1", begin_ms=clock.now - 1000)] == [b"b"]
    assert [m.body for m in store.query_by_key("Other", "order-1")] == [b"c"]
    assert [m.body for m in store.query_by_uniq_key("Orders", first.uniq_key or "")] == [b"a"]
    assert store.query_by_key("Orders", "missing") == []


def test_index_collision_does_not_return_other_key(open_store: OpenStore) -> None:
    """'Orders#Aa' and 'Orders#BB' share a hash and a slot; a lookup returns only its own key."""
    store = open_store()
    store.put_batch([Message("Orders", b"aa", keys=["Aa"]), Message("Orders", b"bb", keys=["BB"])])
    assert [m.body for m in store.query_by_key("Orders", "Aa")] == [b"aa"]
    assert [m.body for m in store.query_by_key("Orders", "BB")] == [b"bb"]


def test_colliding_newer_key_took_the_only_place_of_a_max_count_1_query(open_store: OpenStore) -> None:
    """A query for one message of 'Aa' asked the index for one candidate, got the newer 'BB' (same
    hash, same slot), filtered it out and answered nothing: 27 of 20,000 lookups of a benchmark
    came back empty that way. Dropped candidates are now made up by asking the index for more."""
    store = open_store()
    store.put_batch([Message("Orders", b"aa", keys=["Aa"]), Message("Orders", b"bb", keys=["BB"]),
                     Message("Orders", b"bb2", keys=["BB"])])
    assert [m.body for m in store.query_by_key("Orders", "Aa", max_count=1)] == [b"aa"]
    assert [m.body for m in store.query_by_key("Orders", "BB", max_count=1)] == [b"bb2"]  # the newest
    assert [m.body for m in store.query_by_key("Orders", "BB", max_count=2)] == [b"bb", b"bb2"]


COLLIDING = ("AaAa", "BBAa", "BBBB")  # String.hashCode alike, and alike "AaBB"'s


def test_query_by_key_misses_messages_when_keys_collide(open_store: OpenStore) -> None:
    """3,000 messages, 143 under four keys of one hash, 33 of them 'AaBB': the index handed out at
    most 64 candidates a query, the colliding keys took the places, and the 'ask for more' loop
    stopped because fewer came back than it asked for: 14 of the 33 here, 9 in the issue's store."""
    store = open_store()
    keys = [f"k{i}" for i in range(3000)]
    for j in range(143):
        keys[j * 21] = "AaBB" if j % 13 in (0, 4, 8) else COLLIDING[j % 3]
    for start in range(0, 3000, 100):
        assert all(r.ok for r in store.put_batch([Message("Orders", f"m{i}".encode(), keys=[keys[i]])
                                                  for i in range(start, start + 100)]))
    wanted = [f"m{i}".encode() for i, key in enumerate(keys) if key == "AaBB"]
    assert len(wanted) == 33
    assert [m.body for m in store.query_by_key("Orders", "AaBB", max_count=1000)] == wanted
    assert [m.body for m in store.query_by_key("Orders", "AaBB", max_count=5)] == wanted[-5:]
    for key in COLLIDING:
        assert [m.body for m in store.query_by_key("Orders", key, max_count=1000)] == [
            f"m{i}".encode() for i, k in enumerate(keys) if k == key]


def test_queue_offset_by_time(open_store: OpenStore, clock: FakeClock) -> None:
    """testGetOffsetInQueueByTime: exact and slightly earlier timestamps find the entry."""
    store = open_store()
    stamps = []
    for i in range(10):
        clock.advance(10)
        stamps.append(clock.now)
        store.put(Message("Orders", f"{i}".encode()))
    for i, ts in enumerate(stamps):
        assert store.queue_offset_by_time("Orders", 0, ts) == i
        assert store.queue_offset_by_time("Orders", 0, ts - 2) == i
    assert store.queue_offset_by_time("Orders", 0, 0) == 0
    assert store.queue_offset_by_time("Orders", 0, stamps[-1] + 1) == 10
    assert store.queue_offset_by_time("Missing", 0, stamps[0]) == 0


def test_many_files_and_restart_in_the_middle(open_store: OpenStore, tmp_path: Path) -> None:
    """Several commitlog, consume-queue and index files; close half way, reopen, go on."""
    store = open_store()
    first = store.put_batch(_msgs(60), queue_id=[i % 3 for i in range(60)])
    store.close()
    store = open_store()
    assert not store.recovery.abnormal and store.recovery.truncated_bytes == 0
    second = store.put_batch(_msgs(60, topic="Payments"))
    assert len(store.commitlog.queue.files) > 3
    assert len(list((tmp_path / "store" / "consumequeue" / "Payments" / "0").iterdir())) > 3
    assert len(store.index.files) > 2  # type: ignore[union-attr]
    for r in first + second:
        topic = "Orders" if r in first else "Payments"
        got = store.get(topic, r.queue_id, r.queue_offset, max_count=1)
        assert got.messages[0].phys_offset == r.phys_offset
    assert [m.body for m in store.query_by_key("Orders", "key-59")] == [b"body-59" * 5]
    assert [m.body for m in store.query_by_key("Payments", "key-0")] == [b"body-0" * 5]


def test_put_batch_split_across_files_keeps_order(open_store: OpenStore) -> None:
    store = open_store()
    results = store.put_batch([Message("Orders", bytes([i]) * 500) for i in range(40)])
    phys = [r.phys_offset for r in results]
    assert phys == sorted(phys) and len({p // TINY.commitlog_file_size for p in phys}) > 1
    assert [m.body[0] for m in store.get("Orders", 0, 0, max_count=40, max_bytes=1 << 20).messages][
        :32
    ] == list(range(32))


def test_abort_file_and_abnormal_recovery(tmp_path: Path, open_store: OpenStore) -> None:
    store = open_store()
    assert abort_exists(tmp_path / "store")
    store.put_batch(_msgs(20))
    store.flush()
    store.close()
    assert not abort_exists(tmp_path / "store")
    store = open_store()
    store.put_batch(_msgs(5))
    # a crash: the process dies without close; the abort file stays behind
    store.flush()
    store.commitlog.close()
    store.queues.close()
    store.index.close()  # type: ignore[union-attr]
    import os

    os.close(store._lock_fd)
    store._lock_fd = -1
    reopened = open_store()
    assert reopened.recovery.abnormal
    assert reopened.max_queue_offset("Orders", 0) == 25
    assert len(reopened.query_by_key("Orders", "key-3")) == 2


def test_second_writer_is_refused(open_store: OpenStore) -> None:
    open_store()
    with pytest.raises(StoreLockedError):
        open_store()


def test_reopen_with_another_geometry_is_an_error(open_store: OpenStore, tmp_path: Path) -> None:
    open_store().close()
    with pytest.raises(GeometryError, match="commitlog_file_size"):
        open_store(config=StoreConfig(geometry=Geometry(commitlog_file_size=16384)))


def test_open_without_config_reads_geometry_from_disk(
    open_store: OpenStore, tmp_path: Path, clock: FakeClock
) -> None:
    open_store().put(Message("Orders", b"x"))
    for s in list(vars(open_store).get("opened", [])):
        s.close()
    store = MessageStore.open(tmp_path / "other", StoreConfig(geometry=TINY), now_ms=clock)
    store.close()
    store = MessageStore.open(tmp_path / "other", now_ms=clock)
    assert store.config.geometry == TINY
    store.close()


def test_consumer_offsets_survive_restart(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store()
    store.commit_offset("G1", "Orders", 0, 12)
    store.commit_offset("G1", "Orders", 1, 7)
    assert store.query_offset("G1", "Orders", 2) == -1
    store.close()
    store = open_store()
    assert (store.query_offset("G1", "Orders", 0), store.query_offset("G1", "Orders", 1)) == (12, 7)
    assert (tmp_path / "store" / "config" / "consumerOffset.json").exists()


def test_prepared_transaction_gets_no_queue_offset(open_store: OpenStore) -> None:
    """Regression: a prepared or rolled-back transaction record once took a queue offset that no
    consume-queue entry filled, and the next message on the queue broke the dispatcher."""
    store = open_store()
    store.put(Message("Orders", b"a"))
    prepared = store.put(Message("Orders", b"half", sys_flag=0x4))
    rolled_back = store.put(Message("Orders", b"gone", sys_flag=0xC))
    after = store.put(Message("Orders", b"b"))
    assert (prepared.queue_offset, rolled_back.queue_offset, after.queue_offset) == (0, 0, 1)
    assert [m.body for m in store.get("Orders", 0, 0).messages] == [b"a", b"b"]
    assert store.view_by_id(prepared.msg_id).body == b"half"  # type: ignore[union-attr]
