"""The page warmer advises pages ahead of the written end, a step at a time, follows the writer into a
new file, and never changes a byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.engine.log import page_warmer
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.page_warmer import PageWarmer

FILE_SIZE = 1 << 20


def test_warming_runs_ahead_of_the_writer_and_changes_nothing(tmp_path: Path, populate_read: None) -> None:
    log = CommitLog.open(tmp_path / "commitlog", FILE_SIZE)
    mf = log.queue.last_file_for_append(0)
    mf.append(b"r" * 5000)
    warmer = PageWarmer(tmp_path / "commitlog", FILE_SIZE, ahead_bytes=300_000, step_bytes=128 * 1024)
    steps = 0
    while warmer.warm(log.max_offset):
        steps += 1
    assert warmer.enabled and steps == 3 and warmer.warmed_to >= 5000 + 300_000 - 4096
    assert bytes(mf.buffer[:5000]) == b"r" * 5000 and bytes(mf.buffer[5000:FILE_SIZE]) == bytes(FILE_SIZE - 5000)
    mf.append_blank_tail(b"\0" * 8)
    nxt = log.queue.last_file_for_append(0)  # the writer rolls: the warmer finds the new file
    nxt.append(b"s" * 10)
    assert warmer.warm(log.max_offset) > 0
    assert warmer.warmed_to > FILE_SIZE
    assert bytes(nxt.buffer[10:FILE_SIZE]) == bytes(FILE_SIZE - 10)
    warmer.close()
    log.close()


def test_a_kernel_that_refuses_the_advice_turns_warming_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """An advice the kernel does not know (EINVAL, as MADV_POPULATE_READ before Linux 5.14): the
    warmer stops advising, reports nothing warmed, and the writer faults its own pages."""
    monkeypatch.setattr(page_warmer, "MADV_POPULATE_READ", 0x7FFF)
    log = CommitLog.open(tmp_path / "commitlog", FILE_SIZE)
    log.queue.last_file_for_append(0).append(b"r" * 5000)
    warmer = PageWarmer(tmp_path / "commitlog", FILE_SIZE, ahead_bytes=300_000, step_bytes=128 * 1024)
    assert warmer.enabled
    assert warmer.warm(log.max_offset) == 0
    assert not warmer.enabled and warmer.warmed_to == 0
    assert warmer.warm(log.max_offset) == 0  # it does not try again
    warmer.close()
    log.close()


def test_nothing_to_warm_in_an_empty_log(tmp_path: Path) -> None:
    (tmp_path / "commitlog").mkdir()
    warmer = PageWarmer(tmp_path / "commitlog", FILE_SIZE)
    assert warmer.warm(0) == 0
    warmer.close()
