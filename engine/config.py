"""Store configuration: geometry (saved with the store) and behaviour (chosen per open).

The geometry — file sizes, index shape, whether records carry the whole-record CRC — is written to
``config/storeGeometry.json`` when a store is created. Opening a store with another geometry is an
error; a store without that file (written by Apache RocketMQ) has its geometry read off its files.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from engine.consumequeue.consume_queue import CQ_ENTRY_SIZE, DEFAULT_CQ_ENTRIES_PER_FILE
from engine.log.commitlog import DEFAULT_COMMITLOG_FILE_SIZE
from engine.log.host import LOCAL_HOST, Host
from engine.log.mapped_file_queue import infer_file_size
from engine.log.record import DEFAULT_MAX_BODY_SIZE
from engine.metafile import read_with_backup, write_atomic

GEOMETRY_FILE = "storeGeometry.json"
DEFAULT_INDEX_SLOT_COUNT = 5_000_000
DEFAULT_INDEX_ENTRY_COUNT = 20_000_000
INDEX_HEADER_SIZE = 40
MAX_TOPIC_LENGTH = 127
TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")


class GeometryError(ValueError):
    """The store on disk was built with another geometry than the one asked for."""


@dataclass(frozen=True, slots=True)
class Geometry:
    commitlog_file_size: int = DEFAULT_COMMITLOG_FILE_SIZE
    cq_entries_per_file: int = DEFAULT_CQ_ENTRIES_PER_FILE
    index_slot_count: int = DEFAULT_INDEX_SLOT_COUNT
    index_entry_count: int = DEFAULT_INDEX_ENTRY_COUNT
    prop_crc: bool = True

    def validate(self) -> Geometry:
        if self.commitlog_file_size < 4096:
            raise GeometryError(f"commitlog file size {self.commitlog_file_size} is below one page")
        for name in ("cq_entries_per_file", "index_slot_count", "index_entry_count"):
            if getattr(self, name) < 2:
                raise GeometryError(f"{name} must be at least 2")
        return self

    @property
    def index_file_size(self) -> int:
        return INDEX_HEADER_SIZE + self.index_slot_count * 4 + self.index_entry_count * 20


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Everything a MessageStore needs; frozen, validated once, handed down by section."""

    geometry: Geometry = field(default_factory=Geometry)
    max_body_bytes: int = DEFAULT_MAX_BODY_SIZE
    store_host: Host = LOCAL_HOST
    check_crc_on_recover: bool = True
    index_enabled: bool = True
    max_query_count: int = 64
    max_transfer_count: int = 32
    max_transfer_bytes: int = 256 * 1024
    # the writer's mapping populated this far ahead of its end (engine.log.page_warmer); 0: off; None: the
    # writer's default, 8 MiB under ASYNC_FLUSH and off under SYNC_FLUSH
    prefault_ahead_bytes: int | None = None

    def validate(self) -> StoreConfig:
        self.geometry.validate()
        if not 0 < self.max_body_bytes <= 64 * 1024 * 1024:
            raise ValueError(f"max_body_bytes {self.max_body_bytes} out of range")
        if self.prefault_ahead_bytes is not None and self.prefault_ahead_bytes < 0:
            raise ValueError(f"prefault_ahead_bytes {self.prefault_ahead_bytes} is negative")
        return self


def check_topic(topic: str) -> str | None:
    """RocketMQ's topic rule; returns the reason a topic is refused, or None."""
    if not topic:
        return "topic is empty"
    if len(topic) > MAX_TOPIC_LENGTH:
        return f"topic is longer than {MAX_TOPIC_LENGTH} characters"
    if not TOPIC_PATTERN.match(topic):
        return f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]"
    return None


def resolve_geometry(store_dir: Path, wanted: Geometry | None) -> Geometry:
    """The geometry to open ``store_dir`` with: the saved one, else the one its files show, else
    ``wanted`` (or the defaults) for a new store. A clash with ``wanted`` raises GeometryError."""
    path = store_dir / "config" / GEOMETRY_FILE
    saved = read_with_backup(path, _parse_geometry)
    found = saved if saved is not None else _infer_geometry(store_dir, wanted or Geometry())
    if found is None:
        geometry = (wanted or Geometry()).validate()
        write_atomic(path, json.dumps(asdict(geometry), indent=2).encode())
        return geometry
    if wanted is not None and wanted != found:
        diff = {f.name: (getattr(found, f.name), getattr(wanted, f.name)) for f in fields(Geometry)
                if getattr(found, f.name) != getattr(wanted, f.name)}
        raise GeometryError(f"{store_dir} was created with another geometry (on disk, asked): {diff}")
    return found


def _parse_geometry(data: bytes) -> Geometry:
    raw = json.loads(data)
    return Geometry(**{f.name: raw[f.name] for f in fields(Geometry) if f.name in raw}).validate()


def _infer_geometry(store_dir: Path, base: Geometry) -> Geometry | None:
    """A store written elsewhere: sizes come from its files; it has no whole-record CRC."""
    commitlog_size = infer_file_size(store_dir / "commitlog")
    if commitlog_size is None:
        return None
    geometry = replace(base, commitlog_file_size=commitlog_size, prop_crc=False)
    cq_root = store_dir / "consumequeue"
    for queue_dir in sorted(cq_root.glob("*/*")) if cq_root.is_dir() else ():
        cq_size = infer_file_size(queue_dir)
        if cq_size is not None:
            geometry = replace(geometry, cq_entries_per_file=cq_size // CQ_ENTRY_SIZE)
            break
    index_size = infer_file_size(store_dir / "index")
    if index_size is not None and index_size != geometry.index_file_size:
        # RocketMQ sizes its index with four entries per slot; solve 40 + 4s + 80s = size.
        slots = (index_size - INDEX_HEADER_SIZE) // 84
        geometry = replace(geometry, index_slot_count=slots, index_entry_count=slots * 4)
    return geometry
