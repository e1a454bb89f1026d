"""Timer messages (RocketMQ 5) through a real broker: parked on rmq_sys_wheel_timer, delivered by the
timer actor no earlier than due and within one precision step, refused when illegal, and exactly
once across a SIGKILL of the timer actor and of the whole tree."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine import MessageStore
from mqstore.engine.repair.verify import verify_store
from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.ipc.wire.messages import Outgoing, ReceivedMessage
from tests.integration.broker import Broker, free_port_range, wait_for

ROOT = Path(__file__).resolve().parents[2]
PRECISION_MS = 100
TIMER_TOML = f"\n[store]\ntimer_precision_ms = {PRECISION_MS}\ntimer_max_delay_sec = 3600\n"


def _broker(root: Path, **kwargs: Any) -> Broker:
    return Broker(root, extra_toml=TIMER_TOML, **kwargs)


@pytest.fixture(scope="module")
def timer_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One timer broker for the tests that neither kill, stop nor read the wheel's own queue, each on
    its own topic."""
    with _broker(tmp_path_factory.mktemp("timers")) as broker:
        yield broker


def _consume(store: Path, topic: str, expected: int, timeout_s: float = 60) -> list[ReceivedMessage]:
    got: list[ReceivedMessage] = []
    # the real queues exist only once a copy lands there: name them all
    with Consumer(store, group="timer-test", topic=topic, queues=list(range(4)), start="earliest",
                  long_poll_ms=100) as consumer:
        deadline = time.monotonic() + timeout_s
        while len(got) < expected and time.monotonic() < deadline:
            got += consumer.poll(200)
        # anything past the expected count would be a duplicate: look a little longer
        got += consumer.poll(300)
    return got


def test_timer_messages_are_delivered_when_due_and_not_before(timer_broker: Broker) -> None:
    with nullcontext(timer_broker) as broker, Producer(broker.store) as producer:
        now = int(time.time() * 1000)
        sends = [Outgoing("Timed", f"ms-{i}".encode(), properties={"TIMER_DELAY_MS": str(300 + 50 * i)})
                 for i in range(10)]
        sends += [Outgoing("Timed", b"sec", properties={"TIMER_DELAY_SEC": "1"}),
                  Outgoing("Timed", b"deliver", properties={"TIMER_DELIVER_MS": str(now + 700)}),
                  Outgoing("Timed", b"past", properties={"TIMER_DELIVER_MS": str(now - 1000)})]
        results = producer.send_batch(sends)
        assert all(r.ok for r in results), results
        got = _consume(broker.store, "Timed", len(sends))
        assert sorted(m.body for m in got) == sorted(s.body for s in sends)
        for m in got:
            if m.body == b"past":
                assert "TIMER_OUT_MS" not in m.properties  # not in the future: stored as it was sent
                continue
            due = int(m.properties["TIMER_OUT_MS"])
            assert m.properties["REAL_TOPIC"] == "Timed" and m.properties["REAL_QID"] == str(m.queue_id)
            assert int(m.properties["TIMER_DEQUEUE_MS"]) >= due + PRECISION_MS
            assert m.store_ms >= due + PRECISION_MS
            assert m.properties["WAIT"] == "false"


def test_illegal_timers_are_refused_with_a_reason_and_the_broker_runs_on(timer_broker: Broker) -> None:
    with nullcontext(timer_broker) as broker, Producer(broker.store) as producer:
        results = producer.send_batch([
            Outgoing("Illegal", b"far", properties={"TIMER_DELAY_SEC": str(3601)}),
            Outgoing("Illegal", b"nan", properties={"TIMER_DELAY_MS": "soon"}),
            Outgoing("Illegal", b"ok", properties={"TIMER_DELAY_MS": "200"}),
        ])
        assert [r.status for r in results] == ["MESSAGE_ILLEGAL", "MESSAGE_ILLEGAL", "PUT_OK"]
        assert "maximum delay" in results[0].reason and "TIMER_DELAY_MS" in results[1].reason
        assert [m.body for m in _consume(broker.store, "Illegal", 1)] == [b"ok"]


