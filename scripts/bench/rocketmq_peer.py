"""The stock RocketMQ client (``rocketmq`` 0.4.4 from PyPI, C++ 1.2.3 inside) driven from the command
line, one JSON object per line on stdout, so tests run it in its own process (its C++ threads and
logs stay out of pytest; ``HOME`` points its logs into the test's directory).

    python -m mqstore.scripts.bench.rocketmq_peer produce NS TOPIC COUNT [--big-every N] [--size N] [--forever]
    [--quiet]
        [--delay-level N]
    python -m mqstore.scripts.bench.rocketmq_peer push NS TOPIC GROUP COUNT TIMEOUT_S [--fail-every N] [--quiet]
        [--stream]
    python -m mqstore.scripts.bench.rocketmq_peer pull NS TOPIC GROUP

Each takes ``--access-key AK --secret-key SK`` to sign its requests (the broker's ACL,
``set_session_credentials``). ``produce --give-up-after N`` stops after N sends in a row raised (a refused
client), printing each error and a last line ``{"gave_up": true}``.

Message ``i`` has key ``key-i``, tag ``Tag{i % 3}`` and body ``body-i`` (every ``--big-every``-th
padded past 4 KiB, which the client compresses). ``--forever`` keeps sending until killed, retrying a
message whose send raised, and prints every SEND_OK. ``--fail-every N``: the push callback answers
RECONSUME_LATER to the first delivery of every N-th message (the client then sends it back).
``push --stream`` prints each delivery as it comes (what a test watches while it fails brokers over)
and runs until killed. ``--size N`` pads every body to N bytes; ``--quiet`` prints one summary line
instead (count, seconds from the first send or delivery to the last), which is what
``mqstore.scripts.bench.remoting`` times.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from typing import Any


def body_of(i: int, big_every: int, size: int = 0) -> bytes:
    body = f"body-{i}".encode()
    if big_every and i % big_every == 0:
        body += b"." * 5000
    return body.ljust(size, b".")


def digest(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=8).hexdigest()


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def produce(args: argparse.Namespace) -> None:
    from rocketmq.client import Message, Producer
    producer = Producer(f"PG_{args.topic}", timeout=3000)
    producer.set_namesrv_addr(args.ns)
    _credentials(producer, args)
    producer.start()
    i = failed = in_a_row = 0
    started = time.perf_counter()
    while args.forever or i < args.count:
        message = Message(args.topic)
        message.set_keys(f"key-{i}")
        message.set_tags(f"Tag{i % 3}")
        for name, _, value in (p.partition("=") for p in args.property):
            message.set_property(name, value)
        body = body_of(i, args.big_every, args.size)
        message.set_body(body)
        if args.delay_level:
            message.set_delay_time_level(args.delay_level)
        try:
            result = producer.send_sync(message)
        except Exception as exc:  # the client gave up after its retries: say so, send it again
            emit(i=i, error=str(exc)[:200])
            failed += 1
            in_a_row += 1
            if args.give_up_after and in_a_row >= args.give_up_after:
                emit(gave_up=True)
                break
            time.sleep(0.2)
            continue
        in_a_row = 0
        if not args.quiet:
            emit(i=i, status=result.status.name, msg_id=result.msg_id, offset=result.offset, digest=digest(body))
        i += 1
    elapsed = time.perf_counter() - started
    producer.shutdown()
    if args.quiet:
        emit(summary=True, count=i, failed=failed, elapsed_s=elapsed)


def _credentials(client: Any, args: argparse.Namespace) -> None:
    if args.access_key is not None:
        client.set_session_credentials(args.access_key, args.secret_key or "", "ALIYUN")


def _received(msg: Any) -> dict[str, Any]:
    return {"id": msg.id, "keys": msg.keys.decode(), "tags": msg.tags.decode(), "digest": digest(msg.body),
            "queue": msg.queue_id, "offset": msg.queue_offset, "topic": msg.topic, "reconsume": msg.reconsume_times}


def push(args: argparse.Namespace) -> None:
    from rocketmq.client import PushConsumer, RecvMessage
    from rocketmq.ffi import _CConsumeStatus
    seen: list[dict[str, Any]] = []
    consumed: set[str] = set()  # ids the callback took without raising; COUNT of them ends the run
    lock = threading.Lock()
    enough = threading.Event()
    first_at: list[float] = []
    last_at: list[float] = []

    def on_message(consumer_handle: Any, raw: Any) -> int:
        item = _received(RecvMessage(raw))
        index = int(item["keys"].split("-")[1])
        fail = bool(args.fail_every and index % args.fail_every == 0 and item["reconsume"] == 0)
        with lock:
            if not first_at:
                first_at.append(time.perf_counter())
            seen.append({**item, "failed": fail})
            if args.stream:
                emit(**item, failed=fail)
            if not fail:
                consumed.add(item["id"])
            if len(consumed) >= args.count and not enough.is_set():
                last_at.append(time.perf_counter())
                enough.set()
        return int(_CConsumeStatus.RECONSUME_LATER.value if fail else _CConsumeStatus.CONSUME_SUCCESS.value)

    consumer = PushConsumer(args.group, orderly=args.orderly)
    consumer.set_namesrv_addr(args.ns)
    consumer.set_thread_count(2)
    _credentials(consumer, args)
    consumer.subscribe(args.topic, lambda msg: None)
    # the wrapper's own callback turns an exception into a ctypes error (and an undefined status), so
    # a failure is answered with RECONSUME_LATER through the C callback itself
    consumer._register_callback(on_message)
    consumer.start()
    if args.stream:
        threading.Event().wait()  # until killed: every delivery is already printed
    enough.wait(args.timeout_s)
    time.sleep(1.0)  # anything delivered twice shows up here
    consumer.shutdown()
    with lock:
        if args.quiet:
            emit(summary=True, count=len(consumed), deliveries=len(seen),
                 elapsed_s=(last_at[0] if last_at else time.perf_counter()) - (first_at[0] if first_at else 0.0))
            return
        for item in seen:
            emit(**item)


def pull(args: argparse.Namespace) -> None:
    from rocketmq.client import PullConsumer
    consumer = PullConsumer(args.group)
    # the wrapper keys its offsets by topic and queue id alone: with two brokers, queue 0 of the second
    # would start where queue 0 of the first ended
    consumer._get_mq_key = lambda mq: f"{mq.topic}@{mq.brokerName}@{mq.queueId}"
    consumer.set_namesrv_addr(args.ns)
    _credentials(consumer, args)
    consumer.start()
    for msg in consumer.pull(args.topic):
        emit(**_received(msg))
    consumer.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(prog="rocketmq_peer")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("ns")
    p.add_argument("topic")
    p.add_argument("count", type=int)
    p.add_argument("--big-every", type=int, default=0)
    p.add_argument("--forever", action="store_true")
    p.add_argument("--size", type=int, default=0)
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--delay-level", type=int, default=0, help="each message's delay level (DELAY), 0: none")
    p.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                   help="a property on every message (e.g. TIMER_DELAY_MS=3000: a timed send)")
    p.add_argument("--give-up-after", type=int, default=0, help="stop after this many failed sends in a row")
    p.set_defaults(run=produce)
    c = sub.add_parser("push")
    c.add_argument("ns")
    c.add_argument("topic")
    c.add_argument("group")
    c.add_argument("count", type=int)
    c.add_argument("timeout_s", type=float)
    c.add_argument("--fail-every", type=int, default=0)
    c.add_argument("--quiet", action="store_true")
    c.add_argument("--orderly", action="store_true", help="an orderly consumer (locks its queues)")
    c.add_argument("--stream", action="store_true", help="print each delivery as it comes; run until killed")
    c.set_defaults(run=push)
    q = sub.add_parser("pull")
    q.add_argument("ns")
    q.add_argument("topic")
    q.add_argument("group")
    q.set_defaults(run=pull)
    for command in (p, c, q):
        command.add_argument("--access-key", help="sign requests as this account (the broker's ACL)")
        command.add_argument("--secret-key")
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
