"""What scripts/survival/fuzz.py feeds, and to what: one ``Target`` per decoder that takes bytes from outside.

Each target has a hypothesis strategy (random bytes, byte-flipped and cut copies of valid inputs,
and structured inputs where the format has structure), a ``check`` that runs the code under test
on one input, and the exception types that count as a clear error. Anything else a check raises is
a crash; a check that raises ``Finding`` found something wrong without crashing.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import zmq
from hypothesis import strategies as st

from actors.config import ConfigError, load_config
from actors.writer.encoded import encoding_fields
from engine import Geometry, Host, Message, MessageStore, StoreConfig
from engine.ackindex.codec import (
    PubRecord,
    encode_journal_ack,
    encode_journal_deliver,
    encode_journal_publish,
    encode_segment_entry,
    parse_journal,
    parse_segment,
)
from engine.ackindex.files import JOURNAL_FILE_NAME, QueueIndexError, segment_path
from engine.ackindex.queue_index import QueueIndex
from engine.checkpoint import CheckpointError
from engine.config import GeometryError
from engine.keyindex.index_file import IndexFileError
from engine.log.mapped_file import MappedFileError
from engine.log.record import DecodeKind, decode_record, encode_blank, encode_record, seal_record
from engine.metafile import MetafileError
from engine.topics import TopicError
from engine.verify import verify_store
from ipc import schema
from ipc.encoded import Encoding
from scripts.survival.hostile.requests import JUNK, REQUESTS, as_request, encoded_requests, invalid_frames

GEOMETRY = Geometry(commitlog_file_size=8 * 1024, cq_entries_per_file=16, index_slot_count=16,
                    index_entry_count=64)
LOCAL = Host("127.0.0.1", 10911)


class Finding(Exception):
    """Wrong without a crash: a reply saying SYSTEM_ERROR, a request left unanswered."""


@dataclass
class Target:
    """``expand``: inputs run per hypothesis example: the example, then byte-flipped copies of it
    (hypothesis's own bookkeeping costs more per example than a cheap decoder does)."""

    name: str
    strategy: st.SearchStrategy[Any]
    check: Callable[[Any], None]
    clear: tuple[type[BaseException], ...] = ()
    close: Callable[[], None] = field(default=lambda: None)
    expand: int = 1
    stats: Callable[[], dict[str, Any]] = field(default=dict)
    keeps_no_files: bool = True  # every input's files are closed again (the wire target's store grows)


def mutated(seeds: list[bytes], max_flips: int = 8) -> st.SearchStrategy[bytes]:
    """A seed with bytes flipped, inserted or dropped, maybe cut short."""
    def apply(seed: bytes, edits: list[tuple[int, int, int]], cut: int) -> bytes:
        data = bytearray(seed)
        for kind, where, value in edits:
            if not data:
                break
            pos = where % len(data)
            if kind == 0:
                data[pos] = value
            elif kind == 1:
                data[pos] ^= 1 << (value % 8)
            elif kind == 2:
                data.insert(pos, value)
            else:
                del data[pos]
        return bytes(data[:cut] if cut < len(data) else data)
    edit = st.tuples(st.integers(0, 3), st.integers(0, 1 << 20), st.integers(0, 255))
    return st.builds(apply, st.sampled_from(seeds), st.lists(edit, max_size=max_flips),
                     st.one_of(st.just(1 << 30), st.integers(0, 4096)))


def bytes_like(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=512), mutated(seeds), mutated(seeds), mutated(seeds))


# -- the record decoder ---------------------------------------------------------------------------------


