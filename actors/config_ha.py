"""Replication's settings: a broker's role and the ``[ha]`` section (RocketMQ's names and defaults).

    [broker] role = "ASYNC_MASTER" | "SYNC_MASTER" | "SLAVE", broker_id (0 a master, 1.. its slaves)
    [ha]     the HA port (the remoting port + 1 unless set), where a slave finds its master, how many
             copies a SYNC_MASTER send needs, and who may connect to the port

A master's HA port serves every byte of its commitlog to whoever completes the handshake. So it
listens on loopback unless told who may connect (``allowed_slaves``, addresses or networks) or
given a shared ``secret`` that a slave must prove it holds before anything is sent (mqstore's
addition to RocketMQ's wire, which authenticates nothing).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from mqstore.engine.errors import MqstoreError

ASYNC_MASTER = "ASYNC_MASTER"
SYNC_MASTER = "SYNC_MASTER"
SLAVE = "SLAVE"
ROLES = (ASYNC_MASTER, SYNC_MASTER, SLAVE)
MASTER_ID = 0  # RocketMQ's MixAll.MASTER_ID
MIN_SECRET_CHARS = 16


@dataclass(frozen=True, slots=True)
class HaConfig:
    serve: bool = False                 # a master opens its HA port (a SYNC_MASTER always does); off, an
                                        # ASYNC_MASTER runs as a lone broker, with no port and no HA actor
    listen_port: int = 0                # 0: the remoting port + 1 (RocketMQ's haListenPort)
    host: str = ""                      # where the port listens; "": [remoting] host when guarded, else loopback
    master_address: str = ""            # a slave's master, HOST:PORT of its HA port (haMasterAddress)
    in_sync_replicas: int = 2           # SYNC_MASTER: copies, the master's included, before SEND_OK
                                        # (1, RocketMQ's default, waits for no slave)
    slave_timeout_ms: int = 3_000       # SYNC_MASTER: FLUSH_SLAVE_TIMEOUT after this
    max_gap_not_in_sync: int = 256 * 1024 * 1024  # a slave further behind than this is not in sync
    transfer_batch_bytes: int = 32 * 1024          # haTransferBatchSize: the most bytes one transfer carries
    heartbeat_interval_ms: int = 5_000  # haSendHeartbeatInterval
    housekeeping_interval_ms: int = 20_000  # haHousekeepingInterval: nothing read this long closes a connection
    secret: str = ""                    # a slave proves it holds this before any byte of the log is sent
    allowed_slaves: str = ""            # addresses or networks (comma-separated) that may connect
    allow_non_loopback: bool = False    # listen off loopback with neither of the above (anyone may read the log)
    max_connections: int = 32           # connections the HA port holds at once, slaves and peers still in their
                                        # hello or handshake; past it a new one is closed at once
    metadata_sync_interval_ms: int = 3_000  # a slave fetches topics, offsets and progress from its master this often
    master_remoting: str = ""           # a slave's master's remoting front, HOST:PORT; "": master_address's host
                                        # and its HA port - 1 (RocketMQ's haListenPort = listenPort + 1)
    access_key: str = ""                # the keys a slave signs its metadata requests with when its master's
    secret_key: str = ""                # front has an ACL (RocketMQ's innerClientAuthenticationCredentials)


class HaSettingError(MqstoreError, ValueError):
    """A role or an [ha] value that cannot work; the message names the key."""


def split_host_port(text: str, key: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise HaSettingError(f"{key} must be HOST:PORT, got {text!r}")
    return host, int(port)


def allowed_networks(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """``[ha] allowed_slaves`` as networks (an address is a network of one)."""
    networks = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise HaSettingError(f"ha.allowed_slaves: {item!r} is not an address or a network") from None
    return tuple(networks)


def listen_host(ha: HaConfig, remoting_host: str) -> str:
    """Where the HA port listens: ``[ha] host``; unset, the front's host once the port is guarded
    (``allowed_slaves`` or ``secret``), loopback until then."""
    if ha.host:
        return ha.host
    return (remoting_host or "0.0.0.0") if (ha.allowed_slaves or ha.secret) else "127.0.0.1"


def master_remoting(ha: HaConfig) -> tuple[str, int]:
    """Where a slave reaches its master's remoting front: ``[ha] master_remoting``, else the host of
    ``master_address`` and its HA port - 1 (RocketMQ's brokers listen for HA on the remoting port + 1)."""
    if ha.master_remoting:
        return split_host_port(ha.master_remoting, "ha.master_remoting")
    host, ha_port = split_host_port(ha.master_address, "ha.master_address")
    if ha_port < 2:
        raise HaSettingError(f"ha.master_address {ha.master_address!r} gives no remoting port (HA port - 1): "
                             "set ha.master_remoting")
    return host, ha_port - 1


def serves_slaves(role: str, ha: HaConfig) -> bool:
    """Whether a broker of this role runs a master's HA actor and port."""
    return role == SYNC_MASTER or (role == ASYNC_MASTER and ha.serve)


def validate_ha(role: str, broker_id: int, ha: HaConfig, remoting_host: str) -> None:
    """What RocketMQ's BrokerStartup refuses, and the HA port's exposure (loopback unless guarded)."""
    if role not in ROLES:
        raise HaSettingError(f"broker.role must be one of {', '.join(ROLES)}, got {role!r}")
    if role == SLAVE:
        if broker_id <= MASTER_ID:
            raise HaSettingError("broker.broker_id must be at least 1 for a SLAVE (0 is the master's)")
        if not ha.master_address:
            raise HaSettingError("a SLAVE needs ha.master_address (HOST:PORT of its master's HA port)")
    elif broker_id != MASTER_ID:
        raise HaSettingError(f"broker.broker_id must be 0 for a {role} (1.. are its slaves), got {broker_id}")
    if ha.master_address:
        split_host_port(ha.master_address, "ha.master_address")
    if ha.master_remoting:
        split_host_port(ha.master_remoting, "ha.master_remoting")
    if bool(ha.access_key) != bool(ha.secret_key):
        raise HaSettingError("ha.access_key and ha.secret_key go together: set both or neither")
    if not 0 <= ha.listen_port < 65536:
        raise HaSettingError(f"ha.listen_port must be between 0 and 65535, got {ha.listen_port}")
    if not 1 <= ha.in_sync_replicas <= 16:
        raise HaSettingError(f"ha.in_sync_replicas must be between 1 and 16, got {ha.in_sync_replicas}")
    for key in ("max_connections", "slave_timeout_ms", "transfer_batch_bytes", "heartbeat_interval_ms",
                "housekeeping_interval_ms", "metadata_sync_interval_ms", "max_gap_not_in_sync"):
        if getattr(ha, key) < 1:
            raise HaSettingError(f"ha.{key} must be at least 1, got {getattr(ha, key)}")
    if ha.transfer_batch_bytes > 4 * 1024 * 1024:
        raise HaSettingError("ha.transfer_batch_bytes must be at most 4 MiB (a slave's read buffer)")
    if ha.secret and len(ha.secret) < MIN_SECRET_CHARS:
        raise HaSettingError(f"ha.secret must be at least {MIN_SECRET_CHARS} characters")
    networks = allowed_networks(ha.allowed_slaves)
    host = listen_host(ha, remoting_host)
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise HaSettingError(f"ha.host must be an IP address, got {host!r}") from None
    if serves_slaves(role, ha) and not loopback and not (networks or ha.secret or ha.allow_non_loopback):
        raise HaSettingError(f"[ha] host {host!r} is not a loopback address and the HA port serves the whole "
                             "commitlog to whoever connects: set allowed_slaves, or secret (a slave must prove "
                             "it), or allow_non_loopback = true to serve it to anyone anyway")
