"""A master whose HA actor serves slaves hears of every round's end at once (a ``written`` notice per
round): its slaves are pushed the new bytes without waiting for the writer's tick, which held every
SYNC_MASTER answer a tick and measured as 0.29x ASYNC_MASTER's rate. A lone broker under ASYNC_FLUSH
announces its end on the tick only, as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.actors.writer.actor import CommitLogWriterActor
from mqstore.actors.writer.encoded import encoding_reply
from mqstore.ipc.wire import requests, schema
from mqstore.ipc.wire.encoded import BatchEncoder, Encoding
from mqstore.ipc.wire.notices import Written
from tests.actors.writer.sent_frames import SentFrames
from tests.actors.writer.test_limits import QueuedIngress


def _writer(tmp_path: Path, role: str, serve: bool) -> CommitLogWriterActor:
    geometry = {"commitlog_file_size": 1 << 20, "cq_entries_per_file": 64, "index_slot_count": 16,
                "index_entry_count": 64}
    config = load_config(tmp_path / "store", broker={"role": role}, ha={"serve": serve, "listen_port": 1},
                         store={"geometry": geometry})
    (tmp_path / "store").mkdir()
    return CommitLogWriterActor(Runtime("writer", config, zmq.Context()))


def _frames(writer: CommitLogWriterActor) -> list[list[bytes]]:
    encoder = BatchEncoder(Encoding.of(encoding_reply(writer.rt.config.store)))
    send = requests.Send((requests.SendMessage("Orders", b"one"),))
    encoded = requests.SendEncoded.of(encoder.encode_columns("Orders", [b"two"]))
    return [[b"peer", *map(bytes, request.frames(i))] for i, request in enumerate((send, encoded))]


@pytest.mark.parametrize(("role", "serve", "announced"), [("ASYNC_MASTER", True, True), ("SYNC_MASTER", False, True),
                                                          ("ASYNC_MASTER", False, False)])
def test_each_round_announces_its_end_when_slaves_are_served(tmp_path: Path, role: str, serve: bool,
                                                             announced: bool) -> None:
    writer = _writer(tmp_path, role, serve)
    notices: list[Written] = []

    class Out(SentFrames):
        def send_multipart(self, frames: list[Any], flags: int = 0, copy: bool = True) -> None:
            if bytes(frames[0]) == schema.WRITTEN:
                notices.append(Written.decode(frames[1]))

    out = Out()
    try:
        for frames in _frames(writer):  # a map send, then an encoded one: each its own round
            before = len(notices)
            writer.serve_round(QueuedIngress([frames]), out, out)  # type: ignore[arg-type]
            assert (len(notices) > before) == announced
            if announced:
                assert notices[-1].end == writer.commitlog.max_offset and not notices[-1].sync
    finally:
        writer.commitlog.close()
        writer.rt.close()
