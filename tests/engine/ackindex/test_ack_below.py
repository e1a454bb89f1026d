"""QueueIndex.ack_below: a queue moved forward to another copy's mark (a slave taking its master's),
on a real index directory: everything below it acked, durably (the journal fsynced before the flush
that writes queue_index.json), never backwards, and the next open indexes from the mark."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import mqstore.engine.ackindex.queue_index as queue_index_module
from mqstore.engine.ackindex.codec import MAX_SEQ_ID
from mqstore.engine.ackindex.files import JOURNAL_FILE_NAME, META_FILE_NAME
from mqstore.engine.ackindex.queue_index import PublishEntry, QueueIndex, QueueIndexError
from mqstore.engine.log.host import Host
from mqstore.engine.log.msgid import offset_msg_id

S = 16
HOST = Host("10.0.0.5", 10911)


def msg_id(seq_id: int) -> bytes:
    return bytes.fromhex(offset_msg_id(HOST, 1000 * seq_id))


@pytest.fixture
def qdir(tmp_path: Path) -> Path:
    return tmp_path / "queueindex" / "G" / "T" / "0"


@pytest.fixture
def indexes(qdir: Path) -> Iterator[list[QueueIndex]]:
    opened: list[QueueIndex] = []
    yield opened
    for index in opened:
        index.close(clean=False)


def open_index(qdir: Path, opened: list[QueueIndex]) -> QueueIndex:
    index = QueueIndex.open(qdir, entries_per_segment=S, max_journal_entries=1000)
    opened.append(index)
    return index


def publish(index: QueueIndex, seq_ids: range | list[int]) -> None:
    index.publish_many(PublishEntry(s, msg_id(s), 10) for s in seq_ids)


def unacked(index: QueueIndex) -> list[int]:
    return [e.seq_id for e in index.read(0, index.next_seq_id)]


def meta_next_seq_id(qdir: Path) -> int:
    return int(json.loads((qdir / META_FILE_NAME).read_bytes())["next_seq_id"])


def test_everything_below_the_mark_is_acked_from_files_and_journal_alike(qdir: Path,
                                                                         indexes: list[QueueIndex]) -> None:
    index = open_index(qdir, indexes)
    publish(index, range(0, 2 * S))
    index.deliver(range(0, 5))
    index.ack([1, 3])
    index.flush()                     # segments 0 and 1 in their files
    publish(index, range(2 * S, 3 * S))  # segment 2 in the journal only
    index.deliver([2 * S])
    acked = index.ack_below(2 * S + 4)
    assert acked == 2 * S + 4 - 2     # 1 and 3 were acked already
    assert unacked(index) == list(range(2 * S + 4, 3 * S))
    assert index.next_seq_id == 3 * S
    assert sorted(p.name for p in qdir.glob("*.idx")) == ["2.idx"]  # the emptied segments' files went
    assert (qdir / JOURNAL_FILE_NAME).stat().st_size == 0             # flushed, durably
    index.close(clean=False)          # SIGKILL: nothing more than what ack_below made durable
    again = open_index(qdir, indexes)
    assert unacked(again) == list(range(2 * S + 4, 3 * S))
    assert again.next_seq_id == 3 * S


def test_a_mark_past_what_was_indexed_moves_the_next_seq_id(qdir: Path, indexes: list[QueueIndex]) -> None:
    index = open_index(qdir, indexes)   # a slave's index of a group it never served
    assert index.ack_below(25) == 0
    assert index.next_seq_id == 25 and meta_next_seq_id(qdir) == 25
    index.close(clean=False)
    again = open_index(qdir, indexes)
    assert again.next_seq_id == 25 and unacked(again) == []
    with pytest.raises(QueueIndexError):
        publish(again, [24])          # the owner indexes from the mark, never below it
    publish(again, [25, 26])
    assert unacked(again) == [25, 26]


def test_never_backwards(qdir: Path, indexes: list[QueueIndex]) -> None:
    index = open_index(qdir, indexes)
    publish(index, range(0, 10))
    index.ack([0, 1, 2, 7])
    assert index.ack_below(5) == 2    # 3 and 4
    journal = (qdir / JOURNAL_FILE_NAME).read_bytes()
    meta = (qdir / META_FILE_NAME).read_bytes()
    assert index.ack_below(3) == 0 and index.ack_below(5) == 0 and index.ack_below(0) == 0
    assert (qdir / JOURNAL_FILE_NAME).read_bytes() == journal and (qdir / META_FILE_NAME).read_bytes() == meta
    assert unacked(index) == [5, 6, 8, 9] and index.next_seq_id == 10
    with pytest.raises(ValueError):
        index.ack_below(-1)
    with pytest.raises(ValueError):
        index.ack_below(MAX_SEQ_ID + 2)


def test_the_journal_is_durable_before_the_mark_is_written(qdir: Path, indexes: list[QueueIndex],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A power cut keeps what was synced: queue_index.json's next_seq_id (what says "nothing below
    here is left to index") must never be on disk while the acks it stands on are not."""
    index = open_index(qdir, indexes)
    publish(index, range(0, S + 4))
    events: list[str] = []
    real_fsync, real_write_meta = queue_index_module.os.fsync, queue_index_module.write_meta
    journal_ino = (qdir / JOURNAL_FILE_NAME).stat().st_ino

    def fsync(fd: int) -> None:
        if queue_index_module.os.fstat(fd).st_ino == journal_ino:
            events.append(f"fsync journal ({(qdir / JOURNAL_FILE_NAME).stat().st_size} bytes)")
        real_fsync(fd)

    def write_meta(directory: Path, entries_per_segment: int, next_seq_id: int,
                   flushing: dict[int, int] | None = None) -> None:
        events.append(f"meta next_seq_id={next_seq_id}")
        real_write_meta(directory, entries_per_segment, next_seq_id, flushing)

    monkeypatch.setattr(queue_index_module.os, "fsync", fsync)
    monkeypatch.setattr(queue_index_module, "write_meta", write_meta)
    index.ack_below(2 * S + 3)
    first_meta = next(i for i, e in enumerate(events) if e.startswith("meta next_seq_id=35"))
    synced = [e for e in events[:first_meta] if e.startswith("fsync journal") and not e.endswith("(0 bytes)")]
    assert synced, events               # the acks reached the disk before the mark that needs them
    assert events[-1] == "fsync journal (0 bytes)"  # and the journal truncated only after
