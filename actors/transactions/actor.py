"""The ``transactions`` actor process: END_TRANSACTION for every front, and the check service's cadence.

It binds the ``transactions`` ROUTER. Requests:

- ``end_transaction`` {group, queue_offset, phys_offset, state (0 unknown, 8 commit, 12 rollback),
  from_check}: the half named is committed or rolled back (``mqstore.actors.transactions.resolver``); the
  ipc ``Producer`` and the remoting front (END_TRANSACTION, code 37) both send it;
- ``register_producer`` {groups}: this connection answers checks for these producer groups
  (``mqstore.actors.transactions.producers``);
- ``resume_check`` {phys_offset}: a half the check service discarded goes back on the half queue
  with its check count at 0 (RESUME_CHECK_HALF_MESSAGE, code 323);
- ``ping``.

Every ``[broker] transaction_check_interval_ms`` a check run (``mqstore.actors.transactions.checker``) sends
``check_transaction`` pushes to registered producers. Everything it needs to resume is in the store
(the half and op queues, the ``CID_RMQ_SYS_TRANS`` offsets); the registrations come back with the
producers' next heartbeat.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.runtime import Runtime
from mqstore.actors.transactions.broker import BrokerCalls
from mqstore.actors.transactions.checker import Checker, CheckRun, CheckSettings
from mqstore.actors.transactions.producers import ProducerTable
from mqstore.actors.transactions.resolver import EndRequest, Resolver
from mqstore.engine.log.host import Host
from mqstore.engine.put import transactions as tx
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError, Channel
from mqstore.ipc.transport.sockets import bind, recv_first, recv_routed
from mqstore.ipc.wire import replies, requests, schema
from mqstore.ipc.wire.requests import (
    TRANSACTIONS,
    EndTransaction,
    Ping,
    RegisterProducer,
    Request,
    ResumeCheck,
    UnknownOpError,
)

log = logging.getLogger("mqstore")

MAX_REQUEST_BYTES = 1024 * 1024
END_FAILED = "END_TRANSACTION_FAILED"
RESUME_FAILED = "RESUME_CHECK_FAILED"
NOT_COMMITTED = replies.EndTransactionReply("", -1)  # a rollback, or a state left unknown


class TransactionsActor:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        ep = runtime.endpoints
        cfg = runtime.config
        self.channel = Channel({"ingress": [ep.own_ingress], "reader": [ep.reader(0)]}, name="mqstore-transactions",
                               curve=ep.curve)
        host = cfg.store.store_host
        self.broker = BrokerCalls(self.channel, Host(host.ip, host.port), tx.CHECK_GROUP)
        self.resolver = Resolver(self.broker, wall_ms, time.sleep, cfg.broker.transaction_timeout_ms)
        self.producers = ProducerTable()
        self.router: zmq.Socket[Any] | None = None
        self.roles = cfg.key_roles()  # what each CURVE client key may do; None: no CURVE, none apply
        # the check run's calls give up once the actor stops: its peers may be gone (a producer's end is waited for)
        check_calls = BrokerCalls(self.channel, Host(host.ip, host.port), tx.CHECK_GROUP, lambda: self.rt.stopping)
        self.checker = Checker(check_calls, CheckSettings(cfg.broker.transaction_timeout_ms,
                                                          cfg.broker.transaction_check_max,
                                                          cfg.retention.reserved_ms),
                               wall_ms, self._ask)
        self.totals = CheckRun()
        self.ended = 0

    def run(self) -> None:
        router = bind(self.rt.ctx, zmq.ROUTER, self.rt.endpoints.transactions, max_msg_bytes=MAX_REQUEST_BYTES)
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.router = router
        interval_ms = self.rt.config.broker.transaction_check_interval_ms
        next_run = monotonic_ms() + interval_ms
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(self.rt.stop_fd, zmq.POLLIN)  # a stop ends the round at once
        try:
            while not self.rt.stopping:
                # requests wake the loop; the check run's cadence is the one deadline
                if router in self.rt.poll(poller, max(0, next_run - monotonic_ms())):
                    self._serve(router)
                if monotonic_ms() >= next_run and not self.rt.stopping:
                    try:
                        self._add(self.checker.run())
                    except (BrokerError, BrokerTimeoutError) as exc:
                        log.warning("transactions: check run stopped: %s", exc)
                    next_run = monotonic_ms() + interval_ms
                self.rt.report("running", producer_groups=len(self.producers.groups), ended=self.ended,
                               read_retries=self.resolver.read_retries, checked=self.totals.checked,
                               discarded=self.totals.discarded)
        finally:
            self.channel.close()

    def _add(self, run: CheckRun) -> None:
        self.totals.checked += run.checked
        self.totals.discarded += run.discarded
        self.totals.passed += run.passed

    def _ask(self, group: str, push: dict[str, object]) -> bool:
        assert self.router is not None
        return self.producers.push(self.router, group, push)

    def _serve(self, router: zmq.Socket[Any]) -> None:
        """Every request waiting: the others answered at once, the ends resolved together."""
        ends: list[tuple[bytes, Any, EndRequest]] = []
        by_key = self.roles is not None and self.roles.poll()  # whose key sent each request matters
        while True:
            try:
                first, user_id = recv_first(router, zmq.NOBLOCK) if by_key else (None, None)
                frames = recv_routed(router, first)
            except zmq.Again:
                break
            identity, request_id = frames[0], None
            try:
                if len(frames) != 2:
                    raise schema.SchemaError("expected a map frame after the identity")
                message = schema.unpack(frames[1], max_bytes=MAX_REQUEST_BYTES)
                request_id = message.get("id")
                request = requests.decode_request(message, TRANSACTIONS)
                refusal = self.roles.refusal(user_id, request) if self.roles is not None else None
                if refusal is not None:
                    reply = schema.error_reply(request_id, schema.NO_PERMISSION, refusal)
                elif isinstance(request, EndTransaction):
                    ends.append((identity, request_id, _end_request(request)))
                    continue
                else:
                    reply = self._handle(identity, request_id, request)
            except UnknownOpError as exc:
                reply = schema.error_reply(request_id, schema.UNKNOWN_OP, str(exc))
            except schema.SchemaError as exc:
                reply = schema.error_reply(request_id, schema.BAD_REQUEST, str(exc))
            _reply(router, identity, reply)
        if not ends:
            return
        try:
            results = self.resolver.end([end for _, _, end in ends])
        except (BrokerError, BrokerTimeoutError) as exc:
            for identity, request_id, _ in ends:
                _reply(router, identity, schema.error_reply(request_id, schema.SERVICE_NOT_AVAILABLE, str(exc)))
            return
        for (identity, request_id, end), result in zip(ends, results, strict=True):
            if not result.ok:
                log.warning("transactions: end of half %d refused: %s", end.tran_state_offset, result.reason)
                _reply(router, identity, schema.error_reply(request_id, result.status or END_FAILED, result.reason))
                continue
            self.ended += 1
            committed = result.committed
            ended = replies.EndTransactionReply(committed.msg_id, committed.phys_offset) if committed else NOT_COMMITTED
            _reply(router, identity, ended.encode(request_id))

    def _handle(self, identity: bytes, request_id: Any, request: Request) -> dict[str, Any]:
        if isinstance(request, RegisterProducer):
            self.producers.register(identity, list(request.groups), monotonic_ms())
            return replies.RegisterProducerReply().encode(request_id)
        if isinstance(request, ResumeCheck):
            try:
                result = self.resolver.resume(request.phys_offset)
            except (BrokerError, BrokerTimeoutError) as exc:
                return schema.error_reply(request_id, schema.SERVICE_NOT_AVAILABLE, str(exc))
            if not result.ok or result.committed is None:
                return schema.error_reply(request_id, RESUME_FAILED, result.reason)
            resumed = result.committed
            return replies.ResumeCheckReply(resumed.queue_offset, resumed.phys_offset).encode(request_id)
        assert isinstance(request, Ping), request
        return replies.PingReply(os.getpid()).encode(request_id)


def _end_request(request: EndTransaction) -> EndRequest:
    return EndRequest(request.group, request.queue_offset, request.phys_offset, tx.TransactionState(request.state),
                      bool(request.from_check))


def _reply(router: zmq.Socket[Any], identity: bytes, reply: dict[str, Any]) -> None:
    with contextlib.suppress(zmq.ZMQError):  # the client went away or reads nothing: it times out
        router.send_multipart([identity, schema.pack(reply)], zmq.NOBLOCK)
