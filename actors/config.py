"""Broker configuration: one frozen tree, loaded from TOML once, validated, handed to each actor.

    [store]     geometry of a new store and the engine's limits (engine.StoreConfig)
    [flush]     mode = "ASYNC_FLUSH" | "SYNC_FLUSH", RocketMQ's flush cadences
    [broker]    readers, default queues per topic, long polling, offsets persistence, ack mode
    [ipc]       run_dir, or tcp_host + tcp_base_port to use ZeroMQ over TCP
    [supervisor] restart backoff and flapping limits
    [retention] file_reserved_hours, delete_when, disk watermarks (engine.retention.RetentionPolicy)

Actors receive the tree as a plain dict (``to_dict``) and rebuild it (``from_dict``), so nothing but
plain values crosses into a child process.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from engine import Geometry, Host, StoreConfig
from engine.retention import RetentionPolicy
from ipc.endpoints import Endpoints

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"


class ConfigError(ValueError):
    """The configuration file is unreadable, or names an unknown key, or a value out of range."""


@dataclass(frozen=True, slots=True)
class FlushConfig:
    mode: str = ASYNC_FLUSH
    interval_ms: int = 500              # FlushRealTimeService
    least_pages: int = 4
    thorough_interval_ms: int = 10_000
    sync_timeout_ms: int = 5_000        # GroupCommitService: FLUSH_DISK_TIMEOUT after this
    cq_interval_ms: int = 1_000         # FlushConsumeQueueService
    index_interval_ms: int = 1_000


@dataclass(frozen=True, slots=True)
class BrokerSection:
    readers: int = 1
    default_queues: int = 4
    max_queues: int = 1024
    long_poll_max_ms: int = 30_000
    offset_persist_interval_ms: int = 5_000
    max_batch_messages: int = 4096
    max_request_bytes: int = 64 * 1024 * 1024
    tick_interval_ms: int = 100
    stats_interval_ms: int = 1_000
    clean_interval_ms: int = 10_000     # CleanCommitLogService cadence
    disk_check_interval_ms: int = 1_000  # how soon a full disk stops sends, and a freed one resumes them
    # ack mode (actors.ack_groups): RocketMQ's maxReconsumeTimes, RabbitMQ's journal size
    ack_visibility_timeout_ms: int = 30_000  # an unacked delivery is handed out again after this
    ack_max_deliveries: int = 16             # past this many deliveries a message goes to %DLQ%{group}
    ack_prefetch: int = 64                   # unacked deliveries per consumer and queue
    ack_idle_flush_ms: int = 1_000           # a queue index idle this long moves its journal to segments
    ack_max_journal_entries: int = 32_768    # ... and a journal this long moves at once


@dataclass(frozen=True, slots=True)
class IpcConfig:
    run_dir: str = ""
    tcp_host: str = ""
    tcp_base_port: int = 0


@dataclass(frozen=True, slots=True)
class SupervisorConfig:
    backoff_initial_ms: int = 100
    backoff_max_ms: int = 5_000
    flap_restarts: int = 5              # this many restarts of one actor ...
    flap_window_ms: int = 30_000        # ... within this window: give up, loudly
    stop_timeout_ms: int = 10_000


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    store_dir: str
    store: StoreConfig = field(default_factory=StoreConfig)
    flush: FlushConfig = field(default_factory=FlushConfig)
    broker: BrokerSection = field(default_factory=BrokerSection)
    ipc: IpcConfig = field(default_factory=IpcConfig)
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    geometry_given: bool = False  # whether [store.geometry] was set (else the store's own is used)

    def validate(self) -> BrokerConfig:
        if self.flush.mode not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ConfigError(f"flush.mode must be {ASYNC_FLUSH} or {SYNC_FLUSH}, not {self.flush.mode!r}")
        if not 1 <= self.broker.readers <= 64:
            raise ConfigError("broker.readers must be between 1 and 64")
        if not 1 <= self.broker.default_queues <= self.broker.max_queues:
            raise ConfigError("broker.default_queues must be between 1 and broker.max_queues")
        if min(self.broker.ack_visibility_timeout_ms, self.broker.ack_max_deliveries, self.broker.ack_prefetch,
               self.broker.ack_max_journal_entries) < 1:
            raise ConfigError("broker.ack_visibility_timeout_ms, ack_max_deliveries, ack_prefetch and "
                              "ack_max_journal_entries must be at least 1")
        for section in (self.flush, self.broker, self.supervisor):
            for f in fields(section):
                value = getattr(section, f.name)
                if isinstance(value, int) and value < 0:
                    raise ConfigError(f"{f.name} must not be negative")
        try:
            self.store.validate()
            self.retention.validate()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return self

    @property
    def sync_flush(self) -> bool:
        return self.flush.mode == SYNC_FLUSH

    @property
    def endpoints(self) -> Endpoints:
        return Endpoints.for_store(self.store_dir, self.broker.readers, run_dir=self.ipc.run_dir or None,
                                   tcp_host=self.ipc.tcp_host or None, tcp_base_port=self.ipc.tcp_base_port)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> BrokerConfig:
        store_raw = dict(raw.get("store", {}))
        geometry = Geometry(**store_raw.pop("geometry", {}))
        host = store_raw.pop("store_host", None)
        store = StoreConfig(geometry=geometry, store_host=Host(**host) if isinstance(host, dict) else Host(
            "127.0.0.1", 10911), **store_raw)
        return cls(raw["store_dir"], store, FlushConfig(**raw.get("flush", {})),
                   BrokerSection(**raw.get("broker", {})), IpcConfig(**raw.get("ipc", {})),
                   SupervisorConfig(**raw.get("supervisor", {})), RetentionPolicy(**raw.get("retention", {})),
                   bool(raw.get("geometry_given", False))).validate()


def load_config(store_dir: Path | str, path: Path | str | None = None, **overrides: Any) -> BrokerConfig:
    """Read a TOML file (optional) into a validated BrokerConfig; unknown keys are errors.
    ``overrides`` are ``section={key: value}`` maps applied over the file."""
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from None
    for section, values in overrides.items():
        raw.setdefault(section, {}).update(values)
    known = {"store", "flush", "broker", "ipc", "supervisor", "retention"}
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"unknown config sections: {sorted(unknown)}")
    _check_keys(raw.get("flush", {}), FlushConfig, "flush")
    _check_keys(raw.get("broker", {}), BrokerSection, "broker")
    _check_keys(raw.get("ipc", {}), IpcConfig, "ipc")
    _check_keys(raw.get("supervisor", {}), SupervisorConfig, "supervisor")
    _check_keys(raw.get("retention", {}), RetentionPolicy, "retention")
    store_raw = raw.get("store", {})
    _check_keys({k: v for k, v in store_raw.items() if k not in ("geometry", "store_host")}, StoreConfig, "store")
    _check_keys(store_raw.get("geometry", {}), Geometry, "store.geometry")
    raw["geometry_given"] = "geometry" in store_raw
    raw["store_dir"] = str(Path(store_dir))
    try:
        return BrokerConfig.from_dict(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None


def _check_keys(values: Any, section_type: type, name: str) -> None:
    if not isinstance(values, dict):
        raise ConfigError(f"[{name}] must be a table")
    allowed = {f.name for f in fields(section_type)}
    unknown = set(values) - allowed
    if unknown:
        raise ConfigError(f"unknown keys in [{name}]: {sorted(unknown)}")
    for key, value in values.items():
        default = next(f for f in fields(section_type) if f.name == key).default
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            continue  # 1 for 1.0
        if isinstance(default, (bool, int, str, float)) and type(value) is not type(default):
            raise ConfigError(f"[{name}] {key} must be {type(default).__name__}, got {type(value).__name__}")
