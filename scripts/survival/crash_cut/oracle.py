"""What recovery must keep at a crash-cut point, and the check of a recovered copy against it.

For each cut point, after ``MessageStore.open`` and ``QueueIndex.open`` recover it:

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
"""

from __future__ import annotations

import random
from pathlib import Path

from mqstore.engine import Message, MessageStore, StoreConfig
from mqstore.engine.ackindex.queue_index import QueueIndex
from mqstore.engine.log.record import END_FILE_MIN_BLANK_SIZE, DecodeKind
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, decode_offset_file
from mqstore.engine.repair.verify import verify_store
from mqstore.scripts.survival.crash_cut.cuts import Cut, materialize, write_tree
from mqstore.scripts.survival.crash_cut.recording import (
    GEOMETRY,
    QI_DIR,
    QI_OPTIONS,
    TOPICS,
    Clock,
    Files,
    Rec,
    Recording,
    commitlog_bytes,
    commitlog_path,
)


def expected_records(rec: Recording, files: Files) -> list[Rec]:
    """The longest prefix of the workload's records that is whole in ``files``."""
    final = rec.steps[-1].files
    kept: list[Rec] = []
    for r in sorted(rec.records, key=lambda r: r.phys):
        if kept and commitlog_path(r.phys) != commitlog_path(kept[-1].phys):
            tail = kept[-1].phys + kept[-1].size
            room = GEOMETRY.commitlog_file_size - tail % GEOMETRY.commitlog_file_size
            if room >= END_FILE_MIN_BLANK_SIZE and commitlog_bytes(files, tail, END_FILE_MIN_BLANK_SIZE) != \
                    commitlog_bytes(final, tail, END_FILE_MIN_BLANK_SIZE):
                break
        if commitlog_bytes(files, r.phys, r.size) != commitlog_bytes(final, r.phys, r.size):
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
