"""SYNC_FLUSH waiters: a flush releases the batches it covers before the answers it covers, in the
order they were written; an answer past its deadline goes out as FLUSH_DISK_TIMEOUT; the rest wait."""

from __future__ import annotations

from typing import Any

import numpy as np
import zmq

from mqstore.actors.writer.outlets import Outlets, Progress
from mqstore.actors.writer.sync import SyncWaiters
from mqstore.engine.batch.dispatch import DISPATCH_COLUMNS, DispatchBatch
from mqstore.engine.batch.key_text import KeyText
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Dispatch, Flushed
from mqstore.ipc.wire.replies import SendEncodedReply, SendReply
from tests.actors.writer.sent_frames import SentFrames


class Socket(SentFrames):
    """Every frame sent, and the frames waiting to be received."""

    def __init__(self, waiting: list[list[bytes]] | None = None) -> None:
        self.sent: list[list[bytes]] = []
        self.waiting = list(waiting or [])

    def send_multipart(self, frames: list[bytes], flags: int = 0, copy: bool = True) -> None:
        self.sent.append(frames)

    def recv_multipart(self, flags: int = 0) -> list[bytes]:
        if not self.waiting:
            raise zmq.Again()
        return self.waiting.pop(0)

    def poll(self, timeout: int = 0) -> int:
        return int(bool(self.waiting))


def _outlets(log: list[tuple[str, Any]]) -> tuple[Outlets, Progress]:
    class Logged(Socket):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def send_multipart(self, frames: list[bytes], flags: int = 0, copy: bool = True) -> None:
            log.append((self.name, frames))

    progress = Progress(dispatched_end=0)
    reply: Any = Logged("reply")
    dispatch: Any = Logged("dispatch")
    written: Any = Logged("written")
    return Outlets(reply, dispatch, written, progress), progress


def _dispatch(start: int, end: int) -> Dispatch:
    return Dispatch(start, end, DispatchBatch(np.empty(0, DISPATCH_COLUMNS), [], KeyText.of([], [])))


def test_a_flush_releases_batches_then_answers_up_to_its_end() -> None:
    log: list[tuple[str, Any]] = []
    outlets, progress = _outlets(log)
    waiters = SyncWaiters(timeout_ms=60_000)
    waiters.hold(100, b"a", 1, SendReply([{"status": "PUT_OK"}]))
    waiters.hold(100, b"b", 2, SendReply([{"status": "PUT_OK"}]))
    waiters.hold_dispatch(_dispatch(0, 100))
    waiters.hold(200, b"c", 3, SendEncodedReply(b"", "PUT_OK", ""))
    waiters.hold_dispatch(_dispatch(100, 200))
    assert len(waiters) == 3
    waiters.release(outlets)
    assert log == []  # nothing flushed yet
    flushed_in: Any = Socket([[schema.FLUSHED, Flushed(150).encode()], [schema.FLUSHED, b"\xc1"]])
    waiters.on_flushed(flushed_in)
    assert waiters.flushed_end == 150
    waiters.release(outlets)
    assert [name for name, _ in log] == ["dispatch", "reply", "reply"]
    assert Dispatch.decode(log[0][1][1], log[0][1][2:]).to_phys == 100 and progress.dispatched_end == 100
    assert [(f[0], schema.unpack(f[1])["id"], schema.unpack(f[1])["results"]) for _, f in log[1:]] == [
        (b"a", 1, [{"status": "PUT_OK"}]), (b"b", 2, [{"status": "PUT_OK"}])]
    assert len(waiters) == 1


def test_an_answer_past_its_deadline_is_a_flush_timeout_and_its_batch_still_waits() -> None:
    log: list[tuple[str, Any]] = []
    outlets, progress = _outlets(log)
    waiters = SyncWaiters(timeout_ms=0)  # every deadline is now
    waiters.hold(100, b"a", 1, SendReply([{"status": "PUT_OK"}, {"status": "MESSAGE_ILLEGAL"}]))
    waiters.hold(100, b"b", 2, SendEncodedReply(b"", "PUT_OK", ""))
    waiters.hold_dispatch(_dispatch(0, 100))
    waiters.release(outlets)
    replies = [schema.unpack(frames[1]) for name, frames in log if name == "reply"]
    assert [r["results"] for r in replies[:1]] == [[{"status": "FLUSH_DISK_TIMEOUT"}, {"status": "MESSAGE_ILLEGAL"}]]
    assert replies[1]["written_status"] == "FLUSH_DISK_TIMEOUT" and replies[1]["status"] == "PUT_OK"
    assert all(name == "reply" for name, _ in log) and progress.dispatched_end == 0
    assert len(waiters.undispatched) == 1  # the record becomes visible once flushed