def record_seeds() -> list[bytes]:
    seeds = []
    for i, (topic, props, host) in enumerate([("T", {}, LOCAL), ("Orders", {"KEYS": "a b", "TAGS": "x"}, LOCAL),
                                              ("V2" * 70, {"k": "v" * 300}, Host("::1", 9876))]):
        rec = encode_record(topic=topic, body=bytes(range(i * 40 % 256)) * 2, properties=props, born_host=host,
                            store_host=LOCAL, queue_offset=i, phys_offset=i * 100, prop_crc=True)
        seal_record(rec, 0, len(rec))
        seeds.append(bytes(rec))
    return [*seeds, encode_blank(64), seeds[0] + seeds[1]]


def check_record(data: bytes) -> None:
    for crc in (True, False):
        decoded = decode_record(data, 0, check_crc=crc, require_prop_crc=crc)
        if decoded.kind is DecodeKind.RECORD and not 0 < decoded.size <= len(data):
            raise Finding(f"a record of size {decoded.size} decoded from {len(data)} bytes")


# -- the wire: ipc.schema and the writer's and a reader's request decoding ----------------------------


Frames = bytes | list[bytes] | tuple[list[bytes], ...]  # one frame, one multipart message, or a round of them


class WireTarget:
    """A writer and reader 0 built on a small store in this process, fed one input at a time: a
    frame, a multipart message (a map and its parts), or several multipart messages in one poll
    round (so producer-encoded sends meet in a merge)."""

    def __init__(self) -> None:
        from actors.reader.actor import ReaderActor
        from actors.writer.actor import CommitLogWriterActor
        self.root = Path(tempfile.mkdtemp(prefix="mqstore-fuzz-wire-"))
        store = self.root / "store"
        with MessageStore.open(store, StoreConfig(geometry=GEOMETRY)) as s:
            s.put_batch([Message("Good", f"m{i}".encode(), tags="T", keys=("k",)) for i in range(20)], [0] * 20)
        config = load_config(store, ipc={"run_dir": str(self.root / "run")},
                             store={"geometry": {f: getattr(GEOMETRY, f) for f in GEOMETRY.__dataclass_fields__}})
        config.endpoints.prepare()
        self.ctx: zmq.Context[Any] = zmq.Context()
        runtime = SimpleNamespace(config=config, endpoints=config.endpoints, ctx=self.ctx, stopping=False,
                                  report=lambda *a, **k: None)
        self.writer = CommitLogWriterActor(runtime)  # type: ignore[arg-type]
        self.reader = ReaderActor(runtime, 0)  # type: ignore[arg-type]
        self.reader.acks.start(lambda identity, reply: None)
        self.reader.store.learn_from_files()
        self.encoding = Encoding.from_reply(encoding_fields(config.store))
        self.replies: list[list[bytes]] = []
        self._waiting: list[list[bytes]] = []  # the messages waiting, each its frames
        self._current: list[bytes] = []
        self._pub = SimpleNamespace(send_multipart=lambda *a, **k: None)

    # the writer's ingress, as the writer drives it: frame by frame
    def recv(self, flags: int = 0, copy: bool = True) -> bytes | zmq.Frame:
        if not self._current:
            if not self._waiting:
                raise zmq.Again()
            self._current = self._waiting.pop(0)
        frame = self._current.pop(0)
        return frame if copy else zmq.Frame(frame)

    def getsockopt(self, option: int) -> int:
        return int(bool(self._current))  # RCVMORE: frames left in the message being received

    def send_multipart(self, frames: list[bytes], flags: int = 0) -> None:
        self.replies.append(frames)

    def check(self, data: Frames) -> None:
        messages = [[data]] if isinstance(data, bytes) else [data] if isinstance(data, list) else list(data)
        for frames in messages:
            with contextlib.suppress(schema.SchemaError):
                schema.unpack_message(frames[0], frames[1:])
        self.replies.clear()
        self._waiting = [[b"peer", *frames] for frames in messages]
        self.writer._serve(self, self._pub, self._pub)  # type: ignore[arg-type]
        if len(self.replies) != len(messages):
            raise Finding(f"the writer answered {len(self.replies)} times to {len(messages)} request(s)")
        for frames in messages:
            reply = self.reader._handle([b"peer", *frames])
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


