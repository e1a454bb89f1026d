"""The readers' low-water marks (mqstore.engine.ackindex.low_water): what each reader writes and what the
commitlog writer makes of all of them."""

from __future__ import annotations

from pathlib import Path

from mqstore.engine.ackindex.low_water import (
    AckProgress,
    clamp_marks,
    low_water_path,
    read_ack_progress,
    read_low_water,
    unacked_low_water,
    write_low_water,
)


def test_a_mark_reads_back_as_written_and_lies_beside_the_queue_indexes(tmp_path: Path) -> None:
    write_low_water(tmp_path, 1, 4096)
    assert low_water_path(tmp_path, 1) == tmp_path / "queueindex" / "lowwater-1.json"
    assert low_water_path(tmp_path, 1).read_bytes() == b'{"phys_offset": 4096}'
    assert read_low_water(tmp_path, 1) == 4096
    write_low_water(tmp_path, 1, None)  # nothing unacked any more
    assert read_low_water(tmp_path, 1) is None


def test_the_lowest_mark_of_every_reader_counts(tmp_path: Path) -> None:
    assert unacked_low_water(tmp_path, 3) is None  # no reader wrote one: nothing is unacked
    write_low_water(tmp_path, 0, 9000)
    write_low_water(tmp_path, 2, 700)
    assert unacked_low_water(tmp_path, 3) == 700
    assert unacked_low_water(tmp_path, 2) == 9000  # reader 2 is not one of two readers
    write_low_water(tmp_path, 2, None)
    assert unacked_low_water(tmp_path, 3) == 9000


def test_a_mark_that_does_not_read_is_no_mark(tmp_path: Path) -> None:
    write_low_water(tmp_path, 0, 500)
    for garbage in (b"", b"{", b"[500]", b'{"phys_offset": "500"}', b'{"offset": 500}'):
        low_water_path(tmp_path, 1).write_bytes(garbage)
        assert read_low_water(tmp_path, 1) is None
        assert unacked_low_water(tmp_path, 2) == 500


def test_a_mark_being_replaced_reads_as_the_old_mark_not_as_none(tmp_path: Path) -> None:
    """write_atomic moves the old mark to .bak before the new one takes its place: a writer that read
    in between (or after a crash there) took "no mark" for "nothing unacked" and let retention delete
    files holding unacked messages."""
    write_low_water(tmp_path, 0, 500)
    write_low_water(tmp_path, 0, 800)  # leaves the old mark as .bak
    path = low_water_path(tmp_path, 0)
    path.rename(path.with_name(path.name + ".tmp"))  # the instant between the two renames
    Path(str(path) + ".bak").write_bytes(b'{"phys_offset": 500}')
    assert read_low_water(tmp_path, 0) == 500
    assert unacked_low_water(tmp_path, 1) == 500


def test_marks_past_a_recovered_end_are_brought_back_and_others_left_alone(tmp_path: Path) -> None:
    """A power cut took the log's tail: reader 0's mark says queue (T, 0) is acked below 10 and its
    oldest unacked message at 5000, but the queue came back with 5 entries and the log ends at 3000.
    Retention must not read the new sends at offsets 5..9 as acked: the mark is clamped. Reader 1's
    mark is within what was kept and stays the file it was."""
    far = AckProgress("G", "T", 0, acked_below=10, indexed_to=12, unacked_by_file={4096: 2})
    near = AckProgress("G", "U", 1, acked_below=3, indexed_to=3, unacked_by_file={})
    write_low_water(tmp_path, 0, 5000, [far])
    write_low_water(tmp_path, 1, 100, [near])
    untouched = low_water_path(tmp_path, 1).stat()
    assert clamp_marks(tmp_path, {("T", 0): 5, ("U", 1): 3}, log_end=3000) == [0]
    progress = read_ack_progress(tmp_path, 2)
    assert (progress[("G", "T", 0)].acked_below, progress[("G", "T", 0)].indexed_to) == (5, 5)
    assert progress[("G", "T", 0)].unacked_by_file == {4096: 2}  # what it holds stays held
    assert read_low_water(tmp_path, 0) == 3000 and read_low_water(tmp_path, 1) == 100
    after = low_water_path(tmp_path, 1).stat()
    assert (after.st_ino, after.st_mtime_ns) == (untouched.st_ino, untouched.st_mtime_ns)
