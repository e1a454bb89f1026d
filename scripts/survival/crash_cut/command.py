"""Crash-consistency harness: record a store's writes, replay them cut at every write boundary and
at bytes inside records, and check that recovery keeps exactly the whole records before the cut.

    python -m scripts.survival.crash_cut [--ops 300] [--torn-per-step 2] [--seed 7] [--max-seconds 600]

Recording: a workload drives the real engine on a tiny-geometry store (``MessageStore`` puts and
batches rolling commitlog, consume-queue and index files, flushes that write the checkpoint,
consumer offsets persisted with their ``.bak``, a clean close and reopen, and a ``QueueIndex`` with
publishes, deliveries, acks, journal flushes and clean and dirty reopens). The harness snapshots the
store directory after every write syscall the engine makes (``os.write``, ``pwrite``, ``ftruncate``,
``posix_fallocate``, ``replace``, ``rename``, ``unlink``) and after every workload step (what went
through the mapped files): the states the directory passes through, in order.

Replay: each cut point is a state to recover from, written into a fresh directory:

- a write boundary: the directory exactly as it was after step ``j``;
- a torn step: the state before step ``j`` plus part of it. The commitlog is one byte stream: its
  bytes below a cut ``c`` come from after the step, the rest from before (cuts at every record
  start, one byte before every record end, inside the properties at a record's tail, and at random
  bytes). Every other file the step changed is, independently, as before, as after, or torn at a
  random byte of the changed range. A mapped file (consume queue, index) torn by a power cut keeps
  its size and reads zeros past the cut; a file written with write(2) (queue-index journal and
  segments, checkpoint, temp files) keeps the prefix that was written, as after a killed process or
  on a filesystem that orders data before size (the queue index has no checksum and cannot tell a
  zero-filled tail from data: ``engine.ackindex.codec``). What one atomic syscall changed
  (a rename, a create, a delete) is all or nothing.

The invariant, for each cut point, after ``MessageStore.open`` and ``QueueIndex.open`` recover it:

- commitlog: the records kept are exactly the longest prefix of the workload's records whose bytes
  are whole in the cut state (a record that opens a new file also needs the previous file's blank
  tail), nothing more and nothing garbled;
- consume queues and index: each queue lists exactly the kept records of that queue, in order, and
  a key finds exactly its kept record (no entry survives for a record that was cut);
- checkpoint: whatever its state, recovery reaches the same kept records;
- consumer offsets: the table is the last one whose ``consumerOffset.json`` was in place at the cut
  (a crash between the two renames reads the ``.bak``, the previous table);
- queue index: the unacked messages, and which of them were delivered, are those of every event
  whose journal record is whole before the cut (events flushed into segment files included);
- and after one more put and a clean close, ``verify_store`` finds nothing.

Prints one JSON object: cut points checked by kind, failures (the first few described), seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import Geometry, Message, MessageStore, StoreConfig
from engine.ackindex.codec import PubRecord, encode_journal_ack, encode_journal_deliver, encode_journal_publish
from engine.ackindex.queue_index import PublishEntry, QueueIndex
from engine.log.record import DecodeKind
from engine.offsets import CONSUMER_OFFSET_FILE, decode_offset_file
from engine.verify import verify_store

GEOMETRY = Geometry(commitlog_file_size=4096, cq_entries_per_file=8, index_slot_count=8, index_entry_count=48)
TOPICS = ("Orders", "Payments")
QI_DIR = "queueindex/G/Orders/0"
QI_OPTIONS: dict[str, int] = {"entries_per_segment": 8, "max_journal_entries": 12}
BLANK_MARKER_BYTES = 8
TORN_SYSCALLS = ("write", "pwrite")
ATOMIC_SYSCALLS = ("ftruncate", "truncate", "posix_fallocate", "replace", "rename", "unlink")
MAPPED_FAMILIES = ("commitlog/", "consumequeue/", "index/")

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


# -- recording ----------------------------------------------------------------------------------------

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
                batch = []
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
    for r in rec.records:
        r.size = _record_size(final, r.phys)
    return rec


def _record_size(files: Files, phys: int) -> int:
    data = _commitlog_bytes(files, phys, 4)
    return int.from_bytes(data, "big")


def _commitlog_path(phys: int) -> str:
    return f"commitlog/{phys - phys % GEOMETRY.commitlog_file_size:020d}"


def _commitlog_bytes(files: Files, phys: int, size: int) -> bytes:
    data = files.get(_commitlog_path(phys), b"")
    pos = phys % GEOMETRY.commitlog_file_size
    return data[pos:pos + size]


# -- cut points -----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Cut:
    step: int
    kind: str                                   # boundary / torn
    phys_cut: int | None = None                 # the commitlog stream's cut inside the step
    choices: tuple[tuple[str, str, int], ...] = ()  # (path, old | new | torn, byte) of the other changed files


def _diff_range(old: bytes | None, new: bytes | None) -> tuple[int, int] | None:
    if old == new:
        return None
    a, b = old or b"", new or b""
    lo = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    hi = max(len(a), len(b))
    while hi > lo and hi <= min(len(a), len(b)) and a[hi - 1] == b[hi - 1]:
        hi -= 1
    return lo, hi


def _tearable(step: Step, path: str, old: bytes | None, new: bytes | None) -> bool:
    if old is None or new is None or len(new) < len(old):
        return False  # created, deleted or cut short: one syscall, all or nothing
    return step.kind == "torn" or path.startswith(MAPPED_FAMILIES)


def cuts_for(rec: Recording, j: int, torn_per_step: int, rng: random.Random) -> list[Cut]:
    cuts = [Cut(j, "boundary")]
    if j == 0:
        return cuts
    old, new, step = rec.steps[j - 1].files, rec.steps[j].files, rec.steps[j]
    stream: list[int] = []
    others: list[tuple[str, int, int, bool]] = []
    for path in sorted(old.keys() | new.keys()):
        span = _diff_range(old.get(path), new.get(path))
        if span is None:
            continue
        if path.startswith("commitlog/") and path in new:
            base = int(path.rsplit("/", 1)[1])
            stream += [base + span[0], base + span[1]]
        else:
            others.append((path, span[0], span[1], _tearable(step, path, old.get(path), new.get(path))))

    def choices() -> tuple[tuple[str, str, int], ...]:
        together = rng.choice(("old", "new"))  # what one atomic syscall changed goes all or nothing
        out = []
        for path, lo, hi, tearable in others:
            if not tearable and step.kind == "atomic":
                pick = together
            else:
                pick = rng.choice(("old", "new", "torn") if tearable and hi > lo + 1 else ("old", "new"))
            out.append((path, pick, rng.randint(lo + 1, hi - 1) if pick == "torn" else 0))
        return tuple(out)

    if stream:
        lo, hi = min(stream), max(stream)
        positions = set()
        for r in rec.records:
            if lo <= r.phys < hi:
                end = r.phys + r.size
                positions |= {r.phys, end - 1}
                for _ in range(torn_per_step):
                    positions.add(end - rng.randint(2, min(r.size - 1, 48)))  # the properties at the tail
                    positions.add(rng.randint(r.phys + 1, end - 1))
        positions.add(rng.randint(lo, hi))
        cuts += [Cut(j, "torn", c, choices()) for c in sorted(positions)]
    elif any(o[3] and o[2] > o[1] + 1 for o in others):
        for _ in range(torn_per_step):
            cuts.append(Cut(j, "torn", None, choices()))
    elif others and len(others) > 1:
        cuts.append(Cut(j, "torn", None, choices()))
    return cuts


def materialize(rec: Recording, cut: Cut) -> Files:
    new = rec.steps[cut.step].files
    if cut.kind == "boundary":
        return dict(new)
    old = rec.steps[cut.step - 1].files
    picks = {path: (pick, pos) for path, pick, pos in cut.choices}
    out: Files = {}
    for path in old.keys() | new.keys():
        o, n = old.get(path), new.get(path)
        if o == n or (path not in picks and not path.startswith("commitlog/")):
            data = n
        elif path.startswith("commitlog/"):
            if n is None:
                data = o
            else:
                keep = 0 if cut.phys_cut is None else max(0, min(len(n), cut.phys_cut - int(path.rsplit("/", 1)[1])))
                data = n[:keep] + (o or b"").ljust(len(n), b"\0")[keep:]
        else:
            pick, pos = picks[path]
            if pick == "old" or pick == "new" or n is None:
                data = o if pick == "old" else n
            elif path.startswith(MAPPED_FAMILIES):
                data = n[:pos] + (o or b"").ljust(len(n), b"\0")[pos:len(n)]  # a power cut: zeros after
            else:
                data = n[:pos] + (o or b"")[pos:len(n)]  # write(2): the prefix that made it
        if data is not None:
            out[path] = data
    return out


def write_tree(root: Path, files: Files) -> None:
    if root.exists():
        shutil.rmtree(root)
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


# -- the oracle and the checks ----------------------------------------------------------------------------

def expected_records(rec: Recording, files: Files) -> list[Rec]:
    """The longest prefix of the workload's records that is whole in ``files``."""
    final = rec.steps[-1].files
    kept: list[Rec] = []
    for r in sorted(rec.records, key=lambda r: r.phys):
        if kept and _commitlog_path(r.phys) != _commitlog_path(kept[-1].phys):
            tail = kept[-1].phys + kept[-1].size
            room = GEOMETRY.commitlog_file_size - tail % GEOMETRY.commitlog_file_size
            if room >= BLANK_MARKER_BYTES and _commitlog_bytes(files, tail, BLANK_MARKER_BYTES) != \
                    _commitlog_bytes(final, tail, BLANK_MARKER_BYTES):
                break
        if _commitlog_bytes(files, r.phys, r.size) != _commitlog_bytes(final, r.phys, r.size):
            break
        kept.append(r)
    return kept


