"""Store configuration: geometry (saved with the store) and behaviour (chosen per open).

The geometry — file sizes, index shape, whether records carry the whole-record CRC — is written to
``config/storeGeometry.json`` when a store is created. Opening a store with another geometry is an
error; a store without that file (written by Apache RocketMQ) has its geometry read off its files.

Settings read from a document (that file, or the broker's TOML) go through ``check_table``: each
value must have its field's declared type, and an error names the key's dotted path, what it
expects and what it got. ``validate`` errors start with the key they are about (``max_body_bytes
must be ...``), so a caller that knows where a section sits puts its path in front.
"""

from __future__ import annotations

import ipaddress
import json
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from mqstore.engine.consumequeue.consume_queue import DEFAULT_CQ_ENTRIES_PER_FILE
from mqstore.engine.consumequeue.entry import CQ_ENTRY_SIZE
from mqstore.engine.delay.table import DEFAULT_MESSAGE_DELAY_LEVEL, DelayLevelError, DelayLevels, parse_delay_levels
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.commitlog import DEFAULT_COMMITLOG_FILE_SIZE
from mqstore.engine.log.host import LOCAL_HOST, Host
from mqstore.engine.log.mapped_file_queue import infer_file_size
from mqstore.engine.log.record import DEFAULT_MAX_BODY_SIZE
from mqstore.engine.meta.metafile import read_with_backup, write_atomic
from mqstore.engine.timer.log import DEFAULT_TIMER_LOG_FILE_SIZE
from mqstore.engine.timer.wheel import SLOTS_TOTAL

GEOMETRY_FILE = "storeGeometry.json"
DEFAULT_INDEX_SLOT_COUNT = 5_000_000
DEFAULT_INDEX_ENTRY_COUNT = 20_000_000
INDEX_HEADER_SIZE = 40


MAX_BODY_BYTES_LIMIT = 64 * 1024 * 1024
PAGE_SIZE = 4096


class GeometryError(MqstoreError, ValueError):
    """The store on disk was built with another geometry than the one asked for, or a geometry's
    value is out of range."""


class SettingError(MqstoreError, ValueError):
    """A setting read from a document has the wrong type, is missing, or is unknown."""


