"""Clients of a running broker from the command line: ``produce`` and ``consume``, and the offline
``query``'s questions when a broker holds the store.

Each finds the broker from ``--store`` (its ipc sockets in the run directory derived from the store's
path) or ``--tcp``. No socket there means no broker: said at once, before any request waits for an
answer; a socket that nobody answers is said after the request's timeout. Failures are said with
their reasons on stderr; Ctrl-C stops a command with the summary of what it did so far (exit 130).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mqstore.engine.errors import MqstoreError
from mqstore.ipc.transport.channel import BrokerTimeoutError
from mqstore.ipc.transport.curve import DEFAULT_CLIENT, CurveKeys
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.scripts.cli.arguments import add_store, host_port, non_negative, positive
from mqstore.scripts.cli.output import json_body, message_line

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped


class NoBrokerError(MqstoreError, ConnectionError):
    """No broker runs where a client command looks for one: the reason says where it looked."""


class _CtrlC:
    """Ctrl-C as KeyboardInterrupt, except inside ``held_back()``: there it waits for the block's end, so a
    summary counts exactly what was printed. (Python runs signal handlers in the main thread, between
    bytecodes, whichever thread the kernel handed the signal to.)"""

    def __init__(self) -> None:
        self.held = self.pending = False

    def __enter__(self) -> _CtrlC:
        self.previous = signal.signal(signal.SIGINT, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self.previous)

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.held:
            self.pending = True
        else:
            raise KeyboardInterrupt

    @contextmanager
    def held_back(self) -> Iterator[None]:
        self.held = True
        try:
            yield
        finally:
            self.held = False
            if self.pending:
                raise KeyboardInterrupt


def _add_tcp_arguments(cmd: Any) -> None:
    cmd.add_argument("--tcp", metavar="HOST:PORT", type=host_port, help="the broker's [ipc] tcp_host and "
                     "tcp_base_port (default: its ipc sockets, found from --store)")
    cmd.add_argument("--keys", type=Path, help="CURVE key directory with server.key and CLIENT.key_secret")
    cmd.add_argument("--client", default=DEFAULT_CLIENT, help=f"CURVE client name in --keys ({DEFAULT_CLIENT})")


def client_endpoints(args: argparse.Namespace) -> Endpoints:
    """Where a client command finds the broker: its ipc sockets, or TCP (with CURVE keys when given).
    Raises NoBrokerError when the run directory has no socket for it: no broker runs on that store."""
    if not args.tcp:
        endpoints = Endpoints.for_store(args.store)
        if not endpoints.socket_exists("ingress"):
            raise NoBrokerError(f"no broker runs on {args.store}: its run directory {endpoints.run_dir} has no "
                                f"sockets (start one with mqstore start --store {args.store})")
        return endpoints
    host, tcp_base_port = args.tcp
    curve = CurveKeys.for_client(args.keys, args.client) if args.keys else None
    return Endpoints.for_store(args.store, tcp_host=host, tcp_base_port=tcp_base_port, curve=curve)


def no_answer(args: argparse.Namespace, timeout_ms: int) -> NoBrokerError:
    """What a client command says when its request got no answer: no broker serves those sockets."""
    if args.tcp:
        where = "{}:{}".format(*args.tcp)
        return NoBrokerError(f"no broker answers on {where} within {timeout_ms} ms (is it running there?)")
    run_dir = Endpoints.for_store(args.store).run_dir
    return NoBrokerError(f"no broker answers on {args.store} within {timeout_ms} ms: its sockets are in {run_dir}, "
                         f"but nothing serves them (a broker that was killed leaves them behind; start one with "
                         f"mqstore start --store {args.store})")


def add_client_commands(commands: Any) -> None:
    produce = commands.add_parser("produce", help="send messages to a running broker")
    add_store(produce, helptext="the broker's store directory")
    _add_tcp_arguments(produce)
    produce.add_argument("--topic", required=True, help="the topic to send to")
    produce.add_argument("--body", default="hello from mqstore", help="message body text (a counter is appended)")
    produce.add_argument("--count", type=positive, default=1, help="messages to send")
    produce.add_argument("--batch", type=positive, default=100, help="messages per request (100)")
    produce.add_argument("--tags", help="the messages' tag")
    produce.add_argument("--key-prefix", help="key of message i is PREFIX-i")
    produce.add_argument("--queue", type=non_negative, help="send to this queue id (default: round robin)")
    produce.add_argument("--timeout-ms", type=positive, default=3000, help="how long to wait for each answer")
    produce.add_argument("--json", action="store_true", help="one JSON result per line (status, queue_id, ...)")
    produce.set_defaults(handler=_produce)

    consume = commands.add_parser("consume", help="pull messages from a running broker")
    add_store(consume, helptext="the broker's store directory")
    _add_tcp_arguments(consume)
    consume.add_argument("--topic", required=True, help="the topic to consume")
    consume.add_argument("--group", default="mqstore-cli", help="consumer group")
    consume.add_argument("--tags", default="*", help="subscription, e.g. 'TagA || TagB'")
    consume.add_argument("--from", dest="start", choices=("committed", "earliest", "latest"), default="committed",
                         help="where to start: the group's committed offsets, or each queue's first or end")
    consume.add_argument("--count", type=positive, default=10, help="stop after this many messages (10)")
    consume.add_argument("--timeout-ms", type=positive, default=3000, help="stop after this long without messages")
    consume.add_argument("--json", action="store_true", help="one JSON message per line (topic, queue_id, ...)")
    consume.add_argument("--ack", action="store_true",
                         help="ack mode: each message comes with a receipt and is acked once printed")
    consume.add_argument("--visibility-ms", type=positive, help="ack mode: redeliver what is not acked within this")
    consume.add_argument("--prefetch", type=positive, help="ack mode: unacked messages per queue at most")
    consume.add_argument("--no-ack", dest="settle", action="store_const", const="none", default="ack",
                         help="ack mode: receive without acking (they come back after the visibility timeout)")
    consume.add_argument("--nack", dest="settle", action="store_const", const="nack",
                         help="ack mode: nack with requeue instead of acking")
    consume.add_argument("--dead-letter", dest="settle", action="store_const", const="dlq",
                         help="ack mode: nack without requeue: each message goes to %%DLQ%%{group}")
    consume.set_defaults(handler=_consume)


def message_json(m: Any) -> dict[str, Any]:
    """A received message, JSON-ready, in the same shape as the offline query's records."""
    body, encoding = json_body(m.body)
    return {"type": "record", "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "phys_offset": m.phys_offset, "size": m.size, "flag": m.flag, "sys_flag": m.sys_flag, "tags": m.tags,
            "keys": list(m.keys), "properties": dict(m.properties), "body": body, "encoding": encoding,
            "born_ms": m.born_ms, "born_host": f"{m.born_host[0]}:{m.born_host[1]}", "store_ms": m.store_ms,
            "store_host": f"{m.store_host[0]}:{m.store_host[1]}", "reconsume_times": m.reconsume_times,
            "msg_id": m.msg_id, "uniq_key": m.uniq_key}


