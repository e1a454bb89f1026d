"""The writer's round replayed offline: CPU a round and a message, calls a round, and the builders' decode.

    python -m mqstore.scripts.bench.writer_round [--requests 5] [--rounds 1000] [--profile]

Builds a writer (``CommitLogWriterActor``) on a temp store, and feeds ``serve_round`` rounds of
``send_encoded`` requests as ``bench load`` makes them (``send_encoded_columns``, 100 messages of
128 B to one topic, tags on all, a key on 10 %), framed as ZeroMQ hands them over, from a socket
stand-in that holds them: no sockets, no other process, the commitlog's pages populated ahead as
the writer's prefault thread does. Reports the least CPU a round of 10 runs (the machine is shared:
the least is the least disturbed), the Python calls a round under cProfile, and the CPU a message of
decoding the round's ``dispatch`` frames, alone and with their index keys hashed (what the
consume-queue and index builders pay before they apply). ``--profile`` prints the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import pstats
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.actors.writer.actor import CommitLogWriterActor
from mqstore.actors.writer.encoded import encoding_reply
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.encoded import BatchEncoder, Encoding
from mqstore.ipc.wire.notices import Dispatch
from mqstore.ipc.wire.requests import SendEncoded

BATCH = 100


class HeldFrames:
    """What the writer's ROUTER and PUB sockets do for a round: hand over the frames held, frame by
    frame, and keep what is sent."""

    def __init__(self, messages: list[list[bytes]], sent: list[list[bytes]]) -> None:
        self.waiting = messages
        self.current: list[bytes] = []
        self.sent = sent
        self.sending: list[Any] = []

    def recv(self, flags: int = 0, copy: bool = True) -> bytes | zmq.Frame:
        if not self.current:
            if not self.waiting:
                raise zmq.Again()
            self.current = list(self.waiting.pop(0))
        frame = self.current.pop(0)
        return frame if copy else zmq.Frame(frame)

    def getsockopt(self, option: int) -> int:
        if option == zmq.EVENTS:  # a message waits
            return int(zmq.POLLIN) if self.waiting or self.current else 0
        return int(bool(self.current))  # RCVMORE

    def send(self, frame: Any, flags: int = 0, copy: bool = True) -> None:
        """A message frame by frame, kept whole once its last frame is in."""
        self.sending.append(frame)
        if not flags & zmq.SNDMORE:
            self.sent.append(self.sending)
            self.sending = []

    def send_multipart(self, frames: list[bytes], flags: int = 0, copy: bool = True) -> None:
        self.sent.append(frames)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5, help="send_encoded requests of 100 a round (5)")
    parser.add_argument("--rounds", type=int, default=1000, help="rounds replayed (1000)")
    parser.add_argument("--profile", action="store_true", help="print the top functions by own time")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="writer-round-"))
    config = load_config(work / "store", broker={}, store={"geometry": {"commitlog_file_size": 256 << 20}})
    (work / "store").mkdir()
    writer = CommitLogWriterActor(Runtime("writer", config, zmq.Context()))
    encoders = [BatchEncoder(Encoding.of(encoding_reply(config.store))) for _ in range(2)]
    rng = np.random.default_rng(1)
    seq = itertools.count()

    def request(worker: int) -> list[bytes]:
        keyed = rng.random(BATCH) < 0.1
        batch = encoders[worker].encode_columns(
            "BenchTopic0", [bytes(128)] * BATCH, tags=["TagA" if i % 2 else "TagB" for i in range(BATCH)],
            keys=[(f"k{worker}-{next(seq)}",) if keyed[i] else () for i in range(BATCH)])
        frames = SendEncoded.of(batch).frames(next(seq))
        return [f"peer{worker}".encode(), *map(bytes, frames)]

    sent: list[list[bytes]] = []
    out = HeldFrames([], sent)

    def rounds(count: int) -> list[HeldFrames]:
        return [HeldFrames([request(i % 2) for i in range(args.requests)], sent) for _ in range(count)]

    def serve(held: list[HeldFrames]) -> float:
        begin = time.process_time()
        for ingress in held:
            writer.serve_round(ingress, out, out)  # type: ignore[arg-type]
        return (time.process_time() - begin) / len(held)

    serve(rounds(20))  # the first file created, the topic made, the code warm
    mf = writer.commitlog.queue.files[-1]
    np.frombuffer(mf.buffer, np.uint8)[mf.written_pos:] = 0  # populated ahead, as the prefault thread does
    profile = cProfile.Profile()
    held = rounds(args.rounds)
    profile.enable()
    serve(held)
    profile.disable()
    stats = pstats.Stats(profile)
    calls = sum(row[1] for row in stats.stats.values()) / args.rounds  # type: ignore[attr-defined]
    sent.clear()
    best = min(serve(rounds(max(args.rounds // 10, 1))) for _ in range(10))
    messages = args.requests * BATCH
    frames = [f[1:] for f in sent if f[0] == schema.DISPATCH]
    print(f"writer round of {args.requests} requests ({messages} messages): {best * 1e6:.0f} us, "
          f"{best / messages * 1e6:.3f} us a message (least of 10); {calls:.0f} Python calls a round (cProfile)")
    print(f"dispatch frames: {sum(len(f) for f in frames[0])} bytes for {messages} records")
    for what, apply in (("decode", lambda f: Dispatch.decode(f[0], f[1:])),
                        ("decode + index keys", lambda f: Dispatch.decode(f[0], f[1:]).batch.index_keys())):
        print(f"builders, {what}: {least_per_message(frames, apply, messages) * 1e6:.3f} us a message (least of 10)")
    if args.profile:
        stats.sort_stats("tottime").print_stats(30)
    writer.commitlog.close()
    return 0


def least_per_message(frames: list[list[bytes]], apply: Callable[[list[bytes]], Any], per_frame: int) -> float:
    best = float("inf")
    for _ in range(10):
        begin = time.process_time()
        for frame in frames:
            apply(frame)
        best = min(best, (time.process_time() - begin) / len(frames) / per_frame)
    return best


if __name__ == "__main__":
    raise SystemExit(main())
