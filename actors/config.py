"""Broker configuration: one frozen tree, loaded from TOML once, validated, handed to each actor.

    [store]     geometry of a new store and the engine's limits (engine.StoreConfig)
    [flush]     mode = "ASYNC_FLUSH" | "SYNC_FLUSH", RocketMQ's flush cadences
    [broker]    readers, default queues per topic, long polling, offsets persistence, ack mode
    [ipc]       run_dir, or tcp_host + tcp_base_port to use ZeroMQ over TCP, with CURVE keys
                (curve_secret_key, curve_clients_dir; plain TCP only with allow_plain_tcp = true)
    [supervisor] restart backoff and flapping limits
    [retention] file_reserved_hours, delete_when, disk watermarks, keep_unacked, reclaim_consumed,
                move_stragglers_below
                (mqstore.engine.reclaim.retention.RetentionPolicy)
    [remoting]  the RocketMQ remoting front (NameServer + broker on one TCP port) for stock clients
    [metrics]   Prometheus metrics and the dashboard on one HTTP listener (mqstore.actors.metrics)
    [ha]        replication: the HA port, a slave's master, SYNC_MASTER's copies (mqstore.actors.config_ha)

Actors receive the tree as a plain dict (``to_dict``) and rebuild it (``from_dict``), so nothing but
plain values crosses into a child process.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from mqstore.actors.config_ha import ASYNC_MASTER, MASTER_ID, SLAVE, HaConfig, HaSettingError, listen_host, validate_ha
from mqstore.actors.config_listeners import (
    ListenerSettingError,
    MetricsConfig,
    RemotingConfig,
    validate_metrics,
    validate_remoting,
)
from mqstore.engine import Geometry, Host, StoreConfig
from mqstore.engine.config import SettingError, check_table, shown
from mqstore.engine.errors import MqstoreError
from mqstore.engine.reclaim.retention import RetentionPolicy
from mqstore.ipc.transport.curve import CurveError, CurveKeys, read_authorized
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.transport.roles import KeyRoles, RolesError
from mqstore.ipc.wire.requests.base import MAX_FETCH_BYTES, MAX_FETCH_COUNT  # a pull's most, by the wire

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"


class ConfigError(MqstoreError, ValueError):
    """The configuration file is unreadable, or names an unknown key, or a value of another type or out of range."""


@dataclass(frozen=True, slots=True)
class FlushConfig:
    mode: str = ASYNC_FLUSH
    interval_ms: int = 500              # FlushRealTimeService
    least_pages: int = 4
    thorough_interval_ms: int = 10_000
    sync_timeout_ms: int = 5_000        # GroupCommitService: FLUSH_DISK_TIMEOUT after this
    cq_interval_ms: int = 1_000         # FlushConsumeQueueService
    index_interval_ms: int = 1_000
    spare_file: bool = True             # prepare the next commitlog file ahead (AllocateMappedFileService)


@dataclass(frozen=True, slots=True)
class BrokerSection:
    readers: int = 1
    default_queues: int = 4
    max_queues: int = 1024
    max_topics: int = 4096              # topics made on demand (or by create_topic) up to this many, no more
    auto_create_topics: bool = True     # a send to an unknown topic makes it (off: refused, create it first)
    long_poll_max_ms: int = 30_000
    # an ipc consumer's pull, sized by bytes (Kafka's fetch.max.bytes); the remoting front's pulls keep
    # RocketMQ's caps, [store] max_transfer_count / max_transfer_bytes
    fetch_max_bytes: int = 8 * 1024 * 1024
    fetch_max_count: int = 65_536      # a safety bound: small records reach the bytes long before this
    offset_persist_interval_ms: int = 5_000
    max_batch_messages: int = 4096
    max_request_bytes: int = 64 * 1024 * 1024
    ingress_hwm: int = 10_000           # requests ZeroMQ queues per producer connection (then it stops reading
                                        # it): with max_request_bytes what one connection makes the writer hold
    reader_hwm: int = 1_000             # requests, and replies a client does not read, queued per connection
                                        # of a reader: past it replies are dropped (the client times out)
    tick_interval_ms: int = 100
    index_round_ms: int = 5             # while frames come faster, the index builder's rounds begin this long
                                        # apart, each taking what queued (fewer, larger rounds); 0: none waited for.
                                        # The consume-queue builder waits for none: a consumer waits on it
    stats_interval_ms: int = 1_000
    clean_interval_ms: int = 10_000     # CleanCommitLogService cadence
    # store files (descriptors and mappings) each process keeps open between sweeps, beyond those its
    # round uses (mqstore.engine.log.open_files); 0: no bound. A file unused for a sweep period, or
    # deleted, is let go at the next sweep
    open_files_max: int = 256
    open_files_sweep_ms: int = 2_000
    disk_check_interval_ms: int = 1_000  # how soon a full disk stops sends, and a freed one resumes them
    # ack mode (mqstore.actors.reader.ack_groups): RocketMQ's maxReconsumeTimes, RabbitMQ's journal size
    ack_visibility_timeout_ms: int = 30_000  # an unacked delivery is handed out again after this
    ack_max_deliveries: int = 16             # past this many deliveries a message goes to %DLQ%{group}
    # a failed delivery (nack with requeue, visibility timeout) comes back after the delay of level
    # this + deliveries - 1 of [store] message_delay_level (RocketMQ's retries: 3 + reconsume times); 0: at once
    ack_retry_first_level: int = 3
    ack_prefetch: int = 64                   # unacked deliveries per consumer and queue
    ack_idle_flush_ms: int = 1_000           # a queue index idle this long moves its journal to segments
    ack_max_journal_entries: int = 32_768    # ... and a journal this long moves at once
    ack_max_queues: int = 256                # (group, topic, queue) indexes one reader opens for clients
    # transactional messages (mqstore.actors.transactions): RocketMQ's transactionTimeOut, transactionCheckMax,
    # transactionCheckInterval
    transaction_timeout_ms: int = 6_000        # a half message unresolved this long is checked
    transaction_check_max: int = 15            # checks before it goes to TRANS_CHECK_MAX_TIME_TOPIC
    transaction_check_interval_ms: int = 30_000
    # replication (mqstore.actors.config_ha): RocketMQ's brokerRole and brokerId
    role: str = ASYNC_MASTER
    broker_id: int = MASTER_ID


@dataclass(frozen=True, slots=True)
class IpcConfig:
    run_dir: str = ""
    tcp_host: str = ""
    tcp_base_port: int = 0
    curve_secret_key: str = ""          # the broker's keypair (mqstore keys: server.key_secret)
    curve_clients_dir: str = ""         # public keys of the clients let in (mqstore keys: clients/)
    allow_plain_tcp: bool = False       # TCP without CURVE: anyone who reaches the port is a client


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
    remoting: RemotingConfig = field(default_factory=RemotingConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    ha: HaConfig = field(default_factory=HaConfig)
    geometry_given: bool = False  # whether [store.geometry] was set (else the store's own is used)

    def validate(self) -> BrokerConfig:
        """Ranges and combinations; every error names the key's path (``broker.readers``)."""
        if self.flush.mode not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ConfigError(f'flush.mode must be "{ASYNC_FLUSH}" or "{SYNC_FLUSH}", '
                              f"got {json.dumps(self.flush.mode)}")
        if not 1 <= self.broker.readers <= 64:
            raise ConfigError(f"broker.readers must be between 1 and 64, got {self.broker.readers}")
        if not 1 <= self.broker.default_queues <= self.broker.max_queues:
            raise ConfigError("broker.default_queues must be between 1 and broker.max_queues "
                              f"({self.broker.max_queues}), got {self.broker.default_queues}")
        for name, most in (("fetch_max_bytes", MAX_FETCH_BYTES), ("fetch_max_count", MAX_FETCH_COUNT)):
            if not 1 <= getattr(self.broker, name) <= most:
                raise ConfigError(f"broker.{name} must be between 1 and {most}, got {getattr(self.broker, name)}")
        _at_least(1, "broker", self.broker, "ack_visibility_timeout_ms", "ack_max_deliveries", "ack_prefetch",
                  "ack_max_journal_entries", "ack_max_queues", "transaction_check_interval_ms")
        # the engine's sections (store, retention) check their own
        for name in ("flush", "broker", "ipc", "supervisor", "remoting", "metrics", "ha"):
            section = getattr(self, name)
            _at_least(0, name, section, *(f.name for f in fields(section) if type(getattr(section, f.name)) is int))
        try:
            validate_remoting(self.remoting)  # before [store]: its store_host may come from the front's address
        except ListenerSettingError as exc:
            raise ConfigError(str(exc)) from None
        for name, validate in (("store", self.store.validate), ("retention", self.retention.validate)):
            try:
                validate()
            except ValueError as exc:  # the engine's messages start with the key
                raise ConfigError(f"{name}.{exc}") from None
        self._validate_tcp()
        try:
            validate_metrics(self.metrics)
            validate_ha(self.broker.role, self.broker.broker_id, self.ha, self.remoting.host)
        except (ListenerSettingError, HaSettingError) as exc:
            raise ConfigError(str(exc)) from None
        return self

    def _validate_tcp(self) -> None:
        ipc = self.ipc
        if bool(ipc.curve_secret_key) != bool(ipc.curve_clients_dir):
            raise ConfigError("[ipc] curve_secret_key and curve_clients_dir go together")
        if ipc.tcp_host and not ipc.curve_secret_key and not ipc.allow_plain_tcp:
            raise ConfigError("[ipc] tcp_host without CURVE keys is refused: set curve_secret_key and "
                              "curve_clients_dir (from 'mqstore keys --out DIR'), or allow_plain_tcp = true")
        if ipc.curve_secret_key:
            self.curve_allowed()  # unreadable or open-to-all key files fail here, not in an actor
            self.key_roles()  # and a roles file that does not parse

    def curve_allowed(self) -> frozenset[bytes]:
        """The public keys let in: the clients', and the broker's own (actors connect to each other)."""
        try:
            return read_authorized(self.ipc.curve_clients_dir) | {self._curve_keys().public}
        except CurveError as exc:
            raise ConfigError(f"[ipc] {exc}") from None

    def key_roles(self) -> KeyRoles | None:
        """What each CURVE client key may do (``roles.toml`` beside the clients' keys); None where the
        sockets are no CURVE ones: over ``ipc://`` (the private run directory) no roles apply."""
        if not (self.ipc.tcp_host and self.ipc.curve_secret_key):
            return None
        try:
            return KeyRoles(self.ipc.curve_clients_dir, self._curve_keys().public)
        except RolesError as exc:
            raise ConfigError(f"[ipc] {exc}") from None

    def _curve_keys(self) -> CurveKeys:
        return CurveKeys.for_server(self.ipc.curve_secret_key)

    @property
    def sync_flush(self) -> bool:
        return self.flush.mode == SYNC_FLUSH

    @property
    def is_slave(self) -> bool:
        return self.broker.role == SLAVE

    @property
    def ha_address(self) -> tuple[str, int]:
        """Where the HA port listens (``mqstore.actors.config_ha.listen_host``) and its port (else remoting + 1)."""
        return listen_host(self.ha, self.remoting.host), (self.ha.listen_port or self.remoting.port + 1)

    @property
    def endpoints(self) -> Endpoints:
        curve = self._curve_keys() if self.ipc.tcp_host and self.ipc.curve_secret_key else None
        return Endpoints.for_store(self.store_dir, self.broker.readers, run_dir=self.ipc.run_dir or None,
                                   tcp_host=self.ipc.tcp_host or None, tcp_base_port=self.ipc.tcp_base_port,
                                   curve=curve)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> BrokerConfig:
        store_raw = dict(raw.get("store", {}))
        geometry = Geometry(**store_raw.pop("geometry", {}))
        host = store_raw.pop("store_host", None)
        remoting = RemotingConfig(**raw.get("remoting", {}))
        if not isinstance(host, dict) and remoting.enabled:
            # STOREHOST is where a client sends a message back: the front, unless configured otherwise
            host = {"ip": remoting.address[0], "port": remoting.address[1]}
        store = StoreConfig(geometry=geometry, store_host=Host(**host) if isinstance(host, dict) else Host(
            "127.0.0.1", 10911), **store_raw)
        return cls(raw["store_dir"], store, FlushConfig(**raw.get("flush", {})),
                   BrokerSection(**raw.get("broker", {})), IpcConfig(**raw.get("ipc", {})),
                   SupervisorConfig(**raw.get("supervisor", {})), RetentionPolicy(**raw.get("retention", {})),
                   remoting, MetricsConfig(**raw.get("metrics", {})), HaConfig(**raw.get("ha", {})),
                   bool(raw.get("geometry_given", False))).validate()


