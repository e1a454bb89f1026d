"""The slave's side of the HA actor: one connection to its master, the only writer of its commitlog.

States (``state``, as the status shows them):

    connecting      dialling the master (again every ``RETRY_MS`` after a failure, logged once per outage)
    hello           proving the secret, and checking the master's proof (``[ha] secret``)
    handshake       its broker id sent; waiting for the master's end and epochs
    transfer        appending what the master sends, reporting its end
    diverged        its log and the master's epochs disagree past ``consistent_point``: nothing is
                    truncated while the broker runs (the next start does it); retried later
    master_behind   the master's log ends before this one's in the same epoch: acknowledged bytes are
                    never cut to follow it; retried later

The decision after the master's handshake is ``follow`` (a pure function): where to resume, or why not.
Each transfer must start where the log ends; a new epoch goes into the epoch file before its first
byte does. The builders reput what is appended (``tick`` up to the last complete record) and the flush
service flushes it (``written``), as on a master.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from mqstore.actors.config_ha import HaConfig, split_host_port
from mqstore.actors.ha.peer import Peer
from mqstore.actors.ha_status import CONNECTING, DIVERGED, HANDSHAKE, HELLO, MASTER_BEHIND, TRANSFER
from mqstore.engine.ha.epochs import EpochEntry, EpochFile, consistent_point
from mqstore.engine.ha.replica import append_replica
from mqstore.engine.log.commitlog import CommitLog
from mqstore.ipc.wire import ha as wire
from mqstore.ipc.wire import ha_hello as hello

log = logging.getLogger("mqstore")
RETRY_MS = 3_000


@dataclass(frozen=True, slots=True)
class Follow:
    """What the master's handshake means for this log: resume at ``resume`` (state ``transfer``), or
    ``state`` diverged / master_behind with ``reason``, and where the log would be cut (``cut``)."""

    state: str
    resume: int
    cut: int | None = None
    reason: str = ""


def follow(local: Sequence[EpochEntry], local_end: int, master: wire.MasterHandshake) -> Follow:
    if local_end == 0 and not local:
        return Follow(TRANSFER, 0)
    if not local:
        return Follow(DIVERGED, local_end, None, f"this log ends at {local_end} and has no epoch file: nothing "
                      "tells whether it agrees with the master's (move the store away to start afresh)")
    if local[-1].epoch > master.last_epoch:  # never cut what a newer master wrote to follow an older one
        return Follow(DIVERGED, local_end, None, f"this log's epoch {local[-1].epoch} is newer than the master's "
                      f"{master.last_epoch}: it was a master after that one; it follows no older master")
    point = consistent_point(local, local_end, master.entries, master.max_offset)
    if point is None:
        return Follow(DIVERGED, local_end, None, "no epoch of this log is one of the master's, with the same start")
    if point >= local_end:
        return Follow(TRANSFER, local_end)
    if local[-1].epoch == master.last_epoch and point == master.max_offset:
        return Follow(MASTER_BEHIND, local_end, point, f"the master's log ends at {master.max_offset}, before this "
                      f"one's {local_end}, in the same epoch {master.last_epoch}: waiting for it to catch up")
    return Follow(DIVERGED, local_end, point, f"this log agrees with the master's up to {point} only (it ends at "
                  f"{local_end}); the next start cuts it there")


class SlaveSide:
    def __init__(self, ha: HaConfig, broker_id: int, commitlog: CommitLog, epochs: EpochFile, end: int) -> None:
        self.ha = ha
        self.broker_id = broker_id
        self.master = ha.master_address
        self.commitlog = commitlog
        self.epochs = epochs
        self.end = end                 # the log's end: every byte below it is the master's
        self.state = CONNECTING
        self.reason = ""
        self.peer: Peer | None = None
        self.stream = wire.MasterStream()
        self.secret = ha.secret.encode()
        self.nonces = (b"", b"")       # the hello's master and slave nonces
        self.retry_at_ms = 0
        self.reported = -1             # the last end reported
        self.last_report_ms = 0
        self.connected_ms = 0
        self.master_end = 0            # the master's end as last learned: its handshake, its transfers
        self.confirm = 0               # the master's confirm offset, from its last transfer
        self.logged = ""               # the last failure logged: one line per outage, not per try
        self.connects = 0
        self.appended_bytes = 0

    # -- connection --------------------------------------------------------------------------------

    def connect(self, now_ms: int) -> None:
        if self.peer is not None or now_ms < self.retry_at_ms:
            return
        host, port = split_host_port(self.master, "ha.master_address")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex((host, port))
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            self.fail(now_ms, f"cannot connect to the master {self.master}: {errno.errorcode.get(code, code)}")
            return
        self.peer = Peer(sock, self.master, now_ms)
        self.stream = wire.MasterStream()
        self.state = CONNECTING
        self.connected_ms = now_ms
        self.connects += 1

    def on_connected(self, now_ms: int) -> None:
        """The socket turned writable while connecting: connected, or failed."""
        assert self.peer is not None
        code = self.peer.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self.fail(now_ms, f"cannot connect to the master {self.master}: {errno.errorcode.get(code, code)}")
            return
        if self.secret:
            self.state = HELLO
        else:
            self.state = HANDSHAKE
            self.peer.send(wire.SlaveHandshake(self.broker_id).encode())

    def fail(self, now_ms: int, why: str, *, state: str = CONNECTING) -> None:
        """Close the connection and retry later; log ``why`` unless it was the last line logged."""
        if why != self.logged:
            log.warning("%s; retrying every %d ms", why, RETRY_MS)
            self.logged = why
        if self.peer is not None:
            self.peer.close()
            self.peer = None
        self.state, self.reason = state, why
        self.retry_at_ms = now_ms + RETRY_MS

    # -- reading -----------------------------------------------------------------------------------

    def on_readable(self, now_ms: int) -> bool:
        """Read and apply what came; whether the log grew."""
        assert self.peer is not None
        try:
            data = self.peer.read(now_ms)
        except OSError as exc:
            self.fail(now_ms, f"reading from the master {self.master} failed: {exc}")
            return False
        if data is None:
            self.fail(now_ms, f"the master {self.master} closed the connection"
                      + (" during the handshake (is it an HA port of mqstore?)" if self.state != TRANSFER else ""))
            return False
        before = self.end
        try:
            if self.state == HELLO:
                data = self._hello(data)
            for frame in self.stream.feed(data) if data else ():
                if not self._on_frame(frame, now_ms):
                    break
        except hello.HaAuthError as exc:
            self.fail(now_ms, f"the master {self.master} failed the hello: {exc}")
        except wire.HaWireError as exc:
            self.fail(now_ms, f"{self.master} does not speak mqstore's HA protocol: {exc}")
        return self.end > before

    def _hello(self, data: bytes) -> bytes:
        assert self.peer is not None
        pending = self.peer.pending_in
        pending += data
        if not self.nonces[0]:
            if len(pending) < hello.CHALLENGE_SIZE:
                return b""
            master_nonce = hello.decode_challenge(pending[:hello.CHALLENGE_SIZE])
            del pending[:hello.CHALLENGE_SIZE]
            self.nonces = (master_nonce, hello.new_nonce())
            self.peer.send(hello.encode_answer(self.secret, master_nonce, self.nonces[1], self.broker_id))
        if len(pending) < hello.PROOF_SIZE:
            return b""
        hello.check_proof(self.secret, *self.nonces, self.broker_id, pending[:hello.PROOF_SIZE])
        rest = bytes(pending[hello.PROOF_SIZE:])
        pending.clear()
        self.nonces = (b"", b"")
        self.state = HANDSHAKE
        self.peer.send(wire.SlaveHandshake(self.broker_id).encode())
        return rest

    def _on_frame(self, frame: wire.MasterFrame, now_ms: int) -> bool:
        if isinstance(frame, wire.MasterHandshake):
            if self.state != HANDSHAKE:
                raise wire.HaWireError("a second handshake from the master")
            return self._on_handshake(frame, now_ms)
        if self.state != TRANSFER:
            raise wire.HaWireError("a transfer before the handshake")
        if frame.offset != self.end:
            raise wire.HaWireError(f"a transfer at {frame.offset}, where this log ends at {self.end}")
        self.confirm = frame.confirm_offset
        self.master_end = max(self.master_end, frame.confirm_offset, frame.offset + len(frame.body))
        if frame.epoch > self.epochs.last_epoch:
            self.epochs.append(frame.epoch, frame.epoch_start)  # the epoch's start before its first byte
        elif frame.epoch < self.epochs.last_epoch:
            raise wire.HaWireError(f"a transfer of epoch {frame.epoch}, behind this log's {self.epochs.last_epoch}")
        if frame.body:
            self.end = append_replica(self.commitlog, frame.offset, frame.body)
            self.appended_bytes += len(frame.body)
        return True

    def _on_handshake(self, frame: wire.MasterHandshake, now_ms: int) -> bool:
        decision = follow(self.epochs.entries, self.end, frame)
        self.master_end = frame.max_offset
        if decision.state != TRANSFER:
            self.fail(now_ms, f"not following the master {self.master}: {decision.reason}", state=decision.state)
            return False
        if self.logged:
            log.info("following the master %s again from %d", self.master, decision.resume)
        else:
            log.info("following the master %s from %d (epoch %d)", self.master, decision.resume, frame.last_epoch)
        self.logged = self.reason = ""
        self.state = TRANSFER
        self.report(now_ms, force=True)
        return True

    # -- reports -----------------------------------------------------------------------------------

    def report(self, now_ms: int, *, force: bool = False) -> None:
        """The log's end to the master: after appends, and every heartbeat interval."""
        if self.peer is None or self.state != TRANSFER:
            return
        if not force and self.end == self.reported and now_ms - self.last_report_ms < self.ha.heartbeat_interval_ms:
            return
        try:
            self.peer.send(wire.SlaveReport(self.end).encode())
        except OSError as exc:
            self.fail(now_ms, f"writing to the master {self.master} failed: {exc}")
            return
        self.reported, self.last_report_ms = self.end, now_ms

    def due_ms(self) -> int:
        """The next deadline: a retry while unconnected, else a report due (every heartbeat interval,
        RocketMQ's haSendHeartbeatInterval) or the silent master or slow handshake ``housekeep`` ends."""
        peer = self.peer
        if peer is None:
            return self.retry_at_ms
        if self.state != TRANSFER:
            return self.connected_ms + min(self.ha.housekeeping_interval_ms, HANDSHAKE_TIMEOUT_MS) + 1
        return min(self.last_report_ms + self.ha.heartbeat_interval_ms,
                   peer.last_read_ms + self.ha.housekeeping_interval_ms + 1)

    def housekeep(self, now_ms: int) -> None:
        peer = self.peer
        if peer is None:
            return
        quiet_ms = now_ms - peer.last_read_ms
        if self.state == TRANSFER and quiet_ms > self.ha.housekeeping_interval_ms:
            self.fail(now_ms, f"nothing from the master {self.master} for {quiet_ms} ms")
        elif self.state != TRANSFER and now_ms - self.connected_ms > min(self.ha.housekeeping_interval_ms,
                                                                          HANDSHAKE_TIMEOUT_MS):
            self.fail(now_ms, f"no HA handshake from {self.master} within {HANDSHAKE_TIMEOUT_MS} ms: is it the HA "
                      "port of an mqstore master?")

    def since_master_ms(self, now_ms: int) -> int:
        """How long since anything came from the master; -1 while not following it."""
        if self.peer is None or self.state != TRANSFER:
            return -1
        return max(0, now_ms - self.peer.last_read_ms)

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()
            self.peer = None


HANDSHAKE_TIMEOUT_MS = 5_000
