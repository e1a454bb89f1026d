"""The check of one crash image: a broker recovers a copy of it, takes traffic, delivers what is
due, stops cleanly, and the store it leaves is held to what the clients were told before the cut.

The broker's own recovery is what is checked: the copy is started as a user starts a broker
(``mqstore start``), so the supervisor's recovery and the writer's tail recovery run as they do
after a real power cut. While it runs, the oracle reads the group's recovered committed offsets,
sends two messages to every queue of the plain topics, consumes the offset-mode and ack-mode
groups from where they stand, and waits (polling, with a deadline) for the delayed and timer
messages to come due. Then, on the stopped store, with ``end`` the recovered commitlog end
(records below it came through the cut, the rest were sent after), each check counts:

- ``lost`` / ``garbled`` / ``reused`` (``mqstore.scripts.survival.ack_check.check_acked``): every send that
  must have survived is readable at the queue offset it was told, with its body, and no queue
  offset was told twice, the sends after recovery included. Must survive: under SYNC_FLUSH every
  SEND_OK (delayed, timer and transaction halves as records anywhere in the log); under both modes
  every record of the durable image (what the recorder saw synced); anything else that recovery kept.
- ``below_flush_changed``: the commitlog's bytes below the durable image's end are the durable
  image's (under ASYNC_FLUSH what may go is the unflushed tail, nothing below it).
- ``consumed_lost`` (SYNC_FLUSH): what a consumer got before the cut is stored where it got it:
  nothing is consumable before it is durable.
- ``committed_past_end``: the group's recovered committed offset is at most its queue's recovered end.
- ``skipped``: every message of the offset-mode topic in the store was consumed by its group,
  before the cut or after recovery from its committed offsets; ``ack_lost``: the same for the
  ack-mode group (an ack lost is a redelivery, allowed; a message never delivered is not).
- ``delay_lost`` / ``delay_duplicated``: every delayed and timer message whose send was durable
  (its SEND_OK under SYNC_FLUSH, its record kept under ASYNC_FLUSH) has exactly one copy on its topic.
- ``duplicated``: no plain body stored twice, no committed transaction delivered twice;
  ``tx_rollback_delivered``: no rolled-back one delivered.
- ``verify``: ``verify_store`` finds nothing; ``broker``: the broker recovers, serves and stops cleanly.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import SCHEDULE_TOPIC, DecodeKind
from mqstore.engine.repair.verify import verify_store
from mqstore.engine.timer.put_rule import TIMER_TOPIC
from mqstore.ipc.client.api import AckConsumer, Admin, Consumer, Outgoing, Producer
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError
from mqstore.ipc.transport.control import control_request
from mqstore.scripts.survival.ack_check import check_acked
from mqstore.scripts.survival.power_cut.workload import (
    ACK_GROUP,
    ACK_TOPIC,
    COMMITLOG_FILE_SIZE,
    DELAY_TOPIC,
    OFFSET_GROUP,
    OFFSET_TOPIC,
    PLAIN_TOPICS,
    QUEUES,
    TIMER_REAL_TOPIC,
    TX_TOPIC,
    Journal,
    broker_for,
)
from mqstore.scripts.survival.send_log import digest

SYNC_FLUSH = "SYNC_FLUSH"
CHECKS = ("lost", "garbled", "reused", "below_flush_changed", "consumed_lost", "committed_past_end", "skipped",
          "ack_lost", "delay_lost", "delay_duplicated", "duplicated", "tx_rollback_delivered", "verify", "broker")
CONSUME_DEADLINE_S = 15.0
DUE_DEADLINE_S = 15.0
EXAMPLES = 4


@dataclass(frozen=True, slots=True)
class Stored:
    """One record read off a commitlog."""

    phys: int
    topic: str
    queue: int
    queue_offset: int
    digest: str


@dataclass(frozen=True, slots=True)
class Log:
    """A commitlog read from its first file to its first record that does not decode."""

    records: list[Stored]
    end: int

    @classmethod
    def scan(cls, store: Path) -> Log:
        if not (store / "commitlog").is_dir():
            return cls([], 0)
        commitlog = CommitLog.open(store / "commitlog", COMMITLOG_FILE_SIZE, writable=False)
        records, end = [], commitlog.min_offset
        try:
            for phys, decoded in commitlog.scan(commitlog.min_offset):
                if decoded.kind is DecodeKind.RECORD and decoded.record is not None:
                    r = decoded.record
                    records.append(Stored(phys, r.topic, r.queue_id, r.queue_offset, digest(r.body)))
                    end = phys + decoded.size
                elif decoded.kind is DecodeKind.BLANK:
                    end = commitlog.queue.roll_next(phys)
        finally:
            commitlog.close()
        return cls(records, end)

    def digests(self, topics: tuple[str, ...] | None = None) -> Counter[str]:
        return Counter(r.digest for r in self.records if topics is None or r.topic in topics)


def commitlog_bytes(store: Path, end: int) -> bytes:
    """The commitlog's bytes below ``end``, a missing file read as zeros."""
    out = bytearray()
    for base in range(0, end, COMMITLOG_FILE_SIZE):
        path = store / "commitlog" / f"{base:020d}"
        data = path.read_bytes()[:COMMITLOG_FILE_SIZE] if path.exists() else b""
        out += data.ljust(COMMITLOG_FILE_SIZE, b"\0")
    return bytes(out[:end])


