"""The chunked, columnar scan against the record-by-record one: on random commitlogs (tiny files, so
records roll over blanks; torn, zeroed and bit-flipped tails; odd properties) it finds the same
records, stops at the same record for the same reason, and its dispatch columns are the ones
``DispatchRequest.from_record`` gives; re-dispatch from columns writes the files that dispatching
record by record writes."""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine.batch.column_scan import known_starts, scan_columns
from mqstore.engine.batch.dispatch import DispatchRequest
from mqstore.engine.batch.dispatch_columns import DispatchColumns
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.keyindex.keys import index_hashes, index_key
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.host import Host
from mqstore.engine.log.record import DecodeKind, encode_record
from mqstore.engine.repair.recovery import redispatch

FILE_SIZE = 2048
V4, V6 = Host("10.0.0.7", 4000), Host("2001:db8::1", 10911)
TOPICS = ["T", "Orders", "SCHEDULE_TOPIC_XXXX", "Tö", "t" * 130]  # a non-ASCII topic, a 2-byte-length one
TEXT = st.text(alphabet=st.sampled_from("ab Z0#é\x01"), max_size=12)


class Pairs:
    """Properties given as pairs, so a name can come twice (``encode_properties`` takes ``items()``)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs

    def items(self) -> list[tuple[str, str]]:
        return self.pairs


@st.composite
def records(draw: st.DrawFn) -> dict[str, object]:
    names = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "x", "__CRC32#", "TAGSX"])
    pairs = draw(st.lists(st.tuples(names, TEXT | st.sampled_from(["3", "a b  c", "k1", "Tag0"])), max_size=5))
    return {"topic": draw(st.sampled_from(TOPICS)), "body": draw(st.binary(max_size=200)),
            "properties": Pairs(pairs), "queue_id": draw(st.integers(0, 2)),
            "sys_flag": draw(st.sampled_from([0, 0x4, 0x8, 0xC])),
            "born_host": draw(st.sampled_from([V4, V6])), "store_host": draw(st.sampled_from([V4, V6])),
            "prop_crc": draw(st.booleans())}


@dataclass(frozen=True)
class Damage:
    kind: str       # "none", "zeros" (a torn tail), "flip" (one byte), "garbage"
    where: float    # how far into the log, as a fraction
    value: int


damages = st.builds(Damage, st.sampled_from(["none", "zeros", "flip", "garbage"]), st.floats(0.5, 1.0),
                    st.integers(1, 255))


def write_log(directory: Path, recs: list[dict[str, object]], damage: Damage) -> None:
    log = CommitLog.open(directory, FILE_SIZE)
    try:
        next_offset: dict[tuple[object, object], int] = {}
        for i, rec in enumerate(recs):
            encoded = encode_record(born_ms=1_700_000_000_000 + i, **rec)  # type: ignore[arg-type]
            key = (rec["topic"], rec["queue_id"])
            log.append(encoded, [len(encoded)], [next_offset.get(key, 0)], 1_700_000_000_500 + i,
                       sealed=bool(rec["prop_crc"]))
            if rec["sys_flag"] in (0, 0x8):  # prepared and rolled-back records get no queue entry
                next_offset[key] = next_offset.get(key, 0) + 1
        end = log.max_offset
        at = int(end * damage.where)
        mf = log.queue.find(min(at, end - 1))
        if damage.kind != "none" and mf is not None:
            pos = min(at, end - 1) - mf.file_base
            if damage.kind == "zeros":
                mf.buffer[pos:mf.written_pos] = bytes(mf.written_pos - pos)
            elif damage.kind == "flip":
                mf.buffer[pos] ^= damage.value
            else:
                mf.buffer[pos:pos + 16] = bytes([damage.value]) * len(mf.buffer[pos:pos + 16])
        log.flush()
    finally:
        log.close()


def per_record(log: CommitLog, check_crc: bool, require_prop_crc: bool
               ) -> tuple[list[int], int, tuple[int, DecodeKind, str] | None]:
    """What recovery's loop made of ``CommitLog.scan``: records, end, stop."""
    phys_offsets, end, stop = [], 0, None
    for phys, decoded in log.scan(0, check_crc=check_crc, read_body=False, require_prop_crc=require_prop_crc):
        if decoded.kind is DecodeKind.RECORD:
            phys_offsets.append(phys)
            end = phys + decoded.size
        elif decoded.kind is DecodeKind.BLANK:
            end = log.queue.roll_next(phys)
        else:
            stop = (phys, decoded.kind, decoded.reason)
    return phys_offsets, end, stop


def expected_dispatch(log: CommitLog, phys: int) -> tuple[tuple[object, ...], list[int]]:
    decoded = log.read_record(phys, check_crc=False, read_body=False)
    assert decoded.record is not None
    r = DispatchRequest.from_record(decoded.record)
    names = ([r.uniq_key] if r.uniq_key else []) + [k for k in r.keys if k]
    row = (r.phys_offset, r.size, r.topic, r.queue_id, r.queue_offset, r.tags_code, r.store_ms, r.sys_flag)
    return row, index_hashes([index_key(r.topic, k) for k in names])


