"""The settings of the two listeners outsiders reach: the RocketMQ remoting front and the metrics.

Part of the broker's configuration tree (``mqstore.actors.config``); both listen on loopback unless
told plainly otherwise, since neither authenticates by default (the front does with an ACL file).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any

from mqstore.engine.errors import MqstoreError


class ListenerSettingError(MqstoreError, ValueError):
    """A [remoting] or [metrics] value that cannot work; the message names the key."""


@dataclass(frozen=True, slots=True)
class RemotingConfig:
    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 10911                   # RocketMQ's broker port; the NameServer requests share it
    advertise_host: str = ""            # the address clients dial (routes, STOREHOST); default: host
    acl_file: str = ""                  # RocketMQ's plain_acl.yml: requests signed and checked (actors.remoting.acl)
    allow_non_loopback: bool = False    # without acl_file the wire has no authentication: local unless asked
    broker_name: str = "broker-a"
    cluster_name: str = "DefaultCluster"
    max_frame_bytes: int = 16 * 1024 * 1024   # NettyDecoder's frameMaxLength
    max_connections: int = 1024
    max_inflight_per_connection: int = 1024   # past this, SYSTEM_BUSY
    max_inflight: int = 8192            # in all; past it, a connection holding more than its share gets SYSTEM_BUSY
    max_connections_per_address: int = 256    # past this, a new connection from that address is refused
    idle_timeout_ms: int = 120_000      # serverChannelMaxIdleTimeSeconds: nothing read or in flight this long: closed
    frame_timeout_ms: int = 30_000      # a frame must arrive whole, and a reply leave whole, within this
    max_read_bytes: int = 256 * 1024 * 1024   # half-read frames held at once, in all ...
    max_read_bytes_per_address: int = 64 * 1024 * 1024  # ... and from one address (at least max_frame_bytes)
    max_queue_locks: int = 100_000      # orderly consumers' queue locks held at once
    max_consumer_groups: int = 10_000
    client_expire_ms: int = 120_000     # a client with no heartbeat this long leaves its groups
    max_reconsume_times: int = 16       # a message sent back more often goes to %DLQ%{group}
    # a cluster: the NameServers ("HOST:PORT;HOST:PORT") this broker registers with every
    # register_interval_ms (RocketMQ's namesrvAddr, registerNameServerPeriod); a broker the front
    # registered that is silent for broker_expire_ms leaves its routes
    namesrv: str = ""
    register_interval_ms: int = 30_000
    broker_expire_ms: int = 120_000

    @property
    def address(self) -> tuple[str, int]:
        """Where clients reach the front: the advertised host (else the listening one) and port."""
        host = self.advertise_host or ("127.0.0.1" if self.host in ("0.0.0.0", "") else self.host)
        return host, self.port


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    enabled: bool = False               # ``mqstore start`` turns it on unless told otherwise
    host: str = "127.0.0.1"
    port: int = 9469                    # /metrics (Prometheus text), / (the dashboard), /api/status (JSON)
    allow_non_loopback: bool = False    # the listener has no authentication: local unless asked
    collect_interval_ms: int = 1_000    # how often the metrics actor asks the other actors
    request_timeout_ms: int = 5_000     # a request must arrive whole, and its answer leave, within this
    max_connections: int = 64           # at once; past it the oldest still sending its request is closed
    allowed_hosts: str = ""             # Host names served besides its own address and localhost (comma-separated)
    history_s: int = 600                # the dashboard's throughput chart covers this much

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/"


def validate_remoting(remoting: RemotingConfig) -> None:
    if not 0 < remoting.port < 65536:
        raise ListenerSettingError(f"remoting.port must be between 1 and 65535, got {remoting.port}")
    try:
        loopback = ipaddress.ip_address(remoting.host or "0.0.0.0").is_loopback
        ipaddress.IPv4Address(remoting.address[0])
    except ValueError:
        raise ListenerSettingError("[remoting] host and advertise_host must be IPv4 addresses (RocketMQ's V1 "
                                   "records, which C++ clients decode, hold IPv4 hosts only)") from None
    if remoting.enabled and not loopback and not remoting.acl_file and not remoting.allow_non_loopback:
        raise ListenerSettingError(f"[remoting] host {remoting.host!r} is not a loopback address and the remoting "
                                   "wire has no authentication: set acl_file (RocketMQ's plain_acl.yml), or "
                                   "allow_non_loopback = true to serve it unauthenticated anyway")
    _at_least(1, "remoting", remoting, "max_frame_bytes", "max_connections", "max_inflight_per_connection",
              "max_consumer_groups", "client_expire_ms", "max_inflight", "max_connections_per_address",
              "idle_timeout_ms", "frame_timeout_ms", "max_queue_locks", "register_interval_ms", "broker_expire_ms")
    for part in filter(None, (p.strip() for p in remoting.namesrv.split(";"))):
        host, sep, port = part.rpartition(":")
        if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
            raise ListenerSettingError(f'remoting.namesrv must be "HOST:PORT;HOST:PORT", got {part!r} in it')
    if not remoting.max_frame_bytes <= remoting.max_read_bytes_per_address <= remoting.max_read_bytes:
        raise ListenerSettingError("remoting: max_frame_bytes <= max_read_bytes_per_address <= max_read_bytes "
                                   f"must hold, got {remoting.max_frame_bytes}, "
                                   f"{remoting.max_read_bytes_per_address}, {remoting.max_read_bytes}")


def validate_metrics(metrics: MetricsConfig) -> None:
    if not 0 < metrics.port < 65536:
        raise ListenerSettingError(f"metrics.port must be between 1 and 65535, got {metrics.port}")
    try:
        loopback = ipaddress.ip_address(metrics.host or "0.0.0.0").is_loopback
    except ValueError:
        raise ListenerSettingError(f"metrics.host must be an IP address, got {json.dumps(metrics.host)}") from None
    if metrics.enabled and not loopback and not metrics.allow_non_loopback:
        raise ListenerSettingError(f"[metrics] host {metrics.host!r} is not a loopback address and the listener "
                                   "has no authentication: set allow_non_loopback = true to serve it anyway")
    _at_least(1, "metrics", metrics, "collect_interval_ms", "history_s", "request_timeout_ms", "max_connections")


def _at_least(minimum: int, name: str, section: Any, *keys: str) -> None:
    for key in keys:
        value = getattr(section, key)
        if value < minimum:
            raise ListenerSettingError(f"{name}.{key} must be at least {minimum}, got {value}")