# -- the RocketMQ remoting front's frames ---------------------------------------------------------------


def remoting_seeds() -> list[bytes]:
    from ipc.remoting import JSON_TYPE, ROCKETMQ_TYPE, RemotingCommand, encode_command
    commands = [RemotingCommand(10, 7, 0, "remark", {"topic": "T", "queueId": "0", "flag": "0"}, b"body", "JAVA", 1,
                                kind) for kind in (JSON_TYPE, ROCKETMQ_TYPE)]
    frames = [encode_command(c)[4:] for c in commands]  # without the length word, as the front reads them
    props = b"KEYS\x01k\x02"
    item = struct.pack(">iiiii", 22 + 4 + len(props), 0, 0, 0, 4) + b"abcd" + struct.pack(">h", len(props)) + props
    return [*frames, item * 3]


def check_remoting(frame: bytes) -> None:
    from ipc.remoting import FrameError, decode_batch, decode_command
    for decode in (decode_command, decode_batch):
        with contextlib.suppress(FrameError):
            decode(frame)


# -- the queue index: journal and segment parsers, and recovery from them -----------------------------


def queue_index_seeds() -> list[bytes]:
    pub = PubRecord(bytes(range(16)), 0, 100, None)
    journal = (encode_journal_publish(0, pub) + encode_journal_publish(1, PubRecord(bytes(16), 5, 3, b"abc"))
               + encode_journal_deliver(0) + encode_journal_ack(0) + encode_journal_deliver(1))
    segment = encode_segment_entry(0, pub, 2) + encode_segment_entry(1, pub, 1) + encode_segment_entry(2, pub, 0)
    return [journal, segment, journal + journal[:7]]


class QueueIndexTarget:
    OPEN_EVERY = 4  # recovering a queue index writes and fsyncs files: every 4th input only

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="mqstore-fuzz-qi-"))
        self.parsed = 0

    def check(self, data: bytes) -> None:
        parse_journal(data)
        parse_segment(data, 64)
        self.parsed += 1
        if self.parsed % self.OPEN_EVERY:
            return
        directory = self.root / "q"
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir()
        as_segment = bool(data) and data[0] & 1
        (directory / JOURNAL_FILE_NAME).write_bytes(b"" if as_segment else data)
        if as_segment:
            segment_path(directory, 0).write_bytes(data)
        QueueIndex.open(directory, entries_per_segment=64).close()

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# -- the TOML config loader ----------------------------------------------------------------------------

SAMPLE_TOML = b"""[store.geometry]
commitlog_file_size = 1073741824
[store]
max_body_bytes = 4194304
[flush]
mode = "SYNC_FLUSH"
interval_ms = 500
[broker]
readers = 2
ack_visibility_timeout_ms = 30000
[ipc]
tcp_host = "127.0.0.1"
tcp_base_port = 30000
allow_plain_tcp = true
[supervisor]
flap_restarts = 5
[retention]
file_reserved_hours = 72
delete_when = "04"
disk_warning_ratio = 0.90
"""


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value) if isinstance(value, float) and value == value and abs(value) != float("inf") else str(
        value if not isinstance(value, float) else 0)


def config_strategy() -> st.SearchStrategy[bytes]:
    sections = ["store", "store.geometry", "store.store_host", "flush", "broker", "ipc", "supervisor", "retention",
                "nope"]
    keys = sorted({line.split(b"=")[0].strip().decode() for line in SAMPLE_TOML.splitlines() if b"=" in line}
                  | {"readers", "mode", "run_dir", "keep_unacked", "ip", "port", "prop_crc", "curve_secret_key"})
    scalar = st.one_of(st.integers(-(1 << 70), 1 << 70), st.floats(), st.booleans(), st.text(max_size=20),
                       st.lists(st.integers(), max_size=3))

    def render(tables: dict[str, dict[str, Any]]) -> bytes:
        return "".join(f"[{name}]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in values.items())
                       for name, values in tables.items()).encode()
    structured = st.builds(render, st.dictionaries(st.sampled_from(sections),
                                                   st.dictionaries(st.sampled_from(keys), scalar, max_size=4),
                                                   max_size=4))
    return st.one_of(bytes_like([SAMPLE_TOML]), structured, structured)