def _delivered(broker: Broker) -> int:
    return int((broker.status() or {}).get("actors", {}).get("timer", {}).get("delivered", 0))


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["timer", "tree"])
def test_a_kill_loses_no_timer_and_delivers_none_twice(tmp_path: Path, kill: str) -> None:
    count = 3000
    broker = _broker(tmp_path)
    with broker:
        with Producer(broker.store) as producer:
            for start in range(0, count, 500):
                batch = [Outgoing("Timed", f"m-{i}".encode(), properties={"TIMER_DELAY_MS": str(1500 + 2 * i)})
                         for i in range(start, start + 500)]
                assert all(r.ok for r in producer.send_batch(batch))
        delivered = wait_for(lambda: _delivered(broker) > 100 and _delivered(broker), 60, "deliveries under way")
        assert delivered < count  # killed with timers pending (they come due over 6 s)
        if kill == "timer":
            old = broker.kill("timer")
            broker.wait_restarted("timer", old)
        else:
            broker.kill_tree()
            broker.start()
        got = _consume(broker.store, "Timed", count, timeout_s=120)
        bodies = [m.body for m in got]
        assert len(bodies) == len(set(bodies)) == count
    report = verify_store(broker.store)
    assert report.ok, report


def _java_hash(text: str) -> int:
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_the_stored_bytes_follow_rocketmqs_timer_layout(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    with broker, Producer(broker.store) as producer:
        sent_ms = int(time.time() * 1000)
        result = producer.send_batch([Outgoing("Timed", b"later", queue_id=2,
                                               properties={"TIMER_DELAY_SEC": "600"})])[0]
        # the reply names the queue it was sent to, as RocketMQ's does; the record is on the timer topic's one queue
        assert result.ok and result.queue_id == 2
        wait_for(lambda: (broker.status() or {}).get("actors", {}).get("timer", {}).get("enqueued") == 1, 30,
                 "the timer enqueued")
    store = broker.store
    with MessageStore.open(store) as opened:
        decoded = opened.commitlog.read_record(result.phys_offset).record
    assert decoded is not None and decoded.topic == "rmq_sys_wheel_timer" and decoded.queue_id == 0
    out_ms = int(decoded.properties["TIMER_OUT_MS"])
    assert decoded.properties["REAL_TOPIC"] == "Timed" and decoded.properties["REAL_QID"] == "2"
    assert out_ms % PRECISION_MS == 0 and sent_ms + 600_000 - PRECISION_MS <= out_ms <= decoded.store_ms + 600_000
    wheel = (store / "timerwheel").read_bytes()
    assert len(wheel) == 38_707_200
    index = (out_ms // PRECISION_MS) % (2 * 7 * 86_400)
    assert struct.unpack_from(">qqqii", wheel, index * 32) == (out_ms // PRECISION_MS, 0, 0, 1, 0)
    (log_file,) = (store / "timerlog").iterdir()
    assert log_file.name == "0" * 20
    size, prev, magic, write_ms, delta, phys, phys_size, topic_hash, reserved = struct.unpack_from(
        ">iqiqiqiiq", log_file.read_bytes(), 0)
    assert (size, prev, magic, phys, phys_size, topic_hash, reserved) == (
        52, -1, 1, result.phys_offset, decoded.size, _java_hash("Timed"), 0)
    assert write_ms % PRECISION_MS == 0 and write_ms + delta == out_ms
    check = (store / "config" / "timercheck").read_bytes()
    assert len(check) == 4096
    last_read_ms, flushed_pos, next_queue_offset, master_offset = struct.unpack_from(">qqqq", check, 0)
    assert last_read_ms <= out_ms and flushed_pos == 52 and next_queue_offset == master_offset == 1
    assert verify_store(store).ok


def test_a_timer_past_the_roll_window_goes_round_the_wheel_again(tmp_path: Path) -> None:
    toml = TIMER_TOML + "timer_roll_window_slot = 10\n"  # 1 s at 100 ms
    with Broker(tmp_path, extra_toml=toml) as broker, Producer(broker.store) as producer:
        assert producer.send_batch([Outgoing("Timed", b"far", properties={"TIMER_DELAY_MS": "2500"})])[0].ok
        (message,) = _consume(broker.store, "Timed", 1)
        assert int(message.properties["TIMER_ROLL_TIMES"]) >= 1
        assert message.store_ms >= int(message.properties["TIMER_OUT_MS"]) + PRECISION_MS


@pytest.mark.slow
def test_the_stock_rocketmq_client_sends_a_timer_by_its_property(tmp_path: Path) -> None:
    pytest.importorskip("rocketmq.client", reason="the stock RocketMQ wheel exists for x86-64 Linux only")
    port = free_port_range(1)
    with _broker(tmp_path, remoting_port=port) as broker:
        sent_ms = int(time.time() * 1000)
        proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.bench.rocketmq_peer", "produce",
                               f"127.0.0.1:{port}",
                               "Timed", "5", "--property", "TIMER_DELAY_MS=1500"], cwd=ROOT,
                              env={**os.environ, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-4000:]
        results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        assert [r["status"] for r in results] == ["OK"] * 5
        with Admin(broker.store) as admin:  # this broker's, not another's that took the port meanwhile
            wait_for(lambda: admin.queue_info("rmq_sys_wheel_timer").get(0, (0, 0))[1] == 5, 30, "5 parked timers")
        got = _consume(broker.store, "Timed", 5)
        assert len(got) == 5
        for m in got:
            assert m.properties["TIMER_DELAY_MS"] == "1500" and m.properties["REAL_TOPIC"] == "Timed"
            assert m.store_ms >= int(m.properties["TIMER_OUT_MS"]) + PRECISION_MS >= sent_ms + 1500


def test_a_batch_stored_but_never_recorded_is_not_put_again(tmp_path: Path) -> None:
    """The checkpoint as a kill between the writer's PUT_OK and its record leaves it: the read time
    before slots already delivered, no delivered position, the commitlog end before the batch. The
    restarted actor finds the copies by their TIMER_FROM_PHYS_OFFSET and puts none again."""
    broker = _broker(tmp_path)
    with broker, Producer(broker.store) as producer:
        results = producer.send_batch([Outgoing("Timed", f"m-{i}".encode(),
                                                properties={"TIMER_DELAY_MS": str(300 + i)}) for i in range(200)])
        assert all(r.ok for r in results)
        first = _consume(broker.store, "Timed", 200)
        assert len(first) == 200
        slots = sorted(int(m.properties["TIMER_OUT_MS"]) for m in first)
        check = tmp_path / "store" / "config" / "timercheck"
        # the checkpoint marks the slots once the flush holds their copies
        wait_for(lambda: struct.unpack_from(">q", check.read_bytes(), 0)[0] > slots[-1], 30,
                 "timercheck past every slot")
    data = bytearray(check.read_bytes())
    read_ms = struct.unpack_from(">q", data, 0)[0]
    struct.pack_into(">q", data, 0, slots[0] - PRECISION_MS)  # back before every slot delivered
    struct.pack_into(">qqq", data, 64, -1, -1, 0)              # nothing recorded; in flight from offset 0
    check.write_bytes(bytes(data))
    with broker:
        wait_for(lambda: (broker.status() or {}).get("actors", {}).get("timer", {}).get("read_ms", 0) > read_ms, 30,
                 "the timer actor past the slots again")
        again = _consume(broker.store, "Timed", 200)
    assert sorted(m.body for m in again) == sorted(m.body for m in first)
    assert verify_store(broker.store).ok
