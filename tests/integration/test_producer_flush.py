"""A producer's ``flush`` and its flushing ``close`` against a real broker, blocking and asyncio: sends
made with ``send_async`` and left unawaited are stored by ``close`` (and by leaving a ``with`` block),
a flush with a frozen writer names how many sends are pending when its timeout passes, and
``close(timeout_s=0)`` still closes at once."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

import mqstore
import mqstore.aio
from mqstore.ipc.client.in_flight import FlushTimeoutError
from mqstore.ipc.transport.channel import CLOSED
from tests.integration.broker import Broker

SENDS = 2000  # far more than one round of the writer answers: the last are in flight at close
LOADED_MS = 60_000  # no send times out by itself here, however busy the machine
DEADLINE_S = 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("flush")) as running:
        yield running


def stored_bodies(store: Path, topic: str, expected: int) -> list[bytes]:
    """The bodies of ``topic`` read from the start: ``expected`` of them, then nothing more for a while."""
    got: list[bytes] = []
    with mqstore.Consumer(store, group=f"check-{topic}", topic=topic, start="earliest", long_poll_ms=100) as consumer:
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < expected and time.monotonic() < deadline:
            got += [m.body for m in consumer.poll(200)]
        got += [m.body for m in consumer.poll(300)]
    return got


def bodies(count: int) -> list[bytes]:
    return [b"m%d" % i for i in range(count)]


def all_ok(futures: list[Future[mqstore.SendResult]]) -> bool:
    return all(f.done() and f.exception() is None and f.result().ok for f in futures)


def test_close_stores_every_send_async_left_unawaited(broker: Broker) -> None:
    """``with Producer(...) as p: for x in xs: p.send_async(...)`` lost its last sends: close failed
    whatever was still in flight with CLOSED."""
    with mqstore.Producer(broker.store, timeout_ms=LOADED_MS) as producer:
        futures = [producer.send_async("CloseFlushes", body) for body in bodies(SENDS)]
    assert all_ok(futures)
    assert sorted(stored_bodies(broker.store, "CloseFlushes", SENDS)) == sorted(bodies(SENDS))


def test_leaving_a_with_block_on_an_exception_still_flushes(broker: Broker) -> None:
    futures: list[Future[list[mqstore.SendResult]]] = []
    with pytest.raises(KeyError), mqstore.Producer(broker.store, timeout_ms=LOADED_MS) as producer:
        for chunk in range(0, SENDS, 100):
            futures.append(producer.send_batch_async([mqstore.Outgoing("ExitFlushes", body)
                                                      for body in bodies(SENDS)[chunk:chunk + 100]]))
        raise KeyError("the application's own")
    assert all(f.done() and all(r.ok for r in f.result()) for f in futures)
    assert sorted(stored_bodies(broker.store, "ExitFlushes", SENDS)) == sorted(bodies(SENDS))


def test_flush_waits_for_every_earlier_send_and_keeps_the_producer_open(broker: Broker) -> None:
    with mqstore.Producer(broker.store, timeout_ms=LOADED_MS) as producer:
        futures = [producer.send_async("Flushed", body) for body in bodies(SENDS)]
        encoded = producer.send_encoded_async([mqstore.Outgoing("Flushed", b"encoded")])
        producer.flush()
        assert all_ok(futures) and encoded.done() and encoded.result().ok_count == 1
        assert producer.send("Flushed", b"after").ok
        producer.flush()  # nothing in flight: at once


def test_flush_with_a_frozen_writer_times_out_naming_the_pending_sends(broker: Broker) -> None:
    with mqstore.Producer(broker.store, timeout_ms=LOADED_MS) as producer:
        assert producer.send("Frozen", b"warm").ok
        writer = broker.kill("writer", signal.SIGSTOP)
        try:
            futures = [producer.send_async("Frozen", body) for body in bodies(3)]
            with pytest.raises(FlushTimeoutError, match="3 send") as raised:
                producer.flush(timeout_s=0.5)
            assert raised.value.pending_count == 3 and isinstance(raised.value, mqstore.BrokerTimeoutError)
            assert not any(f.done() for f in futures)
        finally:
            os.kill(writer, signal.SIGCONT)
        producer.flush()
        assert all_ok(futures)


def test_close_at_once_still_fails_pending_sends_with_closed(broker: Broker) -> None:
    producer = mqstore.Producer(broker.store, timeout_ms=LOADED_MS)
    assert producer.send("AtOnce", b"warm").ok
    writer = broker.kill("writer", signal.SIGSTOP)
    try:
        futures = [producer.send_async("AtOnce", body) for body in bodies(3)]
        producer.close(timeout_s=0)
    finally:
        os.kill(writer, signal.SIGCONT)
    for future in futures:
        error = future.exception(timeout=DEADLINE_S)
        assert isinstance(error, mqstore.BrokerError) and error.status == CLOSED


def test_a_closing_flush_cut_off_by_its_timeout_fails_the_rest_with_closed(broker: Broker) -> None:
    producer = mqstore.Producer(broker.store, timeout_ms=LOADED_MS)
    assert producer.send("CutOff", b"warm").ok
    writer = broker.kill("writer", signal.SIGSTOP)
    try:
        futures = [producer.send_async("CutOff", body) for body in bodies(3)]
        producer.close(timeout_s=0.3)  # no raise: close gives up on what it could not flush
    finally:
        os.kill(writer, signal.SIGCONT)
    assert all(isinstance(f.exception(timeout=DEADLINE_S), mqstore.BrokerError) for f in futures)


def test_aio_close_stores_every_send_left_to_a_task(broker: Broker) -> None:
    async def run() -> list[mqstore.SendResult]:
        async with mqstore.aio.Producer(broker.store, timeout_ms=LOADED_MS) as producer:
            assert (await producer.send("AioClose", b"warm")).ok
            tasks = [asyncio.ensure_future(producer.send("AioClose", body)) for body in bodies(SENDS)]
            await asyncio.sleep(0)  # each task makes its send; none is awaited before the close
        return await asyncio.gather(*tasks)

    assert all(result.ok for result in asyncio.run(run()))
    assert sorted(stored_bodies(broker.store, "AioClose", SENDS + 1)) == sorted([b"warm", *bodies(SENDS)])


def test_aio_flush_times_out_with_a_frozen_writer_then_completes(broker: Broker) -> None:
    async def run() -> None:
        async with mqstore.aio.Producer(broker.store, timeout_ms=LOADED_MS) as producer:
            assert (await producer.send("AioFrozen", b"warm")).ok
            writer = broker.kill("writer", signal.SIGSTOP)
            try:
                tasks = [asyncio.ensure_future(producer.send("AioFrozen", body)) for body in bodies(3)]
                await asyncio.sleep(0)  # the tasks make their sends
                with pytest.raises(FlushTimeoutError) as raised:
                    await producer.flush(timeout_s=0.5)
                assert raised.value.pending_count == 3
            finally:
                os.kill(writer, signal.SIGCONT)
            await producer.flush()
            assert all(result.ok for result in await asyncio.gather(*tasks))

    asyncio.run(run())
