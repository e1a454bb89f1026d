"""``mqstore.scripts.bench.cq_rounds``: recorded dispatch frames replayed through the consume-queue builder's
round on a copy of the commitlog write the files a builder wrote live, and the round is counted."""

from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.builder import ConsumeQueueBuilderActor
from mqstore.actors.runtime import Runtime
from mqstore.scripts.bench.cq_rounds import replay
from tests.actors.test_builder_rounds import Written


def test_a_replay_writes_the_builders_files_and_counts_its_rounds(tmp_path: Path) -> None:
    written = Written(tmp_path / "store")
    frames = [written.append(first, 7) for first in range(0, 70, 7)]  # several files of every queue
    ctx: zmq.Context[Any] = zmq.Context()
    try:
        live = ConsumeQueueBuilderActor(Runtime("cqbuilder", written.config, ctx))
        live.applied = max(live.resume_from(), live.commitlog.min_offset)
        for frame in frames:
            assert live._on_round([frame])
        live.close()
    finally:
        ctx.destroy(linger=0)
    written.commitlog.close()
    out = replay(tmp_path / "store", tmp_path / "replay", frames, repeat=1)
    assert out["files_same_as_broker"] and out["rounds"] == len(frames)
    assert out["calls_per_round"] > out["numpy_calls_per_round"] > 0 and out["cpu_us_per_round"] > 0
