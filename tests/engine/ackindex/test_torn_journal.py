"""A power cut keeps a journal page and loses the next one (it reads back as zeros): the record that
straddles the two parses whole, a publish naming another place in the commitlog. Recovery checks
each publish it replays against the message store and stops at the first that fails, so no torn
page is taken for a publish; what follows it is lost like a torn tail (acks: redeliveries; publishes:
derived again from the consume queue, since next_seq_id stops before them)."""

from __future__ import annotations

import struct
from pathlib import Path

from mqstore.engine.ackindex.codec import JOURNAL_PUB_SIZE, PubRecord, parse_journal
from mqstore.engine.ackindex.files import JOURNAL_FILE_NAME
from mqstore.engine.ackindex.queue_index import PublishEntry, QueueIndex

PAGE = 4096
HOST = bytes(8)
SIZE = 100
COUNT = 300  # 40-byte publishes: about three pages


def _msg_id(seq: int) -> bytes:
    return HOST + struct.pack(">q", 1_000 + seq * SIZE)


def _in_commitlog(seq: int, pub: PubRecord) -> bool:
    """The message store as the test built it: message ``seq`` at 1000 + seq * 100, 100 bytes."""
    return pub.msg_id == _msg_id(seq) and pub.size_bytes == SIZE


def _crashed_index(directory: Path) -> None:
    index = QueueIndex.open(directory)
    index.publish_many(PublishEntry(seq, _msg_id(seq), SIZE) for seq in range(COUNT))
    index.close(clean=False)  # a crash: the journal is all there is


def _lose_page(directory: Path, page: int) -> None:
    journal = directory / JOURNAL_FILE_NAME
    data = bytearray(journal.read_bytes())
    data[page * PAGE:(page + 1) * PAGE] = bytes(PAGE)
    journal.write_bytes(bytes(data))


def test_a_lost_page_between_surviving_ones_is_not_replayed_as_a_publish(tmp_path: Path) -> None:
    _crashed_index(tmp_path)
    _lose_page(tmp_path, 1)
    straddling = PAGE // JOURNAL_PUB_SIZE  # the publish whose tail fell into the lost page
    torn = parse_journal((tmp_path / JOURNAL_FILE_NAME).read_bytes()).records[-1]
    assert torn.seq_id == straddling and torn.pub is not None and torn.pub.msg_id != _msg_id(straddling)
    with QueueIndex.open(tmp_path, check_publish=_in_commitlog) as index:
        assert index.recovery.rejected_publish
        entries = index.read(0, COUNT)
        assert [e.seq_id for e in entries] == list(range(straddling))
        assert all(e.msg_id == _msg_id(e.seq_id) for e in entries)
        assert index.next_seq_id == straddling  # the rest is published again from the consume queue
        index.publish_many(PublishEntry(seq, _msg_id(seq), SIZE) for seq in range(straddling, COUNT))
        assert [e.seq_id for e in index.read(0, COUNT)] == list(range(COUNT))


def test_a_journal_that_checks_out_is_replayed_whole(tmp_path: Path) -> None:
    _crashed_index(tmp_path)
    with QueueIndex.open(tmp_path, check_publish=_in_commitlog) as index:
        assert not index.recovery.rejected_publish
        assert index.recovery.journal_record_count == COUNT
        assert [e.seq_id for e in index.read(0, COUNT)] == list(range(COUNT))
