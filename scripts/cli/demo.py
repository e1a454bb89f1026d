"""``mqstore demo``: the embedded quick start. Puts messages on a store opened in this process, gets
them back by tag, finds one by key and by message id, closes and verifies the store, and prints
each step's time."""

from __future__ import annotations

import argparse
import time
from typing import Any

from mqstore.engine import Message, PutResult
from mqstore.engine.repair.verify import verify_store
from mqstore.scripts.cli.arguments import add_store, positive
from mqstore.scripts.cli.offline import opened, pull, verdict
from mqstore.scripts.cli.output import print_table

DEMO_TOPIC = "Demo"
DEMO_QUEUES = 4
DEMO_BATCH = 256
DEMO_TAGS = ("TagA", "TagB")


def add_demo_command(commands: Any) -> None:
    demo = commands.add_parser("demo", help="the embedded quick start: put, get, query, verify")
    add_store(demo)
    demo.add_argument("--count", type=positive, default=10_000, metavar="N", help="messages to put (10000)")
    demo.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    count: int = args.count
    steps: list[tuple[str, str, float]] = []
    clock = time.perf_counter()

    def step(name: str, amount: object) -> None:
        nonlocal clock
        now = time.perf_counter()
        steps.append((name, str(amount), now - clock))
        clock = now

    with opened(args.store) as store:
        step("open", args.store)
        start_offsets = [store.max_queue_offset(DEMO_TOPIC, q) for q in range(DEMO_QUEUES)]
        results: list[PutResult] = []
        for first in range(0, count, DEMO_BATCH):
            numbers = range(first, min(first + DEMO_BATCH, count))
            results += store.put_batch([Message(DEMO_TOPIC, f"demo message {i}".encode(), tags=DEMO_TAGS[i % 2],
                                                keys=(f"demo-{i}",)) for i in numbers],
                                       [i % DEMO_QUEUES for i in numbers])
        put_ok = sum(r.ok for r in results)
        step("put_batch", f"{put_ok} of {count}")
        tag_a = sum(len(pull(store, DEMO_TOPIC, q, start_offsets[q], count, DEMO_TAGS[0]))
                    for q in range(DEMO_QUEUES))
        step(f"get {DEMO_TAGS[0]}", f"{tag_a} of {(count + 1) // 2}")
        probe = results[count // 2]
        by_key = [r for r in store.query_by_key(DEMO_TOPIC, f"demo-{count // 2}") if r.phys_offset == probe.phys_offset]
        step("query by key", f"demo-{count // 2}: {'found' if by_key else 'NOT FOUND'}")
        by_id = store.view_by_id(probe.msg_id)
        step("view by id", f"{probe.msg_id}: {'found' if by_id is not None else 'NOT FOUND'}")
    step("close", "")
    report = verify_store(args.store)
    step("verify", verdict(report))

    print_table(f"mqstore demo: {count} messages on {DEMO_QUEUES} queues of topic {DEMO_TOPIC} in {args.store}",
                ("step", "result", "ms", "per second"),
                [(name, result, f"{seconds * 1000:.1f}", _rate(name, count, seconds))
                 for name, result, seconds in steps])
    ok = put_ok == count and tag_a == (count + 1) // 2 and bool(by_key) and by_id is not None and report.ok
    return 0 if ok else 1


def _rate(step: str, count: int, seconds: float) -> str:
    if step not in ("put_batch", f"get {DEMO_TAGS[0]}") or seconds <= 0:
        return ""
    return f"{count / seconds:,.0f}"
