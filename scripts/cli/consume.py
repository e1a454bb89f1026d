"""``mqstore consume``: messages of a topic from a running broker, printed one a line.

It stops after ``--count`` messages (10) or ``--timeout-ms`` without one; with ``--follow`` it prints
messages as they arrive until Ctrl-C (or ``--count``, when given). Offset mode starts ``--from`` the
group's committed offsets, each queue's ``earliest`` or ``latest``, or a TIME (epoch ms or ISO 8601):
in each queue the first message stored at or after it (the reader's offset-by-time, RocketMQ's
searchOffset), the queue's end when none is. What was printed is committed as the group's offsets.
``--ack`` consumes in ack mode instead: the group's unacked messages, each settled once printed.

``--json`` prints one JSON object a line, the fields of the offline query's records; ``encoding``
says what ``body`` holds: ``utf-8`` the body as text, ``base64`` the bytes of a body that is not UTF-8.
Ctrl-C prints how many were received and exits 130.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.admin import Admin
from mqstore.ipc.client.consumer import START_COMMITTED, START_EARLIEST, START_LATEST, Consumer
from mqstore.ipc.transport.channel import BrokerTimeoutError
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire.receipts import Delivery
from mqstore.scripts.cli.arguments import add_store, positive
from mqstore.scripts.cli.clients import (
    EXIT_INTERRUPTED,
    CtrlC,
    add_connection_arguments,
    client_endpoints,
    message_json,
    no_answer,
)
from mqstore.scripts.cli.output import message_line
from mqstore.scripts.cli.timestamps import epoch_ms

DEFAULT_COUNT = 10
ACK_BATCH = 100  # ack mode with --follow: deliveries asked for at a time
EXIT_USAGE = 2


def start_point(text: str) -> str | int:
    """``--from``: committed, earliest, latest, or a time as epoch ms."""
    return text if text in (START_COMMITTED, START_EARLIEST, START_LATEST) else epoch_ms(text)


def add_consume_command(commands: Any) -> None:
    consume = commands.add_parser("consume", help="print messages from a running broker (--follow: as they arrive)")
    add_store(consume, helptext="the broker's store directory")
    add_connection_arguments(consume)
    consume.add_argument("--topic", required=True, help="the topic to consume")
    consume.add_argument("--group", default="mqstore-cli", help="consumer group")
    consume.add_argument("--tags", default="*", help="subscription, e.g. 'TagA || TagB'")
    consume.add_argument("--from", dest="start", type=start_point, default=START_COMMITTED,
                         metavar="START", help="where to start: committed (the group's offsets), earliest or "
                         "latest (each queue's first or end), or a TIME (epoch ms or ISO 8601): in each queue the "
                         "first message stored at or after it")
    consume.add_argument("--follow", action="store_true",
                         help="print messages as they arrive until Ctrl-C (or --count, when given)")
    consume.add_argument("--count", type=positive, help=f"stop after this many messages ({DEFAULT_COUNT}; "
                         "with --follow: none)")
    consume.add_argument("--timeout-ms", type=positive, default=3000,
                         help="stop after this long without messages (not with --follow)")
    consume.add_argument("--json", action="store_true",
                         help="one JSON message per line (topic, queue_id, ...; encoding says whether body is "
                              "utf-8 text or base64)")
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


def _limit(args: argparse.Namespace) -> int | None:
    """How many messages to print at most; None: until interrupted."""
    if args.count is not None:
        return int(args.count)
    return None if args.follow else DEFAULT_COUNT


def _consume(args: argparse.Namespace) -> int:
    if args.ack:
        if args.start != START_COMMITTED:
            print("mqstore consume: --from is for offset mode; ack mode delivers what the group has not acked",
                  file=sys.stderr)
            return EXIT_USAGE
        return _consume_acked(args)
    received = 0
    limit = _limit(args)
    endpoints = client_endpoints(args)
    start = args.start if isinstance(args.start, str) else START_EARLIEST
    try:
        with CtrlC() as ctrl_c, Consumer(endpoints=endpoints, group=args.group, topic=args.topic, tags=args.tags,
                                         start=start) as consumer:
            if isinstance(args.start, int):
                _seek_to_time(consumer, endpoints, args.start, args.timeout_ms)
            try:
                while limit is None or received < limit:
                    batch = consumer.poll(args.timeout_ms, max_count=None if limit is None else limit - received)
                    if not batch:
                        if args.follow:
                            continue
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


def _seek_to_time(consumer: Consumer, endpoints: Endpoints, ts_ms: int, timeout_ms: int) -> None:
    """Each queue from its first message stored at or after ``ts_ms`` (its end when there is none)."""
    with Admin(endpoints=endpoints, timeout_ms=timeout_ms) as admin:
        for queue_id in consumer.queues:
            consumer.seek(queue_id, admin.offset_by_time(consumer.topic, queue_id, ts_ms))


def _consume_acked(args: argparse.Namespace) -> int:
    received = 0
    limit = _limit(args)
    verb = {"ack": "acked", "nack": "nacked (requeued)", "dlq": "dead-lettered", "none": "left unacked"}
    endpoints = client_endpoints(args)
    try:
        with CtrlC() as ctrl_c, AckConsumer(endpoints=endpoints, group=args.group, topic=args.topic, tags=args.tags,
                                            prefetch=args.prefetch, visibility_ms=args.visibility_ms) as consumer:
            while limit is None or received < limit:
                batch = consumer.receive(limit - received if limit is not None else ACK_BATCH, args.timeout_ms)
                if not batch:
                    if args.follow:
                        continue
                    break
                with ctrl_c.held_back():  # printed, settled and counted, or none of it
                    _print_and_settle(consumer, batch, args)
                    received += len(batch)
    except KeyboardInterrupt:
        print(f"mqstore consume: {received} received and {verb[args.settle]} (interrupted)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokerTimeoutError:
        raise no_answer(args, args.timeout_ms) from None
    print(f"mqstore consume: {received} received and {verb[args.settle]}", file=sys.stderr)
    return 0


def _print_and_settle(consumer: AckConsumer, batch: list[Delivery], args: argparse.Namespace) -> None:
    for d in batch:
        print(json.dumps({**message_json(d), "redelivered": d.redelivered, "delivery_count": d.delivery_count})
              if args.json else message_line(d, f"redelivered={d.redelivered} delivery_count={d.delivery_count}"),
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
