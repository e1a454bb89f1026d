"""An ack index cut back to its queue's recovered end: a power cut took the commitlog's tail after the
index had indexed (and flushed) entries of it; the consume queue was recovered shorter, and new sends
reuse the lost queue offsets."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mqstore.engine.ackindex import files
from mqstore.engine.ackindex.files import CLEAN_FILE_NAME, JOURNAL_FILE_NAME, META_FILE_NAME
from mqstore.engine.ackindex.low_water import QUEUE_INDEX_DIR
from mqstore.engine.ackindex.queue_index import PublishEntry, QueueIndex, RecoveryKind
from mqstore.engine.ackindex.truncation import truncate_after, truncate_to_queue_ends

EPS = 4  # entries per segment: 0..9 spread over segments 0, 1 and 2
SIZE = 100
OLD, NEW = 1_000, 50_000  # the lost messages' commitlog offsets, and the new sends'


def _msg_id(base: int, seq: int) -> bytes:
    return bytes(8) + struct.pack(">q", base + seq * SIZE)


def _queue_dir(store: Path) -> Path:
    return store / QUEUE_INDEX_DIR / "G" / "T" / "0"


def _indexed_ten(directory: Path, *, clean: bool) -> None:
    """Offsets 0..9 indexed and delivered; 0, 1, 5 and 6 acked and flushed into the segments, 7 acked
    in the journal after that flush."""
    index = QueueIndex.open(directory, entries_per_segment=EPS)
    index.publish_many(PublishEntry(seq, _msg_id(OLD, seq), SIZE) for seq in range(10))
    index.deliver(range(10))
    index.ack([0, 1, 5, 6])
    index.flush()
    index.ack([7])
    index.close(clean=clean)


@pytest.mark.parametrize("clean", [False, True], ids=["crashed", "closed-clean"])
def test_an_index_past_the_recovered_end_indexes_the_new_sends_at_the_lost_offsets(tmp_path: Path,
                                                                                  clean: bool) -> None:
    directory = _queue_dir(tmp_path)
    _indexed_ten(directory, clean=clean)

    (key, cut), = truncate_to_queue_ends(tmp_path, {("T", 0): 5, ("Other", 0): 0})
    assert key == ("G", "T", 0) and (cut.indexed_end, cut.end_seq_id) == (10, 5)
    assert not (directory / CLEAN_FILE_NAME).exists()
    assert not files.segment_path(directory, 2).exists()  # 8, 9: nothing below the end
    assert truncate_to_queue_ends(tmp_path, {("T", 0): 5}) == []  # done: a second recovery finds nothing

    with QueueIndex.open(directory, entries_per_segment=EPS) as index:
        assert index.recovery.kind is RecoveryKind.DIRTY
        assert index.next_seq_id == 5
        # the durable ones still unacked come back as delivered before; none of the lost ones
        assert [(e.seq_id, e.redelivered) for e in index.read(0, 10)] == [(2, True), (3, True), (4, True)]
        index.publish_many(PublishEntry(seq, _msg_id(NEW, seq), SIZE) for seq in range(5, 10))
        fresh = index.read(5, 10)
        assert [(e.seq_id, e.msg_id, e.delivered) for e in fresh] == [(s, _msg_id(NEW, s), False) for s in range(5, 10)]
        assert index.unacked_count == 8
    with QueueIndex.open(directory, entries_per_segment=EPS) as index:  # and so it stays
        assert [e.seq_id for e in index.read(0, 10)] == [2, 3, 4, 5, 6, 7, 8, 9]
        assert all(e.msg_id == _msg_id(NEW, e.seq_id) for e in index.read(5, 10))


def test_an_index_within_its_queue_is_not_written(tmp_path: Path) -> None:
    directory = _queue_dir(tmp_path)
    _indexed_ten(directory, clean=False)
    before = {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in directory.iterdir()}
    assert truncate_to_queue_ends(tmp_path, {("T", 0): 10}) == []
    assert truncate_to_queue_ends(tmp_path, {("T", 0): 12}) == []
    assert {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in directory.iterdir()} == before


def test_the_cut_keeps_the_records_below_the_end_in_the_segment_it_splits(tmp_path: Path) -> None:
    """Segment 1 holds 4..7; cut at 6: 4 (unacked) and 5 (acked) stay as they were, 6 and 7 go."""
    directory = _queue_dir(tmp_path)
    _indexed_ten(directory, clean=False)
    cut = truncate_after(directory, 6)
    assert cut is not None and cut.journal_records_dropped == 1  # the ack of 7
    with QueueIndex.open(directory, entries_per_segment=EPS) as index:
        assert index.next_seq_id == 6
        assert [(e.seq_id, e.msg_id) for e in index.read(0, 10)] == [(s, _msg_id(OLD, s)) for s in (2, 3, 4)]
        assert index.ack([5]) == 0  # acked before the cut, still acked


def test_a_cut_interrupted_by_a_power_cut_is_cut_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The segments and the journal were rewritten, queue_index.json was not: the index still says 10."""
    directory = _queue_dir(tmp_path)
    _indexed_ten(directory, clean=False)

    def power_cut(*args: object) -> None:
        raise OSError("power cut")

    import mqstore.engine.ackindex.truncation as truncation
    monkeypatch.setattr(truncation, "write_meta", power_cut)
    with pytest.raises(OSError):
        truncate_after(directory, 5)
    monkeypatch.undo()
    with QueueIndex.open(directory, entries_per_segment=EPS) as index:
        assert index.next_seq_id == 10  # what the new sends would be skipped behind
    cut = truncate_after(directory, 5)
    assert cut is not None and cut.indexed_end == 10
    with QueueIndex.open(directory, entries_per_segment=EPS) as index:
        assert index.next_seq_id == 5
        assert [e.seq_id for e in index.read(0, 10)] == [2, 3, 4]


def test_a_directory_without_an_index_is_left_alone(tmp_path: Path) -> None:
    directory = _queue_dir(tmp_path)
    directory.mkdir(parents=True)
    assert truncate_to_queue_ends(tmp_path, {}) == []
    assert not (directory / META_FILE_NAME).exists() and not (directory / JOURNAL_FILE_NAME).exists()
