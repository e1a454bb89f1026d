"""Fuzz targets that write their input into files and open them: the queue index's journal and
segment files (parsed, then recovered by ``QueueIndex.open``), the TOML config loader, and a small
store with one file damaged (verified, recovered, verified again)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from mqstore.actors.config import load_config
from mqstore.engine import Message, MessageStore, StoreConfig
from mqstore.engine.ackindex.codec import (
    PubRecord,
    encode_journal_ack,
    encode_journal_deliver,
    encode_journal_publish,
    encode_segment_entry,
    parse_journal,
    parse_segment,
)
from mqstore.engine.ackindex.files import JOURNAL_FILE_NAME, segment_path
from mqstore.engine.ackindex.queue_index import QueueIndex
from mqstore.engine.config import GeometryError
from mqstore.engine.keyindex.index_file import IndexFileError
from mqstore.engine.log.mapped_file import MappedFileError
from mqstore.engine.meta.checkpoint import CheckpointError
from mqstore.engine.meta.metafile import MetafileError
from mqstore.engine.meta.topics import TopicError
from mqstore.engine.repair.verify import verify_store
from mqstore.scripts.survival.fuzz.targets import GEOMETRY, Finding, bytes_like


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
                  | {"readers", "mode", "run_dir", "keep_unacked", "reclaim_consumed", "ip", "port", "prop_crc",
                     "curve_secret_key"})
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
