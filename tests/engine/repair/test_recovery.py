"""Recovery after torn writes and corruption: the store keeps exactly the whole records before the
damage, and consume queues and index agree with the commitlog."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mqstore.engine import Geometry, GetStatus, Message, MessageStore, PutResult, StoreConfig
from mqstore.engine.meta.metafile import create_abort
from mqstore.engine.read.store_files import index_paths
from mqstore.engine.repair.verify import verify_store
from tests.conftest import TINY, FakeClock

OpenStore = Callable[..., MessageStore]


def _build(path: Path, clock: FakeClock, count: int, geometry: Geometry = TINY) -> list[PutResult]:
    with MessageStore.open(path, StoreConfig(geometry=geometry), now_ms=clock) as store:
        results = []
        for i in range(count):
            clock.advance(1)
            results.append(store.put(Message("Orders", f"body-{i}".encode() * 7, tags="T", keys=[f"k{i}"],
                                              properties={"p": "v" * (i % 5 + 1)}), queue_id=i % 2))
    return results


def _damage(path: Path, phys_offset: int, data: bytes, file_size: int) -> None:
    name = path / "commitlog" / f"{phys_offset - phys_offset % file_size:020d}"
    with open(name, "r+b") as f:
        f.seek(phys_offset % file_size)
        f.write(data)


def _check_holds_exactly(store: MessageStore, results: list[PutResult]) -> None:
    for queue_id in (0, 1):
        expected = [r for r in results if r.queue_id == queue_id]
        assert store.max_queue_offset("Orders", queue_id) == len(expected)
        got = store.get("Orders", queue_id, 0, max_count=64, max_bytes=1 << 20)
        assert [m.phys_offset for m in got.messages] == [r.phys_offset for r in expected][:32]
    for i, r in enumerate(results):
        assert [m.phys_offset for m in store.query_by_key("Orders", f"k{i}")] == [r.phys_offset]


def test_torn_tail_cut_at_every_byte(tmp_path: Path, clock: FakeClock) -> None:
    """Cut the log at every byte of its last two records (zeros after the cut, as after a crash)."""
    base = tmp_path / "base"
    results = _build(base, clock, 12)
    with MessageStore.open(base, now_ms=clock) as store:
        sizes = {r.phys_offset: store.commitlog.size_at(r.phys_offset) for r in results}
    last_start = results[-2].phys_offset
    end = results[-1].phys_offset + sizes[results[-1].phys_offset]
    for cut in range(last_start, end):
        work = tmp_path / f"cut-{cut}"
        shutil.copytree(base, work)
        _damage(work, cut, bytes(end - cut), TINY.commitlog_file_size)
        create_abort(work, 1)
        kept = [r for r in results if r.phys_offset + sizes[r.phys_offset] <= cut]
        with MessageStore.open(work, now_ms=clock) as store:
            assert store.recovery.abnormal
            assert store.recovery.end_phys_offset == (kept[-1].phys_offset + sizes[kept[-1].phys_offset])
            _check_holds_exactly(store, kept)
            missing = [r for r in results if r not in kept]
            for r in missing:
                assert store.view_by_id(r.msg_id) is None
            again = store.put(Message("Orders", b"after", keys=["after"]))
            assert again.phys_offset == store.recovery.end_phys_offset
        shutil.rmtree(work)


@pytest.mark.parametrize("abnormal", [False, True])
def test_recover_corrupt_last_record(tmp_path: Path, clock: FakeClock, abnormal: bool) -> None:
    """DefaultMessageStoreTest.testRecover phases 2 and 3: zero 16 bytes at the last record's topic
    length; normal and abnormal recovery both drop exactly that record and keep writing."""
    results = _build(tmp_path / "s", clock, 10)
    victim = results[-1]
    body_len = len(b"body-9" * 7)
    _damage(tmp_path / "s", victim.phys_offset + 84 + body_len + 4, bytes(16), TINY.commitlog_file_size)
    if abnormal:
        create_abort(tmp_path / "s", 1)
    with MessageStore.open(tmp_path / "s", now_ms=clock) as store:
        assert store.recovery.abnormal is abnormal
        assert store.recovery.end_phys_offset == victim.phys_offset
        assert "corrupt" in store.recovery.stop_reason
        _check_holds_exactly(store, results[:-1])
        assert store.put(Message("Orders", b"next"), queue_id=1).queue_offset == victim.queue_offset


@pytest.mark.parametrize("where", ["body", "properties", "header"])
def test_flipped_byte_inside_a_record_truncates_there(tmp_path: Path, clock: FakeClock, where: str) -> None:
    """A flipped byte in the body fails the body CRC; in the header or properties, the whole-record
    CRC catches it. Recovery keeps what precedes the damaged record."""
    results = _build(tmp_path / "s", clock, 10)
    victim = results[6]
    with MessageStore.open(tmp_path / "s", now_ms=clock) as store:
        size = store.commitlog.size_at(victim.phys_offset)
    pos = {"body": victim.phys_offset + 90, "properties": victim.phys_offset + size - 25,
           "header": victim.phys_offset + 16}[where]
    path = tmp_path / "s" / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x40
    path.write_bytes(bytes(data))
    create_abort(tmp_path / "s", 1)
    with MessageStore.open(tmp_path / "s", now_ms=clock) as store:
        assert store.recovery.end_phys_offset == victim.phys_offset
        _check_holds_exactly(store, results[:6])


def test_without_whole_record_crc_a_torn_property_tail_goes_unseen(tmp_path: Path, clock: FakeClock) -> None:
    """Why the whole-record CRC is on by default: without it (Apache RocketMQ's default) a tail torn
    inside the properties passes the body CRC and the length check."""
    geometry = Geometry(commitlog_file_size=8192, cq_entries_per_file=16, index_slot_count=16,
                        index_entry_count=64, prop_crc=False)
    results = _build(tmp_path / "s", clock, 3, geometry)
    with MessageStore.open(tmp_path / "s", now_ms=clock) as store:
        end = results[-1].phys_offset + store.commitlog.size_at(results[-1].phys_offset)
    _damage(tmp_path / "s", end - 6, bytes(6), geometry.commitlog_file_size)
    create_abort(tmp_path / "s", 1)
    with MessageStore.open(tmp_path / "s", now_ms=clock) as store:
        assert store.recovery.end_phys_offset == end
        last = store.get("Orders", 0, 1).messages[0]
        assert last.uniq_key != results[-1].uniq_key  # silently garbled with the torn tail


def test_lost_consume_queue_and_index_are_rebuilt_on_open(tmp_path: Path, clock: FakeClock) -> None:
    results = _build(tmp_path / "s", clock, 30)
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    shutil.rmtree(tmp_path / "s" / "index")
    with MessageStore.open(tmp_path / "s", now_ms=clock) as store:
        assert store.recovery.cq_redispatched == 30
        _check_holds_exactly(store, results)


def test_empty_store_reopens(tmp_path: Path, clock: FakeClock) -> None:
    MessageStore.open(tmp_path / "s", StoreConfig(geometry=TINY), now_ms=clock).close()
    with MessageStore.open(tmp_path / "s", now_ms=clock) as store:
        assert store.recovery.end_phys_offset == 0
        assert store.get("Orders", 0, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE


def test_consume_queue_ahead_of_torn_commitlog_is_cut(tmp_path: Path, clock: FakeClock) -> None:
    """Consume-queue entries that point past the recovered end are dropped (truncateDirtyLogicFiles)."""
    results = _build(tmp_path / "s", clock, 8)
    cut = results[5].phys_offset
    _damage(tmp_path / "s", cut, bytes(TINY.commitlog_file_size - cut % TINY.commitlog_file_size),
            TINY.commitlog_file_size)
    create_abort(tmp_path / "s", 1)
    with MessageStore.open(tmp_path / "s", now_ms=clock) as store:
        _check_holds_exactly(store, results[:5])
        assert store.get("Orders", 1, 2).status is GetStatus.OFFSET_OVERFLOW_ONE


def test_torn_consume_queue_entry_survived_recovery(tmp_path: Path, clock: FakeClock) -> None:
    """A power cut inside a 20-byte consume-queue entry leaves its offset and size whole and its tags
    code zeroed: abnormal recovery checks the entries written since the checkpoint against their
    records, cuts the queue at the torn one and writes it again from the commitlog."""
    results = _build(tmp_path / "s", clock, 8)
    victim = [r for r in results if r.queue_id == 0][-1]
    cq_file = tmp_path / "s" / "consumequeue" / "Orders" / "0" / f"{0:020d}"
    data = bytearray(cq_file.read_bytes())
    data[victim.queue_offset * 20 + 14:victim.queue_offset * 20 + 20] = bytes(6)
    cq_file.write_bytes(bytes(data))
    create_abort(tmp_path / "s", 1)
    with MessageStore.open(tmp_path / "s", now_ms=clock) as store:
        _check_holds_exactly(store, results)
        assert [m.tags for m in store.get("Orders", 0, 0, max_count=8).messages] == ["T"] * 4
    assert verify_store(tmp_path / "s").ok


def _derived_bytes(store: Path) -> tuple[dict[str, bytes], list[bytes]]:
    """Every consume-queue file by path, and the index files' contents oldest first (their names are
    creation times)."""
    queues = {str(p.relative_to(store)): p.read_bytes() for p in sorted((store / "consumequeue").rglob("*"))
              if p.is_file()}
    return queues, [p.read_bytes() for p in index_paths(store)]


@pytest.mark.parametrize("torn", [False, True])
def test_lost_derived_files_dispatched_by_the_scan_equal_the_two_pass_rebuild(tmp_path: Path, clock: FakeClock,
                                                                              torn: bool) -> None:
    """With no derived files a normal open dispatches each chunk as its CRC scan passes it (and the files
    before the scanned ones first); an abnormal open of a copy scans, cuts, then re-dispatches in a
    second pass. Same verdicts, and the same files byte for byte."""
    results = _build(tmp_path / "one", clock, 200)
    assert len(list((tmp_path / "one" / "commitlog").iterdir())) > 3  # files before the scanned three
    if torn:
        last = results[-1]
        _damage(tmp_path / "one", last.phys_offset + 40, bytes(10), TINY.commitlog_file_size)
    for derived in ("consumequeue", "index"):
        shutil.rmtree(tmp_path / "one" / derived)
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    create_abort(tmp_path / "two", 1)
    with MessageStore.open(tmp_path / "one", now_ms=clock) as one, \
            MessageStore.open(tmp_path / "two", now_ms=clock) as two:
        assert not one.recovery.abnormal and two.recovery.abnormal
        for field in ("end_phys_offset", "truncated_bytes", "stop_reason", "cq_redispatched", "index_redispatched"):
            assert getattr(one.recovery, field) == getattr(two.recovery, field)
        assert one.recovery.cq_redispatched == len(results) - torn
        _check_holds_exactly(one, results[:len(results) - torn])
    assert _derived_bytes(tmp_path / "one") == _derived_bytes(tmp_path / "two")