class ConfigTarget:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="mqstore-fuzz-config-"))

    def check(self, data: bytes) -> None:
        path = self.root / "broker.toml"
        path.write_bytes(data)
        load_config(self.root / "store", path)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# -- recovery on damaged store files -------------------------------------------------------------------


class RecoveryTarget:
    """A small store with every kind of file; each input damages a copy, which is then verified,
    recovered (opened) and verified again (repaired when verify finds the damage: it must be clean
    after)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="mqstore-fuzz-recovery-"))
        self.base = self.root / "base"
        with MessageStore.open(self.base, StoreConfig(geometry=GEOMETRY)) as s:
            for i in range(60):
                s.put(Message(f"T{i % 3}", os.urandom(i * 7 % 300), tags="A" if i % 2 else "B",
                              keys=(f"k{i}",)), queue_id=i % 2)
            s.commit_offset("G", "T0", 0, 5)
        (self.base / "abort").write_text("")  # the next open recovers abnormally: the deeper path
        self.files = sorted(p.relative_to(self.base) for p in self.base.rglob("*") if p.is_file()
                            and p.name != "lock")
        self.repaired = 0

    def strategy(self) -> st.SearchStrategy[tuple[int, list[tuple[int, int]], int]]:
        return st.tuples(st.integers(0, len(self.files) - 1),
                         st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=6),
                         st.one_of(st.just(-1), st.integers(0, 1 << 16)))

    def check(self, damage: tuple[int, list[tuple[int, int]], int]) -> None:
        which, flips, cut = damage
        work = self.root / "work"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(self.base, work)
        path = work / self.files[which]
        data = bytearray(path.read_bytes())
        for pos, value in flips:
            if data:
                data[pos % len(data)] = value
        if cut >= 0:
            del data[cut % (len(data) + 1):]
        path.write_bytes(bytes(data))
        verify_store(work)
        with MessageStore.open(work):
            pass
        if verify_store(work).ok:
            return
        # derived files carry no checksum (the index's slots and links, as in RocketMQ): verify finds
        # the damage, and repair must clear it
        self.repaired += 1
        report = verify_store(work, repair=True)
        if not report.ok:
            raise Finding(f"verify --repair leaves {report.findings[0].kind} after damaging {self.files[which]}")

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


STORE_ERRORS = (GeometryError, MappedFileError, CheckpointError, MetafileError, IndexFileError, TopicError)


def build(name: str) -> Target:
    if name == "record":
        return Target(name, bytes_like(record_seeds()), check_record, expand=32)
    if name == "wire":
        wire = WireTarget()
        return Target(name, wire_strategy(wire.encoding), wire.check, close=wire.close, expand=4,
                      keeps_no_files=False)
    if name == "remoting":
        return Target(name, bytes_like(remoting_seeds()), check_remoting, expand=16)
    if name == "queue_index":
        qi = QueueIndexTarget()
        return Target(name, bytes_like(queue_index_seeds()), qi.check, (QueueIndexError,), qi.close, expand=4,
                      stats=lambda: {"recovered": qi.parsed // qi.OPEN_EVERY})
    if name == "config":
        cfg = ConfigTarget()
        return Target(name, config_strategy(), cfg.check, (ConfigError,), cfg.close, expand=4)
    if name == "recovery":
        rec = RecoveryTarget()
        return Target(name, rec.strategy(), rec.check, STORE_ERRORS, rec.close,
                      stats=lambda: {"repaired_by_verify": rec.repaired})
    raise ValueError(f"unknown target {name!r}")

