"""The reader as a real process over a store built by engine.MessageStore: pulls, queries, offsets,
long polling (the test plays the consume-queue builder on ``arrived``), and hostile frames."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import multiprocess
import pytest
import zmq

from mqstore.actors.config import BrokerConfig, load_config
from mqstore.actors.process import run_actor
from mqstore.engine import Geometry, Message, MessageStore, PutResult, StoreConfig
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, decode_offset_file
from mqstore.engine.meta.topics import TopicTable
from mqstore.ipc.client.api import Admin, BrokerError, Consumer, Producer, ReceivedMessage
from mqstore.ipc.wire import schema
from tests.integration.broker import wait_for

GEOMETRY = Geometry(commitlog_file_size=8192 * 8, cq_entries_per_file=64, index_slot_count=64,
                    index_entry_count=256)
START_S = 30.0
REPLY_S = 5.0
TOPIC = "TopicA"
BODY_BYTES = 500
FIRST_MS = 1_700_000_000_000


class StepClock:
    """Store times 10 ms apart, so searches by time have distinct answers."""

    def __init__(self) -> None:
        self.now_ms = FIRST_MS

    def __call__(self) -> int:
        self.now_ms += 10
        return self.now_ms


@dataclass
class Broker:
    """One store, the reader processes started on it, and the sockets the test plays the other
    actors with: the supervisor's events PULL and the consume-queue builder's ``arrived`` PUB."""

    store_dir: Path
    config: BrokerConfig
    ctx: zmq.Context[Any]
    arrived_out: zmq.Socket[Any] | None
    processes: dict[str, Any]

    def reader(self, index: int) -> Any:
        return self.processes[f"reader-{index}"]

    def request(self, message: dict[str, Any] | bytes | list[bytes], reader: int = 0,
                timeout_s: float = REPLY_S) -> dict[str, Any]:
        """One raw request on a fresh DEALER; the decoded reply."""
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self.config.endpoints.reader(reader))
        try:
            if isinstance(message, list):
                sock.send_multipart(message)
            else:
                sock.send(message if isinstance(message, bytes) else schema.pack(message))
            assert sock.poll(int(timeout_s * 1000)), f"no reply to {message!r}"
            frame, *parts = sock.recv_multipart()  # a packed reply's parts follow its map
            return schema.unpack_message(frame, parts)
        finally:
            sock.close()

    def call(self, op: str, reader: int = 0, **fields: Any) -> dict[str, Any]:
        return self.request(schema.request(op, 1, **fields), reader)

    def announce(self, results: list[PutResult], applied: int) -> None:
        """What the consume-queue builder publishes after applying ``results``."""
        assert self.arrived_out is not None
        queues: dict[tuple[str, int], int] = {}
        for r in results:
            queues[(TOPIC, r.queue_id)] = max(queues.get((TOPIC, r.queue_id), 0), r.queue_offset + 1)
        self.arrived_out.send_multipart([schema.ARRIVED, schema.pack({
            "v": 1, "queues": [[t, q, m] for (t, q), m in queues.items()], "applied": applied, "store_ms": 0})])


def put_messages(store: MessageStore, count: int, queue_id: int, first: int = 0) -> list[PutResult]:
    results = []
    for i in range(first, first + count):
        message = Message(TOPIC, bytes([i % 251]) * BODY_BYTES, tags="TagA" if i % 2 == 0 else "TagB",
                          keys=(f"key-{queue_id}-{i}", "shared"), properties={"n": str(i)})
        result = store.put(message, queue_id)
        assert result.ok, result
        results.append(result)
    return results


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """Start ``readers`` reader processes on the store at tmp_path/store (built before), and the
    ``others`` actors; without a real consume-queue builder among them, the test plays it."""
    run_dir = tempfile.mkdtemp(prefix="mq", dir="/tmp")  # ipc socket paths must stay short
    os.chmod(run_dir, 0o700)
    ctx: zmq.Context[Any] = zmq.Context()
    started: list[Broker] = []

    def start(readers: int = 1, others: tuple[str, ...] = (), **broker: Any) -> Broker:
        config = load_config(tmp_path / "store", None, ipc={"run_dir": run_dir},
                             store={"geometry": asdict(GEOMETRY)},
                             broker={"readers": readers, "offset_persist_interval_ms": 200, **broker})
        config.endpoints.prepare()
        events_in = ctx.socket(zmq.PULL)  # the supervisor's side: reports must go somewhere
        events_in.setsockopt(zmq.LINGER, 0)
        events_in.bind(config.endpoints.events)
        arrived_out = None
        if "cqbuilder" not in others:
            arrived_out = ctx.socket(zmq.XPUB)
            arrived_out.setsockopt(zmq.LINGER, 0)
            arrived_out.setsockopt(zmq.XPUB_VERBOSE, 1)  # hear every reader's subscription, not the first only
            arrived_out.bind(config.endpoints.arrived)
        spawn = multiprocess.get_context("spawn")
        processes = {}
        for name in (*others, *(f"reader-{i}" for i in range(readers))):
            process = spawn.Process(target=run_actor, args=(name, config.to_dict()), daemon=True)
            process.start()
            processes[name] = process
        broker = Broker(tmp_path / "store", config, ctx, arrived_out, processes)
        started.append(broker)
        for index in range(readers):
            if arrived_out is not None:  # subscribed, so no notice of the test's gets lost
                assert arrived_out.poll(int(START_S * 1000)), "a reader never subscribed to arrived"
                assert arrived_out.recv() == b"\x01" + schema.ARRIVED
            # a request sent before the reader binds waits in the socket until it does
            assert broker.request(schema.request("ping", 1), index, timeout_s=START_S)["ok"]
        return broker

    yield start
    for broker in started:
        for process in broker.processes.values():
            if process.is_alive():
                process.terminate()
            process.join(10)
    ctx.destroy(linger=0)
    shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture
def built(tmp_path: Path) -> dict[int, list[PutResult]]:
    """150 messages in queue 0 (two consume-queue files, a commitlog roll, an index roll), 20 in
    queue 1; topics.json says the topic has 4 queues."""
    with MessageStore.open(tmp_path / "store", StoreConfig(geometry=GEOMETRY), now_ms=StepClock()) as store:
        results = {0: put_messages(store, 150, 0), 1: put_messages(store, 20, 1)}
    TopicTable.load(tmp_path / "store", lambda: FIRST_MS).create(TOPIC, 4)
    return results


def pull(broker: Broker, queue_id: int, offset: int, **fields: Any) -> dict[str, Any]:
    reply = broker.call("pull", group="g", topic=TOPIC, queue=queue_id, offset=offset, **fields)
    assert reply["ok"], reply
    return reply


def test_pull_by_offset_with_a_tag_filter(built: dict[int, list[PutResult]], start_broker: Callable[..., Broker]
                                          ) -> None:
    broker = start_broker()
    offset, seen = 0, []
    while True:
        reply = pull(broker, 0, offset, max=32, tags="TagA")
        if reply["status"] == "OFFSET_OVERFLOW_ONE":
            break
        assert reply["status"] == "FOUND" and reply["min"] == 0 and reply["max"] == 150
        seen.extend(reply["msgs"])
        assert reply["next"] > offset
        offset = reply["next"]
    assert [m["queue_offset"] for m in seen] == list(range(0, 150, 2))
    first = ReceivedMessage.from_wire(seen[1])
    put = built[0][2]
    assert (first.msg_id, first.uniq_key, first.phys_offset, first.queue_id) == (put.msg_id, put.uniq_key,
                                                                               put.phys_offset, 0)
    assert first.tags == "TagA" and first.keys == ("key-0-2", "shared") and first.properties["n"] == "2"
    assert first.body == bytes([2]) * BODY_BYTES and first.store_host == ("127.0.0.1", 10911)
    assert first.store_ms > FIRST_MS and first.born_host[1] == 10911


def test_pull_limits_and_statuses(built: dict[int, list[PutResult]], start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    across = pull(broker, 0, 60, max=10)  # crosses from the first consume-queue file into the second
    assert [m["queue_offset"] for m in across["msgs"]] == list(range(60, 70)) and across["next"] == 70
    assert len(pull(broker, 0, 0, max=1000)["msgs"]) == 32  # the transfer limit caps a big ask
    small = pull(broker, 0, 0, max=32, max_bytes=1)
    assert len(small["msgs"]) == 1  # the first message always goes, whatever its size
    assert pull(broker, 1, 20)["status"] == "OFFSET_OVERFLOW_ONE"
    assert pull(broker, 1, 25)["status"] == "OFFSET_OVERFLOW_BADLY"
    assert pull(broker, 3, 0)["status"] == "NO_MATCHED_LOGIC_QUEUE"
    assert pull(broker, 1, 0, tags="TagC")["status"] == "NO_MATCHED_MESSAGE"


def test_pulls_by_bytes_pass_the_rocketmq_caps(built: dict[int, list[PutResult]],
                                               start_broker: Callable[..., Broker]) -> None:
    """An ipc consumer's pull (by_bytes) is capped by [broker] fetch_max_*, not by RocketMQ's 32."""
    broker = start_broker()
    whole = pull(broker, 0, 0, max=4096, max_bytes=1 << 20, by_bytes=True, raw=True)
    assert whole["count"] == 150 and whole["next"] == 150
    sized = pull(broker, 0, 0, max=4096, max_bytes=10_000, by_bytes=True, raw=True)
    record_bytes = len(whole["parts"][0]) // 150
    assert sized["count"] == 10_000 // record_bytes and len(sized["parts"][0]) <= 10_000
    assert pull(broker, 0, 0, max=1000, max_bytes=1 << 20, raw=True)["count"] == 32  # without by_bytes
    refused = broker.call("pull", group="g", topic=TOPIC, queue=0, offset=0, max=4096)
    assert not refused["ok"] and refused["status"] == "BAD_REQUEST"  # over RocketMQ's 1,024 a pull


def test_queries_by_key_uniq_key_and_id(built: dict[int, list[PutResult]], start_broker: Callable[..., Broker]
                                        ) -> None:
    broker = start_broker()
    with Admin(endpoints=broker.config.endpoints) as admin:
        found = admin.query_by_key(TOPIC, "key-1-7")
        assert [(m.queue_id, m.queue_offset) for m in found] == [(1, 7)]
        assert len(admin.query_by_key(TOPIC, "shared", max_count=1000)) == 64  # max_query_count
        assert admin.query_by_key("OtherTopic", "key-1-7") == []
        target = built[0][140]  # indexed in the second index file
        by_uniq = admin.query_by_uniq_key(TOPIC, str(target.uniq_key))
        assert [m.phys_offset for m in by_uniq] == [target.phys_offset]
        viewed = admin.view_by_id(target.msg_id)
        assert viewed is not None and viewed.queue_offset == 140 and viewed.uniq_key == target.uniq_key
        bogus = target.msg_id[:-4] + "0001"  # a real-looking id pointing into a record's middle
        assert admin.view_by_id(bogus) is None
        with pytest.raises(BrokerError) as caught:
            admin.view_by_id("not-hex")
        assert caught.value.status == schema.BAD_REQUEST


def test_queue_info_and_offset_by_time(built: dict[int, list[PutResult]], start_broker: Callable[..., Broker]
                                       ) -> None:
    broker = start_broker()
    with Admin(endpoints=broker.config.endpoints) as admin:
        assert admin.queue_info(TOPIC) == {0: (0, 150), 1: (0, 20), 2: (0, 0), 3: (0, 0)}
        viewed = admin.view_by_id(built[0][50].msg_id)
        assert viewed is not None
        assert admin.offset_by_time(TOPIC, 0, viewed.store_ms) == 50
        assert admin.offset_by_time(TOPIC, 0, viewed.store_ms - 1, upper=True) == 49
        assert admin.offset_by_time(TOPIC, 0, 0) == 0
        assert admin.offset_by_time(TOPIC, 0, 1 << 62) == 150


def test_consumer_reads_every_queue_in_order(built: dict[int, list[PutResult]],
                                             start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    with Consumer(endpoints=broker.config.endpoints, group="reporting", topic=TOPIC, tags="TagB",
                  start="earliest", long_poll_ms=200) as consumer:
        assert consumer.queues == [0, 1, 2, 3]
        got = consumer.messages(85, timeout_ms=10_000)
        assert [m.queue_offset for m in got if m.queue_id == 0] == list(range(1, 150, 2))
        assert [m.queue_offset for m in got if m.queue_id == 1] == list(range(1, 20, 2))
        assert consumer.poll(timeout_ms=300) == []
        assert consumer.position(0) == 150 and consumer.position(1) == 20
    with Admin(endpoints=broker.config.endpoints) as admin:  # close committed the positions
        assert admin.fetch_offset("reporting", TOPIC, 0) == 150


def test_offsets_are_owned_by_reader_0_and_persisted_on_stop(built: dict[int, list[PutResult]],
                                                             start_broker: Callable[..., Broker]) -> None:
    broker = start_broker(readers=2)
    assert broker.call("fetch_offset", group="g1", topic=TOPIC, queue=0)["offset"] == -1
    assert broker.call("commit_offset", group="g1", topic=TOPIC, queue=0, offset=42)["ok"]
    assert broker.call("commit_offset", group="g1", topic=TOPIC, queue=1, offset=20)["ok"]
    assert broker.call("fetch_offset", group="g1", topic=TOPIC, queue=0)["offset"] == 42
    beyond = broker.call("commit_offset", group="g1", topic=TOPIC, queue=1, offset=21)
    assert not beyond["ok"] and beyond["status"] == "OFFSET_OVERFLOW_BADLY" and "max offset 20" in beyond["reason"]
    not_owner = broker.call("commit_offset", reader=1, group="g1", topic=TOPIC, queue=0, offset=1)
    assert not not_owner["ok"] and not_owner["status"] == "NOT_OWNER"
    assert broker.call("fetch_offset", reader=1, group="g1", topic=TOPIC, queue=0)["status"] == "NOT_OWNER"
    assert broker.call("pull", reader=1, topic=TOPIC, queue=0, offset=0)["status"] == "FOUND"  # reads work
    bad_group = broker.call("commit_offset", group="a@b", topic=TOPIC, queue=0, offset=1)
    assert bad_group["status"] == schema.BAD_REQUEST
    process = broker.reader(0)
    os.kill(process.pid, signal.SIGTERM)
    process.join(REPLY_S)
    assert process.exitcode == 0
    saved = decode_offset_file((broker.store_dir / CONSUMER_OFFSET_FILE).read_bytes())
    assert saved.table[f"{TOPIC}@g1"] == {0: 42, 1: 20}


def test_a_parked_pull_is_answered_by_the_arrived_notice(built: dict[int, list[PutResult]],
                                                         start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    sock = broker.ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(broker.config.endpoints.reader(0))
    with MessageStore.open(broker.store_dir, StoreConfig(geometry=GEOMETRY)) as store:
        parked_at = time.monotonic()
        sock.send(schema.pack(schema.request("pull", 7, topic=TOPIC, queue=1, offset=20, wait_ms=20_000)))
        wait_for(lambda: broker.call("ping")["parked"] == 1, REPLY_S, "the pull to be parked")
        results = put_messages(store, 3, 1, first=20)
        broker.announce(results, store.commitlog.max_offset)
        assert sock.poll(int(REPLY_S * 1000))
        answered_at = time.monotonic()
    reply = schema.unpack(sock.recv())
    sock.close()
    assert reply["id"] == 7 and reply["status"] == "FOUND"
    assert [m["queue_offset"] for m in reply["msgs"]] == [20, 21, 22]
    # the reader rereads waited-on queues off the files only every 2 s: this was the notice
    assert answered_at - parked_at < 1.9
    assert broker.call("ping")["readable_end"] == results[-1].phys_offset + reply["msgs"][-1]["size"]


def test_a_parked_pull_on_an_empty_queue_is_answered_at_its_deadline(built: dict[int, list[PutResult]],
                                                                      start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    started = time.monotonic()
    reply = broker.request(schema.request("pull", 3, topic=TOPIC, queue=2, offset=0, wait_ms=600))
    elapsed = time.monotonic() - started
    assert reply["ok"] and reply["status"] == "NO_MATCHED_LOGIC_QUEUE" and reply["msgs"] == []
    assert 0.6 <= elapsed < 1.6
    started = time.monotonic()
    reply = broker.request(schema.request("pull", 4, topic=TOPIC, queue=1, offset=20, wait_ms=300, tags="TagA"))
    assert reply["status"] == "OFFSET_OVERFLOW_ONE" and 0.3 <= time.monotonic() - started < 1.3


def test_a_lost_notice_only_delays(built: dict[int, list[PutResult]], start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    with MessageStore.open(broker.store_dir, StoreConfig(geometry=GEOMETRY)) as store:
        put_messages(store, 2, 1, first=20)  # no notice: the reader must find them in the files
        assert [m["queue_offset"] for m in pull(broker, 1, 20)["msgs"]] == [20, 21]
        sock = broker.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(broker.config.endpoints.reader(0))
        sock.send(schema.pack(schema.request("pull", 8, topic=TOPIC, queue=1, offset=22, wait_ms=20_000)))
        wait_for(lambda: broker.call("ping")["parked"] == 1, REPLY_S, "the pull to be parked")
        put_messages(store, 1, 1, first=22)
        assert sock.poll(int(REPLY_S * 1000))  # the periodic look at the files found it
    reply = schema.unpack(sock.recv())
    sock.close()
    assert [m["queue_offset"] for m in reply["msgs"]] == [22]


def test_hostile_frames_get_error_replies_and_the_reader_serves_on(built: dict[int, list[PutResult]],
                                                                   start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    bad_requests: list[dict[str, Any] | bytes | list[bytes]] = [
        b"\xc1\xff garbage",
        schema.pack([1, 2, 3]),  # type: ignore[arg-type]
        schema.pack({"v": 99, "op": "ping", "id": 1}),
        schema.request("pull", 1, topic=TOPIC, queue="0", offset=0),
        schema.request("pull", 1, topic=TOPIC, queue=0, offset=-1),
        schema.request("pull", 1, topic=TOPIC, queue=0, offset=0, wait_ms=10**12),
        schema.request("pull", 1, topic=TOPIC, queue=0, offset=0, max=0),
        schema.request("pull", 1, topic=TOPIC, queue=0, offset=0, max=True),
        schema.request("pull", 1, topic="../../etc", queue=0, offset=0),
        schema.request("pull", 1, queue=0, offset=0),
        schema.request("query_key", 1, topic=TOPIC, key="k" * 5000),
        schema.request("offset_by_time", 1, topic=TOPIC, queue=0, ts_ms=0, upper="yes"),
        [b"two", b"frames"],
    ]
    for message in bad_requests:
        reply = broker.request(message)
        assert not reply["ok"] and reply["status"] == schema.BAD_REQUEST and reply["reason"], (message, reply)
    unknown = broker.call("drop_all_tables")
    assert unknown["status"] == schema.UNKNOWN_OP and unknown["id"] == 1
    ping = broker.call("ping")
    assert ping["ok"] and ping["pid"] == broker.reader(0).pid and ping["readable_end"] > 0


def test_producer_to_consumer_through_the_real_actors(built: dict[int, list[PutResult]],
                                                      start_broker: Callable[..., Broker]) -> None:
    broker = start_broker(others=("writer", "cqbuilder", "indexbuilder"))
    endpoints = broker.config.endpoints
    with Producer(endpoints=endpoints, timeout_ms=int(START_S * 1000)) as producer, \
            Consumer(endpoints=endpoints, group="e2e", topic=TOPIC, queues=[1], start="latest",
                     long_poll_ms=5000) as consumer:
        assert consumer.poll(timeout_ms=100) == []  # its pull is parked at the reader now
        sent = [producer.send(TOPIC, f"hello {i}".encode(), tags="TagE", keys=[f"e2e-{i}"], queue_id=1)
                for i in range(5)]
        assert all(r.ok for r in sent) and [r.queue_offset for r in sent] == [20, 21, 22, 23, 24]
        got = consumer.messages(5, timeout_ms=10_000)
        assert [(m.queue_offset, m.body, m.msg_id) for m in got] == [
            (r.queue_offset, f"hello {i}".encode(), r.msg_id) for i, r in enumerate(sent)]
    with Admin(endpoints=endpoints) as admin:
        wait_for(lambda: len(admin.query_by_key(TOPIC, "e2e-3")) == 1, REPLY_S, "the index builder")
        assert admin.queue_info(TOPIC)[1] == (0, 25)
        assert admin.fetch_offset("e2e", TOPIC, 1) == 25