def columnar(log: CommitLog, check_crc: bool, require_prop_crc: bool
             ) -> tuple[list[int], int, tuple[int, DecodeKind, str] | None, list[tuple[tuple[object, ...], list[int]]]]:
    """The same from ``scan_columns`` over a CommitLog, with each record's dispatch columns."""
    scan = scan_columns(log, 0, check_crc=check_crc, require_prop_crc=require_prop_crc)
    phys_offsets: list[int] = []
    dispatched: list[tuple[tuple[object, ...], list[int]]] = []
    for chunk in scan:
        phys_offsets.extend((chunk.file_base + chunk.records.starts).tolist())
        batch = DispatchColumns.of(chunk.buf, chunk.records)
        keys = batch.key_rows.tolist()
        for i, row in enumerate(batch.rows.tolist()):
            phys, size, topic, queue_id, queue_offset, tags_code, store_ms, sys_flag = row
            dispatched.append(((phys, size, batch.topics[topic], queue_id, queue_offset, tags_code, store_ms, sys_flag),
                               [h for h, r in zip(batch.key_hashes.tolist(), keys, strict=True) if r == i]))
        del chunk
    again = scan_columns(log, 0, scan.end, check_crc=False, known=known_starts(scan))
    assert [p for c in again for p in (c.file_base + c.records.starts).tolist()] == phys_offsets
    stop = None if scan.stop is None else (scan.stop[0], scan.stop[1].kind, scan.stop[1].reason)
    return phys_offsets, scan.end, stop, dispatched


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), min_size=1, max_size=40), damages, st.booleans(), st.booleans())
def test_columnar_scan_finds_what_the_record_scan_finds(recs: list[dict[str, object]], damage: Damage,
                                                        check_crc: bool, require_prop_crc: bool) -> None:
    with tempfile.TemporaryDirectory() as work:
        write_log(Path(work), recs, damage)
        log = CommitLog.open(work, FILE_SIZE)
        try:
            want_phys, want_end, want_stop = per_record(log, check_crc, require_prop_crc)
            got_phys, got_end, got_stop, dispatched = columnar(log, check_crc, require_prop_crc)
            assert (got_phys, got_end, got_stop) == (want_phys, want_end, want_stop)
            assert dispatched == [expected_dispatch(log, phys) for phys in want_phys]
        finally:
            log.close()


def file_digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), min_size=1, max_size=60), st.integers(0, 30))
def test_redispatch_from_columns_writes_what_record_by_record_dispatch_writes(recs: list[dict[str, object]],
                                                                             skip: int) -> None:
    """Into empty queues and index, and into ones already holding the first ``skip`` records (the
    index's newest file then ends at a record that comes again: only its missing keys are put)."""
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        write_log(root / "commitlog", recs, Damage("none", 1.0, 0))
        log = CommitLog.open(root / "commitlog", FILE_SIZE)
        phys_offsets, end, _ = per_record(log, False, False)
        try:
            for name in ("columns", "records"):
                queues = ConsumeQueueStore.open(root / name / "consumequeue", 8)
                index = IndexService.open(root / name / "index", 8, 32, lambda: 1_700_000_000_000)
                try:
                    for phys in phys_offsets[:skip]:
                        dispatch_one(log, queues, index, phys)
                    start = phys_offsets[min(skip, len(phys_offsets)) - 1] if skip and phys_offsets else 0
                    if name == "columns":
                        redispatch(log, queues, index, start, start, end)
                    else:
                        for phys in (p for p in phys_offsets if p >= start):
                            dispatch_one(log, queues, index, phys)
                finally:
                    queues.close()
                    index.close()
            assert file_digests(root / "columns") == file_digests(root / "records")
        finally:
            log.close()


def dispatch_one(log: CommitLog, queues: ConsumeQueueStore, index: IndexService, phys: int) -> None:
    record = log.read_record(phys, check_crc=False, read_body=False).record
    assert record is not None
    request = DispatchRequest.from_record(record)
    queues.dispatch(request)
    index.build(request.topic, request.keys, request.uniq_key, phys, request.store_ms, request.sys_flag)


def test_wide_field_gathered_near_the_file_end_reads_its_own_bytes(tmp_path: Path) -> None:
    """Regression: a topic matrix as wide as the chunk's longest topic, gathered for a record that ends
    near the file's end (only the 8-byte blank after it), read a window clamped back into the file
    (another record's bytes) and gave the record a garbage topic and tags code, which put it in
    another queue (seen as a ConsumeQueueOrderError in the full-disk survival run)."""
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        long = encode_record(topic="t" * 130, body=b"x", properties={"TAGS": "a"}, born_host=V4, store_host=V4)
        log.append(long, [len(long)], [0], 1)
        short = encode_record(topic="Ab", body=b"", properties={"TAGS": "Tag0"}, born_host=V4, store_host=V4)
        filler_size = FILE_SIZE - len(long) - len(short) - 8  # the last record leaves room for a blank
        filler = encode_record(topic="F", body=bytes(filler_size - len(encode_record(
            topic="F", body=b"", properties={}, born_host=V4, store_host=V4))), properties={}, born_host=V4,
            store_host=V4)
        log.append(filler, [len(filler)], [0], 1)
        log.append(short, [len(short)], [0], 1)
        assert log.max_offset == FILE_SIZE - 8
        chunks = list(scan_columns(log, 0))
        batch = DispatchColumns.of(chunks[0].buf, chunks[0].records)
        assert batch.topics[batch.rows["topic"][-1]] == "Ab"
        assert batch.rows["tags_code"][-1] == expected_dispatch(log, FILE_SIZE - 8 - len(short))[0][5]
        del chunks
    finally:
        log.close()