def test_drain_on_stop_waits_for_the_flush_within_the_sync_timeout() -> None:
    log: list[tuple[str, Any]] = []
    outlets, progress = _outlets(log)
    waiters = SyncWaiters(timeout_ms=60_000)
    waiters.hold(100, b"a", 1, SendReply([{"status": "PUT_OK"}]))
    waiters.hold_dispatch(_dispatch(0, 100))
    flushed_in: Any = Socket([[schema.FLUSHED, Flushed(100).encode()]])
    waiters.drain(outlets, flushed_in)
    assert [name for name, _ in log] == ["dispatch", "reply"]
    assert progress.dispatched_end == 100 and len(waiters) == 0 and not waiters.undispatched


def test_drain_on_stop_without_a_flush_times_out_and_leaves_the_batch_to_the_builders() -> None:
    log: list[tuple[str, Any]] = []
    outlets, progress = _outlets(log)
    waiters = SyncWaiters(timeout_ms=0)  # the flush service is gone: no waiting past the timeout
    waiters.hold(100, b"a", 1, SendReply([{"status": "PUT_OK"}]))
    waiters.hold_dispatch(_dispatch(0, 100))
    waiters.drain(outlets, Socket())  # type: ignore[arg-type]
    assert [schema.unpack(frames[1])["results"] for _, frames in log] == [[{"status": "FLUSH_DISK_TIMEOUT"}]]
    assert progress.dispatched_end == 0 and not waiters.undispatched  # read back from the commitlog


def test_drain_on_stop_flushes_what_waits_itself_when_the_flush_service_is_gone() -> None:
    """Every actor stops at once when the supervisor dies: the flush service's notice may never come.
    The writer makes the log durable itself and answers PUT_OK, instead of waiting out the timeout."""
    log: list[tuple[str, Any]] = []
    outlets, progress = _outlets(log)
    waiters = SyncWaiters(timeout_ms=3_600_000)  # waiting for the notice would outlast the test
    waiters.flushed_end = 40
    waiters.hold(100, b"a", 1, SendReply([{"status": "PUT_OK"}]))
    waiters.hold_dispatch(_dispatch(40, 100))
    synced_from: list[int] = []

    def sync_own(flushed_end: int) -> int:
        synced_from.append(flushed_end)
        return 100

    waiters.drain(outlets, Socket(), sync_own=sync_own)  # type: ignore[arg-type]
    assert synced_from == [40]
    assert [name for name, _ in log] == ["dispatch", "reply"]
    assert schema.unpack(log[1][1][1])["results"] == [{"status": "PUT_OK"}]
    assert progress.dispatched_end == 100 and len(waiters) == 0 and not waiters.undispatched


def test_drain_on_stop_whose_own_flush_fails_claims_nothing_durable() -> None:
    log: list[tuple[str, Any]] = []
    outlets, progress = _outlets(log)
    waiters = SyncWaiters(timeout_ms=0)
    waiters.hold(100, b"a", 1, SendReply([{"status": "PUT_OK"}]))
    waiters.hold_dispatch(_dispatch(0, 100))

    def sync_own(flushed_end: int) -> int:
        raise OSError(5, "Input/output error")

    waiters.drain(outlets, Socket(), sync_own=sync_own)  # type: ignore[arg-type]
    assert [schema.unpack(frames[1])["results"] for _, frames in log] == [[{"status": "FLUSH_DISK_TIMEOUT"}]]
    assert waiters.flushed_end == 0 and progress.dispatched_end == 0


def test_drain_on_stop_in_async_flush_mode_flushes_nothing_itself() -> None:
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(timeout_ms=0, sync_flush=False)
    called: list[int] = []
    waiters.drain(outlets, Socket(), sync_own=lambda end: called.append(end) or end)  # type: ignore[arg-type]
    assert called == []
