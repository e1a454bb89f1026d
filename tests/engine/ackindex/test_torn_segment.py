"""A power cut between a flush's append to a segment file and that file's fsync keeps what the
kernel had written back of the append: the rest of it reads back as zeros, and the record the loss
cuts through can parse whole, a publish naming another message. The segment's copy of a message
outranks the journal's on recovery, so the flush records, durably and before it appends, how long
each file it appends to was; a dirty recovery cuts the files back to that and appends the journal's
copy again (the journal is fsynced before the append, so it holds every record the append tore)."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from mqstore.engine.ackindex import files
from mqstore.engine.ackindex.queue_index import PublishEntry, QueueIndex

SIZE = 100
EPS = 64  # entries per segment
FLUSHED = 40  # publishes flushed (and fsynced) before the flush the power cut interrupts
COUNT = 100  # the interrupted flush appends 40..99: to segment 0 and segment 1


def _msg_id(seq: int) -> bytes:
    return bytes(8) + struct.pack(">q", 1_000 + seq * SIZE)


def _publish(index: QueueIndex, seqs: range) -> None:
    index.publish_many(PublishEntry(seq, _msg_id(seq), SIZE) for seq in seqs)


def _cut_during_flush(monkeypatch: pytest.MonkeyPatch, directory: Path, image: Path,
                      tear: Callable[[bytes], bytes]) -> None:
    """Flush publishes, publish more, flush again and take the directory's image right after that
    flush's first segment append, before the file's fsync: the appended bytes go through ``tear``;
    what else the flush wrote by then is kept (more than a power cut keeps, never less)."""
    real_write_all = files.write_all

    def write_then_cut(fd: int, data: bytes) -> None:
        real_write_all(fd, data)
        if image.exists():
            return
        shutil.copytree(directory, image)
        name = Path(f"/proc/self/fd/{fd}").readlink().name
        segment = image / name
        whole = segment.read_bytes()
        segment.write_bytes(whole[:len(whole) - len(data)] + tear(data))

    index = QueueIndex.open(directory, entries_per_segment=EPS)
    _publish(index, range(FLUSHED))
    index.flush()
    _publish(index, range(FLUSHED, COUNT))
    monkeypatch.setattr(files, "write_all", write_then_cut)
    index.flush()
    index.close(clean=False)
    monkeypatch.undo()


def _zeroed_after(keep: int) -> Callable[[bytes], bytes]:
    return lambda data: data[:keep] + bytes(len(data) - keep)


@pytest.mark.parametrize("keep", [10, 2, 34 + 20, 0])
def test_a_torn_segment_append_is_not_taken_for_a_publish(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          keep: int) -> None:
    image = tmp_path / "image"
    _cut_during_flush(monkeypatch, tmp_path / "index", image, _zeroed_after(keep))
    with QueueIndex.open(image, entries_per_segment=EPS) as index:
        entries = index.read(0, COUNT)
        assert [e.seq_id for e in entries] == list(range(COUNT))
        assert [e.msg_id for e in entries] == [_msg_id(seq) for seq in range(COUNT)]
        assert index.next_seq_id == COUNT
    with QueueIndex.open(image, entries_per_segment=EPS) as index:  # and again from the files alone
        assert [e.msg_id for e in index.read(0, COUNT)] == [_msg_id(seq) for seq in range(COUNT)]


def test_a_torn_delivery_record_acks_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A 2-byte delivery whose second byte is lost names rel_seq 0: the positional second record of
    message 0 after its durable delivery, an ack of a message never acked."""
    directory, image = tmp_path / "index", tmp_path / "image"
    index = QueueIndex.open(directory, entries_per_segment=EPS)
    _publish(index, range(3))
    index.deliver([0])
    index.flush()
    index.deliver([2])
    real_write_all = files.write_all

    def write_then_cut(fd: int, data: bytes) -> None:
        real_write_all(fd, data)
        if not image.exists():
            shutil.copytree(directory, image)
            segment = image / "0.idx"
            whole = segment.read_bytes()
            segment.write_bytes(whole[:len(whole) - 1] + b"\x00")

    monkeypatch.setattr(files, "write_all", write_then_cut)
    index.flush()
    index.close(clean=False)
    monkeypatch.undo()
    with QueueIndex.open(image, entries_per_segment=EPS) as index:
        assert [e.seq_id for e in index.read(0, 3)] == [0, 1, 2]
