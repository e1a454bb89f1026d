"""What a power cut leaves in file names and sizes: a file whose name survived without its size (0
bytes, or short), a later file whose name survived while an earlier one's did not, a spare left
half made. Each test builds the state on a real store (tiny files), leaves ``abort`` as a cut does,
and opens it with the real recovery: it must open, keep every record below the last durable flush,
and leave a store ``verify`` finds clean."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqstore.engine import Message, MessageStore, PutResult, StoreConfig
from mqstore.engine.consumequeue.entry import CQ_ENTRY_SIZE
from mqstore.engine.keyindex.file_names import index_file_names
from mqstore.engine.log.mapped_file_queue import SPARE_NAME, SPARE_PREPARING_NAME
from mqstore.engine.meta.checkpoint import Checkpoint
from mqstore.engine.meta.metafile import create_abort
from mqstore.engine.repair.crash_files import CrashFilesError
from mqstore.engine.repair.verify import verify_store
from tests.conftest import TINY, FakeClock

STEP_MS = 10_000  # far apart: the checkpoint's 3 s margin reaches no earlier record
CONFIG = StoreConfig(geometry=TINY)


def _fill(path: Path, clock: FakeClock, queue_ids: list[int]) -> list[tuple[PutResult, int]]:
    """One keyed message per entry of ``queue_ids``; each result with its store time."""
    out = []
    with MessageStore.open(path, CONFIG, now_ms=clock) as store:
        for i, queue_id in enumerate(queue_ids):
            clock.advance(STEP_MS)
            out.append((store.put(Message("Orders", f"body-{i}".encode() * 7, keys=(f"k{i}",)), queue_id=queue_id),
                        clock.now))
    return out


def _cut(path: Path, physic_ms: int, logics_ms: int, index_ms: int) -> None:
    """The checkpoint as the flush service left it, and ``abort``: the machine went down."""
    with Checkpoint.open(path / "checkpoint") as checkpoint:
        checkpoint.physic_msg_ms, checkpoint.logics_msg_ms, checkpoint.index_msg_ms = physic_ms, logics_ms, index_ms
        checkpoint.flush()
    create_abort(path, 1)


def _assert_all_there(store: MessageStore, results: list[tuple[PutResult, int]]) -> None:
    for queue_id in sorted({r.queue_id for r, _ in results}):
        want = [r.phys_offset for r, _ in results if r.queue_id == queue_id]
        got: list[int] = []
        while len(got) < len(want) + 1:
            page = store.get("Orders", queue_id, len(got), max_count=32, max_bytes=1 << 22).messages
            if not page:
                break
            got += [m.phys_offset for m in page]
        assert got == want
        assert store.max_queue_offset("Orders", queue_id) == len(want)


def _end(path: Path, result: PutResult) -> int:
    """The commitlog byte after the record ``result`` names (read off its file)."""
    base = result.phys_offset - result.phys_offset % TINY.commitlog_file_size
    with open(path / "commitlog" / f"{base:020d}", "rb") as f:
        f.seek(result.phys_offset - base)
        return result.phys_offset + int.from_bytes(f.read(4), "big")


def _queue_files(path: Path, queue_id: int) -> list[Path]:
    return sorted((path / "consumequeue" / "Orders" / str(queue_id)).iterdir())


def test_a_zero_length_index_file_is_set_aside_and_rebuilt(tmp_path: Path) -> None:
    clock, path = FakeClock(), tmp_path / "store"
    results = _fill(path, clock, [i % 2 for i in range(120)])
    names = index_file_names(path / "index")
    assert len(names) >= 3
    os.truncate(path / "index" / names[-1], 0)  # its name durable, its allocation not
    _cut(path, results[-1][1], results[-1][1], 0)

    with MessageStore.open(path, CONFIG, now_ms=clock) as store:
        assert any("index" in note for note in store.recovery.repairs)
        for i in (0, 60, 119):
            assert [r.phys_offset for r in store.query_by_key("Orders", f"k{i}")] == [results[i][0].phys_offset]
        _assert_all_there(store, results)
    assert verify_store(path).ok


def test_an_index_file_with_an_impossible_header_is_set_aside_with_the_newer_ones(tmp_path: Path) -> None:
    clock, path = FakeClock(), tmp_path / "store"
    results = _fill(path, clock, [i % 2 for i in range(120)])
    names = index_file_names(path / "index")
    with open(path / "index" / names[1], "r+b") as f:  # its header page lost: zeros, entries kept
        f.write(bytes(40))
    _cut(path, results[-1][1], results[-1][1], results[-1][1])

    with MessageStore.open(path, CONFIG, now_ms=clock) as store:
        assert any(names[1] in note for note in store.recovery.repairs)
        for i in range(0, 120, 7):
            assert [r.phys_offset for r in store.query_by_key("Orders", f"k{i}")] == [results[i][0].phys_offset]
    assert verify_store(path).ok


def test_a_consume_queue_gap_is_cut_back_and_redispatched_whatever_the_checkpoint_says(tmp_path: Path) -> None:
    # queue 1's records all come first, so a re-dispatch from the checkpoint never meets one of them:
    # only the cut queue's own end can tell recovery where to start
    clock, path = FakeClock(), tmp_path / "store"
    results = _fill(path, clock, [1] * 60 + [0] * 60)
    files = _queue_files(path, 1)
    assert len(files) >= 4
    files[1].unlink()  # a name lost while a later one survived
    _cut(path, results[-1][1], results[-1][1], results[-1][1])  # a checkpoint claiming every entry synced

    with MessageStore.open(path, CONFIG, now_ms=clock) as store:
        assert store.recovery.abnormal
        _assert_all_there(store, results)
        assert store.put(Message("Orders", b"after"), queue_id=1).queue_offset == 60
    assert verify_store(path).ok


def test_a_zero_length_consume_queue_file_between_others_is_cut_back_and_redispatched(tmp_path: Path) -> None:
    clock, path = FakeClock(), tmp_path / "store"
    results = _fill(path, clock, [1] * 60 + [0] * 60)
    files = _queue_files(path, 1)
    os.truncate(files[2], 0)
    os.truncate(files[1], 7 * CQ_ENTRY_SIZE + 3)
    _cut(path, results[-1][1], results[-1][1], results[-1][1])

    with MessageStore.open(path, CONFIG, now_ms=clock) as store:
        _assert_all_there(store, results)
    assert verify_store(path).ok


@pytest.mark.parametrize("kept_bytes", [0, 3000])
def test_a_short_last_commitlog_file_opens_with_its_whole_records(tmp_path: Path, kept_bytes: int) -> None:
    clock, path = FakeClock(), tmp_path / "store"
    results = _fill(path, clock, [i % 2 for i in range(120)])
    last = sorted((path / "commitlog").iterdir())[-1]
    base = int(last.name)
    durable = [(r, ms) for r, ms in results if _end(path, r) <= base + kept_bytes]
    expected_end = max(_end(path, r) for r, _ in durable) if kept_bytes else base  # the blank tail's end
    os.truncate(last, kept_bytes)  # the allocation's size never synced; what was flushed is there
    flushed_ms = durable[-1][1] if kept_bytes else max(ms for r, ms in results if r.phys_offset < base)
    _cut(path, flushed_ms, flushed_ms, 0)

    with MessageStore.open(path, CONFIG, now_ms=clock) as store:
        assert store.commitlog.max_offset == expected_end
        kept = durable if kept_bytes else [(r, ms) for r, ms in results if r.phys_offset < base]
        _assert_all_there(store, kept)
        after = store.put(Message("Orders", b"after the cut"), queue_id=0)
        assert after.queue_offset == sum(1 for r, _ in kept if r.queue_id == 0)
    assert verify_store(path).ok


def test_a_commitlog_gap_past_the_last_flush_is_the_lost_tail(tmp_path: Path) -> None:
    clock, path = FakeClock(), tmp_path / "store"
    results = _fill(path, clock, [i % 2 for i in range(120)])
    files = sorted((path / "commitlog").iterdir())
    assert len(files) >= 4
    gap_base = int(files[-2].name)
    flushed = [(r, ms) for r, ms in results if _end(path, r) <= gap_base]
    files[-2].unlink()  # two files made since the last flush; only the newer name survived
    _cut(path, flushed[-1][1], flushed[-1][1], 0)

    with MessageStore.open(path, CONFIG, now_ms=clock) as store:
        assert any("gap" in note for note in store.recovery.repairs)
        _assert_all_there(store, flushed)
        assert store.put(Message("Orders", b"after"), queue_id=0).queue_offset == \
            sum(1 for r, _ in flushed if r.queue_id == 0)
    assert verify_store(path).ok


def test_a_commitlog_gap_below_the_last_flush_is_refused(tmp_path: Path) -> None:
    clock, path = FakeClock(), tmp_path / "store"
    results = _fill(path, clock, [i % 2 for i in range(120)])
    files = sorted((path / "commitlog").iterdir())
    files[1].unlink()  # records the checkpoint counts flushed: damage no power cut leaves
    _cut(path, results[-1][1], results[-1][1], 0)

    with pytest.raises(CrashFilesError, match="not adjacent"):
        MessageStore.open(path, CONFIG, now_ms=clock)
    assert files[-1].exists()  # nothing removed


def test_leftover_spares_and_dispatching_mark_are_handled(tmp_path: Path) -> None:
    clock, path = FakeClock(), tmp_path / "store"
    results = _fill(path, clock, [i % 2 for i in range(120)])
    commitlog_dir = path / "commitlog"
    (commitlog_dir / SPARE_PREPARING_NAME).write_bytes(b"")  # created, never allocated durably
    # a spare the writer adopted and wrote records into, the adopting rename undone by the cut:
    # adopted again as the next file, its old records would sit past the new end, valid CRCs and all
    (commitlog_dir / SPARE_NAME).write_bytes(sorted(commitlog_dir.iterdir())[-1].read_bytes())
    (path / "consumequeue" / ".dispatching").write_bytes(b"\x07\x00")  # a short mark
    _cut(path, results[-1][1], results[-1][1], 0)

    with MessageStore.open(path, CONFIG, now_ms=clock) as store:
        assert not (commitlog_dir / SPARE_NAME).exists()
        assert not (commitlog_dir / SPARE_PREPARING_NAME).exists()
        _assert_all_there(store, results)
        for i in range(8):
            store.put(Message("Orders", f"after-{i}".encode() * 40), queue_id=0)
    assert verify_store(path).ok
    (path / "consumequeue" / ".dispatching").write_bytes(b"")  # an empty one
    create_abort(path, 1)
    with MessageStore.open(path, CONFIG, now_ms=clock) as store:
        assert store.max_queue_offset("Orders", 0) == 68
    assert verify_store(path).ok
