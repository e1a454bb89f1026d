"""Retention's ``move_stragglers_below`` through a real broker: an ack-mode group acks all but one
message in 25, in every commitlog file; the writer copies those stragglers to the head of the log,
the old files go, and every straggler is still delivered and ackable as before (same receipt,
delivery count, redelivered flag, and the original's topic, queue offset, msg id, properties and
body), and a straggler nacked to the DLQ goes there as the original; an offset-mode group on the
same topic never sees a copy; ``mqstore verify`` is clean. Then
the same through SIGKILLs of the writer, the reader and the consume-queue builder at the steps of a
move, and of the whole tree.

64 KiB commitlog files and 1 KiB bodies: about 60 messages fill a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine.reclaim.move import MOVED_TOPIC
from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Consumer, Producer
from mqstore.ipc.transport.channel import BrokerError, Channel
from mqstore.ipc.wire import requests
from mqstore.ipc.wire.messages import ReceivedMessage
from mqstore.ipc.wire.receipts import Delivery, dlq_topic
from mqstore.ipc.wire.requests import SendMessage
from tests.integration.broker import Broker, wait_for
from tests.integration.test_reclaim import FILE_SIZE, _body, _consume_all, _files, _persisted, _produce, _verify

COUNT = 400     # about seven files
EVERY = 25      # one message in 25 is left unacked: two or three in every file
NACKED = 4      # of those, the first few are nacked with requeue before the move
TOPIC = "Mix"


def _broker(tmp_path: Path) -> Broker:
    return Broker(tmp_path, commitlog=FILE_SIZE,
                  broker_extra="clean_interval_ms = 100\noffset_persist_interval_ms = 100\nack_retry_first_level = 0",
                  extra_toml="\n[retention]\nreclaim_consumed = true\nmove_stragglers_below = 0.5\n")


def _fields(m: ReceivedMessage) -> dict[str, Any]:
    return {name: getattr(m, name) for name in ReceivedMessage.__dataclass_fields__}


def _writer(broker: Broker) -> dict[str, Any]:
    status = broker.status()
    assert status is not None
    return dict(status["actors"]["writer"])


def _leave_stragglers(consumer: AckConsumer) -> tuple[list[Delivery], list[Delivery]]:
    """Receive every message, ack all but one in ``EVERY``; the first ``NACKED`` of those are nacked
    (due again at once), the rest stay in flight. Returns (in flight, nacked)."""
    kept: list[Delivery] = []
    received = 0
    while received < COUNT:
        batch = consumer.receive(64, timeout_ms=5000)
        assert batch, f"only {received} of {COUNT} delivered"
        received += len(batch)
        kept += [d for d in batch if not d.queue_offset % EVERY]
        assert set(consumer.ack([d for d in batch if d.queue_offset % EVERY])) <= {"OK"}
    assert [d.queue_offset for d in kept] == list(range(0, COUNT, EVERY))
    assert all(not d.redelivered and d.delivery_count == 1 for d in kept)
    nacked = kept[:NACKED]
    assert set(consumer.nack(nacked)) == {"OK"}
    return kept[NACKED:], nacked


def _moved(broker: Broker) -> int:
    return int((_writer(broker).get("moved") or {}).get("messages", 0))


def _old_files_gone(broker: Broker, files: list[int]) -> None:
    wait_for(lambda: _files(broker)[0] >= files[-1], 60, "every old file to go once its stragglers moved")


def _redelivered(consumer: AckConsumer, nacked: list[Delivery], count: int) -> list[Delivery]:
    got: list[Delivery] = []
    wait_for(lambda: got.extend(consumer.receive(64, timeout_ms=500)) or len(got) >= len(nacked), 30,
             "the nacked stragglers to come back")
    assert [d.receipt for d in got] == [d.receipt for d in nacked]
    assert all(d.redelivered and d.delivery_count == count for d in got)
    for again, first in zip(got, nacked, strict=True):
        assert _fields(again) == _fields(first)  # the original: topic, queue offset, msg id, properties, body
    return got


def _offsets_see_no_copy(broker: Broker, producer: Producer) -> None:
    """The offset-mode group gets exactly what was sent after its commit, and a new group reading the
    topic from its first live entry sees only the topic's own records, in order."""
    _produce(producer, TOPIC, 10, start=COUNT)
    more = _consume_all(broker, "Offsets", TOPIC, 10)
    assert [m.queue_offset for m in more] == list(range(COUNT, COUNT + 10))
    with Consumer(broker.store, group="Late", topic=TOPIC, queues=[0], auto_commit=False) as late:
        seen = late.messages(COUNT + 10, timeout_ms=3000)
    assert seen and all(m.topic == TOPIC and "MOVED_FROM" not in m.properties for m in seen)
    offsets = [m.queue_offset for m in seen]
    assert offsets == sorted(set(offsets)) and offsets[-1] == COUNT + 9
    assert all(m.body == _body(m.queue_offset) for m in seen)