def expected_offsets(rec: Recording, cut: Cut) -> dict[str, dict[int, int]]:
    new_counts = cut.kind == "boundary" or ("config/consumerOffset.json", "new", 0) in cut.choices
    last = cut.step if new_counts else cut.step - 1
    for s in range(last, -1, -1):
        data = rec.steps[s].files.get(CONSUMER_OFFSET_FILE)
        if data:
            return {k: dict(v) for k, v in decode_offset_file(data).table.items()}
    return {}


def expected_queue_index(rec: Recording, cut: Cut) -> list[tuple[int, bytes, bool]]:
    journal = next(((pick, pos) for path, pick, pos in cut.choices if path == QI_DIR + "/journal.jif"), ("new", 0))
    pubs: dict[int, bytes] = {}
    delivered: set[int] = set()
    acked: set[int] = set()
    for e in rec.qi_events:
        whole = e.step < cut.step or (e.step == cut.step and (
            cut.kind == "boundary" or journal[0] == "new" or (journal[0] == "torn" and e.end <= journal[1])))
        if not whole:
            continue
        if e.kind == "pub":
            pubs[e.seq] = e.msg_id
        elif e.kind == "del":
            delivered.add(e.seq)
        else:
            acked.add(e.seq)
    return [(seq, msg_id, seq in delivered) for seq, msg_id in sorted(pubs.items()) if seq not in acked]