@dataclass(slots=True)
class Findings:
    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, check: str, what: str, count: int = 1) -> None:
        self.counts[check] += count
        shown = self.examples.setdefault(check, [])
        if len(shown) < EXAMPLES:
            shown.append(what)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())


@dataclass(slots=True)
class AfterRecovery:
    """What the recovered broker said and did while it ran."""

    end: int = 0
    committed: dict[int, int] = field(default_factory=dict)
    sent: list[tuple[str, int, int, str]] = field(default_factory=list)
    offset_group: set[str] = field(default_factory=set)
    ack_group: set[str] = field(default_factory=set)


def check_image(image: Path, durable: Log, durable_dir: Path, journal: Journal, mode: str,
                work: Path) -> Findings:
    """Recover a copy of ``image`` in ``work`` with a broker, and check it (module docstring)."""
    findings = Findings()
    try:
        awaited = _awaited(journal, mode, Log.scan(image))
    except (MqstoreError, OSError, ValueError):  # a commitlog its broker may refuse: await every send
        awaited = _awaited(journal, SYNC_FLUSH, Log([], 0))
    store = work / "store"
    shutil.copytree(image, store)
    broker = broker_for(work, mode, store=store)
    after = AfterRecovery()
    try:
        broker.start()
        _drive(broker.store, journal, awaited, after, findings)
        code = broker.stop()
        if code != 0:
            findings.add("broker", f"the recovered broker stopped with {code}")
    except (AssertionError, BrokerError, BrokerTimeoutError, ValueError) as exc:
        findings.add("broker", f"{type(exc).__name__}: {str(exc)[-600:]}")
        return findings
    finally:
        broker.__exit__()
    _check_store(store, durable, durable_dir, journal, mode, after, findings)
    return findings


def _awaited(journal: Journal, mode: str, image: Log) -> dict[str, set[str]]:
    """Per real topic, the delayed and timer bodies whose send was durable: every one answered
    PUT_OK under SYNC_FLUSH, those whose record the image holds under ASYNC_FLUSH."""
    held = image.digests()
    out: dict[str, set[str]] = {DELAY_TOPIC: set(), TIMER_REAL_TOPIC: set()}
    for s in journal.special:
        if s["kind"] in ("delay", "timer") and s.get("status") == "PUT_OK" and (mode == SYNC_FLUSH or
                                                                               s["digest"] in held):
            out[s["topic"]].add(s["digest"])
    return out