def _produce(args: argparse.Namespace) -> int:
    from mqstore.ipc.client.api import Producer
    sent = failed = 0
    in_doubt: Counter[str] = Counter()  # stored, a wait failed: FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, ...
    endpoints = client_endpoints(args)

    def summary() -> str:
        return f"mqstore produce: {sent} sent, {failed} failed" + "".join(
            f", {n} {status}" for status, n in sorted(in_doubt.items()))
    try:
        with _CtrlC() as ctrl_c, Producer(endpoints=endpoints, timeout_ms=args.timeout_ms) as producer:
            for start in range(0, args.count, args.batch):
                batch = [{"topic": args.topic, "body": f"{args.body} {i}".encode(), "tags": args.tags,
                          "keys": [f"{args.key_prefix}-{i}"] if args.key_prefix else [], "queue_id": args.queue}
                         for i in range(start, min(args.count, start + args.batch))]
                for result in producer.send_batch(batch):
                    with ctrl_c.held_back():
                        sent += result.ok
                        failed += not result.stored
                        if result.stored and not result.ok:
                            in_doubt[result.status] += 1
                    if args.json:
                        print(json.dumps({"status": result.status, "msg_id": result.msg_id,
                                          "queue_id": result.queue_id, "queue_offset": result.queue_offset,
                                          "reason": result.reason}), flush=True)
                    if not result.stored:
                        print(f"mqstore produce: not sent: {result.status}: {result.reason}", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"{summary()} (interrupted)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokerTimeoutError:
        if sent or failed:
            print(summary(), file=sys.stderr)
        raise no_answer(args, args.timeout_ms) from None
    print(summary(), file=sys.stderr)
    return 0 if failed == 0 and not in_doubt else 1


def _consume(args: argparse.Namespace) -> int:
    if args.ack:
        return _consume_acked(args)
    from mqstore.ipc.client.api import Consumer
    received = 0
    endpoints = client_endpoints(args)
    try:
        with _CtrlC() as ctrl_c, Consumer(endpoints=endpoints, group=args.group, topic=args.topic, tags=args.tags,
                                          start=args.start) as consumer:
            try:
                while received < args.count:
                    batch = consumer.poll(args.timeout_ms, max_count=args.count - received)
                    if not batch:
                        break
                    for m in batch:
                        with ctrl_c.held_back():  # the summary counts exactly the lines printed
                            print(json.dumps(message_json(m)) if args.json else message_line(m), flush=True)
                            received += 1
            finally:
                consumer.commit()  # what was printed, interrupted or not
    except KeyboardInterrupt:
        print(f"mqstore consume: {received} received (interrupted)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokerTimeoutError:
        raise no_answer(args, args.timeout_ms) from None
    print(f"mqstore consume: {received} received", file=sys.stderr)
    return 0


def _consume_acked(args: argparse.Namespace) -> int:
    from mqstore.ipc.client.ack_consumer import AckConsumer
    received = 0
    verb = {"ack": "acked", "nack": "nacked (requeued)", "dlq": "dead-lettered", "none": "left unacked"}
    endpoints = client_endpoints(args)
    try:
        with AckConsumer(endpoints=endpoints, group=args.group, topic=args.topic, tags=args.tags,
                         prefetch=args.prefetch, visibility_ms=args.visibility_ms) as consumer:
            while received < args.count:
                batch = consumer.receive(args.count - received, args.timeout_ms)
                if not batch:
                    break
                for d in batch:
                    print(json.dumps({**message_json(d), "redelivered": d.redelivered,
                                      "delivery_count": d.delivery_count}) if args.json else
                          message_line(d, f"redelivered={d.redelivered} delivery_count={d.delivery_count}"),
                          flush=True)
                if args.settle == "ack":
                    statuses = consumer.ack(batch)
                elif args.settle in ("nack", "dlq"):
                    statuses = consumer.nack(batch, requeue=args.settle == "nack")
                else:
                    statuses = ["OK"] * len(batch)
                refused = [s for s in statuses if s != "OK"]
                if refused:
                    print(f"mqstore consume: {len(refused)} not settled: {refused[0]}", file=sys.stderr)
                received += len(batch)
    except KeyboardInterrupt:
        print(f"mqstore consume: {received} received and {verb[args.settle]} (interrupted)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokerTimeoutError:
        raise no_answer(args, args.timeout_ms) from None
    print(f"mqstore consume: {received} received and {verb[args.settle]}", file=sys.stderr)
    return 0


def query_broker(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The offline query's questions asked of a running broker's readers."""
    from mqstore.ipc.client.api import Admin, Consumer
    with Admin(args.store) as admin:
        if args.key is not None:
            found = admin.query_by_key(args.topic, args.key)
        elif args.msg_id is not None:
            one = admin.view_by_id(args.msg_id)
            found = [one] if one is not None else []
        elif args.uniq_key is not None:
            topics = [args.topic] if args.topic else sorted(admin.topics())
            found = [m for t in topics for m in admin.query_by_uniq_key(t, args.uniq_key)]
        else:
            with Consumer(args.store, group="mqstore-cli-query", topic=args.topic, queues=[args.queue],
                          tags=args.tags or "*", start="earliest", auto_commit=False) as consumer:
                consumer.seek(args.queue, args.offset)
                found = consumer.messages(args.count, timeout_ms=1000)
    return [message_json(m) for m in found]