def _forge_copy(broker: Broker, producer: Producer, of: Delivery) -> None:
    """A record on the moved topic naming a straggler as its original, with another body. A client is
    refused the moved topic (NO_PERMISSION), so it goes in through the broker's own ingress, as a
    faulty actor's would."""
    origin = f"{of.phys_offset},{of.size},{of.queue_offset},{of.store_ms},{of.sys_flag},0"
    props = {"REAL_TOPIC": of.topic, "REAL_QID": str(of.queue_id), "MOVED_FROM": origin, "UNIQ_KEY": of.uniq_key or ""}
    forged = SendMessage(MOVED_TOPIC, b"forged", queue=0, props=props)
    with pytest.raises(BrokerError, match="NO_PERMISSION"):
        producer.send_batch([{"topic": MOVED_TOPIC, "body": b"forged", "queue_id": 0, "properties": props}])
    channel = Channel({"ingress": [broker.endpoints().own_ingress]})
    try:
        reply = channel.request("ingress", requests.Send((forged,)), timeout_ms=30_000)
    finally:
        channel.close()
    assert reply["results"][0]["status"] == "PUT_OK"


def test_stragglers_are_moved_and_delivered_as_before_and_the_old_files_go(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    with broker, Producer(broker.store) as producer:
        _produce(producer, TOPIC)
        files = _files(broker)
        assert len(files) >= 6
        with AckConsumer(broker.store, group="Acks", topic=TOPIC, queues=[0], visibility_ms=300_000) as consumer:
            in_flight, nacked = _leave_stragglers(consumer)
            _forge_copy(broker, producer, nacked[1])  # no stand-in: the reader checks a copy against what it copies
            _consume_all(broker, "Offsets", TOPIC)
            wait_for(lambda: _persisted(broker, f"{TOPIC}@Offsets"), 10, "the offsets persisted")
            _old_files_gone(broker, files)
            assert _moved(broker) >= COUNT // EVERY - 1  # those of the newest file may stay where they are
            shown = broker.mqstore("status")
            assert shown.returncode == 0 and "stragglers moved since the writer started" in shown.stdout
            again = _redelivered(consumer, nacked, 2)
            poison, *in_flight = in_flight
            assert consumer.nack(poison, requeue=False) == ["OK"]  # dead-lettered from its copy
            assert set(consumer.ack([*in_flight, *again])) == {"OK"}  # the receipts of before the move
            assert consumer.receive(64, timeout_ms=300) == []
        [dead] = _consume_all(broker, "DlqReader", dlq_topic("Acks"), 1)
        assert dead.body == poison.body and dead.properties["ORIGIN_MESSAGE_ID"] == poison.msg_id
        assert dead.properties["ORIGIN_TOPIC"] == TOPIC and dead.properties["ORIGIN_OFFSET"] == str(poison.queue_offset)
        _offsets_see_no_copy(broker, producer)
        assert (broker.store / "consumequeue" / MOVED_TOPIC / "0").is_dir()
        assert broker.stop() == 0
    _verify(broker)


def _mark_counts_copies(broker: Broker, files: list[int]) -> bool:
    try:
        mark = json.loads((broker.store / "queueindex" / "lowwater-0.json").read_text())
    except (OSError, ValueError):
        return False  # read between the renames: asked again
    queues = mark.get("queues") or ()
    return bool(queues) and all(str(files[0]) not in q["unacked_by_file"] for q in queues)  # moved off the first


@pytest.mark.slow
def test_sigkills_at_each_step_of_a_move_lose_nothing(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    with broker, Producer(broker.store) as producer:
        _produce(producer, TOPIC)
        files = _files(broker)
        with AckConsumer(broker.store, group="Acks", topic=TOPIC, queues=[0], visibility_ms=300_000) as consumer:
            in_flight, nacked = _leave_stragglers(consumer)
            _consume_all(broker, "Offsets", TOPIC)
            # copies appended and dispatched: the writer goes (an orphan copy, or one copied again, is harmless)
            wait_for(lambda: (broker.store / "consumequeue" / MOVED_TOPIC / "0").is_dir(), 30, "the first copies")
            broker.wait_restarted("writer", broker.kill("writer"))
            # the reader follows the copies and its mark counts them: it goes, and re-reads the moved topic
            wait_for(lambda: _mark_counts_copies(broker, files), 30, "a mark counting a copy")
            broker.wait_restarted("reader-0", broker.kill("reader-0"))
            # an old file gone: the consume-queue builder goes
            wait_for(lambda: _files(broker)[0] > files[0], 30, "the first old file to go")
            broker.wait_restarted("cqbuilder", broker.kill("cqbuilder"))
            _old_files_gone(broker, files)
        # every delivery the killed reader had handed out is due again, flagged, counted from the index
        broker.kill_tree()
    with broker, AckConsumer(broker.store, group="Acks", topic=TOPIC, queues=[0], visibility_ms=300_000) as consumer:
        stragglers = sorted([*in_flight, *nacked], key=lambda d: d.queue_offset)
        again = _redelivered(consumer, stragglers, 2)
        assert set(consumer.ack(again)) == {"OK"}
        assert consumer.receive(64, timeout_ms=300) == []
        with Producer(broker.store) as producer:
            _offsets_see_no_copy(broker, producer)
        assert broker.stop() == 0
    _verify(broker)
