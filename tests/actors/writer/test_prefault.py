"""The writer's prefault thread: it populates what the loop hands it, stops when told, never works
on a file closed under ``paused()``, and with the switch off there is no thread at all."""

from __future__ import annotations

import threading
from pathlib import Path

from mqstore.actors.writer.prefault import PrefaultThread, ahead_bytes_for
from mqstore.engine.log.mapped_file import MappedFile, file_name
from mqstore.engine.log.prefault import DEFAULT_PREFAULT_AHEAD_BYTES
from tests.integration.broker import wait_for

FILE_SIZE = 8 * 1024 * 1024


def prefault_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "commitlog-prefault"]


def test_the_thread_populates_what_it_is_handed_and_stops(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), FILE_SIZE)
    thread = PrefaultThread(2 * 1024 * 1024)
    thread.start()
    try:
        assert thread.alive
        mf.append(b"r" * 10_000)
        thread.hand(mf)
        target = thread.prefault.target_pos(mf, mf.written_pos)
        wait_for(lambda: thread.prefault.populated_pos == target, 30, "the handed range populated")
        mf.append(b"s" * 1_500_000)  # past half the distance ahead: handed again
        thread.hand(mf)
        target = thread.prefault.target_pos(mf, mf.written_pos)
        wait_for(lambda: thread.prefault.populated_pos == target, 30, "the next range populated")
    finally:
        thread.stop()
        mf.close()
    assert not thread.alive and thread.prefault.error is None
    assert not prefault_threads()


def test_files_closed_while_the_thread_works_on_them_are_never_touched_again(tmp_path: Path) -> None:
    """Like retention deleting a file the thread was handed: the close waits for the step in flight,
    and the thread skips the closed file, then serves the next one."""
    thread = PrefaultThread(FILE_SIZE)  # a whole file ahead: many steps, so closes land mid-range
    thread.start()
    try:
        for n in range(12):
            mf = MappedFile.create(tmp_path / file_name(n * FILE_SIZE), FILE_SIZE)
            mf.append(b"t" * 100)
            thread.hand(mf)
            if n % 2:
                wait_for(lambda: thread.prefault.file is mf, 30, "the thread on the new file")  # noqa: B023
            with thread.paused():
                mf.close()
                populated = thread.prefault.populated_bytes
            with thread.paused():
                assert thread.prefault.populated_bytes == populated  # nothing advised on the closed file
        last = MappedFile.create(tmp_path / file_name(100 * FILE_SIZE), FILE_SIZE)
        try:
            thread.hand(last)
            wait_for(lambda: thread.prefault.populated_pos == FILE_SIZE and thread.prefault.file is last, 30,
                     "the file after the closed ones populated")
        finally:
            with thread.paused():
                last.close()
        assert thread.alive and thread.prefault.enabled and thread.prefault.error is None
    finally:
        thread.stop()
    assert not thread.alive


def test_switched_off_there_is_no_thread(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), FILE_SIZE)
    thread = PrefaultThread(0)
    thread.start()
    try:
        assert not thread.alive and not prefault_threads()
        mf.append(b"u" * 100)
        thread.hand(mf)
        with thread.paused():
            pass
        assert thread.prefault.populated_bytes == 0
    finally:
        thread.stop()
        mf.close()


def test_unset_the_flush_mode_chooses() -> None:
    assert ahead_bytes_for(None, sync_flush=False) == DEFAULT_PREFAULT_AHEAD_BYTES
    assert ahead_bytes_for(None, sync_flush=True) == 0
    assert ahead_bytes_for(0, sync_flush=False) == 0
    assert ahead_bytes_for(1 << 20, sync_flush=True) == 1 << 20
