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

``--lone``: instead, rounds of one ``send`` of one message (what ``Producer.send`` makes: 128 B, tags,
a key), over real sockets in this process (the ingress an inproc ROUTER a DEALER sends to, the
notices a PUB with a subscriber): the writer thread's CPU a round, socket calls included, least of 5
runs: the fixed cost a synchronous send pays in the writer's round, without its poll loop.
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
from mqstore.ipc.wire.messages import Outgoing
from mqstore.ipc.wire.notices import Dispatch
from mqstore.ipc.wire.requests import Send, SendEncoded, SendMessage

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
    parser.add_argument("--lone", action="store_true", help="rounds of one send of one message, real sockets")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="writer-round-"))
    config = load_config(work / "store", broker={}, store={"geometry": {"commitlog_file_size": 256 << 20}})
    (work / "store").mkdir()
    writer = CommitLogWriterActor(Runtime("writer", config, zmq.Context()))
    if args.lone:
        best = min(lone_rounds(writer, args.rounds) for _ in range(5))
        print(f"writer round of one send of one message, real sockets: {best * 1e6:.1f} us (least of 5)")
        writer.commitlog.close()
        return 0
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


_ENDPOINTS = itertools.count()  # inproc names are let go of some time after the close: a fresh one a run


def lone_rounds(writer: CommitLogWriterActor, rounds: int) -> float:
    """The writer thread's CPU seconds a round of one ``send`` of one message, each answered, over
    inproc sockets; the client's side of each round is not counted."""
    ctx = writer.rt.ctx
    ingress, client = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    pub, sub = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
    run = next(_ENDPOINTS)
    try:
        ingress.bind(f"inproc://writer-round-ingress-{run}")
        client.connect(f"inproc://writer-round-ingress-{run}")
        pub.bind(f"inproc://writer-round-dispatch-{run}")
        sub.connect(f"inproc://writer-round-dispatch-{run}")
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        message = SendMessage.of(Outgoing("BenchTopic0", bytes(128), "TagA", ("k",), {}, None, None))
        took = 0
        for request_id in range(rounds):
            client.send(schema.pack(Send((message,)).encode(request_id)))
            if not ingress.poll(10_000):
                raise RuntimeError("the request never reached the writer's ingress")
            begin = time.thread_time_ns()
            writer.serve_round(ingress, pub, pub)
            took += time.thread_time_ns() - begin
            if not client.poll(10_000) or not schema.unpack(client.recv())["ok"]:
                raise RuntimeError("a send was not answered ok")
            while sub.poll(0):
                sub.recv_multipart()
        return took / rounds / 1e9
    finally:
        for sock in (client, ingress, sub, pub):
            sock.close(linger=0)


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
