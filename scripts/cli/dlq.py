"""Dead letters sent back where they came from:

    mqstore dlq replay GROUP [--to TOPIC] [--max N] [--batch N] [--json]

A group's dead letters are on ``%DLQ%{GROUP}`` (RocketMQ's dead-letter topic): those of its plain
consumers (sent back past ``max_reconsume_times``, the original topic in ``RETRY_TOPIC``) and those
of its ack-mode queues (past ``ack_max_deliveries`` or nacked without requeue, the original topic in
``ORIGIN_TOPIC``). Each is sent again to its original topic (or ``--to``) with its body, tags, keys
and the user's properties, plus one more key and the property ``REPLAYED_FROM``, both the dead
letter's message id.

Each dead letter is replayed once, even across a SIGKILL of this command or of the broker:

1. progress is the committed offset of the group ``%REPLAY%{GROUP}`` on the DLQ topic, moved past a
   batch only after the writer stored the batch's copies and the flush service flushed them, and
   written to disk (``persist_offsets``) before the next batch;
2. before a batch is sent, the target topic is asked by key (the index) for each dead letter's
   message id: a copy found there (sent by a run killed before its commit) is not sent again;
3. before the first batch the command waits until the index builder has indexed everything the
   commitlog held when it started, so the copies of an earlier run are all in the index.

One replay per group at a time, and a rerun with the same ``--to``: the lookup asks the topic it
sends to. The dead letters stay on the DLQ topic until retention.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore.engine.log.record import PROP_CRC_KEY, PROP_KEYS, PROP_TAGS
from mqstore.ipc.transport.control import control_request
from mqstore.ipc.wire.messages import Outgoing, ReceivedMessage
from mqstore.ipc.wire.receipts import dlq_topic
from mqstore.scripts.cli.arguments import add_store, positive
from mqstore.scripts.cli.offline import CommandError
from mqstore.scripts.cli.queues import running_admin

REPLAY_GROUP_PREFIX = "%REPLAY%"
REPLAYED_FROM = "REPLAYED_FROM"
# what the DLQ's senders added (mqstore.actors.reader.dead_letters, the remoting front's send-back) and
# what the broker sets itself: not the original message's, so not sent again
DEAD_LETTER_PROPERTIES = frozenset({
    PROP_TAGS, PROP_KEYS, PROP_CRC_KEY, "UNIQ_KEY", "ORIGIN_TOPIC", "ORIGIN_QUEUE", "ORIGIN_OFFSET",
    "ORIGIN_MESSAGE_ID", "RECONSUME_TIMES", "RETRY_TOPIC", "RECONSUME_TIME", "DELAY", "REAL_TOPIC", "REAL_QID",
    "MAX_OFFSET", "MIN_OFFSET", "CLUSTER", "WAIT", REPLAYED_FROM})
INDEX_WAIT_S = 60.0
FLUSH_WAIT_S = 60.0
POLL_S = 0.02
BATCH = 256
CRASH_ENV = "MQSTORE_DLQ_REPLAY_KILL_AFTER_SEND"  # tests: SIGKILL itself after this many batches' sends


def add_dlq_commands(commands: Any) -> None:
    dlq = commands.add_parser("dlq", help="a consumer group's dead letters")
    actions = dlq.add_subparsers(dest="action", required=True, metavar="ACTION")
    replay = actions.add_parser("replay", help="send a group's dead letters (%%DLQ%%GROUP) again to their original "
                                "topic, each once, even across a crash (a running broker)")
    replay.add_argument("group", help="the consumer group whose dead letters are replayed")
    replay.add_argument("--to", metavar="TOPIC", help="send them to this topic instead of their original one")
    replay.add_argument("--max", type=positive, dest="max_count", metavar="N", help="replay at most N dead letters")
    replay.add_argument("--batch", type=positive, default=BATCH, help="dead letters sent (and committed) at once")
    add_store(replay)
    replay.add_argument("--json", action="store_true", help="one JSON object per line")
    replay.set_defaults(handler=_replay)


def replay_group(group: str) -> str:
    """The group whose offsets on the DLQ topic say how far the replay got."""
    return REPLAY_GROUP_PREFIX + group


def target_of(letter: ReceivedMessage, to: str | None) -> str | None:
    props = letter.properties
    return to or props.get("ORIGIN_TOPIC") or props.get("RETRY_TOPIC")


def replayed(letter: ReceivedMessage, topic: str) -> Outgoing:
    """The dead letter as the message it was, marked with its message id (a key and ``REPLAYED_FROM``)."""
    props = {k: v for k, v in letter.properties.items() if k not in DEAD_LETTER_PROPERTIES}
    props[REPLAYED_FROM] = letter.msg_id
    return Outgoing(topic=topic, body=letter.body, tags=letter.tags, keys=(*letter.keys, letter.msg_id),
                    properties=props, flag=letter.flag)


def _replay(args: argparse.Namespace) -> int:
    from mqstore.ipc.client.api import Producer
    dlq, progress = dlq_topic(args.group), replay_group(args.group)
    counts = {"replayed": 0, "already_replayed": 0, "no_origin": 0}
    with running_admin(args.store, "dlq replay") as admin, Producer(args.store) as producer:
        spans = admin.queue_info(dlq)
        if not spans or all(hi == 0 for _, hi in spans.values()):
            raise CommandError(f"group {args.group!r} has no dead letters ({dlq} is empty or absent)")
        _wait_indexed(args.store, admin.ping_writer()["written"])
        batches = 0
        for queue_id, (lo, hi) in sorted(spans.items()):
            offset = max(admin.fetch_offset(progress, dlq, queue_id), lo)
            while offset < hi and (args.max_count is None or counts["replayed"] < args.max_count):
                room = args.batch if args.max_count is None else min(args.batch, args.max_count - counts["replayed"])
                letters, next_offset, _ = admin.read_queue(dlq, queue_id, offset, room)
                outgoing = _not_yet_replayed(admin, list(letters), args.to, counts)
                if outgoing:
                    results = producer.send_batch(outgoing)
                    failed = [r for r in results if not r.ok]
                    if failed:
                        raise CommandError(f"{len(failed)} of {len(results)} copies not stored ({failed[0].status}: "
                                           f"{failed[0].reason}); run it again to go on")
                    counts["replayed"] += len(outgoing)
                    batches += 1
                    if os.environ.get(CRASH_ENV) == str(batches):
                        os.kill(os.getpid(), signal.SIGKILL)
                    _wait_flushed(args.store, admin.ping_writer()["written"])
                admin.reset_offset(progress, dlq, queue_id, next_offset)
                admin.persist_offsets()
                if next_offset <= offset:
                    break
                offset = next_offset
    if args.json:
        print(json.dumps({"type": "replay", "group": args.group, "dlq": dlq, **counts}))
    else:
        print(f"{dlq}: {counts['replayed']} replayed, {counts['already_replayed']} already replayed by an earlier "
              f"run, {counts['no_origin']} without an original topic (give --to)")
    return 0


def _not_yet_replayed(admin: Any, letters: list[ReceivedMessage], to: str | None, counts: dict[str, int]
                      ) -> list[Outgoing]:
    by_target: dict[str, list[ReceivedMessage]] = {}
    for letter in letters:
        target = target_of(letter, to)
        if target is None:
            counts["no_origin"] += 1
        else:
            by_target.setdefault(target, []).append(letter)
    out = []
    for target, group in by_target.items():
        if not admin.topics().get(target):
            found: list[Any] = [[] for _ in group]  # a topic not made yet holds no copy
        else:
            found = admin.query_keys(target, [letter.msg_id for letter in group])
        for letter, copies in zip(group, found, strict=True):
            if any(c.properties.get(REPLAYED_FROM) == letter.msg_id for c in copies):
                counts["already_replayed"] += 1
            else:
                out.append(replayed(letter, target))
    return out


def _status(store: Path) -> dict[str, Any]:
    return control_request(store, "status")


def _wait_until(store: Path, done: Callable[[dict[str, Any]], bool], timeout_s: float, what: str) -> None:
    """Poll the broker's status until ``done(status)``."""
    deadline = time.monotonic() + timeout_s
    status = _status(store)
    while not done(status):
        if time.monotonic() > deadline:
            raise CommandError(f"{what} after {timeout_s:.0f} s; run it again")
        time.sleep(POLL_S)
        status = _status(store)


def _wait_indexed(store: Path, written: int) -> None:
    """Until the index holds every record below ``written`` (the writer's end as this run began):
    every copy an earlier run stored."""
    if "indexbuilder" not in _status(store)["actors"]:
        raise CommandError("dlq replay finds what an earlier run sent by key: it needs the index ([store] "
                           "index_enabled)")
    _wait_until(store, lambda s: int(s["actors"]["indexbuilder"].get("applied", -1)) >= written,
                INDEX_WAIT_S, "the index builder is still behind the commitlog")


def _wait_flushed(store: Path, written: int) -> None:
    """Until the commitlog is flushed up to ``written`` (past the batch just stored): the copies are on
    disk before the progress that skips their dead letters is."""
    _wait_until(store, lambda s: int(s["flushed"]) >= written, FLUSH_WAIT_S, "the commitlog is not flushed")
