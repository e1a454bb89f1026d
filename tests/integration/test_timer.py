"""Timer messages (RocketMQ 5) through a real broker: parked on rmq_sys_wheel_timer, delivered by the
timer actor no earlier than due and within one precision step, refused when illegal, and exactly
once across a SIGKILL of the timer actor and of the whole tree."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.verify import verify_store
from ipc.client import Consumer, Producer
from ipc.messages import Outgoing, ReceivedMessage
from tests.integration.broker import Broker, wait_for

PRECISION_MS = 100
TIMER_TOML = f"\n[store]\ntimer_precision_ms = {PRECISION_MS}\ntimer_max_delay_sec = 3600\n"


def _broker(root: Path, **kwargs: Any) -> Broker:
    return Broker(root, extra_toml=TIMER_TOML, **kwargs)


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


def test_timer_messages_are_delivered_when_due_and_not_before(tmp_path: Path) -> None:
    with _broker(tmp_path) as broker, Producer(broker.store) as producer:
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
            assert m.properties["REAL_TOPIC"] == "Timed" and m.properties["REAL_QID"] == str(m.queue)
            assert int(m.properties["TIMER_DEQUEUE_MS"]) >= due + PRECISION_MS
            assert m.store_ms >= due + PRECISION_MS
            assert m.properties["WAIT"] == "false"


def test_illegal_timers_are_refused_with_a_reason_and_the_broker_runs_on(tmp_path: Path) -> None:
    with _broker(tmp_path) as broker, Producer(broker.store) as producer:
        results = producer.send_batch([
            Outgoing("Timed", b"far", properties={"TIMER_DELAY_SEC": str(3601)}),
            Outgoing("Timed", b"nan", properties={"TIMER_DELAY_MS": "soon"}),
            Outgoing("Timed", b"ok", properties={"TIMER_DELAY_MS": "200"}),
        ])
        assert [r.status for r in results] == ["MESSAGE_ILLEGAL", "MESSAGE_ILLEGAL", "PUT_OK"]
        assert "maximum delay" in results[0].reason and "TIMER_DELAY_MS" in results[1].reason
        assert [m.body for m in _consume(broker.store, "Timed", 1)] == [b"ok"]


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["timer", "tree"])
def test_a_kill_loses_no_timer_and_delivers_none_twice(tmp_path: Path, kill: str) -> None:
    count = 3000
    broker = _broker(tmp_path)
    with broker:
        with Producer(broker.store) as producer:
            for start in range(0, count, 500):
                batch = [Outgoing("Timed", f"m-{i}".encode(), properties={"TIMER_DELAY_MS": str(1500 + i)})
                         for i in range(start, start + 500)]
                assert all(r.ok for r in producer.send_batch(batch))
        wait_for(lambda: (broker.status() or {}).get("actors", {}).get("timer", {}).get("delivered", 0) > 100,
                 60, "deliveries under way")
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
