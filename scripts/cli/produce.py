"""``mqstore produce``: messages to a running broker, from stdin, a file, ``--body`` or a counter.

Where the bodies come from:

- ``--body TEXT``: TEXT exactly (its bytes as the shell passed them), ``--count`` times (1);
- ``--file PATH``: each line of PATH is one message (``-``: stdin);
- neither, with ``--count N``: N test messages, ``hello from mqstore 0`` and on;
- neither: each line of stdin is one message, as kafka-console-producer sends them (typed at a
  terminal too, until Ctrl-D).

A line is sent exactly as read, without its ``\\n``: a ``\\r`` before it stays in the body, an empty
line is an empty message, a last line without ``\\n`` is a message, bytes that are not UTF-8 are
sent as they are (``mqstore.scripts.cli.line_batches``). A line longer than the broker's largest message
body (``[store] max_body_bytes``, asked of its writer before the first line is read) is refused with
its number and length on stderr, never held whole, and the lines after it go on: each line is a
message of its own, and input from a pipe cannot be read again. Lines go out in batches (``--batch`` lines,
one request each, a few requests in flight), and a batch is cut as soon as stdin has nothing more
ready, so a line typed into a pipe is sent at once. Every message carries the tags, keys,
properties and delay given (``mqstore.scripts.cli.message_options``).

Each message that is not stored is said on stderr with the broker's reason, then a summary of what
was sent; exit 1 when any failed or is in doubt (stored, a wait failed: FLUSH_DISK_TIMEOUT, ...),
130 after Ctrl-C (with the summary so far), 2 for an option no message may carry.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, NamedTuple

from mqstore.actors.config import BrokerSection
from mqstore.engine.log.message import PutStatus
from mqstore.ipc.client.api import Producer
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError, Channel
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire import replies, requests
from mqstore.ipc.wire.encoded import EncodingError, SendResults
from mqstore.ipc.wire.messages import Outgoing, SendResult
from mqstore.scripts.cli.arguments import add_store, non_negative, positive
from mqstore.scripts.cli.clients import (
    EXIT_INTERRUPTED,
    CtrlC,
    add_connection_arguments,
    client_endpoints,
    no_answer,
)
from mqstore.scripts.cli.line_batches import LineBatch, TooLong, line_batches
from mqstore.scripts.cli.message_options import (
    MessageOptionError,
    MessageOptions,
    add_message_arguments,
    message_options,
)

GENERATED_BODY = "hello from mqstore"
BATCH_MAX_BYTES = 1 << 20  # lines a request at most, in bytes: far below the broker's [broker] max_request_bytes
MAX_BATCH = BrokerSection().max_batch_messages
IN_FLIGHT = 4  # requests sent and not yet answered: the broker appends one while the next is on its way
EXIT_USAGE = 2
STDIN_FD = 0


def batch_size(text: str) -> int:
    value = positive(text)
    if value > MAX_BATCH:
        raise argparse.ArgumentTypeError(f"{value} is more than a request carries ({MAX_BATCH}, the broker's "
                                         "[broker] max_batch_messages by default)")
    return value


def add_produce_command(commands: Any) -> None:
    produce = commands.add_parser("produce", help="send messages to a running broker: each line of stdin, "
                                  "a file's lines, --body, or --count test messages")
    add_store(produce, helptext="the broker's store directory")
    add_connection_arguments(produce)
    produce.add_argument("--topic", required=True, help="the topic to send to")
    source = produce.add_mutually_exclusive_group()
    source.add_argument("--body", metavar="TEXT",
                        help="send this text exactly, --count times (default: each line of stdin)")
    source.add_argument("--file", type=Path, metavar="PATH", help="send each line of PATH as a message (- is stdin)")
    produce.add_argument("--count", type=positive,
                         help=f"with --body: send it this often (1); alone: this many test messages "
                              f"('{GENERATED_BODY} N')")
    produce.add_argument("--batch", type=batch_size, default=1000,
                         help=f"messages per request (at most {MAX_BATCH}, the broker's [broker] max_batch_messages)")
    add_message_arguments(produce)
    produce.add_argument("--key-prefix", help="key of message i is PREFIX-i")
    produce.add_argument("--queue", type=non_negative, help="send to this queue id (default: round robin)")
    produce.add_argument("--timeout-ms", type=positive, default=3000, help="how long to wait for each answer")
    produce.add_argument("--json", action="store_true", help="one JSON result per line (status, queue_id, ...)")
    produce.set_defaults(handler=_produce)


def _bodies(args: argparse.Namespace, fd: int, max_body_bytes: int) -> Iterator[LineBatch]:
    """The bodies to send, in batches: ``--body``'s or the test messages, else the lines of ``fd``
    (those longer than ``max_body_bytes`` refused)."""
    if args.body is not None or args.count is not None:
        body = os.fsencode(args.body) if args.body is not None else None
        count = args.count or 1
        for start in range(0, count, args.batch):
            indices = range(start, min(count, start + args.batch))
            yield LineBatch([body if body is not None else f"{GENERATED_BODY} {i}".encode() for i in indices], False)
        return
    if os.isatty(fd):
        print("mqstore produce: each line is a message; Ctrl-D ends", file=sys.stderr)
    yield from line_batches(fd, args.batch, BATCH_MAX_BYTES, max_body_bytes)


def _reads_lines(args: argparse.Namespace) -> bool:
    return args.body is None and args.count is None


def max_body_bytes(endpoints: Endpoints, timeout_ms: int) -> int:
    """The broker's largest message body (``[store] max_body_bytes``), asked of its writer."""
    channel = Channel({"ingress": [endpoints.ingress]}, name="mqstore-produce", curve=endpoints.curve)
    try:
        reply = channel.request("ingress", requests.Encoding(), timeout_ms=timeout_ms)
    finally:
        channel.close()
    return replies.EncodingReply.decode(reply).max_body_bytes


