"""A slave's start, before recovery: one short handshake with its master, and the cut its epochs call for.

The supervisor asks the master for its end and epochs (the hello first with ``[ha] secret``), and
decides as the HA actor does (``mqstore.actors.ha.slave.follow``). A log that diverged is cut here,
while no actor runs: the commitlog at the consistent point (``truncate_replica``), then the epoch
file, and the abort marker is made so recovery runs as after an abnormal stop and cuts the consume
queues and the index past the new end. A master that cannot be reached changes nothing: the broker
starts, and its HA actor keeps trying.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

from mqstore.actors.config import BrokerConfig
from mqstore.actors.config_ha import split_host_port
from mqstore.actors.ha.log_end import recover_end
from mqstore.actors.ha.slave import Follow, follow
from mqstore.actors.ha_status import DIVERGED
from mqstore.engine.ha.epochs import EpochFile
from mqstore.engine.ha.replica import truncate_replica
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.meta.metafile import abort_exists, create_abort
from mqstore.ipc.wire import ha as wire
from mqstore.ipc.wire import ha_hello as hello

log = logging.getLogger("mqstore")
HANDSHAKE_TIMEOUT_S = 3.0


def ask_master(config: BrokerConfig, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> wire.MasterHandshake:
    """The master's handshake; OSError or HaWireError when there is none within ``timeout_s``."""
    ha = config.ha
    broker_id = config.broker.broker_id
    with socket.create_connection(split_host_port(ha.master_address, "ha.master_address"), timeout_s) as sock:
        sock.settimeout(timeout_s)
        if ha.secret:
            secret = ha.secret.encode()
            master_nonce = hello.decode_challenge(_read(sock, hello.CHALLENGE_SIZE))
            slave_nonce = hello.new_nonce()
            sock.sendall(hello.encode_answer(secret, master_nonce, slave_nonce, broker_id))
            hello.check_proof(secret, master_nonce, slave_nonce, broker_id, _read(sock, hello.PROOF_SIZE))
        sock.sendall(wire.SlaveHandshake(broker_id).encode())
        stream = wire.MasterStream()
        while True:
            for frame in stream.feed(_read(sock, 1 << 16, exact=False)):
                if isinstance(frame, wire.MasterHandshake):
                    return frame
                raise wire.HaWireError("a transfer before the handshake")


def _read(sock: socket.socket, size: int, *, exact: bool = True) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the master closed the connection during the handshake")
        data += chunk
        if not exact:
            break
    return bytes(data)


def rejoin(config: BrokerConfig) -> Follow | None:
    """Before recovery: cut a diverged log to the point it agrees with its master's. Returns the
    decision, or None when the master could not be asked (the broker starts anyway)."""
    store_dir = Path(config.store_dir)
    try:
        master = ask_master(config)
    except (OSError, wire.HaWireError) as exc:
        log.warning("the master %s cannot be asked before start (%s): starting anyway", config.ha.master_address, exc)
        return None
    geometry = config.store.geometry
    commitlog = CommitLog.open(store_dir / "commitlog", geometry.commitlog_file_size)
    try:
        epochs = EpochFile.load(store_dir)
        _, end = recover_end(store_dir, commitlog, geometry.cq_entries_per_file, cut=False)
        decision = follow(epochs.entries, end, master)
        if decision.state == DIVERGED and decision.cut is not None:
            log.warning("this log diverged from the master %s's: cutting it from %d to %d (%s)",
                        config.ha.master_address, end, decision.cut, decision.reason)
            truncate_replica(commitlog, decision.cut)  # the log first, then the epochs that named its tail
            epochs.truncate_from(decision.cut)
            if not abort_exists(store_dir):
                create_abort(store_dir, 0)  # recovery cuts the derived files as after a crash
        elif decision.state != "transfer":
            log.warning("not following the master %s yet: %s", config.ha.master_address, decision.reason)
    finally:
        commitlog.close()
    return decision