def _drive(store: Path, journal: Journal, awaited: dict[str, set[str]], after: AfterRecovery,
           findings: Findings) -> None:
    with Admin(store, timeout_ms=10_000) as admin:
        after.end = int(control_request(store, "status", timeout_ms=10_000)["recovery"]["end"])
        after.committed = {q: admin.fetch_offset(OFFSET_GROUP, OFFSET_TOPIC, q) for q in range(QUEUES)}
    with Producer(store, timeout_ms=10_000) as producer:
        batch = [Outgoing(t, f"after-{t}-{q}-{i}".encode(), tags="A", queue_id=q)
                 for t in PLAIN_TOPICS for q in range(QUEUES) for i in range(2)]
        for m, r in zip(batch, producer.send_batch(batch), strict=True):
            if r.ok:
                after.sent.append((m.topic, r.queue_id, r.queue_offset, digest(bytes(m.body))))
            else:
                findings.add("broker", f"a send after recovery: {r.status} {r.reason}")
    ends = {t: {q: 1 + max((o for topic, queue, o, _ in after.sent if (topic, queue) == (t, q)), default=-1)
                for q in range(QUEUES)} for t in PLAIN_TOPICS}  # each queue's end once the sends after are in
    with Consumer(store, group=OFFSET_GROUP, topic=OFFSET_TOPIC, queues=list(range(QUEUES)), start="committed",
                  auto_commit=False, long_poll_ms=100, timeout_ms=10_000) as consumer:
        deadline = time.monotonic() + CONSUME_DEADLINE_S
        while time.monotonic() < deadline and any(consumer.position(q) < ends[OFFSET_TOPIC].get(q, 0)
                                                  for q in range(QUEUES)):
            after.offset_group.update(digest(m.body) for m in consumer.poll(200))
        consumer.commit()
    before = {(q, o) for _, q, o, _ in journal.logs.ack_received}
    # a send after recovery may take the offset of a lost message received before the cut: wait for it too
    want = ({(q, o) for q, hi in ends[ACK_TOPIC].items() for o in range(hi)} - before) \
        | {(q, o) for t, q, o, _ in after.sent if t == ACK_TOPIC}
    got: set[tuple[int, int]] = set()
    with AckConsumer(store, group=ACK_GROUP, topic=ACK_TOPIC, long_poll_ms=100, visibility_ms=1000) as acker:
        deadline = time.monotonic() + CONSUME_DEADLINE_S
        while time.monotonic() < deadline and not want <= got:
            deliveries = acker.receive(max_count=64, timeout_ms=200)
            if deliveries:
                got.update((d.queue_id, d.queue_offset) for d in deliveries)
                after.ack_group.update(digest(d.body) for d in deliveries)
                acker.ack(deliveries)
    _await_due(store, awaited)


def _await_due(store: Path, awaited: dict[str, set[str]]) -> None:
    """Poll each real topic until every awaited copy is there, or the deadline."""
    deadline = time.monotonic() + DUE_DEADLINE_S
    for topic, bodies in awaited.items():
        if not bodies:
            continue
        seen: set[str] = set()
        with Consumer(store, group=f"pc-check-{topic}", topic=topic, queues=list(range(QUEUES)), start="earliest",
                      auto_commit=False, long_poll_ms=100, timeout_ms=10_000) as consumer:
            while time.monotonic() < deadline and not bodies <= seen:
                seen.update(digest(m.body) for m in consumer.poll(200))


