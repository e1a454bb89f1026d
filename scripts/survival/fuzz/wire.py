"""The wire fuzz target: ``mqstore.ipc.wire.schema`` and the commitlog writer's and a reader's request paths,
built in this process on a small store and fed a frame, a multipart message, or a round of them."""

from __future__ import annotations

import contextlib
import random
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import zmq
from hypothesis import strategies as st

from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.actors.writer.encoded import encoding_reply
from mqstore.engine import Message, MessageStore, StoreConfig
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.encoded import Encoding
from mqstore.scripts.survival.fuzz.targets import GEOMETRY, Finding, bytes_like, mutated
from mqstore.scripts.survival.hostile.requests import JUNK, REQUESTS, as_request, encoded_requests, invalid_frames

Frames = bytes | list[bytes] | tuple[list[bytes], ...]  # one frame, one multipart message, or a round of them


class WireTarget:
    """A writer and reader 0 built on a small store in this process, fed one input at a time: a
    frame, a multipart message (a map and its parts), or several multipart messages in one poll
    round (so producer-encoded sends meet in a merge)."""

    def __init__(self) -> None:
        from mqstore.actors.reader.actor import ReaderActor
        from mqstore.actors.writer.actor import CommitLogWriterActor
        self.root = Path(tempfile.mkdtemp(prefix="mqstore-fuzz-wire-"))
        store = self.root / "store"
        with MessageStore.open(store, StoreConfig(geometry=GEOMETRY)) as s:
            s.put_batch([Message("Good", f"m{i}".encode(), tags="T", keys=("k",)) for i in range(20)], [0] * 20)
        config = load_config(store, ipc={"run_dir": str(self.root / "run")},
                             store={"geometry": {f: getattr(GEOMETRY, f) for f in GEOMETRY.__dataclass_fields__}})
        config.endpoints.prepare()
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.writer = CommitLogWriterActor(Runtime("writer", config, self.ctx))
        self.reader = ReaderActor(Runtime("reader-0", config, self.ctx), 0)
        self.reader.acks.start(lambda identity, reply: None)
        self.reader.store.learn_from_files()
        self.encoding = Encoding.of(encoding_reply(config.store))
        self.replies: list[list[bytes]] = []
        self._waiting: list[list[bytes]] = []  # the messages waiting, each its frames
        self._current: list[bytes] = []
        self._sending: list[bytes] = []
        self._pub = SimpleNamespace(send_multipart=lambda *a, **k: None, send=lambda *a, **k: None)

    # the writer's ingress, as the writer drives it: frame by frame
    def recv(self, flags: int = 0, copy: bool = True) -> bytes | zmq.Frame:
        if not self._current:
            if not self._waiting:
                raise zmq.Again()
            self._current = self._waiting.pop(0)
        frame = self._current.pop(0)
        return frame if copy else zmq.Frame(frame)

    def getsockopt(self, option: int) -> int:
        if option == zmq.EVENTS:  # a message waits
            return int(zmq.POLLIN) if self._waiting or self._current else 0
        return int(bool(self._current))  # RCVMORE: frames left in the message being received

    def send(self, frame: Any, flags: int = 0, copy: bool = True) -> None:
        """A reply frame by frame (the writer's ``send_routed``), kept whole once its last frame is in."""
        self._sending.append(bytes(frame))
        if not flags & zmq.SNDMORE:
            self.replies.append(self._sending)
            self._sending = []

    def send_multipart(self, frames: list[bytes], flags: int = 0, copy: bool = True) -> None:
        self.replies.append(frames)

    def check(self, data: Frames) -> None:
        messages = [[data]] if isinstance(data, bytes) else [data] if isinstance(data, list) else list(data)
        for frames in messages:
            with contextlib.suppress(schema.SchemaError):
                schema.unpack_message(frames[0], frames[1:])
        self.replies.clear()
        self._waiting = [[b"peer", *frames] for frames in messages]
        self.writer.serve_round(self, self._pub, self._pub)  # type: ignore[arg-type]
        if len(self.replies) != len(messages):
            raise Finding(f"the writer answered {len(self.replies)} times to {len(messages)} request(s)")
        for frames in messages:
            reply = self.reader.handle([b"peer", *frames])
            if reply is not None and reply.get("status") == "SYSTEM_ERROR":
                raise Finding(f"reader SYSTEM_ERROR: {reply.get('reason')}")
        self.reader.parked.drain()

    def close(self) -> None:
        self.reader.acks.close()
        self.reader.store.close()
        self.writer.commitlog.close()
        self.ctx.destroy(0)
        shutil.rmtree(self.root, ignore_errors=True)


def _plain_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 64) - 1), st.floats(),
                        st.text(max_size=40), st.binary(max_size=40), st.sampled_from(JUNK))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                         st.dictionaries(st.text(max_size=10), inner, max_size=5)),
                        max_leaves=12)


def multipart_strategy(encoding: Encoding) -> st.SearchStrategy[Frames]:
    """Producer-encoded sends: every shape of ``encoded_requests``, as is or with one frame replaced
    by a mutated copy of one of its frames, alone or several in one round."""
    shapes = list(encoded_requests(encoding, random.Random(0)).values())

    def replaced(frames: list[bytes], which: int, new: bytes) -> list[bytes]:
        out = list(frames)
        out[which % len(out)] = new
        return out
    one = st.one_of(st.sampled_from(shapes), st.sampled_from(shapes).flatmap(
        lambda frames: st.builds(replaced, st.just(frames), st.integers(0, 3), mutated(frames, max_flips=3))))
    return st.one_of(one, st.lists(one, min_size=2, max_size=5).map(tuple))


def wire_strategy(encoding: Encoding) -> st.SearchStrategy[Frames]:
    seeds = [as_request(op, 1, fields) for _, op, fields in REQUESTS]
    names = sorted({name for _, _, fields in REQUESTS for name in fields} | {"msgs"})
    ops = sorted({op for _, op, _ in REQUESTS})

    def structured(op: str, fields: dict[str, Any], base: int) -> bytes:
        template = next(f for _, o, f in REQUESTS if o == op)
        merged = {**template, **fields} if base else fields
        body = {"msgs": [merged]} if op == "send" and base == 1 else merged
        try:
            return schema.pack(schema.request(op, 1, **body))
        except (TypeError, ValueError, OverflowError):
            return schema.pack(schema.request(op, 1))
    shaped = st.builds(structured, st.sampled_from(ops),
                       st.dictionaries(st.sampled_from(names), _plain_values(), max_size=6), st.integers(0, 2))
    garbage = st.builds(lambda seed: invalid_frames(random.Random(seed), 40)[seed % 40],
                        st.integers(0, 1 << 30))
    return st.one_of(bytes_like(seeds), shaped, shaped, garbage, multipart_strategy(encoding))