def check(rec: Recording, cut: Cut, work: Path, rng: random.Random) -> list[str]:
    files = materialize(rec, cut)
    write_tree(work, files)
    kept = expected_records(rec, files)
    problems: list[str] = []
    store = MessageStore.open(work, StoreConfig(geometry=GEOMETRY), now_ms=Clock())
    try:
        got = [phys for phys, d in store.commitlog.scan(store.commitlog.min_offset) if d.kind is DecodeKind.RECORD]
        if got != [r.phys for r in kept]:
            problems.append(f"commitlog kept {len(got)} records, expected {len(kept)} "
                            f"(recovered end {store.recovery.end_phys_offset}: {store.recovery.stop_reason})")
        for topic in TOPICS:
            for queue in (0, 1):
                want = [r.phys for r in kept if (r.topic, r.queue) == (topic, queue)]
                have: list[int] = []
                while True:
                    page = store.get(topic, queue, len(have), max_count=32, max_bytes=1 << 20).messages
                    if not page:
                        break
                    have += [m.phys_offset for m in page]
                if have != want or store.max_queue_offset(topic, queue) != len(want):
                    problems.append(f"consume queue {topic}/{queue}: {len(have)} entries "
                                    f"(max offset {store.max_queue_offset(topic, queue)}), expected {len(want)}")
        kept_set = {r.phys for r in kept}
        near = kept[-12:] + [r for r in rec.records if r.phys not in kept_set][:6] + rng.sample(rec.records, 8)
        for r in near:
            found = [m.phys_offset for m in store.query_by_key(r.topic, r.key)]
            if found != ([r.phys] if r.phys in kept_set else []):
                problems.append(f"index: key {r.key} finds {found}, expected {[r.phys] if r.phys in kept_set else []}")
        if {k: dict(v) for k, v in store.offsets.table.items()} != expected_offsets(rec, cut):
            problems.append(f"consumer offsets {dict(store.offsets.table)} != {expected_offsets(rec, cut)}")
        if not store.put(Message("Orders", b"after the crash", keys=["after"]), 1).ok:
            problems.append("a put after recovery failed")
    finally:
        store.close()
    qi = QueueIndex.open(work / QI_DIR, **QI_OPTIONS)
    try:
        have_qi = [(e.seq_id, e.msg_id, e.delivered) for e in qi.read(0, 1 << 40)]
        if have_qi != expected_queue_index(rec, cut):
            problems.append(f"queue index unacked {have_qi[:6]}... ({len(have_qi)}), "
                            f"expected {expected_queue_index(rec, cut)[:6]}... ({len(expected_queue_index(rec, cut))})")
    finally:
        qi.close()
    report = verify_store(work)
    problems += [f"verify: {f.kind} at {f.location}: {f.detail}" for f in report.findings[:3]]
    return problems