class _Tally:
    """What the broker answered so far, printed as it comes, and the summary."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.sent = self.failed = 0
        self.in_doubt: Counter[str] = Counter()  # stored, a wait failed: FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, ...

    def count(self, result: SendResult, ctrl_c: CtrlC) -> None:
        with ctrl_c.held_back():  # the summary counts exactly what was reported
            self.sent += result.ok
            self.failed += not result.stored
            if result.stored and not result.ok:
                self.in_doubt[result.status] += 1
        if self.as_json:
            print(json.dumps({"status": result.status, "msg_id": result.msg_id, "queue_id": result.queue_id,
                              "queue_offset": result.queue_offset, "reason": result.reason}), flush=True)
        if not result.stored:
            print(f"mqstore produce: not sent: {result.status}: {result.reason}", file=sys.stderr)

    def refuse(self, too_long: Sequence[TooLong], limit: int, ctrl_c: CtrlC) -> None:
        """Lines not sent for their length: each said on stderr, counted as failed."""
        with ctrl_c.held_back():
            self.failed += len(too_long)
        for line in too_long:
            print(f"mqstore produce: not sent: line {line.number} is {line.size_bytes} bytes, more than the "
                  f"broker's largest message body ({limit} bytes, [store] max_body_bytes)", file=sys.stderr)

    def summary(self) -> str:
        return f"mqstore produce: {self.sent} sent, {self.failed} failed" + "".join(
            f", {n} {status}" for status, n in sorted(self.in_doubt.items()))


class _Request(NamedTuple):
    messages: Sequence[Outgoing]
    reply: Future[SendResults] | Future[list[SendResult]]
    encoded: bool


def _send(producer: Producer, messages: Sequence[Outgoing], delayed: bool) -> _Request:
    """One request for ``messages``: encoded here (the fast path) unless delayed, or the encoder
    refuses one of them, when the broker checks each and says why per message."""
    if not delayed:
        try:
            return _Request(messages, producer.send_encoded_async(messages), True)
        except EncodingError:
            pass
    return _Request(messages, producer.send_batch_async(messages), False)


def _results(producer: Producer, request: _Request) -> Sequence[SendResult]:
    """The broker's answer to ``request``. An encoded batch it refused whole (MESSAGE_ILLEGAL: refused
    before any write, a queue id out of range, say) goes again as messages, so each gets its own reason."""
    try:
        return request.reply.result()
    except BrokerError as exc:
        if not request.encoded or exc.status != PutStatus.MESSAGE_ILLEGAL:
            raise
    return producer.send_batch(request.messages)


def _produce(args: argparse.Namespace) -> int:
    if args.file is not None and args.count is not None:
        print("mqstore produce: --count goes with --body or alone; --file sends each of its lines once",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        options = message_options(args, args.store)
    except MessageOptionError as exc:
        print(f"mqstore produce: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from_file = args.file is not None and str(args.file) != "-"
    fd = os.open(args.file, os.O_RDONLY) if from_file else STDIN_FD  # a missing file: said before sending
    try:
        return _produce_from(args, options, fd)
    finally:
        if from_file:
            os.close(fd)


def _produce_from(args: argparse.Namespace, options: MessageOptions, fd: int) -> int:
    endpoints = client_endpoints(args)
    tally = _Tally(args.json)
    in_flight: deque[_Request] = deque()
    sent_count = 0
    try:
        with CtrlC() as ctrl_c, Producer(endpoints=endpoints, timeout_ms=args.timeout_ms) as producer:
            limit = max_body_bytes(endpoints, args.timeout_ms) if _reads_lines(args) else 0
            for batch in _bodies(args, fd, limit):
                tally.refuse(batch.too_long, limit, ctrl_c)
                if not batch.lines:
                    continue
                messages = [_message(args, options, body, sent_count + i) for i, body in enumerate(batch.lines)]
                sent_count += len(messages)
                in_flight.append(_send(producer, messages, options.delayed))
                while in_flight and (len(in_flight) > IN_FLIGHT or batch.idle):
                    for result in _results(producer, in_flight.popleft()):
                        tally.count(result, ctrl_c)
            while in_flight:
                for result in _results(producer, in_flight.popleft()):
                    tally.count(result, ctrl_c)
    except KeyboardInterrupt:
        print(f"{tally.summary()} (interrupted)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokerTimeoutError:
        if tally.sent or tally.failed:
            print(tally.summary(), file=sys.stderr)
        raise no_answer(args, args.timeout_ms) from None
    except BrokerError:  # a request refused whole: main says why
        if tally.sent or tally.failed:
            print(tally.summary(), file=sys.stderr)
        raise
    print(tally.summary(), file=sys.stderr)
    return 0 if tally.failed == 0 and not tally.in_doubt else 1


def _message(args: argparse.Namespace, options: MessageOptions, body: bytes, index: int) -> Outgoing:
    keys = (*options.keys, f"{args.key_prefix}-{index}") if args.key_prefix else options.keys
    return Outgoing(args.topic, body, options.tags, keys, options.properties, args.queue)