def _check_store(store: Path, durable: Log, durable_dir: Path, journal: Journal, mode: str, after: AfterRecovery,
                 findings: Findings) -> None:
    final = Log.scan(store)
    kept = [r for r in final.records if r.phys < after.end]
    kept_digests = Counter(r.digest for r in kept)
    durable_digests = durable.digests()
    sync = mode == SYNC_FLUSH
    acked = [a for a in journal.logs.acked if sync or a[3] in durable_digests or a[3] in kept_digests]
    check = check_acked(store, [*acked, *after.sent])
    for kind, name in (("lost", "lost"), ("garbled", "garbled"), ("offset_reused", "reused")):
        if check.counts[kind]:
            findings.add(name, f"{check.counts[kind]}: {getattr(check, kind)}", check.counts[kind])
    if sync:
        for s in journal.special:
            if s.get("status") == "PUT_OK" and s["digest"] not in kept_digests:
                findings.add("lost", f"{s['kind']} {s['digest'][:12]} acknowledged at phys {s.get('phys')}")
        where = {(r.topic, r.queue, r.queue_offset, r.digest) for r in kept}
        for topic, q, o, h in [*journal.logs.seen, *journal.logs.ack_received]:
            if (topic, q, o, h) not in where:
                findings.add("consumed_lost", f"{topic}/{q}@{o} consumed before the cut, not stored")
    missing = durable_digests - kept_digests
    if missing:
        findings.add("lost", f"{sum(missing.values())} records of the durable image not recovered "
                             f"(durable end {durable.end}, recovered end {after.end})", sum(missing.values()))
    if commitlog_bytes(store, durable.end) != commitlog_bytes(durable_dir, durable.end):
        findings.add("below_flush_changed", f"commitlog bytes below the durable end {durable.end} changed "
                                            f"(recovered end {after.end})")
    kept_ends: Counter[int] = Counter()
    for r in kept:
        if r.topic == OFFSET_TOPIC:
            kept_ends[r.queue] = max(kept_ends[r.queue], r.queue_offset + 1)
    for q, committed in after.committed.items():
        if committed > kept_ends[q]:
            findings.add("committed_past_end", f"{OFFSET_TOPIC}/{q}: committed {committed}, recovered end "
                                               f"{kept_ends[q]}")
    seen_before = {h for *_, h in journal.logs.seen}
    received_before = {h for *_, h in journal.logs.ack_received}
    for r in final.records:
        if r.topic == OFFSET_TOPIC and r.digest not in seen_before | after.offset_group:
            findings.add("skipped", f"{r.topic}/{r.queue}@{r.queue_offset} ({_origin(r, after)})")
        if r.topic == ACK_TOPIC and r.digest not in received_before | after.ack_group:
            findings.add("ack_lost", f"{r.topic}/{r.queue}@{r.queue_offset} ({_origin(r, after)})")
    _check_specials(final, kept_digests, journal, sync, findings)
    report = verify_store(store)
    for f in report.findings:
        findings.add("verify", f"{f.kind} at {f.location}: {f.detail}")


def _origin(r: Stored, after: AfterRecovery) -> str:
    return "came through the cut" if r.phys < after.end else "sent after recovery"


def _check_specials(final: Log, kept_digests: Counter[str], journal: Journal, sync: bool, findings: Findings) -> None:
    copies = {t: final.digests((t,)) for t in (DELAY_TOPIC, TIMER_REAL_TOPIC, TX_TOPIC)}
    parked = final.digests((SCHEDULE_TOPIC, TIMER_TOPIC))
    for s in journal.special:
        h, n = s["digest"], copies[s["topic"]][s["digest"]]
        if s["kind"] in ("delay", "timer") and s.get("status") == "PUT_OK" and (sync or parked[h] or kept_digests[h]):
            if n == 0:
                findings.add("delay_lost", f"{s['kind']} {h[:12]} (durable send) never delivered")
            elif n > 1:
                findings.add("delay_duplicated", f"{s['kind']} {h[:12]} delivered {n} times")
        elif s["kind"] == "tx" and s.get("state") == "ROLLBACK" and n:
            findings.add("tx_rollback_delivered", f"tx {h[:12]} rolled back, delivered {n} times")
        elif s["kind"] == "tx" and n > 1:
            findings.add("duplicated", f"tx {h[:12]} committed, delivered {n} times")
    for topic in PLAIN_TOPICS:
        for h, n in final.digests((topic,)).items():
            if n > 1:
                findings.add("duplicated", f"{topic}: body {h[:12]} stored {n} times")


def describe(info: Any) -> Any:
    """An image's description (the recorder's ``ImageInfo``) as JSON can hold it."""
    import dataclasses
    if callable(getattr(info, "describe", None)):
        return info.describe()
    if dataclasses.is_dataclass(info) and not isinstance(info, type):
        return {k: describe(v) for k, v in dataclasses.asdict(info).items()}
    if isinstance(info, dict):
        return {str(k): describe(v) for k, v in info.items()}
    if isinstance(info, list | tuple | set | frozenset):
        return [describe(v) for v in info]
    return info if isinstance(info, str | int | float | bool) or info is None else str(info)
