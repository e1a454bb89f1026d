"""The writer's straggler mover on a real commitlog: a plan's stragglers are appended as copies on the
moved topic and dispatched (under SYNC_FLUSH held for the flush, in order with the sends before
them); a straggler copied is not copied again while the marks catch up; a listed straggler that is
not the record it says is left where it is; nothing moves while the plan says no."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqstore.actors.config import SYNC_FLUSH, BrokerConfig, FlushConfig
from mqstore.actors.writer.mover import StragglerMover
from mqstore.actors.writer.state import DiskState, TopicQueues, WriterState
from mqstore.actors.writer.sync import SyncWaiters
from mqstore.engine import Geometry, Message, StoreConfig
from mqstore.engine.ackindex.low_water import AckProgress
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.msgid import UniqKeyGenerator
from mqstore.engine.log.record import DecodeKind
from mqstore.engine.meta.topics import TopicTable
from mqstore.engine.put.writer import CommitLogWriter
from mqstore.engine.reclaim.consumed import ACK, OFFSET, FileHold, HeldFile, Holder
from mqstore.engine.reclaim.move import MOVED_TOPIC, presented
from mqstore.engine.reclaim.retention import RetentionPolicy
from mqstore.ipc.wire.notices import Dispatch
from tests.actors.writer.test_sync import _outlets

FILE_SIZE = 8192


def _state(tmp_path: Path, mode: str = "ASYNC_FLUSH") -> WriterState:
    config = BrokerConfig(str(tmp_path), StoreConfig(geometry=Geometry(commitlog_file_size=FILE_SIZE)),
                          FlushConfig(mode=mode), retention=RetentionPolicy(reclaim_consumed=True,
                                                                            move_stragglers_below=0.5))
    commitlog = CommitLog.open(tmp_path / "commitlog", FILE_SIZE)
    writer = CommitLogWriter(commitlog, config.store, {}, UniqKeyGenerator.for_this_process(lambda: 1))
    return WriterState(config, writer, TopicQueues(TopicTable.load(tmp_path, lambda: 1), 4), DiskState(),
                       SyncWaiters(60_000, sync_flush=mode == SYNC_FLUSH))


def _held(state: WriterState, stragglers: list[tuple[int, int]], kind: str = ACK) -> list[HeldFile]:
    progress = AckProgress("G", "T", 0, 0, 100, {0: len(stragglers)}, tuple(stragglers))
    hold = FileHold(Holder(kind, "G", "T", 0, 0, 0, 100, progress if kind == ACK else None), len(stragglers))
    files = state.writer.commitlog.queue.files
    return [HeldFile(0, FILE_SIZE, 0, False, False, (hold,)),
            *(HeldFile(mf.file_base, mf.file_end, 0, mf is files[-1], False, ()) for mf in files[1:])]


def _originals(state: WriterState) -> list[tuple[int, int]]:
    outcome = state.writer.write([Message("T", f"{i:03d}".encode() * 100, tags="t", keys=(f"k{i}",))
                                  for i in range(60)], [0] * 60, 1000)
    return [(r.phys_offset, r.size) for r in outcome.requests]


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", SYNC_FLUSH])
def test_a_plans_stragglers_are_copied_dispatched_and_not_copied_again(tmp_path: Path, mode: str) -> None:
    state = _state(tmp_path, mode)
    located = _originals(state)
    stragglers = [loc for loc in located if loc[0] < FILE_SIZE][1:4:2]  # two in the first file
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    mover = StragglerMover(state)
    start = state.writer.commitlog.max_offset
    assert mover.round(_held(state, stragglers), outlets) == 2
    assert mover.stats() == {"messages": 2, "bytes": state.writer.commitlog.max_offset - start, "files": 1}
    if mode == SYNC_FLUSH:
        assert [name for name, _ in log] == ["written"] and len(state.waiters.undispatched) == 1
        state.waiters.flushed_end = state.writer.commitlog.max_offset  # the flush service's notice
        state.waiters.release(outlets)
        log.pop(0)
    [(name, frames)] = log
    notice = Dispatch.decode(frames[1], frames[2:])
    assert name == "dispatch" and (notice.from_phys, notice.to_phys) == (start, state.writer.commitlog.max_offset)
    assert notice.batch.topics == [MOVED_TOPIC] and notice.batch.columns["queue_offset"].tolist() == [0, 1]
    copies = [state.writer.commitlog.read_record(phys) for phys in (start, start + log_size(state, start))]
    for (phys, _), copy in zip(stragglers, copies, strict=True):
        original = state.writer.commitlog.read_record(phys).record
        assert copy.kind is DecodeKind.RECORD and copy.record is not None and copy.record.topic == MOVED_TOPIC
        assert presented(copy.record) == original
    assert mover.round(_held(state, stragglers), outlets) == 0  # in transit: the marks have not caught up
    state.writer.commitlog.close()


def log_size(state: WriterState, phys: int) -> int:
    return state.writer.commitlog.read_record(phys).size


def test_nothing_moves_when_the_plan_says_no_or_a_straggler_is_not_there(tmp_path: Path) -> None:
    state = _state(tmp_path)
    located = _originals(state)
    outlets, _ = _outlets([])
    mover = StragglerMover(state)
    assert mover.round(_held(state, located[:1], kind=OFFSET), outlets) == 0
    too_many = [loc for loc in located if loc[0] < FILE_SIZE]  # every record of the file: not below half
    assert mover.round(_held(state, too_many), outlets) == 0
    wrong = [(located[0][0], located[0][1] + 1), located[1]]  # the first is not the record it says
    assert mover.round(_held(state, wrong), outlets) == 1
    assert mover.stats()["messages"] == 1
    state.writer.commitlog.close()
