"""``mqstore.aio`` against a real broker: sends of every kind, many at once from one event loop, cancelled
sends, transactional sends whose callbacks are coroutines on the loop, and every Admin call answering
what the blocking Admin answers. The tests share one broker, each on its own topic and group; each
runs its coroutine with ``asyncio.run``."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

import mqstore
import mqstore.aio
from mqstore.engine.put import transactions as tx
from tests.integration.broker import Broker

T = TypeVar("T")
# transaction checks come quickly; offsets are persisted often
QUICK = ("transaction_timeout_ms = 300\ntransaction_check_interval_ms = 200\ntransaction_check_max = 3\n"
         "offset_persist_interval_ms = 100")
LOADED_MS = 15_000  # a reply may be slow on a busy machine; no test waits on it to fail
DEADLINE_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("aio"), broker_extra=QUICK) as running:
        yield running


async def eventually(probe: Callable[[], Awaitable[T]], what: str) -> T:
    """Await ``probe()`` until it is truthy; fail with ``what`` at the deadline (no sleep to wait on)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {DEADLINE_S} s waiting for {what}")
        await asyncio.sleep(0.05)


def consumed(store: Path, topic: str, expected: int) -> list[mqstore.ReceivedMessage]:
    """Every message of ``topic`` read from the start by a blocking consumer: ``expected`` of them, and
    then nothing more for a while."""
    got: list[mqstore.ReceivedMessage] = []
    with mqstore.Consumer(store, group=f"check-{topic}", topic=topic, start="earliest", long_poll_ms=100) as consumer:
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < expected and time.monotonic() < deadline:
            got += consumer.poll(200)
        got += consumer.poll(300)
    return got


def test_every_kind_of_send_is_stored_once(broker: Broker) -> None:
    async def main() -> list[mqstore.SendResult]:
        async with mqstore.aio.Admin(broker.store) as admin, mqstore.aio.Producer(broker.store) as producer:
            assert await admin.create_topic("Kinds", 2) == 2
            one = await producer.send("Kinds", b"one", tags="A", keys="k-one", queue_id=1)
            batch = await producer.send_batch([mqstore.Outgoing("Kinds", b"b1"), {"topic": "Kinds", "body": b"b2"}])
            encoded = await producer.send_encoded([{"topic": "Kinds", "body": b"e1", "keys": ["k-e1"]}])
            columns = await producer.send_encoded_columns("Kinds", [b"c1", b"c2"], tags="C")
            big = await producer.send("Kinds", bytes(100_000))  # over the first-send limit the writer is asked
            return [one, *batch, *encoded, *columns, big]

    results = asyncio.run(main())
    assert all(r.ok for r in results), results
    assert results[0].queue_id == 1 and results[0].status is mqstore.PutStatus.PUT_OK
    got = consumed(broker.store, "Kinds", len(results))
    assert sorted(m.body for m in got) == sorted([b"one", b"b1", b"b2", b"e1", b"c1", b"c2", bytes(100_000)])
    assert {(m.queue_id, m.queue_offset) for m in got} == {(r.queue_id, r.queue_offset) for r in results}
    [one] = [m for m in got if m.body == b"one"]
    assert one.tags == "A" and one.keys == ("k-one",)


def test_many_concurrent_sends_from_one_loop_each_stored_once(broker: Broker) -> None:
    count = 2000
    threads: list[int] = []

    async def main() -> list[mqstore.SendResult]:
        async with mqstore.aio.Producer(broker.store, timeout_ms=LOADED_MS) as producer:
            sends = [producer.send("Many", f"m{i}".encode()) for i in range(count)]
            threads.append(threading.active_count())
            results = await asyncio.gather(*sends)
            threads.append(threading.active_count())
            return results

    results = asyncio.run(main())
    assert all(r.ok for r in results)
    assert len({(r.queue_id, r.queue_offset) for r in results}) == count
    assert threads[0] == threads[1]  # no thread per call
    assert sorted(m.body for m in consumed(broker.store, "Many", count)) == sorted(
        f"m{i}".encode() for i in range(count))


def test_a_send_cancelled_while_awaited_still_goes_out(broker: Broker) -> None:
    count = 50

    async def main() -> None:
        async with mqstore.aio.Producer(broker.store, timeout_ms=LOADED_MS) as producer:
            assert (await producer.send("Cancelled", b"first")).ok
            tasks = [asyncio.create_task(producer.send("Cancelled", f"c{i}".encode())) for i in range(count)]
            await asyncio.sleep(0)  # each task runs to its await: its request is handed to the I/O thread
            for task in tasks:
                task.cancel()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            assert sum(isinstance(d, asyncio.CancelledError) for d in done) > 0
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0):
                    await producer.send("Cancelled", b"timed out")
            assert (await producer.send("Cancelled", b"last")).ok  # the producer goes on

    asyncio.run(main())
    bodies = sorted(m.body for m in consumed(broker.store, "Cancelled", count + 3))
    assert bodies == sorted([b"first", b"last", b"timed out", *(f"c{i}".encode() for i in range(count))])


