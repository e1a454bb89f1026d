"""Recording a crash-cut workload: the states a store directory passes through, in order.

A workload drives the real engine on a tiny-geometry store (``MessageStore`` puts and batches
rolling commitlog, consume-queue and index files, flushes that write the checkpoint, consumer
offsets persisted with their ``.bak``, a clean close and reopen, and a ``QueueIndex`` with publishes,
deliveries, acks, journal flushes and clean and dirty reopens). The ``Recorder`` snapshots the store
directory after every write syscall the engine makes (``os.write``, ``pwrite``, ``ftruncate``,
``posix_fallocate``, ``replace``, ``rename``, ``unlink``) and after every workload step (what went
through the mapped files). The ``Recording`` keeps those steps, every record put (where it went)
and every queue-index event (which step's journal write holds it).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqstore.engine import Geometry, Message, MessageStore, StoreConfig
from mqstore.engine.ackindex.codec import PubRecord, encode_journal_ack, encode_journal_deliver, encode_journal_publish
from mqstore.engine.ackindex.queue_index import PublishEntry, QueueIndex
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE

GEOMETRY = Geometry(commitlog_file_size=4096, cq_entries_per_file=8, index_slot_count=8, index_entry_count=48)
TOPICS = ("Orders", "Payments")
QI_DIR = "queueindex/G/Orders/0"
QI_OPTIONS: dict[str, int] = {"entries_per_segment": 8, "max_journal_entries": 12}
TORN_SYSCALLS = ("write", "pwrite")
ATOMIC_SYSCALLS = ("ftruncate", "truncate", "posix_fallocate", "replace", "rename", "unlink")

Files = dict[str, bytes]


@dataclass(slots=True)
class Step:
    kind: str      # "torn": a write or a workload step (may be cut inside); "atomic": a syscall that is not
    files: Files


@dataclass(slots=True)
class Rec:
    topic: str
    queue: int
    key: str
    phys: int
    size: int = 0


@dataclass(slots=True)
class QiEvent:
    step: int        # the step whose journal write holds it
    end: int         # the journal's length once its record is written
    kind: str        # pub / del / ack
    seq: int
    msg_id: bytes = b""


@dataclass(slots=True)
class Recording:
    steps: list[Step] = field(default_factory=list)
    records: list[Rec] = field(default_factory=list)
    qi_events: list[QiEvent] = field(default_factory=list)


def read_tree(root: Path, previous: Files) -> Files:
    files: Files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if rel == "lock":
                continue
            data = path.read_bytes()
            old = previous.get(rel)
            files[rel] = old if old == data else data  # unchanged files share one bytes object
    return files


class Recorder:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.steps: list[Step] = []

    def snap(self, kind: str = "torn") -> None:
        files = read_tree(self.root, self.steps[-1].files if self.steps else {})
        if self.steps and files == self.steps[-1].files:
            return
        self.steps.append(Step(kind, files))

    @contextmanager
    def hooked(self) -> Iterator[None]:
        originals = {name: getattr(os, name) for name in (*TORN_SYSCALLS, *ATOMIC_SYSCALLS)}

        def hook(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
            kind = "torn" if name in TORN_SYSCALLS else "atomic"

            def call(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                self.snap(kind)
                return result
            return call
        for name, original in originals.items():
            setattr(os, name, hook(name, original))
        try:
            yield
        finally:
            for name, original in originals.items():
                setattr(os, name, original)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        self.now += 7
        return self.now


def record(root: Path, ops: int, rng: random.Random) -> Recording:
    """Run the workload under the recorder."""
    rec = Recording()
    recorder = Recorder(root)
    clock = Clock()
    config = StoreConfig(geometry=GEOMETRY)
    published: list[tuple[int, bytes]] = []  # queue-index seq, msg id: Orders/0 records
    delivered: list[int] = []
    qi_pending: list[tuple[int, bytes]] = []

    def qi_op(qi: QueueIndex, kind: str, items: list[tuple[int, bytes]]) -> None:
        journal = root / QI_DIR / "journal.jif"
        start = len(recorder.steps)
        before = journal.stat().st_size if journal.exists() else 0
        if kind == "pub":
            qi.publish_many([PublishEntry(seq, msg_id, 100) for seq, msg_id in items])
        elif kind == "del":
            qi.deliver([seq for seq, _ in items])
        else:
            qi.ack([seq for seq, _ in items])
        recorder.snap()
        journal_step = next(i for i in range(start, len(recorder.steps))
                            if len(recorder.steps[i].files.get(QI_DIR + "/journal.jif", b"")) > before)
        end = before
        for seq, msg_id in items:
            if kind == "pub":
                encoded = encode_journal_publish(seq, PubRecord(msg_id, 0, 100, None))
            else:
                encoded = encode_journal_deliver(seq) if kind == "del" else encode_journal_ack(seq)
            end += len(encoded)
            rec.qi_events.append(QiEvent(journal_step, end, kind, seq, msg_id))

    with recorder.hooked():
        store = MessageStore.open(root, config, now_ms=clock)
        qi = QueueIndex.open(root / QI_DIR, **QI_OPTIONS)
        recorder.snap()
        for op in range(ops):
            roll = rng.random()
            if roll < 0.5:
                batch: list[tuple[Message, int]] = []
                for _ in range(rng.randint(1, 4)):
                    n = len(rec.records) + len(batch)
                    topic, queue = rng.choice(TOPICS), rng.randint(0, 1)
                    props = {"p": "v" * rng.randint(1, 60)} if rng.random() < 0.7 else {}
                    batch.append((Message(topic, os.urandom(rng.randint(1, 300)), tags="T", keys=[f"k{n}"],
                                          properties=props), queue))
                results = store.put_batch([m for m, _ in batch], [q for _, q in batch])
                for (m, q), r in zip(batch, results, strict=True):
                    assert r.ok, r
                    rec.records.append(Rec(m.topic, q, m.keys[0], r.phys_offset))
                    if (m.topic, q) == ("Orders", 0):
                        qi_pending.append((r.queue_offset, bytes.fromhex(r.msg_id)))
                recorder.snap()
            elif roll < 0.58:
                store.flush()
            elif roll < 0.64:
                for topic in TOPICS:
                    store.commit_offset("G", topic, rng.randint(0, 1), rng.randint(0, 1000))
                store.offsets.persist(root / CONSUMER_OFFSET_FILE)
            elif roll < 0.74 and qi_pending:
                qi_op(qi, "pub", qi_pending)
                published.extend(qi_pending)
                qi_pending = []
            elif roll < 0.84:
                seen = {e.seq for e in rec.qi_events if e.kind in ("del", "ack")}
                fresh = [p for p in published if p[0] not in seen][: rng.randint(1, 5)]
                if fresh:
                    qi_op(qi, "del", fresh)
                    delivered.extend(seq for seq, _ in fresh)
            elif roll < 0.93 and delivered:
                rng.shuffle(delivered)
                count = rng.randint(1, 4)
                take, delivered = delivered[:count], delivered[count:]
                qi_op(qi, "ack", [(seq, b"") for seq in take])
            elif roll < 0.96:
                qi.flush()
            elif roll < 0.99:
                qi.close(clean=rng.random() < 0.5)
                qi = QueueIndex.open(root / QI_DIR, **QI_OPTIONS)
            elif op > ops // 3:
                store.close()
                store = MessageStore.open(root, config, now_ms=clock)
            recorder.snap()
        qi.close()
        store.close()
        recorder.snap()
    rec.steps = recorder.steps
    final = rec.steps[-1].files
    for put in rec.records:
        put.size = _record_size(final, put.phys)
    return rec


def _record_size(files: Files, phys: int) -> int:
    data = commitlog_bytes(files, phys, 4)
    return int.from_bytes(data, "big")


def commitlog_path(phys: int) -> str:
    return f"commitlog/{phys - phys % GEOMETRY.commitlog_file_size:020d}"


def commitlog_bytes(files: Files, phys: int, size: int) -> bytes:
    data = files.get(commitlog_path(phys), b"")
    pos = phys % GEOMETRY.commitlog_file_size
    return data[pos:pos + size]
