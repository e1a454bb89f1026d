"""``mqstore.aio``'s consumers against a real broker: round trips, ``async for`` ending on close and
committing only what the loop had, and cancellation (``task.cancel()``, ``asyncio.timeout``) that
loses nothing: a cancelled poll, then a poll, gets every message exactly once, also when the poll was
served on the I/O thread a moment before its task was cancelled."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import mqstore
import mqstore.aio
from mqstore.ipc.transport.endpoints import Endpoints
from tests.integration.broker import Broker, wait_for

LONG_MS = 60_000  # a poll's time that never runs out in a test: something else ends it
DEADLINE_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("aio-consumers")) as running:
        yield running


async def create(broker: Broker, topic: str, queues: int = 1) -> None:
    async with mqstore.aio.Admin(broker.store) as admin:
        await admin.create_topic(topic, queues)


async def send(producer: mqstore.aio.Producer, topic: str, bodies: list[bytes]) -> None:
    results = await asyncio.gather(*(producer.send(topic, body, queue_id=0) for body in bodies))
    assert all(r.ok for r in results)


async def poll_until(consumer: mqstore.aio.Consumer, count: int) -> list[mqstore.ReceivedMessage]:
    """Polls until ``count`` messages came (or the deadline), then one more poll that must add none."""
    got: list[mqstore.ReceivedMessage] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < count and time.monotonic() < deadline:
        got += await consumer.poll(500)
    got += await consumer.poll(300)
    return got


def bodies(count: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


def test_sent_messages_come_round_to_poll_and_poll_batch(broker: Broker) -> None:
    async def main() -> None:
        await create(broker, "Round")
        async with mqstore.aio.Producer(broker.store) as producer, \
                mqstore.aio.Consumer(broker.store, group="g", topic="Round", start="earliest",
                                     long_poll_ms=200) as consumer:
            assert consumer.queues == [0] and consumer.position(0) == 0
            waiting = asyncio.create_task(consumer.poll(LONG_MS))  # waits before anything is sent
            await send(producer, "Round", bodies(10))
            got = await waiting
            got += await poll_until(consumer, 10 - len(got))
            assert [m.body for m in got] == bodies(10)
            await send(producer, "Round", bodies(3, "b"))
            batch = await consumer.poll_batch(LONG_MS)
            batch_bodies = batch.bodies() + [m.body for m in await poll_until(consumer, 3 - len(batch))]
            assert batch_bodies == bodies(3, "b")
            assert consumer.position(0) == 13
            await consumer.commit()
        with mqstore.Admin(broker.store) as admin:
            assert admin.fetch_offset("g", "Round", 0) == 13

    asyncio.run(main())


def test_async_for_ends_on_close_and_commits_only_what_the_loop_had(broker: Broker) -> None:
    async def main() -> None:
        await create(broker, "Iterated")
        async with mqstore.aio.Producer(broker.store) as producer:
            await send(producer, "Iterated", bodies(20))
        consumer = mqstore.aio.Consumer(broker.store, group="g", topic="Iterated", start="earliest", long_poll_ms=200)
        seen: list[bytes] = []
        async for message in consumer:  # closed inside the loop after 7: the loop ends there
            seen.append(message.body)
            if len(seen) == 7:
                await consumer.close()
        assert seen == bodies(7)
        with mqstore.Admin(broker.store) as admin:
            assert admin.fetch_offset("g", "Iterated", 0) == 7  # prefetched beyond 7, committed 7

        consumer = mqstore.aio.Consumer(broker.store, group="g", topic="Iterated", long_poll_ms=200)
        rest: list[bytes] = []

        async def iterate() -> None:
            async for message in consumer:
                rest.append(message.body)

        task = asyncio.create_task(iterate())
        deadline = time.monotonic() + DEADLINE_S
        while len(rest) < 13 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # the loop's turn: the iterating task runs
        await consumer.close()  # from another task, while the loop waits for a 21st
        async with asyncio.timeout(DEADLINE_S):  # a guard against a hang, not a measure
            await task
        assert rest == bodies(20)[7:]

    asyncio.run(main())


def test_a_cancelled_poll_then_a_poll_gets_every_message_exactly_once(broker: Broker) -> None:
    async def main() -> None:
        await create(broker, "Cancel")
        async with mqstore.aio.Producer(broker.store) as producer, \
                mqstore.aio.Consumer(broker.store, group="g", topic="Cancel", start="earliest",
                                     long_poll_ms=200) as consumer:
            waiting = asyncio.create_task(consumer.poll(LONG_MS))
            await asyncio.sleep(0)
            waiting.cancel()  # while it waits: it takes nothing
            assert isinstance((await asyncio.gather(waiting, return_exceptions=True))[0], asyncio.CancelledError)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await consumer.poll(LONG_MS)
            await send(producer, "Cancel", bodies(10))
            assert [m.body for m in await poll_until(consumer, 10)] == bodies(10)

            # served on the I/O thread, then cancelled before its task ran again: given back
            waiting = asyncio.create_task(consumer.poll(LONG_MS))
            await asyncio.sleep(0)
            with mqstore.Producer(broker.store) as blocking:  # the loop does not run until the cancel
                assert all(r.ok for r in blocking.send_batch([{"topic": "Cancel", "body": b, "queue_id": 0}
                                                              for b in bodies(5, "s")]))
                wait_for(lambda: consumer.position(0) == 15, DEADLINE_S, "the poll to be served")
            waiting.cancel()
            assert isinstance((await asyncio.gather(waiting, return_exceptions=True))[0], asyncio.CancelledError)
            assert consumer.position(0) == 10  # sought back: a commit now passes none of them
            assert [m.body for m in await poll_until(consumer, 5)] == bodies(5, "s")
        with mqstore.Admin(broker.store) as admin:
            assert admin.fetch_offset("g", "Cancel", 0) == 15

    asyncio.run(main())


def test_ack_consumer_receives_acks_and_a_cancelled_receive_loses_nothing(broker: Broker) -> None:
    async def main() -> None:
        await create(broker, "Acked")
        async with mqstore.aio.Producer(broker.store) as producer:
            async with mqstore.aio.AckConsumer(broker.store, group="ag", topic="Acked", long_poll_ms=200) as consumer:
                waiting = asyncio.create_task(consumer.receive(32, LONG_MS))
                await asyncio.sleep(0)
                waiting.cancel()
                assert isinstance((await asyncio.gather(waiting, return_exceptions=True))[0], asyncio.CancelledError)
                await send(producer, "Acked", bodies(6))
                got: list[mqstore.Delivery] = []
                deadline = time.monotonic() + DEADLINE_S
                while len(got) < 6 and time.monotonic() < deadline:
                    got += await consumer.receive(32, 500)
                assert sorted(d.body for d in got) == bodies(6)
                assert await consumer.ack(got[:4]) == [mqstore.AckStatus.OK] * 4
                assert await consumer.ack(got[0]) == [mqstore.AckStatus.UNKNOWN_RECEIPT]  # settled already
                assert await consumer.nack(got[4]) == [mqstore.AckStatus.OK]  # handed out again at once
                again = await consumer.receive(32, LONG_MS)
                assert [d.body for d in again] == [got[4].body] and again[0].redelivered
                assert await consumer.ack(again) == [mqstore.AckStatus.OK]
            # closed holding got[5] unacked: the next consumer is handed it at once
            async with mqstore.aio.AckConsumer(broker.store, group="ag", topic="Acked", long_poll_ms=200) as consumer:
                seen: list[mqstore.Delivery] = []
                async for delivery in consumer:
                    seen.append(delivery)
                    await consumer.ack(delivery)
                    await consumer.close()  # the loop ends at its next step
                assert [d.body for d in seen] == [got[5].body]

    asyncio.run(main())


def test_making_a_consumer_does_not_block_the_loop_and_async_with_says_no_broker_answers(tmp_path: Path) -> None:
    """The constructor asked reader 0 on the loop's thread and waited (its whole timeout, no broker)."""
    endpoints = Endpoints.for_store(str(tmp_path / "nobody"))

    async def main() -> None:
        made = mqstore.aio.Consumer(endpoints=endpoints, group="g", topic="T", timeout_ms=500)  # raised before
        with pytest.raises(mqstore.BrokerTimeoutError, match="queue_info"):
            await made.poll(timeout_ms=LONG_MS)
        await made.close()
        with pytest.raises(mqstore.BrokerTimeoutError, match="queue_info"):
            async with mqstore.aio.Consumer(endpoints=endpoints, group="g", topic="T", timeout_ms=500):
                pass

    asyncio.run(main())
