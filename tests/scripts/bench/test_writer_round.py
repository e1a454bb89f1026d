"""``mqstore.scripts.bench.writer_round --lone``: rounds of one send of one message over real sockets are
each appended and answered, and the writer thread's CPU a round is counted."""

from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.actors.writer.actor import CommitLogWriterActor
from mqstore.scripts.bench.writer_round import lone_rounds


def test_lone_rounds_append_and_answer_each_send(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    ctx: zmq.Context[Any] = zmq.Context()
    writer = CommitLogWriterActor(Runtime("writer", load_config(tmp_path / "store"), ctx))
    try:
        before = writer.commitlog.max_offset
        assert lone_rounds(writer, 20) > 0  # raises unless every send is answered ok
        assert sum(writer.state.writer.next_queue_offsets.values()) == 20 and writer.commitlog.max_offset > before
        assert lone_rounds(writer, 5) > 0  # a second run in the same process binds afresh
    finally:
        writer.commitlog.close()
        ctx.destroy(linger=0)
