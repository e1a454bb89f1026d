"""The client library applications import: ``Producer``, ``Consumer``, ``AckConsumer`` (ack mode,
``mqstore.ipc.client.ack_consumer``), ``Admin``.

Each finds the broker from its store directory (``Endpoints.for_store``: the private run dir the
broker's ipc sockets live in) or from explicit ``endpoints``. Requests go out on DEALER sockets owned
by one background I/O thread per client object (``mqstore.ipc.transport.channel``), or, for a call that
waits for its reply (Admin's, the Producer's blocking sends), on the calling thread's own; so a client
object may be shared between threads.
Every call has a timeout; a call that gets no reply raises ``BrokerTimeoutError`` (a
``TimeoutError``), a refused request raises ``BrokerError``; expected outcomes of a send (a full
disk, an illegal message) are ``SendResult`` statuses, not exceptions.

    with Producer(store_dir) as producer:
        result = producer.send("Orders", b"...", tags="paid", keys=["order-17"])
    with Consumer(store_dir, group="billing", topic="Orders", tags="paid") as consumer:
        for msg in consumer.poll(timeout_ms=1000):
            ...
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.admin import DEFAULT_TIMEOUT_MS, Admin, StorePath
from mqstore.ipc.client.consumer import Consumer
from mqstore.ipc.client.futures import completed, then
from mqstore.ipc.client.in_flight import Flushing, FlushTimeoutError, InFlight
from mqstore.ipc.client.transactions import (
    CheckBack,
    ExecuteLocal,
    StartLocal,
    TransactionResult,
    Transactions,
    TransactionState,
)
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError, Channel, resolve_endpoints
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire import replies, requests
from mqstore.ipc.wire.encoded import (
    BatchEncoder,
    Encoding,
    EncodingError,
    SendResults,
    results_from_reply,
)
from mqstore.ipc.wire.messages import (
    SERVICE_NOT_AVAILABLE,
    MessageBatch,
    Outgoing,
    ReceivedMessage,
    ReplyError,
    SendResult,
    message_keys,
)
from mqstore.ipc.wire.receipts import Delivery, Receipt

if TYPE_CHECKING:
    from mqstore.engine.batch.record_batch import EncodedBatch

__all__ = [
    "AckConsumer", "Admin", "BrokerError", "BrokerTimeoutError", "Consumer", "Delivery", "EncodingError",
    "Endpoints", "MessageBatch", "Outgoing", "Producer", "Receipt", "ReceivedMessage", "ReplyError", "SendResult",
    "SendResults", "TransactionResult", "TransactionState",
]

LEARN_LIMIT_BYTES = 64 * 1024  # a first send of more bodies than this asks the broker's request limit first


class Producer:
    """Sends messages to the commitlog writer. SERVICE_NOT_AVAILABLE results (the writer is refusing
    sends for now: a full disk, derived files behind) are retried ``retries`` times with a growing
    pause; a timeout is not retried, since the send may have been stored."""

    def __init__(self, store_dir: StorePath | None = None, *, endpoints: Endpoints | None = None,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS, retries: int = 2, retry_backoff_ms: int = 100,
                 heartbeat_ms: int = 30_000) -> None:
        """``heartbeat_ms``: how often a transactional producer registers its groups again."""
        if timeout_ms <= 0 or retries < 0 or retry_backoff_ms < 0 or heartbeat_ms <= 0:
            raise ValueError("timeout_ms and heartbeat_ms must be positive, retries and retry_backoff_ms not negative")
        self._timeout_ms = timeout_ms
        self._retries = retries
        self._backoff_ms = retry_backoff_ms
        ep = resolve_endpoints(store_dir, endpoints)
        self._transactions = Transactions(timeout_ms, heartbeat_ms)
        self._channel = Channel({"ingress": [ep.ingress], "transactions": [ep.transactions]},
                                name="mqstore-producer", curve=ep.curve, on_push=self._transactions.on_push)
        self._transactions.channel = self._channel
        self._encoder: BatchEncoder | None = None
        self._encoder_lock = threading.Lock()
        self._in_flight = InFlight()
        # the longest one send can take: each try its timeout, and the pauses between tries
        self.send_bound_s = ((retries + 1) * timeout_ms + retry_backoff_ms * retries * (retries + 1) // 2) / 1000

    def send(self, topic: str, body: bytes, *, tags: str | None = None, keys: str | Sequence[str] = (),
             properties: Mapping[str, str] | None = None, queue_id: int | None = None,
             shard: str | None = None) -> SendResult:
        """One message, waited for on the calling thread's own socket (as ``send_batch``)."""
        message = Outgoing(topic, body, tags, message_keys(keys), dict(properties or {}), queue_id, shard)
        return self.send_batch([message])[0]

    def send_transactional(self, message: Outgoing, execute_local: ExecuteLocal, check_back: CheckBack, *,
                           group: str) -> TransactionResult:
        """A transaction's half message, the local transaction, and its end (``mqstore.ipc.client.transactions``):
        consumers of the topic get the message once ``execute_local`` (or later ``check_back``)
        says COMMIT, never on ROLLBACK."""
        return self._transactions.send(lambda m: self.send_batch([m])[0], message, execute_local, check_back, group)

    def end_transaction(self, half: SendResult, state: TransactionState, *, group: str) -> None:
        """End a half sent earlier (``TransactionResult.send``) by hand: for a producer that kept the
        half's result across a failure of its own, and knows the outcome before any check asks."""
        self._transactions.end(group, half, state).result()

    def send_transactional_async(self, message: Outgoing, start_local: StartLocal, check_back: CheckBack, *,
                                 group: str) -> Future[TransactionResult]:
        """``send_transactional`` without waiting: ``start_local(message, send_result)`` is called on
        the client's I/O thread once the half is stored, and only starts the local transaction
        elsewhere, returning a future of its state (``mqstore.aio.Producer`` starts a task on its
        event loop); the end goes out when that future is done."""
        return self._transactions.send_async(lambda m: then(self.send_batch_async([m]), lambda r: r[0]), message,
                                             start_local, check_back, group)

    def end_transaction_async(self, half: SendResult, state: TransactionState, *, group: str) -> Future[None]:
        return self._transactions.end(group, half, state)

    def send_batch(self, messages: Sequence[Outgoing | Mapping[str, Any]]) -> list[SendResult]:
        """One request for many messages (one commitlog append); one result per message, in order.
        Made on the calling thread's own socket (``Channel.request``), not handed to the I/O thread:
        the retries' pauses are slept here, and it may be called from a send callback too."""
        wire = self._wire(messages)
        results: list[SendResult | None] = [None] * len(wire)
        indices = list(range(len(wire)))
        tries = 0
        while True:
            reply = self._channel.request("ingress", requests.Send(tuple(wire[i] for i in indices)),
                                          timeout_ms=self._timeout_ms)
            indices = _retried(reply, indices, results)
            tries += 1
            if not indices or tries > self._retries:
                return [r for r in results if r is not None]
            time.sleep(self._backoff_ms * tries / 1000)

    def send_async(self, topic: str, body: bytes, *, tags: str | None = None, keys: str | Sequence[str] = (),
                   properties: Mapping[str, str] | None = None, queue_id: int | None = None,
                   shard: str | None = None, callback: Callable[[Future[SendResult]], None] | None = None
                   ) -> Future[SendResult]:
        """Send without waiting. ``callback(future)`` runs when the result is in, on the client's I/O
        thread: keep it short, and never wait there for another request (that thread answers it)."""
        message = Outgoing(topic, body, tags, message_keys(keys), dict(properties or {}), queue_id, shard)
        single: Future[SendResult] = Future()
        single.set_running_or_notify_cancel()

        def first(batch: Future[list[SendResult]]) -> None:
            error = batch.exception()
            if error is not None:
                single.set_exception(error)
            else:
                single.set_result(batch.result()[0])

        if callback is not None:
            single.add_done_callback(callback)
        sent = self._send_batch_async([message])  # a message refused here raises before it is in flight
        self._in_flight.add(single)
        sent.add_done_callback(first)
        return single

    def send_batch_async(self, messages: Sequence[Outgoing | Mapping[str, Any]]) -> Future[list[SendResult]]:
        sent = self._send_batch_async(messages)
        self._in_flight.add(sent)
        return sent

    def _send_batch_async(self, messages: Sequence[Outgoing | Mapping[str, Any]]) -> Future[list[SendResult]]:
        wire = self._wire(messages)
        outer: Future[list[SendResult]] = Future()
        outer.set_running_or_notify_cancel()
        results: list[SendResult | None] = [None] * len(wire)

        def attempt(indices: list[int], tries_left: int, delay_ms: int) -> None:
            try:
                inner = self._channel.call("ingress", requests.Send(tuple(wire[i] for i in indices)),
                                           timeout_ms=self._timeout_ms, delay_ms=delay_ms)
            except BrokerError as exc:  # closed meanwhile (this may run on the I/O thread)
                outer.set_exception(exc)
                return
            inner.add_done_callback(lambda reply: on_reply(reply, indices, tries_left))

        def on_reply(reply: Future[dict[str, Any]], indices: list[int], tries_left: int) -> None:
            try:
                again = _retried(reply.result(), indices, results)
            except BaseException as exc:
                outer.set_exception(exc)
                return
            if again and tries_left > 0:
                attempt(again, tries_left - 1, self._backoff_ms * (self._retries - tries_left + 1))
            else:
                outer.set_result([r for r in results if r is not None])

        attempt(list(range(len(wire))), self._retries, 0)
        return outer

    def send_encoded(self, messages: Sequence[Outgoing | Mapping[str, Any]]) -> SendResults:
        """``send_batch`` with the records encoded here, whole (``mqstore.ipc.wire.encoded``), so the writer only
        checks, stamps and copies them: the fast path for batches. Delayed messages, and messages
        the store would refuse, raise EncodingError before anything is sent; nothing is retried. The
        results are one ``SendResults`` (a sequence of ``SendResult``, made when touched; its
        ``ok_count`` and ``columns`` read the reply as it came)."""
        if not messages:
            raise ValueError("send_encoded needs at least one message")
        encoder = self._batch_encoder()
        return self._send_encoded_now(encoder, encoder.encode(messages))

    def send_encoded_async(self, messages: Sequence[Outgoing | Mapping[str, Any]]) -> Future[SendResults]:
        if not messages:
            raise ValueError("send_encoded needs at least one message")
        encoder = self._batch_encoder()
        return self._send_encoded(encoder, encoder.encode(messages))

    def send_encoded_columns(self, topic: str, bodies: Sequence[bytes], *,
                             tags: str | Sequence[str | None] | None = None,
                             keys: Sequence[Sequence[str]] | None = None) -> SendResults:
        """``send_encoded`` for one topic, its messages given as columns: the bodies, ``tags`` one for
        all or one per body, ``keys`` one sequence per body. No message object is built: the
        cheapest way to send a batch."""
        if not bodies:
            raise ValueError("send_encoded_columns needs at least one body")
        encoder = self._batch_encoder()
        return self._send_encoded_now(encoder, encoder.encode_columns(topic, bodies, tags, keys))

    def send_encoded_columns_async(self, topic: str, bodies: Sequence[bytes], *,
                                   tags: str | Sequence[str | None] | None = None,
                                   keys: Sequence[Sequence[str]] | None = None) -> Future[SendResults]:
        if not bodies:
            raise ValueError("send_encoded_columns needs at least one body")
        encoder = self._batch_encoder()
        return self._send_encoded(encoder, encoder.encode_columns(topic, bodies, tags, keys))

    def _send_encoded_now(self, encoder: BatchEncoder, batch: EncodedBatch) -> SendResults:
        """An encoded batch sent and waited for on the calling thread's own socket."""
        reply = self._channel.request("ingress", requests.SendEncoded.of(batch), timeout_ms=self._timeout_ms)
        return results_from_reply(reply, batch, encoder.encoding.store_host)

    def _wire(self, messages: Sequence[Outgoing | Mapping[str, Any]]) -> list[requests.SendMessage]:
        """A send's messages as the wire carries them; the broker's request limit learnt first when
        a first send carries more than ``LEARN_LIMIT_BYTES`` of bodies."""
        wire = [requests.SendMessage.of(Outgoing.of(m)) for m in messages]
        if not wire:
            raise ValueError("send_batch needs at least one message")
        if (self._encoder is None and sum(len(m.body) for m in wire) > LEARN_LIMIT_BYTES
                and not self._channel.on_io_thread()):
            self._batch_encoder()  # the broker's limit, once: a request over it is refused here, not dropped there
        return wire

    def _send_encoded(self, encoder: BatchEncoder, batch: EncodedBatch) -> Future[SendResults]:
        outer: Future[SendResults] = Future()
        outer.set_running_or_notify_cancel()
        self._in_flight.add(outer)

        def on_reply(reply: Future[dict[str, Any]]) -> None:
            try:
                outer.set_result(results_from_reply(reply.result(), batch, encoder.encoding.store_host))
            except BaseException as exc:
                outer.set_exception(exc)

        call = self._channel.call("ingress", requests.SendEncoded.of(batch), timeout_ms=self._timeout_ms)
        call.add_done_callback(on_reply)
        return outer

    def _batch_encoder(self) -> BatchEncoder:
        """Asks the writer how it encodes, and how big a request it takes, once (never from the I/O
        thread: it would wait on itself)."""
        with self._encoder_lock:
            if self._encoder is None:
                self._learn(self._channel.request("ingress", requests.Encoding(), timeout_ms=self._timeout_ms))
            assert self._encoder is not None
            return self._encoder

    def prepare_async(self) -> Future[None]:
        """What ``_batch_encoder`` asks, through the I/O thread: done at once when known. The blocking
        sends ask on their calling thread when a send first needs it (an encoded send, a first batch
        over 64 KiB); ``mqstore.aio.Producer`` awaits this before its first send instead."""
        if self._encoder is not None:
            return completed(None)

        def learned(reply: dict[str, Any]) -> None:
            with self._encoder_lock:
                if self._encoder is None:
                    self._learn(reply)

        return then(self._channel.call("ingress", requests.Encoding(), timeout_ms=self._timeout_ms), learned)

    def _learn(self, encoding: dict[str, Any]) -> None:
        reply = replies.EncodingReply.decode(encoding)
        self._channel.limit("ingress", reply.max_request_bytes)
        self._encoder = BatchEncoder(Encoding.of(reply))

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every send made before this call (by the ``*_async`` sends) is answered, stored
        or failed: a failure is its future's, not raised here. ``FlushTimeoutError`` (a
        ``BrokerTimeoutError``), naming how many are still pending, once ``timeout_s`` has passed;
        with none, the wait ends when each send is answered or has timed out by itself. Not from a
        send's callback: the I/O thread that runs it answers the sends."""
        if self._channel.on_io_thread():
            raise RuntimeError("flush cannot wait on the client's I/O thread, which answers the sends")
        self._in_flight.flushing().wait(timeout_s)

    def flush_async(self) -> Flushing:
        """``flush`` without waiting: a future done once every send made before the call is answered;
        its ``check(timeout_s)`` raises ``flush``'s FlushTimeoutError while some are not."""
        return self._in_flight.flushing()

    def close(self, timeout_s: float | None = None) -> None:
        """Flush, then close the sockets. The flush waits at most ``timeout_s``, by default
        ``send_bound_s`` (the longest one send can take: each try's ``timeout_ms`` and the pauses
        between tries), so the default cuts off no send that could still succeed. Sends still
        pending after it fail with BrokerError CLOSED, as every pending send does with
        ``timeout_s=0``. Leaving a ``with`` block closes the same way, on an exception too (as
        Kafka's producers do)."""
        if timeout_s is None:
            timeout_s = self.send_bound_s
        try:
            if timeout_s > 0:
                with contextlib.suppress(FlushTimeoutError):
                    self.flush(timeout_s)
        finally:  # a flush interrupted (Ctrl-C) still closes
            self.close_async().result()

    def close_async(self) -> Future[None]:
        """Close the sockets now, with no flush (what waits fails with BrokerError CLOSED); the future
        is done once the transaction checks already handed to the checks' thread are answered."""
        self._channel.close()
        return self._transactions.close_async()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _retried(reply: dict[str, Any], indices: list[int], results: list[SendResult | None]) -> list[int]:
    """A send reply's results put in their places (``indices``: the messages that request carried);
    the places of those to send again (SERVICE_NOT_AVAILABLE)."""
    raw = replies.SendReply.decode(reply).results
    if len(raw) != len(indices):
        raise ReplyError(f"expected {len(indices)} send results, got {len(raw)}")
    again = []
    for index, wire_result in zip(indices, raw, strict=True):
        result = results[index] = SendResult.from_wire(wire_result)
        if result.status == SERVICE_NOT_AVAILABLE:
            again.append(index)
    return again
