"""Transactional sends for the ipc ``Producer`` (``Producer.send_transactional``), RocketMQ's way.

    def execute_local(message, send_result):       # runs the local transaction
        return TransactionState.COMMIT             # or ROLLBACK, or UNKNOWN: ask me later
    def check_back(message):                       # the broker asks about an unresolved half
        return TransactionState.COMMIT if order_exists(message.keys) else TransactionState.ROLLBACK
    result = producer.send_transactional(Outgoing("Orders", b"..."), execute_local, check_back,
                                         group="order-service")

The message goes out as a half message (``TRAN_MSG=true``, ``PGROUP`` = the group, its own
``UNIQ_KEY``), which the broker keeps on ``RMQ_SYS_TRANS_HALF_TOPIC`` where no consumer sees it.
Then ``execute_local`` runs, and its COMMIT or ROLLBACK goes to the broker's ``transactions``
actor as ``end_transaction``. A half left UNKNOWN (or whose end was lost) is checked after
``[broker] transaction_timeout_ms``: the actor pushes ``check_transaction`` to a producer that
registered the group, and ``check_back`` runs on a thread of the producer's (never on its I/O
thread) with the message as stored; its answer goes back as ``end_transaction``. The producer
registers its groups again every ``heartbeat_ms``, so a restarted broker finds it. Checks may come
for a half already resolved, and more than once: ``check_back`` answers from the local state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from mqstore.engine.log.msgid import UniqKeyGenerator
from mqstore.engine.log.record import PROP_UNIQ_KEY, decode_record
from mqstore.engine.put.transactions import PROP_PGROUP, PROP_TRAN_MSG, TransactionState
from mqstore.ipc.client.futures import completed, guarded, then
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError, Channel
from mqstore.ipc.wire.messages import Outgoing, ReceivedMessage, SendResult
from mqstore.ipc.wire.requests import EndTransaction, RegisterProducer

__all__ = ["CheckBack", "ExecuteLocal", "TransactionResult", "TransactionState", "Transactions"]

log = logging.getLogger("mqstore.client")

ROUTE = "transactions"
CHECK_PUSH = "check_transaction"

ExecuteLocal = Callable[[Outgoing, SendResult], TransactionState]
CheckBack = Callable[[ReceivedMessage], TransactionState]
StartLocal = Callable[[Outgoing, SendResult], Future[TransactionState]]


@dataclass(frozen=True, slots=True)
class TransactionResult:
    """What ``send_transactional`` did: the half's send, the local transaction's state, and why its
    end did not reach the broker ("" when it did, or when there was none to send)."""

    send: SendResult
    state: TransactionState
    end_error: str = ""


class Transactions:
    """A producer's transactional side: its registered groups, their check-backs, the checks' thread."""

    def __init__(self, timeout_ms: int, heartbeat_ms: int) -> None:
        self.channel: Channel | None = None
        self._timeout_ms = timeout_ms
        self._heartbeat_ms = heartbeat_ms
        self._check_backs: dict[str, CheckBack] = {}
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._uniq = UniqKeyGenerator.for_this_process(lambda: time.time_ns() // 1_000_000)

    def send(self, send: Callable[[Outgoing], SendResult], message: Outgoing, execute_local: ExecuteLocal,
             check_back: CheckBack, group: str) -> TransactionResult:
        half = self._half(message, group)
        self._register(group, check_back).result()
        result = send(half)
        if not result.ok:
            return _not_stored(result)
        try:
            state = TransactionState(execute_local(message, result))
        except Exception:
            state = _failed_locally(result)
        return self._settle(group, result, state).result()

    def send_async(self, send: Callable[[Outgoing], Future[SendResult]], message: Outgoing,
                   start_local: StartLocal, check_back: CheckBack, group: str) -> Future[TransactionResult]:
        """``send`` as a chain of futures: ``start_local`` is called on the I/O thread once the half
        is stored, and must only start the local transaction elsewhere (an event loop's task) and
        return a future of its state."""
        half = self._half(message, group)
        outer: Future[TransactionResult] = Future()
        outer.set_running_or_notify_cancel()

        @guarded(outer)
        def registered(registration: Future[None]) -> None:
            registration.result()
            send(half).add_done_callback(sent)

        @guarded(outer)
        def sent(sending: Future[SendResult]) -> None:
            result = sending.result()
            if not result.ok:
                outer.set_result(_not_stored(result))
                return

            @guarded(outer)
            def decided(local: Future[TransactionState]) -> None:
                try:
                    state = TransactionState(local.result())
                except Exception:
                    state = _failed_locally(result)
                self._settle(group, result, state).add_done_callback(lambda end: outer.set_result(end.result()))

            try:
                local = start_local(message, result)
            except Exception:
                local = completed(_failed_locally(result))
            local.add_done_callback(decided)

        self._register(group, check_back).add_done_callback(registered)
        return outer

    def end(self, group: str, half: SendResult, state: TransactionState) -> Future[None]:
        """The future raises BrokerError when the actor refuses the end, BrokerTimeoutError without an answer."""
        return then(self._end(group, half.queue_offset, half.phys_offset, state, False), lambda _: None)

    def _half(self, message: Outgoing, group: str) -> Outgoing:
        if not group:
            raise ValueError("a transactional send names its producer group")
        props = {**message.properties, PROP_TRAN_MSG: "true", PROP_PGROUP: group}
        props.setdefault(PROP_UNIQ_KEY, self._uniq.next())
        return replace(message, properties=props)

    def _settle(self, group: str, result: SendResult, state: TransactionState) -> Future[TransactionResult]:
        """The end of a stored half once its local transaction decided (none for UNKNOWN: the check
        will ask); an end that did not reach the broker is said in ``end_error``."""
        if state is TransactionState.UNKNOWN:
            return completed(TransactionResult(result, state))
        settled: Future[TransactionResult] = Future()
        settled.set_running_or_notify_cancel()

        def ended(end: Future[Any]) -> None:
            try:
                end.result()
            except (BrokerError, BrokerTimeoutError) as exc:
                settled.set_result(TransactionResult(result, state, str(exc)))
            except BaseException as exc:
                settled.set_exception(exc)
            else:
                settled.set_result(TransactionResult(result, state))

        try:
            end = self._end(group, result.queue_offset, result.phys_offset, state, False)
        except BrokerError as exc:  # closed meanwhile
            end = Future()
            end.set_exception(exc)
        end.add_done_callback(ended)
        return settled

    def _register(self, group: str, check_back: CheckBack) -> Future[None]:
        assert self.channel is not None
        with self._lock:
            first = not self._check_backs
            known = group in self._check_backs
            self._check_backs[group] = check_back
        if first:
            self._heartbeat()
        if known:
            return completed(None)
        return then(self.channel.call(ROUTE, RegisterProducer((group,)), timeout_ms=self._timeout_ms), lambda _: None)

    def _heartbeat(self, _: Future[dict[str, Any]] | None = None) -> None:
        """Register every group again after ``heartbeat_ms``, and so on until the producer closes."""
        assert self.channel is not None
        with self._lock:
            groups = list(self._check_backs)
        try:
            call = self.channel.call(ROUTE, RegisterProducer(tuple(groups)), timeout_ms=self._timeout_ms,
                                     delay_ms=self._heartbeat_ms)
        except BrokerError:
            return  # closed
        call.add_done_callback(self._heartbeat)

    def _end(self, group: str, queue_offset: int, phys_offset: int, state: TransactionState,
             from_check: bool) -> Future[dict[str, Any]]:
        assert self.channel is not None
        return self.channel.call(ROUTE, EndTransaction(group, queue_offset, phys_offset, int(state), from_check),
                                 timeout_ms=self._timeout_ms)

    def on_push(self, route: str, push: dict[str, Any]) -> None:
        """A push on the I/O thread: a check is handed to the checks' thread."""
        if push.get("push") != CHECK_PUSH:
            return
        group = push.get("group")
        check_back = self._check_backs.get(group) if isinstance(group, str) else None
        if check_back is None:
            return
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="mqstore-check-back")
            self._executor.submit(self._answer, str(group), check_back, push)

    def _answer(self, group: str, check_back: CheckBack, push: dict[str, Any]) -> None:
        try:
            decoded = decode_record(bytes(push["record"]), 0, check_crc=False)
            if decoded.record is None:
                raise ValueError(f"the check's record does not decode: {decoded.kind.name}")
            state = TransactionState(check_back(ReceivedMessage.from_record(decoded.record)))
            if state is not TransactionState.UNKNOWN:
                self._end(group, int(push["queue_offset"]), int(push["phys_offset"]), state, True)
        except Exception:
            log.exception("a transaction check of group %s failed; the broker will ask again", group)

    def close(self) -> None:
        self.close_async().result()

    def close_async(self) -> Future[None]:
        """Take no more checks; the future is done once the checks' thread has answered those it holds."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is None:
            return completed(None)
        last = executor.submit(lambda: None)  # one thread, in order: done after every check before it
        executor.shutdown(wait=False)
        return last


def _not_stored(result: SendResult) -> TransactionResult:
    return TransactionResult(result, TransactionState.UNKNOWN, f"the half was not stored: {result.status}")


def _failed_locally(result: SendResult) -> TransactionState:
    """RocketMQ's UNKNOW for a local transaction that raised: the check will ask again."""
    log.exception("the local transaction of %s failed; its half waits for a check", result.uniq_key)
    return TransactionState.UNKNOWN