def test_transactional_callbacks_run_as_coroutines_on_the_loop(broker: Broker) -> None:
    ran_on: list[str] = []

    async def main() -> tuple[mqstore.TransactionResult, mqstore.TransactionResult]:
        loop = asyncio.get_running_loop()

        async def commit(message: mqstore.Outgoing, result: mqstore.SendResult) -> mqstore.TransactionState:
            assert asyncio.get_running_loop() is loop and result.ok
            await asyncio.sleep(0)  # a coroutine: it may await the application's own I/O
            ran_on.append("execute_local")
            return mqstore.TransactionState.COMMIT

        async def unknown(message: mqstore.Outgoing, result: mqstore.SendResult) -> mqstore.TransactionState:
            return mqstore.TransactionState.UNKNOWN

        async def check_back(message: mqstore.ReceivedMessage) -> mqstore.TransactionState:
            assert asyncio.get_running_loop() is loop
            ran_on.append(f"check_back {message.body.decode()}")
            return mqstore.TransactionState.COMMIT

        async with mqstore.aio.Admin(broker.store) as admin, \
                mqstore.aio.Producer(broker.store, heartbeat_ms=200, timeout_ms=LOADED_MS) as producer:
            await admin.create_topic("Paid", 2)
            now = await producer.send_transactional(mqstore.Outgoing("Paid", b"now"), commit, check_back, group="pg")
            later = await producer.send_transactional(mqstore.Outgoing("Paid", b"later"), unknown, check_back,
                                                      group="pg")
            await eventually(lambda: _true_soon(lambda: "check_back later" in ran_on), "the check of the UNKNOWN half")
            return now, later

    now, later = asyncio.run(main())
    assert now.state is mqstore.TransactionState.COMMIT and now.end_error == ""
    assert later.state is mqstore.TransactionState.UNKNOWN
    assert ran_on[0] == "execute_local"
    got = consumed(broker.store, "Paid", 2)
    assert sorted(m.body for m in got) == [b"later", b"now"]
    assert all(m.properties[tx.PROP_REAL_TOPIC] == "Paid" for m in got)


async def _true_soon(predicate: Callable[[], bool]) -> bool:
    return predicate()


def test_every_admin_call_answers_what_the_blocking_admin_does(broker: Broker) -> None:
    with mqstore.Producer(broker.store) as producer, mqstore.Admin(broker.store) as blocking:
        blocking.create_topic("Asked", 2)
        sent = producer.send_batch([{"topic": "Asked", "body": f"a{i}".encode(), "keys": [f"k{i % 3}"], "queue_id": 0}
                                    for i in range(9)])
        assert all(r.ok for r in sent)

    async def main() -> dict[str, Any]:
        async with mqstore.aio.Admin(broker.store) as admin:
            await eventually(lambda: admin.query_by_key("Asked", "k0"), "the index builder")
            await admin.commit_offset("G-aio", "Asked", 0, 4)
            committed = await admin.fetch_offset("G-aio", "Asked", 0)
            await admin.reset_offset("G-aio", "Asked", 0, 2)
            answers: dict[str, Any] = {
                "committed": committed,
                "topics": await admin.topics(),
                "groups": await admin.groups(),
                "group_describe": await admin.group_describe("G-aio"),
                "group_last_seen_ms": await admin.group_last_seen_ms(),
                "ack_stats": await admin.ack_stats(),
                "queue_info": await admin.queue_info("Asked"),
                "query_by_key": list(await admin.query_by_key("Asked", "k1", max_count=2)),
                "query_keys": [list(b) for b in await admin.query_keys("Asked", ["k0", "k2", "none"])],
                "query_by_uniq_key": await admin.query_by_uniq_key("Asked", sent[5].uniq_key or ""),
                "view_by_id": await admin.view_by_id(sent[3].msg_id),
                "offset_by_time": await admin.offset_by_time("Asked", 0, 0),
                "fetch_offset": await admin.fetch_offset("G-aio", "Asked", 0),
                "ping": set(await admin.ping()) - {"parked"},
                "ping_writer": (await admin.ping_writer())["ok"],
            }
            with pytest.raises(mqstore.BrokerError, match="BAD_REQUEST"):
                await admin.query_keys("Asked", [])
            answers["delete_topic_offsets"] = await admin.delete_topic_offsets("Asked")
            answers["delete_topic"] = (await admin.delete_topic("Asked"), await admin.delete_topic("Asked"))
            return answers

    answers = asyncio.run(main())
    assert answers["committed"] == 4 and answers["fetch_offset"] == 2
    assert answers["delete_topic_offsets"] is True and answers["delete_topic"] == (True, False)
    assert answers["ping_writer"] is True
    with mqstore.Admin(broker.store) as blocking:
        assert answers["topics"]["Asked"] == 2
        assert answers["groups"]["G-aio"] == ["Asked"]
        [lag] = [q for q in answers["group_describe"] if q.queue_id == 0]
        assert lag.committed_offset == 2 and lag.max_queue_offset == 9
        assert answers["group_last_seen_ms"]["G-aio"] > 0
        assert set(answers["group_last_seen_ms"]) <= set(blocking.group_last_seen_ms())
        assert answers["ack_stats"] == blocking.ack_stats()
        assert answers["queue_info"] == {0: (0, 9), 1: (0, 0)}
        assert [m.body for m in answers["query_by_key"]] == [b"a4", b"a7"]
        assert [[m.body for m in b] for b in answers["query_keys"]] == [
            [b"a0", b"a3", b"a6"], [b"a2", b"a5", b"a8"], []]
        assert [m.body for m in answers["query_by_uniq_key"]] == [b"a5"]
        assert answers["view_by_id"].body == b"a3"
        assert answers["offset_by_time"] == 0
        assert answers["ping"] == set(blocking.ping()) - {"parked"}