SECTIONS: dict[str, type] = {
    "store": StoreConfig, "flush": FlushConfig, "broker": BrokerSection, "ipc": IpcConfig,
    "supervisor": SupervisorConfig, "retention": RetentionPolicy, "remoting": RemotingConfig,
    "metrics": MetricsConfig, "ha": HaConfig,
}


LOG_LEVEL_VARIABLE = "MQSTORE_LOG_LEVEL"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(environ: Mapping[str, str] = os.environ) -> str:
    """The log level ``MQSTORE_LOG_LEVEL`` asks for (any case; INFO when unset). Checked with the
    configuration, so a wrong value stops ``mqstore start`` with a clear error rather than a traceback
    in every actor's logging set-up."""
    given = environ.get(LOG_LEVEL_VARIABLE, "").strip()
    level = given.upper() or "INFO"
    if level not in LOG_LEVELS:
        raise ConfigError(f"{LOG_LEVEL_VARIABLE} must be one of {', '.join(LOG_LEVELS)}, got {given!r}")
    return level


def load_config(store_dir: Path | str, path: Path | str | None = None, **overrides: Any) -> BrokerConfig:
    """Read a TOML file (optional) into a validated BrokerConfig; unknown keys and values of another
    type than their field's are errors. ``overrides`` are ``section={key: value}`` maps applied over
    the file."""
    log_level()
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from None
    for section, values in overrides.items():
        table = raw.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"[{section}] must be a table, got {shown(table)}")
        table.update(values)
    unknown = set(raw) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"unknown config sections: {sorted(unknown)}")
    for name, section_type in SECTIONS.items():
        try:
            check_table(raw.get(name, {}), section_type, name)
        except SettingError as exc:
            raise ConfigError(str(exc)) from None
    raw["geometry_given"] = "geometry" in raw.get("store", {})
    if path is not None:  # key paths are relative to the file that names them
        for key in ("curve_secret_key", "curve_clients_dir"):
            value = raw.get("ipc", {}).get(key)
            if isinstance(value, str) and value:
                raw["ipc"][key] = str(Path(path).parent / Path(value).expanduser())
        acl_file = raw.get("remoting", {}).get("acl_file")
        if isinstance(acl_file, str) and acl_file:
            raw["remoting"]["acl_file"] = str(Path(path).parent / Path(acl_file).expanduser())
    raw["store_dir"] = str(Path(store_dir))
    try:
        config = BrokerConfig.from_dict(raw)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    if config.remoting.enabled and config.remoting.acl_file:
        # read once here, so a broken file stops the start; the front rereads it as it changes
        from mqstore.actors.remoting.acl_file import AclFileError, read_acl
        try:
            read_acl(config.remoting.acl_file)
        except AclFileError as exc:
            raise ConfigError(f"[remoting] {exc}") from None
    return config


def _at_least(minimum: int, name: str, section: Any, *keys: str) -> None:
    for key in keys:
        value = getattr(section, key)
        if value < minimum:
            raise ConfigError(f"{name}.{key} must " + ("not be negative" if minimum == 0 else f"be at least {minimum}")
                              + f", got {value}")