def run(ops: int, torn_per_step: int, seed: int, max_seconds: float, workdir: Path) -> dict[str, Any]:
    started = time.monotonic()
    rng = random.Random(seed)
    rec = record(workdir / "recorded", ops, rng)
    counts = {"boundary": 0, "torn": 0}
    failures: list[dict[str, Any]] = []
    complete = True
    for j in range(len(rec.steps)):
        if time.monotonic() - started > max_seconds:
            complete = False
            break
        for cut in cuts_for(rec, j, torn_per_step, rng):
            try:
                problems = check(rec, cut, workdir / "replay", rng)
            except Exception as exc:  # a crash in recovery is a finding, reported with the cut
                problems = [f"{type(exc).__name__}: {exc}"]
            counts[cut.kind] += 1
            if problems:
                failures.append({"step": j, "kind": cut.kind, "phys_cut": cut.phys_cut,
                                 "choices": [list(c) for c in cut.choices], "problems": problems})
    return {"harness": "crash_cut", "seed": seed, "ops": ops, "steps": len(rec.steps), "records": len(rec.records),
            "queue_index_events": len(rec.qi_events), "cut_points": counts["boundary"] + counts["torn"],
            "boundary_cuts": counts["boundary"], "torn_cuts": counts["torn"], "complete": complete,
            "failures": len(failures), "first_failures": failures[:5],
            "seconds": round(time.monotonic() - started, 1), "ok": complete and not failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=300, help="workload steps to record")
    parser.add_argument("--torn-per-step", type=int, default=2, help="random torn cuts per record and step")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-seconds", type=float, default=600)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="crash-cut-") as tmp:
        verdict = run(args.ops, args.torn_per_step, args.seed, args.max_seconds, Path(tmp))
    print(json.dumps(verdict))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
