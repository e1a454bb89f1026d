"""QueueIndex: RabbitMQ's v1 queue-index scenarios (reference §5) plus crash windows of our own.

RabbitMQ's tests use a segment of S = 2048 entries and a journal flushed every 128 entries; here S
is 16 (or 4, so that rolls happen in a few messages) and the journal limit is small too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import mqstore.engine.ackindex.queue_index
from mqstore.engine.ackindex.codec import (
    JOURNAL_OP_SIZE,
    JOURNAL_PUB_SIZE,
    encode_segment_rel,
    parse_journal,
    parse_segment,
)
from mqstore.engine.ackindex.files import CLEAN_FILE_NAME, JOURNAL_FILE_NAME, META_FILE_NAME
from mqstore.engine.ackindex.queue_index import (
    FlushResult,
    IndexEntry,
    PublishEntry,
    QueueIndex,
    QueueIndexError,
    RecoveryKind,
)
from mqstore.engine.log.host import Host
from mqstore.engine.log.msgid import decode_offset_msg_id, offset_msg_id

S = 16
STORE_HOST = Host("10.0.0.5", 10911)


def msg_id(seq_id: int) -> bytes:
    """The offsetMsgId bytes of a record at phys_offset 1000 * seq_id: what the owner publishes."""
    return bytes.fromhex(offset_msg_id(STORE_HOST, 1000 * seq_id))


@pytest.fixture
def qdir(tmp_path: Path) -> Path:
    return tmp_path / "queueindex" / "group" / "topic" / "0"


@pytest.fixture
def opened() -> Iterator[list[QueueIndex]]:
    indexes: list[QueueIndex] = []
    yield indexes
    for index in indexes:
        index.close(clean=False)


@pytest.fixture
def open_index(qdir: Path, opened: list[QueueIndex]) -> Any:
    def _open(**kwargs: int) -> QueueIndex:
        kwargs.setdefault("entries_per_segment", S)
        kwargs.setdefault("max_journal_entries", 1000)
        index = QueueIndex.open(qdir, **kwargs)
        opened.append(index)
        return index
    return _open


def publish(index: QueueIndex, seq_ids: Iterator[int] | range | list[int], size_bytes: int = 10) -> None:
    index.publish_many(PublishEntry(s, msg_id(s), size_bytes) for s in seq_ids)


def crash(index: QueueIndex) -> None:
    """What SIGKILL leaves: every write() is in the page cache, nothing else happened."""
    index.close(clean=False)


def seqs(entries: list[IndexEntry]) -> list[int]:
    return [e.seq_id for e in entries]


def segment_files(qdir: Path) -> list[str]:
    return sorted((p.name for p in qdir.glob("*.idx")), key=lambda n: int(n.split(".")[0]))


def journal_size(qdir: Path) -> int:
    return (qdir / JOURNAL_FILE_NAME).stat().st_size


def snapshot(qdir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in qdir.iterdir() if p.is_file()}


# -- RabbitMQ's scenarios (reference §5) ------------------------------------------------------------


def test_bounds_on_an_empty_index(open_index: Any) -> None:
    """RabbitMQ bq_queue_index1: a fresh queue has bounds (0, 0)."""
    index = open_index()
    assert index.bounds == (0, 0)
    assert index.next_seq_id == 0 and index.unacked_count == 0
    assert index.read(0, 100) == []
    assert index.recovery.kind is RecoveryKind.CREATED


@pytest.mark.parametrize("restart", ["clean", "crash"])
def test_persistent_messages_survive_restart_with_exact_counts(open_index: Any, restart: str) -> None:
    """RabbitMQ bq_queue_index1: publish 0.75*S .. 1.5*S, bounds are segment-aligned (0, 2*S), a read
    of [0, S) returns exactly those below S, and a restart keeps the count."""
    index = open_index()
    published = range(S * 3 // 4, S * 3 // 2)
    publish(index, published)
    assert index.bounds == (0, 2 * S)
    below = index.read(0, S)
    assert seqs(below) == list(range(S * 3 // 4, S))
    assert [e.msg_id for e in below] == [msg_id(s) for s in range(S * 3 // 4, S)]
    index.close(clean=restart == "clean")
    index = open_index()
    assert index.unacked_count == len(published)
    assert seqs(index.read(0, 2 * S)) == list(published)
    assert index.next_seq_id == published[-1] + 1


def test_full_ack_empties_the_index(open_index: Any, qdir: Path) -> None:
    """RabbitMQ bq_queue_index1: deliver and ack everything, flush: bounds (0, 0), before and
    after a restart. The next seq_id is not forgotten although no file shows it any more."""
    index = open_index()
    publish(index, range(S * 3 // 4, S * 3 // 2))
    index.deliver(range(S * 2))
    index.ack(range(S * 2))
    index.flush()
    assert index.bounds == (0, 0) and segment_files(qdir) == []
    crash(index)
    index = open_index()
    assert index.bounds == (0, 0) and index.unacked_count == 0
    assert index.next_seq_id == S * 3 // 2


def test_segment_auto_deletion_edge_cases(open_index: Any, qdir: Path) -> None:
    """RabbitMQ bq_queue_index1 "segment auto-deletion": none of these may crash, and no file of a
    fully acked segment may remain."""
    index = open_index()
    # (a) publish, deliver and ack half a segment, flush, then publish at S
    publish(index, range(S // 2))
    index.deliver(range(S // 2))
    index.ack(range(S // 2))
    index.flush()
    publish(index, [S])
    index.flush()
    assert segment_files(qdir) == ["1.idx"]
    index.ack([S])
    index.flush()
    assert segment_files(qdir) == []
    # (b) publish and deliver half a segment, publish at the next segment, ack the old half, flush
    base = 2 * S
    publish(index, range(base, base + S // 2))
    index.deliver(range(base, base + S // 2))
    publish(index, [base + S])
    index.flush()
    assert segment_files(qdir) == ["2.idx", "3.idx"]
    index.ack(range(base, base + S // 2))
    result = index.flush()
    assert result.deleted_segments == (2,) and segment_files(qdir) == ["3.idx"]
    index.ack([base + S])
    index.flush()
    # (c) publish 4*S + 1, deliver and ack them all, flush
    base = 4 * S
    publish(index, range(base, base + 4 * S + 1))
    index.flush()
    assert len(segment_files(qdir)) == 5
    index.deliver(range(base, base + 4 * S + 1))
    index.ack(range(base, base + 4 * S + 1))
    index.flush()
    assert segment_files(qdir) == [] and index.unacked_count == 0 and index.segment_numbers == []


def merge_scenario_first_half(index: QueueIndex) -> None:
    publish(index, [0, 1, 2, 3, 4, 5])
    index.deliver([0, 1, 3])
    index.ack([0])


def merge_scenario_second_half(index: QueueIndex) -> None:
    publish(index, [6, 7, 8])
    index.deliver([2, 6, 4, 7])
    index.ack([1, 2, 6])


# seq_id -> delivered, for what the merge scenario leaves unacked
MERGE_EXPECTED = {3: True, 4: True, 5: False, 7: True, 8: False}


@pytest.mark.parametrize("entries_per_segment", [4, S])
def test_journal_segment_merge_on_read(open_index: Any, entries_per_segment: int) -> None:
    """RabbitMQ bq_queue_index1 "journal/segment merging", every segment-plus-journal combination.

    RabbitMQ publishes {0,1,2,4,5,7}, flushes, then publishes {3,6,8}; here publishes must rise, so
    the seq_ids are relabelled (RabbitMQ's 4,5,7,3,6,8 are our 3,4,5,6,7,8) with the same roles:
    0 pub+del+ack all in the journal (cancelled); 1 segment {pub,del} + journal ack; 2 segment {pub}
    + journal del+ack; 3 segment {pub,del}; 4 segment {pub} + journal del; 5 segment {pub};
    6 journal pub+del+ack; 7 journal {pub,del}; 8 journal {pub}.
    """
    index = open_index(entries_per_segment=entries_per_segment)
    merge_scenario_first_half(index)
    index.flush()
    merge_scenario_second_half(index)
    for check in ("journal", "flushed"):
        entries = index.read(0, 9)
        assert {e.seq_id: e.delivered for e in entries} == MERGE_EXPECTED, check
        assert not any(e.redelivered for e in entries)
        assert seqs(index.read(0, 3)) == [] and seqs(index.read(3, 6)) == [3, 4, 5]
        assert seqs(index.read(6, 9)) == [7, 8]
        assert index.unacked_count == 5
        index.flush()


@pytest.mark.parametrize("entries_per_segment", [4, S])
def test_journal_segment_dedup_on_recovery(open_index: Any, qdir: Path, entries_per_segment: int) -> None:
    """RabbitMQ bq_queue_index1 "journal minus segment": the merge scenario with a crash after each
    half; 5 unacked after the first, 5 after the second. The second crash comes between a flush's
    segment appends and its journal truncation, so the journal replays over entries already there."""
    index = open_index(entries_per_segment=entries_per_segment)
    merge_scenario_first_half(index)
    index.flush()
    crash(index)
    index = open_index(entries_per_segment=entries_per_segment)
    assert index.unacked_count == 5 and index.recovery.kind is RecoveryKind.DIRTY
    merge_scenario_second_half(index)
    journal = (qdir / JOURNAL_FILE_NAME).read_bytes()
    index.flush()
    sizes = {name: len(data) for name, data in snapshot(qdir).items() if name.endswith(".idx")}
    crash(index)
    (qdir / JOURNAL_FILE_NAME).write_bytes(journal)
    index = open_index(entries_per_segment=entries_per_segment)
    assert index.unacked_count == 5
    assert index.recovery.journal_record_count == len(parse_journal(journal).records)
    entries = index.read(0, 9)
    assert {e.seq_id: e.delivered for e in entries} == MERGE_EXPECTED
    # nothing was appended twice
    assert {name: len(data) for name, data in snapshot(qdir).items() if name.endswith(".idx")} == sizes


def test_properties_round_trip(open_index: Any) -> None:
    """RabbitMQ bq_queue_index_props1: expiry 12345 and size 10 read back as written; the msg id
    is the commitlog record's offsetMsgId."""
    index = open_index()
    index.publish(0, msg_id(0), 10, expiry_ms=12345)
    for _ in ("journal", "segment"):
        (entry,) = index.read(0, 1)
        assert (entry.size_bytes, entry.expiry_ms, entry.body) == (10, 12345, None)
        assert decode_offset_msg_id(entry.msg_id.hex().upper()) == (STORE_HOST, 0)
        index.flush()


def test_fully_acked_segment_file_is_deleted(open_index: Any, qdir: Path) -> None:
    """RabbitMQ v2_delete_segment_file_completely_acked1: a full segment, all acked, loses its file."""
    index = open_index()
    publish(index, range(S))
    index.flush()
    assert segment_files(qdir) == ["0.idx"]
    index.ack(range(S))
    assert index.flush() == FlushResult((), (0,))
    assert segment_files(qdir) == []


def test_partially_filled_segment_file_is_deleted_when_all_acked(open_index: Any, qdir: Path) -> None:
    """RabbitMQ v2_delete_segment_file_partially_acked1: S/2 + 1 entries, all acked."""
    index = open_index()
    publish(index, range(S // 2 + 1))
    index.flush()
    index.ack(range(S // 2 + 1))
    assert index.flush().deleted_segments == (0,)
    assert segment_files(qdir) == []


def test_segment_with_holes_is_deleted_once_both_ranges_are_acked(open_index: Any, qdir: Path) -> None:
    """RabbitMQ v2_delete_segment_file_partially_acked_with_holes1."""
    index = open_index()
    first, second = range(S // 2 + 1), range(S // 2 + 3, S)
    publish(index, [*first, *second])
    index.flush()
    index.ack(first)
    assert index.flush().deleted_segments == ()
    assert segment_files(qdir) == ["0.idx"]
    index.ack(second)
    assert index.flush().deleted_segments == (0,)
    assert segment_files(qdir) == []


@pytest.mark.parametrize("restart", ["clean", "crash"])
def test_queue_recovery_flags_delivered_messages_redelivered(open_index: Any, restart: str) -> None:
    """RabbitMQ bq_queue_recover1: 2*S persistent messages, one fetched, the queue killed; the
    recovered queue gives that message back flagged redelivered, and keeps the count. Messages
    never delivered are not flagged (RabbitMQ's dirty recovery flags them too, reference §2.3,
    because its deliveries are not in the journal; ours are)."""
    index = open_index()
    publish(index, range(2 * S))
    index.flush()
    index.deliver([0, S + 1])  # one delivery over a flushed publish, one left in the journal
    index.flush()
    index.deliver([5])
    index.ack([S + 1])
    index.close(clean=restart == "clean")
    index = open_index()
    assert index.unacked_count == 2 * S - 1
    entries = {e.seq_id: e for e in index.read(0, 2 * S)}
    assert entries[0].redelivered and entries[0].delivered
    assert entries[5].redelivered
    assert not entries[1].delivered and not entries[1].redelivered
    assert seqs(index.pending_redelivery(0, 2 * S)) == [0, 5]
    # a delivery in this run is in flight with its consumer, not due again
    index.deliver([1])
    assert index.deliver([0]) == 0  # already delivered: a redelivery is not an index event
    assert seqs(index.pending_redelivery(0, 2 * S)) == [0, 5]
    index.flush()
    assert seqs(index.pending_redelivery(0, 2 * S)) == [0, 5]
    crash(index)
    index = open_index()
    assert seqs(index.pending_redelivery(0, 2 * S)) == [0, 1, 5]


def test_many_segments(open_index: Any, qdir: Path) -> None:
    """RabbitMQ variable_queue_partial_segments_delta_thing2, scaled: hundreds of messages over
    segments of 4, delivered and acked in a scattered order, with automatic flushes."""
    index = open_index(entries_per_segment=4, max_journal_entries=32)
    count = 600
    publish(index, range(count))
    order = [(i * 7) % count for i in range(count)]  # 7 is prime to 600: a permutation
    index.deliver(order[: count // 2])
    index.ack(order[: count // 3])
    crash(index)
    index = open_index(entries_per_segment=4, max_journal_entries=32)
    acked = set(order[: count // 3])
    delivered = set(order[: count // 2])
    entries = index.read(0, count)
    assert seqs(entries) == [s for s in range(count) if s not in acked]
    assert all(e.redelivered == (e.seq_id in delivered) for e in entries)
    index.ack(range(count))
    index.flush()
    assert segment_files(qdir) == [] and index.segment_numbers == [] and index.unacked_count == 0
    publish(index, range(count, count + 9))
    index.close()
    assert segment_files(qdir) == [f"{n}.idx" for n in range(150, 153)]


# -- flush triggers ---------------------------------------------------------------------------------


def test_flush_threshold_triggers_automatic_flush(open_index: Any, qdir: Path) -> None:
    """RabbitMQ's maybe_flush_journal: a flush once the journal holds more than
    max_journal_entries records."""
    index = open_index(max_journal_entries=8)
    publish(index, range(8))
    assert index.dirty_count == 8 and segment_files(qdir) == []
    assert journal_size(qdir) == 8 * JOURNAL_PUB_SIZE
    publish(index, [8])
    assert index.dirty_count == 0 and journal_size(qdir) == 0
    assert segment_files(qdir) == ["0.idx"]
    index.deliver(range(9))  # 9 more records: over the limit again within one batch
    assert index.dirty_count == 0
    assert len(parse_segment((qdir / "0.idx").read_bytes()).entries) == 9


def test_idle_flush_moves_the_journal_into_segments(open_index: Any, qdir: Path) -> None:
    """RabbitMQ's handle_pre_hibernate -> flush: the owner flushes an idle queue."""
    index = open_index()
    assert index.flush() == FlushResult()
    publish(index, range(S + 2))
    index.deliver([0])
    assert journal_size(qdir) == (S + 2) * JOURNAL_PUB_SIZE + JOURNAL_OP_SIZE
    assert index.flush() == FlushResult((0, 1), ())
    assert journal_size(qdir) == 0 and index.dirty_count == 0
    entries = parse_segment((qdir / "0.idx").read_bytes()).entries
    assert len(entries) == S and entries[0].deliver_pos is not None
    assert index.flush() == FlushResult()


def test_journal_records_are_appended_as_written(open_index: Any, qdir: Path) -> None:
    index = open_index()
    publish(index, [0, 1])
    index.deliver([1])
    index.ack([0])  # undelivered: a delivery is written first
    index.sync()
    records = parse_journal((qdir / JOURNAL_FILE_NAME).read_bytes()).records
    assert [(r.kind.value, r.seq_id) for r in records] == [
        ("publish", 0), ("publish", 1), ("deliver", 1), ("deliver", 0), ("ack", 0)]


# -- clean marker and reopen ------------------------------------------------------------------------


def test_reopen_after_clean_close_reads_the_same_state(open_index: Any, qdir: Path) -> None:
    index = open_index(embed_threshold_bytes=64)
    publish(index, range(2 * S + 3))
    index.publish(2 * S + 3, msg_id(2 * S + 3), 5, expiry_ms=99, body=b"small")
    index.deliver(range(0, 2 * S, 3))
    index.ack(range(0, 2 * S, 2))
    before = index.read(0, 3 * S)
    index.close()
    assert (qdir / CLEAN_FILE_NAME).exists() and journal_size(qdir) == 0
    index = open_index(embed_threshold_bytes=64)
    assert index.recovery.kind is RecoveryKind.CLEAN
    assert not (qdir / CLEAN_FILE_NAME).exists()  # a crash from now on must read as dirty
    after = index.read(0, 3 * S)
    assert seqs(after) == seqs(before)
    assert [e.delivered for e in after] == [e.delivered for e in before]
    assert [e.redelivered for e in after] == [e.delivered for e in before]
    assert after[-1].body == b"small" and after[-1].expiry_ms == 99
    assert index.unacked_count == len(before) and index.next_seq_id == 2 * S + 4
    crash(index)
    index = open_index(embed_threshold_bytes=64)
    assert index.recovery.kind is RecoveryKind.DIRTY
    assert seqs(index.read(0, 3 * S)) == seqs(before)


@pytest.mark.parametrize("damage", ["unreadable", "file_missing", "extra_file", "journal_written"])
def test_a_clean_marker_that_does_not_match_means_dirty_recovery(open_index: Any, qdir: Path, damage: str) -> None:
    index = open_index()
    publish(index, range(2 * S))
    index.ack(range(S))
    index.close()
    marker = qdir / CLEAN_FILE_NAME
    if damage == "unreadable":
        marker.write_bytes(b"{not json")
    elif damage == "file_missing":
        (qdir / "1.idx").unlink()
    elif damage == "extra_file":
        (qdir / "7.idx").write_bytes(encode_segment_rel(0))  # a stray, torn-looking file
    else:
        with open(qdir / JOURNAL_FILE_NAME, "ab") as journal:
            journal.write(bytes.fromhex("c000000000000010"))  # ack of seq_id 16
    index = open_index()
    assert index.recovery.kind is RecoveryKind.DIRTY
    expected = {"unreadable": S, "file_missing": 0, "extra_file": S, "journal_written": S - 1}[damage]
    assert index.unacked_count == len(index.read(0, 3 * S)) == expected
    assert not (qdir / CLEAN_FILE_NAME).exists() and not (qdir / "7.idx").exists()


def test_another_geometry_is_an_error(open_index: Any, qdir: Path) -> None:
    open_index().close()
    with pytest.raises(QueueIndexError, match="entries_per_segment"):
        QueueIndex.open(qdir, entries_per_segment=S * 2)
    assert (qdir / META_FILE_NAME).exists()


# -- torn tails and interrupted flushes -------------------------------------------------------------


@pytest.mark.parametrize("last", ["publish", "embedded_publish", "deliver", "ack"])
def test_torn_journal_tail_at_every_byte(tmp_path: Path, last: str) -> None:
    """Reference §1.3 parsing rule: a crash inside the last record's write keeps exactly the whole
    records before it, and the torn bytes are truncated away before anything is appended."""
    src = tmp_path / "src"
    index = QueueIndex.open(src, entries_per_segment=4, embed_threshold_bytes=64)
    publish(index, range(6))
    index.flush()
    index.deliver([0, 1])
    index.ack([0])
    before = (src / JOURNAL_FILE_NAME).stat().st_size
    if last == "publish":
        index.publish(6, msg_id(6), 10)
    elif last == "embedded_publish":
        index.publish(6, msg_id(6), 10, body=b"0123456789")
    elif last == "deliver":
        index.deliver([2])
    else:
        index.ack([1])
    crash(index)
    after = (src / JOURNAL_FILE_NAME).stat().st_size
    expected_unacked = [1, 2, 3, 4, 5]
    for cut in range(before, after):
        work = tmp_path / f"cut{cut}"
        shutil.copytree(src, work)
        os.truncate(work / JOURNAL_FILE_NAME, cut)
        index = QueueIndex.open(work, entries_per_segment=4, embed_threshold_bytes=64)
        assert index.recovery.ignored_journal_bytes == cut - before
        assert index.recovery.journal_record_count == 3
        entries = index.read(0, 10)
        assert seqs(entries) == expected_unacked
        assert [e.seq_id for e in entries if e.delivered] == [1]
        assert index.next_seq_id == 6
        assert journal_size(work) == 0
        index.publish(6, msg_id(6), 10)  # appends after the truncated tail, readable after a crash
        crash(index)
        index = QueueIndex.open(work, entries_per_segment=4, embed_threshold_bytes=64)
        assert seqs(index.read(0, 10)) == [*expected_unacked, 6]
        index.close()


def test_torn_segment_tail_is_cut_at_recovery(open_index: Any, qdir: Path) -> None:
    """A flush that crashed inside a segment append: the journal still holds the entries, the
    partial record is cut off, and the entries are appended again whole."""
    index = open_index(entries_per_segment=4)
    publish(index, range(4))
    index.flush()
    index.deliver([1])
    journal = (qdir / JOURNAL_FILE_NAME).read_bytes()
    crash(index)
    with open(qdir / "0.idx", "ab") as segment:
        segment.write(encode_segment_rel(1)[:1])
    index = open_index(entries_per_segment=4)
    assert index.recovery.repaired_segment_count == 1
    assert (qdir / JOURNAL_FILE_NAME).read_bytes() == b""
    entries = parse_segment((qdir / "0.idx").read_bytes())
    assert entries.stray_count == 0 and entries.entries[1].deliver_pos is not None
    assert [e.seq_id for e in index.read(0, 4) if e.delivered] == [1]
    assert journal  # the delivery came from the journal, not from the torn byte


def test_zero_filled_segment_tail_is_cut_at_recovery(open_index: Any, qdir: Path) -> None:
    index = open_index(entries_per_segment=4)
    publish(index, range(4))
    index.close()
    size = (qdir / "0.idx").stat().st_size
    with open(qdir / "0.idx", "ab") as segment:
        segment.write(bytes(4096))
    (qdir / CLEAN_FILE_NAME).unlink()
    index = open_index(entries_per_segment=4)
    assert index.recovery.repaired_segment_count == 1
    assert (qdir / "0.idx").stat().st_size == size
    assert seqs(index.read(0, 4)) == [0, 1, 2, 3]


def test_crash_after_deleting_a_segment_before_truncating_the_journal(open_index: Any, qdir: Path) -> None:
    """Reference §2.3 "missing segment": the journal's acks for a deleted segment are dropped and
    nothing is resurrected."""
    index = open_index(entries_per_segment=4)
    publish(index, range(6))
    index.flush()
    index.ack(range(5))
    journal = (qdir / JOURNAL_FILE_NAME).read_bytes()
    assert index.flush().deleted_segments == (0,)
    crash(index)
    (qdir / JOURNAL_FILE_NAME).write_bytes(journal)
    index = open_index(entries_per_segment=4)
    assert seqs(index.read(0, 8)) == [5]
    assert segment_files(qdir) == ["1.idx"] and index.unacked_count == 1


def test_next_seq_id_survives_when_no_file_shows_it(open_index: Any, qdir: Path) -> None:
    """Publish, deliver and ack all within one journal cancel out: no segment ever sees them, so
    only queue_index.json keeps the next seq_id once the journal is truncated."""
    index = open_index()
    publish(index, range(10))
    index.ack(range(10))
    index.flush()
    assert segment_files(qdir) == [] and journal_size(qdir) == 0
    crash(index)
    index = open_index()
    assert index.next_seq_id == 10
    with pytest.raises(QueueIndexError, match="next seq_id is 10"):
        index.publish(9, msg_id(9), 1)


# -- the write API --------------------------------------------------------------------------------


def test_deliver_and_ack_are_idempotent_and_skip_unknown_seq_ids(open_index: Any) -> None:
    index = open_index(entries_per_segment=4)
    publish(index, [0, 1, 2, 5])  # 3 and 4 are a gap
    assert index.deliver([0, 0, 3, 99]) == 1
    index.flush()
    assert index.deliver([0, 1]) == 1  # 0's delivery is now in its segment file
    assert index.ack([0, 0, 2, 4]) == 2  # 2 was never delivered: it is delivered and acked
    assert index.ack([0, 2]) == 0
    index.flush()
    assert index.ack([0, 2]) == 0
    assert {e.seq_id: e.delivered for e in index.read(0, 8)} == {1: True, 5: False}
    crash(index)
    index = open_index(entries_per_segment=4)
    assert {e.seq_id: e.delivered for e in index.read(0, 8)} == {1: True, 5: False}


def test_ack_without_delivery_over_a_flushed_publish_reads_back_acked(open_index: Any, qdir: Path) -> None:
    """A segment tells delivery from ack by position: a lone 2-byte record would read as a delivery."""
    index = open_index(entries_per_segment=4)
    publish(index, [0, 1])
    index.flush()
    index.ack([0])
    index.flush()
    entries = parse_segment((qdir / "0.idx").read_bytes()).entries
    assert entries[0].acked and not entries[1].acked
    index.close()
    index = open_index(entries_per_segment=4)
    assert seqs(index.read(0, 4)) == [1]


def test_publish_must_rise(open_index: Any) -> None:
    index = open_index()
    publish(index, [3, 7])  # gaps are fine: a filtered consume queue skips offsets
    with pytest.raises(QueueIndexError):
        publish(index, [8, 7])
    assert index.next_seq_id == 8 and index.dirty_count == 2  # nothing of the bad batch was written
    with pytest.raises(ValueError):
        index.publish(8, b"short", 1)
    with pytest.raises(ValueError):
        index.ack([-1])


def test_embedding_is_below_the_threshold_only(open_index: Any) -> None:
    index = open_index(embed_threshold_bytes=8)
    index.publish(0, msg_id(0), 7, body=b"1234567")
    index.publish(1, msg_id(1), 8, body=b"12345678")
    index.publish(2, msg_id(2), 0, body=b"")
    for _ in ("journal", "segment", "reopened"):
        assert [e.body for e in index.read(0, 3)] == [b"1234567", None, None]
        index.close()
        index = open_index(embed_threshold_bytes=8)


def test_lowest_unacked_seq_id_and_bounds(open_index: Any) -> None:
    index = open_index(entries_per_segment=4)
    assert index.lowest_unacked_seq_id() == 0
    publish(index, range(10))
    index.ack([0, 1, 2, 3, 4])
    assert index.lowest_unacked_seq_id() == 5
    assert index.bounds == (4, 12)
    index.ack(range(10))
    assert index.lowest_unacked_seq_id() == 10 and index.bounds == (0, 0)


def test_a_failed_write_refuses_later_writes_and_never_closes_clean(
        open_index: Any, qdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = open_index()
    publish(index, [0])

    def full_disk(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(mqstore.engine.ackindex.queue_index, "write_all", full_disk)
    with pytest.raises(OSError):
        publish(index, [1])
    monkeypatch.undo()
    with pytest.raises(QueueIndexError, match="refuses writes"):
        publish(index, [1])
    index.close()
    assert not (qdir / CLEAN_FILE_NAME).exists()
    index = open_index()
    assert index.recovery.kind is RecoveryKind.DIRTY and seqs(index.read(0, 2)) == [0]


def test_closed_index_refuses_use(open_index: Any) -> None:
    index = open_index()
    index.close()
    index.close()
    with pytest.raises(QueueIndexError, match="closed"):
        index.read(0, 1)
    with pytest.raises(QueueIndexError, match="closed"):
        index.flush()


# -- model-based: RabbitMQ's classic_queue_prop_SUITE, against an in-memory model -------------------


@dataclass
class ModelMessage:
    entry: IndexEntry
    delivered_run: int | None = None  # which open (run) recorded the delivery


class QueueIndexMachine(RuleBasedStateMachine):
    """Random publish / deliver / ack / flush / clean restart / crash / crash inside a flush, with
    segments of 4 and a journal of 6 so that every path rolls and flushes within a few steps."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="qi-machine-"))
        self.qdir = self.root / "q"
        self.run = 0
        self.model: dict[int, ModelMessage] = {}
        self.next_seq_id = 0
        self.index = self._open()

    def _open(self) -> QueueIndex:
        return QueueIndex.open(self.qdir, entries_per_segment=4, max_journal_entries=6, embed_threshold_bytes=8)

    def _reopen(self) -> None:
        self.index = self._open()
        self.run += 1

    def teardown(self) -> None:
        self.index.close(clean=False)
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(gap=st.integers(0, 3), count=st.integers(1, 6), bodies=st.lists(st.none() | st.binary(max_size=12)))
    def publish(self, gap: int, count: int, bodies: list[bytes | None]) -> None:
        batch = []
        seq_id = self.next_seq_id + gap
        for i in range(count):
            body = bodies[i] if i < len(bodies) else None
            batch.append(PublishEntry(seq_id, msg_id(seq_id), 10 + i, expiry_ms=i, body=body))
            embedded = body if body and len(body) < 8 else None
            self.model[seq_id] = ModelMessage(IndexEntry(seq_id, msg_id(seq_id), 10 + i, i, embedded, False, False))
            seq_id += 1 + (i % 2) * gap
        assert self.index.publish_many(batch) == count
        self.next_seq_id = batch[-1].seq_id + 1

    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.integers(0, self.next_seq_id + 2), max_size=6))
        applied = 0
        for seq_id in chosen:
            message = self.model.get(seq_id)
            if message is not None and message.delivered_run is None:
                message.delivered_run = self.run
                applied += 1
        assert self.index.deliver(chosen) == applied

    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.integers(0, self.next_seq_id + 2), max_size=6))
        applied = 0
        for seq_id in chosen:
            if self.model.pop(seq_id, None) is not None:
                applied += 1
        assert self.index.ack(chosen) == applied

    @rule()
    def flush(self) -> None:
        self.index.flush()
        assert journal_size(self.qdir) == 0
        live_segments = sorted({seq_id // 4 for seq_id in self.model})
        # memory and disk both hold exactly the segments with unacked messages
        assert self.index.segment_numbers == live_segments
        assert segment_files(self.qdir) == [f"{n}.idx" for n in live_segments]

    @rule()
    def clean_restart(self) -> None:
        self.index.close()
        self._reopen()
        assert self.index.recovery.kind is RecoveryKind.CLEAN

    @rule()
    def crash_restart(self) -> None:
        crash(self.index)
        self._reopen()

    @rule(data=st.data())
    def crash_inside_a_flush(self, data: st.DataObject) -> None:
        """Any subset of the flush's segment appends and deletes reached the disk, any append may be
        torn (a prefix of it) or read back as zeros (size extended, data not written), and the
        journal was not yet truncated. Not generated: real bytes then zeros inside one record,
        which no checksum-less format can tell from a record (see mqstore.engine.ackindex.codec)."""
        before = snapshot(self.qdir)
        self.index.flush()
        crash(self.index)
        after = snapshot(self.qdir)
        for name in sorted(n for n in before.keys() | after.keys() if n.endswith(".idx")):
            old, new = before.get(name), after.get(name)
            if old == new or not data.draw(st.booleans(), label=f"revert {name}"):
                continue
            path = self.qdir / name
            if old is None and new is not None and not data.draw(st.booleans(), label="torn create"):
                path.unlink()
                continue
            old = old or b""
            tail = b""
            if new is not None and len(new) > len(old):
                cut = data.draw(st.integers(0, len(new) - len(old) - 1), label="torn bytes")
                zeros = data.draw(st.booleans(), label="zero fill")
                tail = bytes(cut + 1) if zeros else new[len(old):len(old) + cut]
            path.write_bytes(old + tail)
        (self.qdir / JOURNAL_FILE_NAME).write_bytes(before[JOURNAL_FILE_NAME])
        self._reopen()

    @invariant()
    def matches_the_model(self) -> None:
        expected = []
        for seq_id in sorted(self.model):
            message = self.model[seq_id]
            run = message.delivered_run
            expected.append(replace(message.entry, delivered=run is not None,
                                    redelivered=run is not None and run < self.run))
        assert self.index.read(0, self.next_seq_id + 4) == expected
        assert self.index.unacked_count == len(self.model)
        assert self.index.next_seq_id == self.next_seq_id
        assert self.index.lowest_unacked_seq_id() == min(self.model, default=self.next_seq_id)


TestQueueIndexMachine = QueueIndexMachine.TestCase
TestQueueIndexMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