_TYPE_NAMES: dict[Any, str] = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def shown(value: Any) -> str:
    """A value as TOML and JSON write it, and what it is: ``"8MiB" (a string)``, ``true (a boolean)``."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int):
        return f"{value} (an integer)"
    if isinstance(value, float):
        return f"{value} (a float)"
    if isinstance(value, str):
        return f"{json.dumps(value)} (a string)"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"{value} (a {type(value).__name__})"  # TOML's dates and times


def check_table(values: Any, cls: type, path: str) -> None:
    """Check ``values`` (a parsed TOML table or JSON object) against the dataclass ``cls``: no
    unknown key, every key without a default present, each value of its field's declared type and
    dataclass fields as nested tables. bool is not an int here; an int is a float; TOML and JSON
    have no null, so an ``X | None`` field takes an X (None only from code)."""
    if not isinstance(values, dict):
        raise SettingError(f"[{path}] must be a table, got {shown(values)}")
    declared = {f.name: f for f in fields(cls)}
    unknown = set(values) - set(declared)
    if unknown:
        raise SettingError(f"unknown keys in [{path}]: {sorted(unknown)}")
    hints = typing.get_type_hints(cls)
    for name, f in declared.items():
        key_path = f"{path}.{name}" if path else name
        if name in values:
            _check_value(values[name], hints[name], key_path)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise SettingError(f"{key_path} is missing")


def _check_value(value: Any, hint: Any, path: str) -> None:
    if is_dataclass(hint):
        check_table(value, typing.cast(type, hint), path)
        return
    options = typing.get_args(hint)
    if options:  # X | None
        if value is None:
            return
        (hint,) = [t for t in options if t is not type(None)]
    if hint not in _TYPE_NAMES:
        raise TypeError(f"{path}: settings of type {hint} are not checked")
    if type(value) is not hint and not (hint is float and type(value) is int):
        raise SettingError(f"{path} must be {_TYPE_NAMES[hint]}, got {shown(value)}")


@dataclass(frozen=True, slots=True)
class Geometry:
    commitlog_file_size: int = DEFAULT_COMMITLOG_FILE_SIZE
    cq_entries_per_file: int = DEFAULT_CQ_ENTRIES_PER_FILE
    index_slot_count: int = DEFAULT_INDEX_SLOT_COUNT
    index_entry_count: int = DEFAULT_INDEX_ENTRY_COUNT
    prop_crc: bool = True

    def validate(self) -> Geometry:
        if self.commitlog_file_size < PAGE_SIZE:
            raise GeometryError(f"commitlog_file_size must be at least {PAGE_SIZE} (one page), "
                                f"got {self.commitlog_file_size}")
        for name in ("cq_entries_per_file", "index_slot_count", "index_entry_count"):
            if getattr(self, name) < 2:
                raise GeometryError(f"{name} must be at least 2, got {getattr(self, name)}")
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
    # the writer's mapping populated this far ahead of its end (mqstore.engine.log.page_warmer); 0: off; None: the
    # writer's default, 8 MiB under ASYNC_FLUSH and off under SYNC_FLUSH
    prefault_ahead_bytes: int | None = None
    # RocketMQ's messageDelayLevel: the delay of each level of a message's DELAY property (mqstore.engine.delay.table)
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL
    # RocketMQ 5's timer store (mqstore.engine.timer, the timer actor), under RocketMQ's names: timerWheelEnable,
    # timerPrecisionMs (100, 200, 500 or 1000), timerMaxDelaySec, timerRollWindowSlot (slots; a timer
    # further out is parked and put through the wheel again), mappedFileSizeTimerLog, timerFlushIntervalMs
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 259_200
    timer_roll_window_slot: int = 172_800
    timer_log_file_size: int = DEFAULT_TIMER_LOG_FILE_SIZE
    timer_flush_interval_ms: int = 1000

    @property
    def delay_levels(self) -> DelayLevels:
        return parse_delay_levels(self.message_delay_level)

    def validate(self) -> StoreConfig:
        try:
            self.geometry.validate()
        except GeometryError as exc:
            raise GeometryError(f"geometry.{exc}") from None
        if not 0 < self.max_body_bytes <= MAX_BODY_BYTES_LIMIT:
            raise ValueError(f"max_body_bytes must be between 1 and {MAX_BODY_BYTES_LIMIT}, got {self.max_body_bytes}")
        if self.prefault_ahead_bytes is not None and self.prefault_ahead_bytes < 0:
            raise ValueError(f"prefault_ahead_bytes must not be negative, got {self.prefault_ahead_bytes}")
        self._validate_timer()
        try:
            self.delay_levels  # noqa: B018  # parsed once here: a bad table stops the start, not a send
        except DelayLevelError as exc:
            raise ValueError(str(exc)) from None
        try:
            ipaddress.ip_address(self.store_host.ip)
        except ValueError:
            raise ValueError(f"store_host.ip must be an IP address, got {json.dumps(self.store_host.ip)}") from None
        if not 0 <= self.store_host.port <= 65535:
            raise ValueError(f"store_host.port must be between 0 and 65535, got {self.store_host.port}")
        return self

    def _validate_timer(self) -> None:
        if self.timer_precision_ms not in (100, 200, 500, 1000):
            raise ValueError(f"timer_precision_ms must be 100, 200, 500 or 1000, got {self.timer_precision_ms}")
        if self.timer_max_delay_sec < 1:
            raise ValueError(f"timer_max_delay_sec must be at least 1, got {self.timer_max_delay_sec}")
        if not 2 <= self.timer_roll_window_slot <= SLOTS_TOTAL - 60:
            raise ValueError(f"timer_roll_window_slot must be between 2 and {SLOTS_TOTAL - 60}, "
                             f"got {self.timer_roll_window_slot}")
        if self.timer_log_file_size < PAGE_SIZE:
            raise ValueError(f"timer_log_file_size must be at least {PAGE_SIZE}, got {self.timer_log_file_size}")
        if self.timer_flush_interval_ms < 1:
            raise ValueError(f"timer_flush_interval_ms must be at least 1, got {self.timer_flush_interval_ms}")


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
    if not isinstance(raw, dict):
        raise SettingError(f"{GEOMETRY_FILE} holds {shown(raw)}, not an object")
    known = {f.name: raw[f.name] for f in fields(Geometry) if f.name in raw}
    check_table(known, Geometry, "")
    return Geometry(**known).validate()


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
